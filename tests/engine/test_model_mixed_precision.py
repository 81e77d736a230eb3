"""A model built under Keras's mixed_float16 policy: model mode computes it in float32 and says
so in the trace's model summary; its gradients are those of Keras's tape on a float32 twin
(the same config and weights under the float32 policy), not of the float16 model."""

from __future__ import annotations

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from lstmviz.engine.modes.model import model_gradients

L = keras.layers
T = 9


def mixed_model(keras_runs: bool = False):
    """Embedding(mask_zero) → [Conv1D → LayerNormalization, layers only Keras runs, when
    `keras_runs`] → Bidirectional(LSTM) → LSTM → Dense, under mixed_float16."""
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        keras.utils.set_random_seed(5)
        extra = [L.Conv1D(6, 3, padding="same"), L.LayerNormalization()] if keras_runs else []
        model = keras.Sequential([
            keras.Input((T,), dtype="int32"),
            L.Embedding(30, 6, mask_zero=True),
            *extra,
            L.Bidirectional(L.LSTM(5, return_sequences=True)),
            L.LSTM(4),
            L.Dense(1, activation="sigmoid", dtype="float32"),
        ])  # fmt: skip
        model.compile(loss="binary_crossentropy", optimizer="adam")
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return model


def float32_twin(model):
    """The same layers and weights under the float32 policy."""
    text = json.dumps(model.get_config()).replace('"mixed_float16"', '"float32"')
    twin = keras.Sequential.from_config(json.loads(text))
    twin.set_weights(model.get_weights())
    twin.compile(loss="binary_crossentropy")
    return twin


def lstm_gradients(model, x, y):
    bi, top = model.layers[-3], model.layers[-2]
    cells = [bi.forward_layer.cell, bi.backward_layer.cell, top.cell]
    variables = [v for c in cells for v in (c.kernel, c.recurrent_kernel, c.bias)]
    with tf.GradientTape() as tape:
        value = model.compute_loss(x=x, y=y, y_pred=model(x, training=False))
    return float(value), [np.asarray(g) for g in tape.gradient(value, variables)]


@pytest.mark.parametrize("keras_runs", [False, True], ids=["modelled", "keras-runs"])
@pytest.mark.parametrize("how", ["live", "file"])
def test_a_mixed_float16_model_runs_in_float32_and_says_so(how, keras_runs, tmp_path):
    model = mixed_model(keras_runs)
    assert model.layers[1].compute_dtype == "float16"
    rng = np.random.default_rng(6)
    x = rng.integers(1, 30, (5, T)).astype(np.int32)
    x[0, 6:] = 0
    y = rng.integers(0, 2, (5, 1)).astype(np.float32)
    if how == "file":
        model.save(tmp_path / "m.keras")
        trace = model_gradients(str(tmp_path / "m.keras"), x, y)
    else:
        trace = model_gradients(model, x, y)
    summary = str(trace.model_summary)
    assert "mixed_float16" in summary and "float32" in summary, summary
    value, grads = lstm_gradients(float32_twin(model), x, y)
    assert float(trace.loss) == pytest.approx(value, rel=1e-5)
    for k in range(3):
        for j, key in enumerate(("grad_kernel", "grad_recurrent_kernel", "grad_bias")):
            want = grads[3 * k + j]
            np.testing.assert_allclose(trace[f"layer{k}_{key}"], want, rtol=1e-4,
                                       atol=1e-5 * np.abs(want).max())  # fmt: skip
