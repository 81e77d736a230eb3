"""SimpleRNN directions, stacks mixing cells (GRU → LSTM → SimpleRNN) and LSTMs of other
activations in model mode, against Keras 3 and an unrolled loop over Keras's own cells; float64
finite differences of dL/dh_t for SimpleRNN and LSTMs of other activations."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from lstmviz.engine.modes.model import model_gradients
from tests.helpers.references.cell_checks import finite_difference_check, randomized
from tests.helpers.references.cell_reference import check_trace, spec_of

L = keras.layers


def test_mixed_stack_matches_keras():
    """Masked features through GRU → LSTM (Keras 3 hard_sigmoid gates, go_backwards) →
    SimpleRNN (relu, no bias) → Dense: every direction's cell, keys and gradients."""
    keras.utils.set_random_seed(8)
    model = randomized(keras.Sequential([
        keras.Input((5, 2)),
        L.Masking(0.0),
        L.GRU(3, return_sequences=True, name="gru"),
        L.LSTM(3, return_sequences=True, recurrent_activation="hard_sigmoid", go_backwards=True,
               name="lstm"),
        L.SimpleRNN(2, activation="relu", use_bias=False, name="rnn"),
        L.Dense(1, name="head"),
    ], name="mixed"), 9)  # fmt: skip
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 5, 2)).astype(np.float32)
    x[0, 1] = 0.0
    y = rng.standard_normal((2, 1)).astype(np.float32)
    arrays = model_gradients(spec_of(model, "mse"), x, y).arrays
    check_trace(model, arrays, x, y, "mse")
    assert [str(arrays[f"layer{k}_cell"]) for k in range(3)] == ["gru", "lstm", "simple_rnn"]
    assert [str(n) for n in arrays["layer2_gate_names"]] == ["h"]
    assert [str(n) for n in arrays["layer1_gate_names"]] == ["i", "f", "g", "o"]
    # relu's flat tail: the fraction of pre-activations below 0, within [0, 1]
    saturated = arrays["layer2_gates_saturated"]
    assert saturated.shape == (1, 5) and ((saturated >= 0) & (saturated <= 1)).all()


def test_bidirectional_simple_rnn_and_linear_lstm_on_tokens():
    keras.utils.set_random_seed(11)
    model = randomized(keras.Sequential([
        keras.Input((6,), dtype="int32"),
        L.Embedding(20, 3, mask_zero=True),
        L.Bidirectional(L.SimpleRNN(2, return_sequences=True), merge_mode="mul", name="bi"),
        L.LSTM(2, activation="linear", name="top"),
        L.Dense(3, activation="softmax"),
    ], name="tokens_rnn"), 12)  # fmt: skip
    rng = np.random.default_rng(13)
    x = rng.integers(1, 20, (2, 6)).astype(np.int32)
    x[1, 3:] = 0
    y = rng.integers(0, 3, (2,)).astype(np.int32)
    arrays = model_gradients(spec_of(model, "sparse_categorical_crossentropy"), x, y).arrays
    check_trace(model, arrays, x, y, "sparse_categorical_crossentropy")


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_simple_rnn_total_gradient_finite_differences(activation):
    rng = np.random.default_rng(14)
    weights = {"kernel": rng.standard_normal((2, 3)),
               "recurrent_kernel": 0.8 * rng.standard_normal((3, 3)),
               "bias": rng.standard_normal(3)}  # fmt: skip
    finite_difference_check("simple_rnn", {"activation": activation}, weights, 15)


@pytest.mark.parametrize("activations", [("relu", "hard_sigmoid"), ("linear", "sigmoid"),
                                         ("tanh", "hard_sigmoid_keras2")])
def test_lstm_of_other_activations_finite_differences(activations):
    rng = np.random.default_rng(16)
    weights = {"kernel": 0.6 * rng.standard_normal((2, 12)),
               "recurrent_kernel": 0.6 * rng.standard_normal((3, 12)),
               "bias": rng.standard_normal(12)}  # fmt: skip
    args = dict(zip(("activation", "recurrent_activation"), activations, strict=True))
    finite_difference_check("lstm", args, weights, 17)
