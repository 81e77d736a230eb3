"""Model mode against Keras itself and an unrolled per-step reference
(tests/helpers/references/model_reference.py).

Each model is built and compiled in Keras 3, saved as `.keras`, and run by lstmviz from the
file: `y_pred` equals Keras's `model(x)`, `loss` Keras's `compute_loss`, every direction's
weight gradients Keras's `tape.gradient` of that loss, and every direction's total dL/dh_t and
dL/dc_t the unrolled reference's, at unmasked positions.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from lstmviz.engine.modes.model import model_gradients
from tests.helpers.references.model_reference import check_against_keras, close

L = keras.layers
T, B = 7, 3


def tokens_model(merge="concat"):
    inp = keras.Input((T,), dtype="int32")
    x = L.Embedding(30, 6)(inp)
    x = L.Bidirectional(L.LSTM(5, return_sequences=True), merge_mode=merge)(x)
    x = L.Dropout(0.3)(x)
    x = L.LSTM(4)(x)
    return keras.Model(inp, L.Dense(1, activation="sigmoid")(x)), "binary_crossentropy"


def softmax_head(merge):
    model = keras.Sequential([keras.Input((T, 3)),
                              L.Bidirectional(L.LSTM(4), merge_mode=merge),
                              L.Dense(3, activation="softmax")])  # fmt: skip
    return model, "categorical_crossentropy"


def backwards_sequence():
    model = keras.Sequential([keras.Input((T, 3)),
                              L.LSTM(5, return_sequences=True, go_backwards=True),
                              L.TimeDistributed(L.Dense(4)), L.Activation("softmax")])  # fmt: skip
    return model, "sparse_categorical_crossentropy"


def regression():
    model = keras.Sequential([keras.Input((T, 3)), L.LSTM(4, return_sequences=True),
                              L.LSTM(3, return_sequences=True), L.Dense(2)])  # fmt: skip
    return model, "mse"


MODELS = {
    "tokens-bi-concat": lambda: tokens_model("concat"),
    "bi-sum-softmax": lambda: softmax_head("sum"),
    "bi-mul-softmax": lambda: softmax_head("mul"),
    "bi-ave-softmax": lambda: softmax_head("ave"),
    "go-backwards-sequence": backwards_sequence,
    "stacked-mse": regression,
}


def data(model, loss, rng):
    shape = model.inputs[0].shape
    if len(shape) == 2:
        x = rng.integers(1, 30, (B, T)).astype(np.int32)
    else:
        x = rng.standard_normal((B, T, shape[2])).astype(np.float32)
    out = model.outputs[0].shape
    if loss == "binary_crossentropy":
        y = rng.integers(0, 2, (B, out[-1])).astype(np.float32)
    elif loss == "categorical_crossentropy":
        y = np.eye(out[-1], dtype=np.float32)[rng.integers(0, out[-1], B)]
    elif loss == "sparse_categorical_crossentropy":
        y = rng.integers(0, out[-1], (B, T)).astype(np.int32)
    else:
        y = rng.standard_normal((B, *out[1:])).astype(np.float32)
    return x, y




@pytest.mark.parametrize("name", list(MODELS))
def test_model_matches_keras_and_the_unrolled_reference(name, tmp_path):
    keras.utils.set_random_seed(3)
    model, loss = MODELS[name]()
    model.compile(loss=loss)
    path = tmp_path / "m.keras"
    model.save(path)
    x, y = data(model, loss, np.random.default_rng(4))
    trace = check_against_keras(model, loss, x, y, model_gradients(str(path), x, y))
    assert float(trace.loss_by_sample.mean()) == pytest.approx(float(trace.loss), rel=1e-5)
    first_input = trace.grad_input.shape
    assert first_input[:2] == (T, B) and trace.saliency.shape == (B, T)


def test_targets_without_the_outputs_last_axis_of_one_are_taken_as_keras_takes_them(tmp_path):
    """A binary classifier's labels y [B] for an output [B, 1]: Keras's fit and compute_loss
    take them, so model mode does too, with Keras's loss and gradients."""
    keras.utils.set_random_seed(8)
    model, loss = tokens_model()
    model.compile(loss=loss)
    model.save(tmp_path / "m.keras")
    x, y = data(model, loss, np.random.default_rng(9))
    flat = y[:, 0]
    trace = model_gradients(str(tmp_path / "m.keras"), x, flat)
    keras_loss = model.compute_loss(x=x, y=flat, y_pred=model(x, training=False))
    assert float(trace.loss) == pytest.approx(float(keras_loss), rel=1e-5)
    check_against_keras(model, loss, x, y, trace)  # every gradient, as with y [B, 1]


def test_saliency_is_the_gradient_at_the_embedding_vectors(tmp_path):
    """grad_input of a token model is dL/d(embedding vector of each input token): summed per
    token id it is Keras's gradient of the embedding table."""
    keras.utils.set_random_seed(5)
    model, loss = tokens_model()
    model.compile(loss=loss)
    x, y = data(model, loss, np.random.default_rng(6))
    trace = model_gradients(model, x, y)
    with tf.GradientTape() as tape:
        value = model.compute_loss(x=x, y=y, y_pred=model(x), training=False)
    table = model.layers[1].embeddings
    expected = tf.convert_to_tensor(tape.gradient(value, table)).numpy()
    summed = np.zeros_like(expected)
    np.add.at(summed, trace.x.T, trace.grad_input.transpose(1, 0, 2))
    close(summed, expected, 1e-4, "embedding gradient")
    np.testing.assert_allclose(trace.saliency, np.linalg.norm(trace.grad_input, axis=-1).T,
                               rtol=1e-6)  # fmt: skip


def test_loss_naming_the_compiled_one_by_another_keras_name_is_that_loss(tmp_path, rng):
    """`--loss mse` (`loss="mse"`) for a model compiled with mean_squared_error was refused as
    another loss; Keras's own names of one loss are one loss. Another loss is still refused."""
    from lstmviz.core.errors import ConfigError

    model = keras.Sequential([keras.Input((T, 3)), L.LSTM(4), L.Dense(2)])
    model.compile(loss="mean_squared_error")
    model.save(tmp_path / "m.keras")
    x = rng.standard_normal((B, T, 3)).astype(np.float32)
    y = rng.standard_normal((B, 2)).astype(np.float32)
    expected = float(keras.ops.mean((model(x) - y) ** 2))
    for name in ("mse", "MeanSquaredError", "mean_squared_error"):
        trace = model_gradients(tmp_path / "m.keras", x, y, loss=name)
        np.testing.assert_allclose(float(trace["loss"]), expected, rtol=1e-6)
    with pytest.raises(ConfigError, match="compiled with mean_squared_error"):
        model_gradients(tmp_path / "m.keras", x, y, loss="mae")
