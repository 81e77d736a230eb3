"""GradientFlowCallback in a tf_keras (Keras 2) model's fit, as `TF_USE_LEGACY_KERAS=1` users
run it: records at batches N, 2N, … counted across epochs, the last one equal to tf_keras's own
tape on the final weights (weight gradients of every direction, the loss)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import tensorflow as tf

from lstmviz.io.recording import load_recording
from lstmviz.keras import GradientFlowCallback

T = 7


def keras2_model():
    """Embedding(mask_zero) → Bidirectional(LSTM) → Dropout → LSTM → Dense, in tf_keras."""
    import tf_keras
    from tf_keras import layers

    tf_keras.utils.set_random_seed(3)
    model = tf_keras.Sequential([
        layers.Embedding(20, 4, mask_zero=True, input_length=T),
        layers.Bidirectional(layers.LSTM(3, return_sequences=True), name="bi"),
        layers.Dropout(0.2),
        layers.LSTM(4, name="top"),
        layers.Dense(1, activation="sigmoid"),
    ])  # fmt: skip
    model.compile(loss="binary_crossentropy", optimizer=tf_keras.optimizers.Adam(0.02))
    return model


def test_a_tf_keras_fit_is_recorded_and_its_last_record_is_tf_keras_gradients(tmp_path):
    rng = np.random.default_rng(4)
    x = rng.integers(1, 20, (32, T)).astype(np.int32)
    x[::3, 5:] = 0  # padding the model masks
    y = rng.integers(0, 2, (32, 1)).astype(np.float32)
    model = keras2_model()
    path = tmp_path / "k2.lvz"
    callback = GradientFlowCallback((x[:8], y[:8]), path, every=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[callback])  # 4 batches each
    # the .h5 the callback reads the model through is no concern of the user's
    assert not [w for w in caught if "HDF5" in str(w.message)]

    rec = load_recording(path)
    assert rec.finished
    assert rec.step.tolist() == [4, 8]
    assert rec.epoch.tolist() == [0, 1]
    assert list(rec.layer_names) == ["bi/forward", "bi/backward", "top"]
    bi, top = model.get_layer("bi"), model.get_layer("top")
    cells = [bi.forward_layer.cell, bi.backward_layer.cell, top.cell]
    variables = [v for c in cells for v in (c.kernel, c.recurrent_kernel, c.bias)]
    with tf.GradientTape() as tape:
        value = model.compiled_loss(tf.constant(y[:8]), model(x[:8], training=False))
    grads = [np.asarray(g) for g in tape.gradient(value, variables)]
    last = rec.last
    assert float(last.loss) == pytest.approx(float(value), rel=1e-5)
    assert float(rec.loss[-1]) == pytest.approx(float(value), rel=1e-5)
    for k in range(3):
        for j, key in enumerate(("grad_kernel", "grad_recurrent_kernel", "grad_bias")):
            want = grads[3 * k + j]
            np.testing.assert_allclose(last[f"layer{k}_{key}"], want, rtol=1e-4,
                                       atol=1e-6 * np.abs(want).max())  # fmt: skip
