"""GRU directions in model mode against Keras 3 (y_pred, loss, weight gradients), an unrolled
loop over Keras's own GRUCell (total dL/dh_t) and float64 finite differences of a NumPy GRU:
reset_after both ways, masks, go_backwards, use_bias=False, other activations, every merge
mode of a Bidirectional GRU."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from lstmviz.core.errors import ModelError
from lstmviz.engine.modes.model import model_gradients
from tests.helpers.references.cell_checks import finite_difference_check, randomized
from tests.helpers.references.cell_reference import check_trace, spec_of

L = keras.layers


@pytest.fixture(scope="module")
def tokens():
    """Embedding(mask_zero) → Bidirectional(GRU) → GRU(reset_after=False, go_backwards) → Dense,
    and its data (sample 0 padded: masked steps)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((6,), dtype="int32"),
        L.Embedding(30, 4, mask_zero=True, name="emb"),
        L.Bidirectional(L.GRU(3, return_sequences=True), name="bi"),
        L.GRU(3, reset_after=False, go_backwards=True, name="top"),
        L.Dense(1, activation="sigmoid", name="head"),
    ], name="tokens")  # fmt: skip
    randomized(model, 1)
    rng = np.random.default_rng(2)
    x = rng.integers(1, 30, (2, 6)).astype(np.int32)
    x[0, 4:] = 0
    y = rng.integers(0, 2, (2, 1)).astype(np.float32)
    return model, x, y


def test_gru_model_matches_keras(tokens):
    model, x, y = tokens
    arrays = model_gradients(spec_of(model, "binary_crossentropy"), x, y).arrays
    check_trace(model, arrays, x, y, "binary_crossentropy")
    assert list(arrays["layer_names"]) == ["bi/forward", "bi/backward", "top"]
    assert [str(n) for n in arrays["layer0_gate_names"]] == ["z", "r", "h~"]
    # gate means are activations: z and r of a sigmoid in [0, 1]
    assert ((arrays["layer2_gates_mean"][:2] >= 0) & (arrays["layer2_gates_mean"][:2] <= 1)).all()
    assert arrays["nonfinite_steps"].size == 0


@pytest.mark.parametrize("merge", ["concat", "sum", "mul", "ave"])
def test_bidirectional_gru_every_merge_mode(merge):
    """Features with a Masking layer; no bias and Keras 3's hard_sigmoid / relu in the
    concat case, so the generic slopes are checked too."""
    keras.utils.set_random_seed(3)
    extra = ({"use_bias": False, "recurrent_activation": "hard_sigmoid", "activation": "relu"}
             if merge == "concat" else {})  # fmt: skip
    model = randomized(keras.Sequential([
        keras.Input((5, 2)),
        L.Masking(0.0),
        L.Bidirectional(L.GRU(3, **extra), merge_mode=merge, name="bi"),
        L.Dense(2, name="head"),
    ], name=f"merge_{merge}"), 4)  # fmt: skip
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 5, 2)).astype(np.float32)
    x[1, 3:] = 0.0
    y = rng.standard_normal((2, 2)).astype(np.float32)
    arrays = model_gradients(spec_of(model, "mse"), x, y).arrays
    check_trace(model, arrays, x, y, "mse")


@pytest.mark.parametrize("reset_after", [True, False])
def test_gru_total_gradient_finite_differences(reset_after):
    rng = np.random.default_rng(6)
    units = 3
    bias_shape = (2, 3 * units) if reset_after else (3 * units,)
    weights = {"kernel": rng.standard_normal((2, 3 * units)),
               "recurrent_kernel": rng.standard_normal((units, 3 * units)),
               "bias": rng.standard_normal(bias_shape)}  # fmt: skip
    finite_difference_check("gru", {"reset_after": reset_after}, weights, 7)


def test_gru_weights_that_do_not_fit_are_named():
    from lstmviz.weights.model_spec import LayerSpec, ModelSpec

    w = {"kernel": np.zeros((2, 9)), "recurrent_kernel": np.zeros((3, 9)), "bias": np.zeros(9)}
    layers = (LayerSpec("input", "input", "InputLayer", output_shape=(5, 2)),
              LayerSpec("g", "gru", "GRU", args={"reset_after": True}, weights=w))  # fmt: skip
    with pytest.raises(ModelError, match=r"layer 'g' \(GRU\): GRU weights of 3 units .*bias \[9\]"):
        ModelSpec("m", "test", layers)
    w = {"kernel": np.zeros((2, 8)), "recurrent_kernel": np.zeros((3, 9))}
    layers = (layers[0], LayerSpec("g", "gru", "GRU", weights=w))
    with pytest.raises(ModelError, match=r"kernel \[2, 8\] \(expected \[2, 9\]\)"):
        ModelSpec("m", "test", layers)
    w = {"kernel": np.zeros((2, 9)), "recurrent_kernel": np.zeros((3, 9))}
    layers = (layers[0], LayerSpec("g", "gru", "GRU", args={"activation": "wobbly"}, weights=w))
    with pytest.raises(ModelError, match="unknown activation 'wobbly'"):
        ModelSpec("m", "test", layers)
