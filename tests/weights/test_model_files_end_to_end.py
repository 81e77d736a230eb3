"""Model files read by lstmviz's readers and run by model mode, against the Keras that wrote
them: y_pred, the loss and every recurrent direction's weight gradients equal the model's own
forward and `tf.GradientTape` (tf_keras for Keras 2 files, Keras 3 for Keras 3 files)."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

from lstmviz import model_gradients  # noqa: E402
from tests.helpers.models.model_fixtures import drop_key, randomize, rewrite_config  # noqa: E402


def cells(model) -> list:
    """The cells of a Keras model's recurrent directions in model order (forward first)."""
    found = []
    for layer in model.layers:
        if hasattr(layer, "forward_layer"):
            found += [layer.forward_layer.cell, layer.backward_layer.cell]
        elif hasattr(layer, "cell"):
            found.append(layer.cell)
    return found


def saved(model, path, seed: int, loss: str | None = None):
    """Save `model` to `path` with random weights (moving variances a BatchNormalization can
    take), compiled with `loss` if given; returns the path."""
    randomize(model, seed)
    for layer in model.layers:
        if "BatchNormalization" in type(layer).__name__:
            *others, variance = layer.get_weights()
            layer.set_weights([*others, np.linspace(0.5, 2.0, variance.shape[0])])
    if loss:
        model.compile(loss=loss)
    model.save(path)
    return path


def assert_matches_keras(path, model, loss_fn, x, y) -> None:
    """model_gradients on the file equals the model's own forward and tape."""
    trace = model_gradients(str(path), x, y)
    with tf.GradientTape() as tape:
        y_pred = model(x, training=False)
        value = tf.reduce_mean(loss_fn(y, y_pred))
    found = cells(model)
    variables = [[cell.kernel, cell.recurrent_kernel] + ([cell.bias] if cell.use_bias else [])
                 for cell in found]  # fmt: skip
    grads = tape.gradient(value, [v for group in variables for v in group])
    np.testing.assert_allclose(trace["y_pred"], np.asarray(y_pred), rtol=1e-4, atol=1e-6)
    assert float(trace.loss) == pytest.approx(float(value), rel=1e-4)
    assert len(trace["layer_names"]) == len(found)
    n = 0
    for k, group in enumerate(variables):
        for key, _ in zip(("kernel", "recurrent_kernel", "bias"), group, strict=False):
            got, want = trace[f"layer{k}_grad_{key}"], np.asarray(grads[n])
            scale = float(np.max(np.abs(want))) or 1.0
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5 * scale,
                                       err_msg=f"direction {k} {key}")  # fmt: skip
            n += 1


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_keras2_batch_normalization_and_flatten(tmp_path, data_format):
    """tf_keras: LSTM → BatchNormalization → LSTM → SpatialDropout1D →
    Flatten (either data format: channels_first takes the time axis as the channels) →
    Dense(softmax), masked inputs."""
    import tf_keras as k2
    from tf_keras import layers as L

    model = k2.Sequential([
        k2.Input((6, 3)),
        L.Masking(0.0),
        L.LSTM(3, return_sequences=True, name="first"),
        L.BatchNormalization(name="bn", epsilon=0.05),
        L.LSTM(2, return_sequences=True, name="top"),
        L.SpatialDropout1D(0.3),
        L.Flatten(data_format=data_format, name="flat"),
        L.Dense(3, activation="softmax", name="out"),
    ])  # fmt: skip
    saved(model, tmp_path / "bn.h5", 21, "categorical_crossentropy")
    rng = np.random.default_rng(21)
    x = rng.standard_normal((4, 6, 3)).astype(np.float32)
    x[1, 4:] = 0.0  # masked steps
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 4)]
    assert_matches_keras(tmp_path / "bn.h5", model, k2.losses.categorical_crossentropy, x, y)


def test_keras3_batch_normalization_without_scale(tmp_path):
    import keras
    from keras import layers as L

    model = keras.Sequential([
        keras.Input((5, 3)),
        L.LSTM(4, return_sequences=True, name="a"),
        L.BatchNormalization(scale=False, name="bn"),
        L.LSTM(2, name="b"),
        L.BatchNormalization(center=False, name="bn2"),
        L.Dense(1, name="out"),
    ])  # fmt: skip
    saved(model, tmp_path / "bn.keras", 22, "mse")
    rng = np.random.default_rng(22)
    x = rng.standard_normal((3, 5, 3)).astype(np.float32)
    y = rng.standard_normal((3, 1)).astype(np.float32)
    assert_matches_keras(tmp_path / "bn.keras", model, keras.losses.mean_squared_error, x, y)


def test_keras21_stacked_bidirectional_hard_sigmoid_lstms_per_timestep_softmax(tmp_path):
    """A Keras 2.1 model as such files come: three stacked Bidirectional LSTMs with Keras 2's
    hard_sigmoid, BatchNormalization between them, a softmax per timestep."""
    import tf_keras as k2
    from tf_keras import layers as L

    hard = {"recurrent_activation": "hard_sigmoid", "return_sequences": True}
    model = k2.Sequential([
        k2.Input((5, 3)),
        L.Bidirectional(L.LSTM(3, **hard), name="bi1"),
        L.BatchNormalization(name="bn1"),
        L.Bidirectional(L.LSTM(2, **hard), merge_mode="sum", name="bi2"),
        L.BatchNormalization(name="bn2"),
        L.Bidirectional(L.LSTM(2, **hard), merge_mode="mul", name="bi3"),
        L.TimeDistributed(L.Dense(4, activation="softmax"), name="td"),
    ])  # fmt: skip
    saved(model, tmp_path / "k21.h5", 23, "categorical_crossentropy")
    rng = np.random.default_rng(23)
    x = (2 * rng.standard_normal((3, 5, 3))).astype(np.float32)  # into hard_sigmoid's clipped tails
    y = np.eye(4, dtype=np.float32)[rng.integers(0, 4, (3, 5))]
    assert_matches_keras(tmp_path / "k21.h5", model, k2.losses.categorical_crossentropy, x, y)


@pytest.mark.parametrize("bidirectional", [False, True])
def test_keras20_gru_without_reset_after(tmp_path, bidirectional):
    """Keras 2.0 models as users have them: a GRU, and a Bidirectional GRU (reset_after=False, Keras
    2's hard_sigmoid; the key absent from the file)."""
    import tf_keras as k2
    from tf_keras import layers as L

    gru = L.GRU(3, reset_after=False, recurrent_activation="hard_sigmoid", name="gru_1")
    model = k2.Sequential([
        L.Embedding(9, 4, mask_zero=True, input_length=6, name="emb"),
        L.Bidirectional(gru, name="bi") if bidirectional else gru,
        L.Dense(1, activation="sigmoid", name="out"),
    ])  # fmt: skip
    saved(model, tmp_path / "gru.h5", 24, "binary_crossentropy")
    rewrite_config(tmp_path / "gru.h5", drop_key("reset_after"), version="2.0.8")
    rng = np.random.default_rng(24)
    x = rng.integers(1, 9, (4, 6)).astype(np.int32)
    x[0, 4:] = 0  # padding
    y = rng.integers(0, 2, (4, 1)).astype(np.float32)
    assert_matches_keras(tmp_path / "gru.h5", model, k2.losses.binary_crossentropy, x, y)


def test_keras2_cudnn_gru_runs_as_tf_keras_converts_it(tmp_path):
    """A CuDNNGRU file runs as the GRU(reset_after=True) tf_keras loads it into."""
    import tf_keras as k2
    import tf_keras.src.layers  # noqa: F401
    from tf_keras import layers as L

    cudnn = k2.Sequential([
        k2.Input((5, 3)),
        L.Bidirectional(k2.src.layers.CuDNNGRU(3, return_sequences=True), name="cbi"),
        k2.src.layers.CuDNNGRU(2, name="cg"),
    ])  # fmt: skip
    saved(cudnn, tmp_path / "cudnn.h5", 25)
    twin = k2.Sequential([
        k2.Input((5, 3)),
        L.Bidirectional(L.GRU(3, return_sequences=True), name="cbi"),
        L.GRU(2, name="cg"),
    ])  # fmt: skip
    twin.load_weights(tmp_path / "cudnn.h5")  # tf_keras's own conversion
    rng = np.random.default_rng(25)
    x = rng.standard_normal((3, 5, 3)).astype(np.float32)
    y = rng.standard_normal((3, 2)).astype(np.float32)
    trace = model_gradients(str(tmp_path / "cudnn.h5"), x, y, loss="mse")
    np.testing.assert_allclose(trace["y_pred"], np.asarray(twin(x)), rtol=1e-4, atol=1e-6)
    assert list(trace["layer_names"]) == ["cbi/forward", "cbi/backward", "cg"]


def test_keras2_simple_rnn_relu_and_gru_softsign_without_bias(tmp_path):
    import tf_keras as k2
    from tf_keras import layers as L

    model = k2.Sequential([
        k2.Input((5, 3)),
        L.SimpleRNN(3, activation="relu", return_sequences=True, go_backwards=True, name="rnn"),
        L.GRU(2, activation="softsign", use_bias=False, return_sequences=True, name="gru"),
        L.Dense(2, name="out"),
    ])  # fmt: skip
    saved(model, tmp_path / "mixed.h5", 26, "mse")
    rng = np.random.default_rng(26)
    x = rng.standard_normal((3, 5, 3)).astype(np.float32)
    y = rng.standard_normal((3, 5, 2)).astype(np.float32)
    assert_matches_keras(tmp_path / "mixed.h5", model, k2.losses.mean_squared_error, x, y)
