"""Model files with GRU, SimpleRNN, any activation and Keras 2's layers between recurrent
layers, read into ModelSpecs: each layer's kind and arguments as Keras's config says, its
weights equal to what Keras itself holds (`layer.get_weights()`; for Keras 2 cuDNN layers, what
tf_keras's own loader converts them to).

The Keras 2 files are written by tf_keras with the arguments of Keras 2.0/2.1 (hard_sigmoid,
GRU reset_after=False) and, like files from before GRU had `reset_after`, without that key.
"""

from __future__ import annotations

import os

import h5py
import numpy as np
import pytest

from lstmviz.core.errors import ModelError
from lstmviz.weights.model_files import load_model, spec_from_keras
from tests.helpers.models.model_fixtures import drop_key, randomize, rewrite_config

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def keras_weights(layer) -> list[np.ndarray]:
    return [np.asarray(w) for w in layer.get_weights()]


def assert_same_weights(spec_layer, arrays) -> None:
    got = list(spec_layer.weights.values())
    assert [a.shape for a in got] == [a.shape for a in arrays], spec_layer.name
    for a, b in zip(got, arrays, strict=True):
        np.testing.assert_array_equal(a, np.asarray(b, np.float32), err_msg=spec_layer.name)


@pytest.fixture(scope="module")
def keras2_files(tmp_path_factory):
    """name -> (path, tf_keras model) of Keras 2 files shaped like users' models."""
    import tf_keras as k2
    import tf_keras.src.layers  # noqa: F401  (the cuDNN layers live there)
    from tf_keras import layers as L

    folder = tmp_path_factory.mktemp("k2cells")
    k2.utils.set_random_seed(5)
    hard = {"recurrent_activation": "hard_sigmoid"}  # Keras < 2.3's default
    models = {
        # Keras 2.1: three stacked Bidirectional LSTMs, BatchNormalization between, a softmax
        # per timestep
        "bilstm_bn": k2.Sequential([
            k2.Input((6, 3)),
            L.Bidirectional(L.LSTM(3, return_sequences=True, **hard), name="bi1"),
            L.BatchNormalization(name="bn1"),
            L.Bidirectional(L.LSTM(2, return_sequences=True, **hard), name="bi2"),
            L.BatchNormalization(name="bn2", center=False, epsilon=0.01),
            L.Bidirectional(L.LSTM(2, return_sequences=True, **hard), name="bi3"),
            L.SpatialDropout1D(0.2),
            L.TimeDistributed(L.Dense(4, activation="softmax"), name="td"),
        ], name="bilstm_bn"),  # fmt: skip
        # Keras 2.0: a GRU, and a Bidirectional GRU (reset_after did not exist yet)
        "gru": k2.Sequential([
            L.Embedding(9, 4, input_length=5, name="emb"),
            L.GRU(3, reset_after=False, name="gru_1", **hard),
            L.Dense(1, activation="sigmoid", name="out"),
        ], name="gru"),  # fmt: skip
        "bigru": k2.Sequential([
            k2.Input((5, 3)),
            L.Bidirectional(L.GRU(2, reset_after=False, return_sequences=True, **hard),
                            merge_mode="ave", name="bi"),
            L.Activation("relu", name="act"),
            L.Dropout(0.3),
            L.Flatten(name="flat"),
            L.Dense(2, activation="softmax", name="out"),
        ], name="bigru"),  # fmt: skip
        "rnn": k2.Sequential([
            k2.Input((5, 3)),
            L.SimpleRNN(3, activation="relu", return_sequences=True, go_backwards=True,
                        name="rnn"),
            L.GRU(2, activation="softsign", use_bias=False, name="gru"),
        ], name="rnn"),  # fmt: skip
        "cudnn": k2.Sequential([
            k2.Input((5, 3)),
            L.Bidirectional(k2.src.layers.CuDNNGRU(3, return_sequences=True), name="cbi"),
            k2.src.layers.CuDNNGRU(2, name="cg"),
        ], name="cudnn"),  # fmt: skip
    }
    models["bilstm_bn"].compile(loss="categorical_crossentropy", optimizer="adam")
    models["gru"].compile(loss="binary_crossentropy", optimizer="rmsprop")
    files = {}
    for seed, (name, model) in enumerate(models.items()):
        randomize(model, 40 + seed)
        for layer in model.layers:  # a variance must stay positive
            if isinstance(layer, L.BatchNormalization):
                *others, variance = layer.get_weights()
                layer.set_weights([*others, np.linspace(0.5, 2.0, variance.shape[0])])
        path = folder / f"{name}.h5"
        model.save(path)
        files[name] = (path, model)
    for name in ("gru", "bigru"):
        rewrite_config(files[name][0], drop_key("reset_after"), version="2.0.8")
    rewrite_config(files["bilstm_bn"][0], lambda c: None, version="2.1.6")
    return files


def test_keras21_bidirectional_lstms_with_batch_normalization(keras2_files):
    path, model = keras2_files["bilstm_bn"]
    spec = load_model(path)
    kinds = [layer.kind for layer in spec.layers[1:]]
    assert kinds == ["bidirectional", "batch_normalization", "bidirectional",
                     "batch_normalization", "bidirectional", "identity",
                     "time_distributed_dense"]  # fmt: skip
    for spec_layer, keras_layer in zip(spec.layers[1:], model.layers, strict=True):
        assert_same_weights(spec_layer, keras_weights(keras_layer))
    for name in ("bi1", "bi2", "bi3"):
        args = next(layer for layer in spec.layers if layer.name == name).args
        assert args["cell"] == "lstm"
        for half in ("forward", "backward"):
            assert args[half]["recurrent_activation"] == "hard_sigmoid_keras2"
            assert args[half]["activation"] == "tanh"
    bn2 = spec.layers[4]
    assert list(bn2.weights) == ["gamma", "moving_mean", "moving_variance"]
    assert bn2.args == {"epsilon": 0.01, "center": False, "scale": True}
    assert spec.output_shape == (6, 4) and spec.loss == "categorical_crossentropy"
    summary = spec.summary()
    assert "Keras 2.1.6 model" in summary
    assert "Bidirectional(LSTM) (tanh, Keras 2 hard_sigmoid)" in summary


@pytest.mark.parametrize("name", ["gru", "bigru"])
def test_keras20_gru_without_reset_after_is_reset_after_false(keras2_files, name):
    path, model = keras2_files[name]
    with h5py.File(path) as f:
        assert b"reset_after" not in f.attrs["model_config"]
    spec = load_model(path)
    recurrent = [layer for layer in spec.layers if layer.kind in ("gru", "bidirectional")]
    assert len(recurrent) == 1
    layer = recurrent[0]
    halves = [layer.args] if layer.kind == "gru" else [layer.args["forward"],
                                                       layer.args["backward"]]  # fmt: skip
    for args in halves:
        assert args["reset_after"] is False
        assert args["recurrent_activation"] == "hard_sigmoid_keras2"
    keras_layer = model.get_layer(layer.name)
    assert_same_weights(layer, keras_weights(keras_layer))
    units = 3 if name == "gru" else 2
    assert all(w.shape == (3 * units,) for k, w in layer.weights.items() if k.endswith("bias"))
    assert "Keras 2 hard_sigmoid; reset_after=False" in spec.summary()
    if name == "bigru":
        assert [x.kind for x in spec.layers[2:5]] == ["activation", "identity", "flatten"]
        assert layer.args["merge_mode"] == "ave" and layer.args["cell"] == "gru"
        assert spec.layers[4].output_shape == (10,)


def test_keras2_simple_rnn_and_gru_activations(keras2_files):
    path, model = keras2_files["rnn"]
    rnn, gru = load_model(path).layers[1:]
    assert (rnn.kind, gru.kind) == ("simple_rnn", "gru")
    assert rnn.args["activation"] == "relu" and rnn.args["go_backwards"] is True
    assert "recurrent_activation" not in rnn.args
    assert gru.args["activation"] == "softsign" and gru.args["use_bias"] is False
    assert gru.args["reset_after"] is True  # written by TF 2's Keras: the key is there
    for spec_layer, keras_layer in zip((rnn, gru), model.layers, strict=True):
        assert_same_weights(spec_layer, keras_weights(keras_layer))
    live = spec_from_keras(model)  # a live tf_keras model: Keras 2's definitions too
    for got, want in zip(live.layers[1:], (rnn, gru), strict=True):
        assert (got.kind, got.args) == (want.kind, want.args)
        assert_same_weights(got, list(want.weights.values()))
    assert "(tf_keras, in memory)" in live.source


def test_keras2_cudnn_gru_is_converted_as_tf_keras_converts_it(keras2_files):
    """tf_keras loads a CuDNNGRU file into GRU(reset_after=True) layers converting the
    weights itself: the spec holds what it holds."""
    import tf_keras as k2
    from tf_keras import layers as L

    path, _ = keras2_files["cudnn"]
    twin = k2.Sequential([
        k2.Input((5, 3)),
        L.Bidirectional(L.GRU(3, return_sequences=True, reset_after=True), name="cbi"),
        L.GRU(2, reset_after=True, name="cg"),
    ])  # fmt: skip
    twin.load_weights(path)
    spec = load_model(path)
    for spec_layer, keras_layer in zip(spec.layers[1:], twin.layers, strict=True):
        assert spec_layer.kind in ("gru", "bidirectional")
        assert_same_weights(spec_layer, keras_weights(keras_layer))
    cg = spec.layers[2].args
    assert (cg["reset_after"], cg["recurrent_activation"], cg["cudnn"]) == (True, "sigmoid", True)
    assert spec.layers[1].args["forward"]["reset_after"] is True
    # its weights alone (a stack): the same conversion
    keras2_files["cudnn"][1].save_weights(path.with_suffix(".weights-only.h5"))
    stack = load_model(path.with_suffix(".weights-only.h5"))
    assert [layer.kind for layer in stack.layers[1:]] == ["bidirectional", "gru"]
    assert stack.layers[2].args["cudnn"] is True
    for spec_layer, keras_layer in zip(stack.layers[1:], twin.layers, strict=True):
        assert_same_weights(spec_layer, keras_weights(keras_layer))


@pytest.fixture(scope="module")
def keras3_model():
    import keras
    from keras import layers as L

    keras.utils.set_random_seed(6)
    model = keras.Sequential([
        keras.Input((5, 3)),
        L.Bidirectional(L.GRU(4, return_sequences=True, recurrent_activation="hard_sigmoid"),
                        merge_mode="mul", name="bi"),
        L.BatchNormalization(name="bn", scale=False),
        L.GRU(3, return_sequences=True, reset_after=False, use_bias=False, name="g"),
        L.SimpleRNN(2, return_sequences=True, activation="linear", name="rnn"),
        L.LSTM(2, activation="relu", recurrent_activation="hard_sigmoid", name="l"),
        L.Dense(3, activation="softmax", name="out"),
    ], name="cells")  # fmt: skip
    randomize(model, 7)
    model.compile(loss="categorical_crossentropy")
    return model


@pytest.mark.parametrize("source", ["keras", "h5", "live"])
def test_keras3_cells_any_activation(keras3_model, tmp_path, source):
    if source == "live":
        spec = spec_from_keras(keras3_model)
    else:
        path = tmp_path / f"m.{source}"
        keras3_model.save(path)
        spec = load_model(path)
    kinds = [layer.kind for layer in spec.layers[1:]]
    assert kinds == ["bidirectional", "batch_normalization", "gru", "simple_rnn", "lstm", "dense"]
    for spec_layer, keras_layer in zip(spec.layers[1:], keras3_model.layers, strict=True):
        assert_same_weights(spec_layer, keras_weights(keras_layer))
    bi, bn, g, rnn, lstm = spec.layers[1:6]
    # Keras 3's hard_sigmoid is its own (relu6(x + 3) / 6): the name stays
    assert bi.args["forward"]["recurrent_activation"] == "hard_sigmoid"
    assert bi.args["forward"]["reset_after"] is True and bi.args["cell"] == "gru"
    assert bi.weights["backward/bias"].shape == (2, 12)
    assert bn.args["scale"] is False and "gamma" not in bn.weights
    assert (g.args["reset_after"], g.args["use_bias"]) == (False, False)
    assert rnn.args["activation"] == "linear"
    assert (lstm.args["activation"], lstm.args["recurrent_activation"]) == ("relu", "hard_sigmoid")
    summary = spec.summary()
    for text in ("Bidirectional(GRU) (tanh, hard_sigmoid)", "GRU (reset_after=False)",
                 "SimpleRNN (linear)", "LSTM (relu, hard_sigmoid)"):  # fmt: skip
        assert text in summary
    assert "not traced" not in summary


def test_layers_lstmviz_does_not_compute_run_in_keras_when_keras_can(tmp_path):
    """In a .keras file a ConvLSTM1D, a custom activation or a BatchNormalization on another
    axis are for Keras to run (the summary says it); in a Keras 2 file, one line naming the
    layer."""
    import keras
    from keras import layers as L

    @keras.saving.register_keras_serializable(package="lstmviz_tests")
    def wobble(x):
        return keras.ops.tanh(x) * 0.5

    model = keras.Sequential([
        keras.Input((5, 6)),
        L.Reshape((5, 2, 3), name="split"),
        L.ConvLSTM1D(3, 2, return_sequences=True, name="conv"),
        L.Reshape((5, 3), name="join"),
        L.BatchNormalization(axis=1, name="bn1"),
        L.GRU(2, activation=wobble, return_sequences=True, name="odd"),
        L.LSTM(2, name="plain"),
    ])  # fmt: skip
    model.save(tmp_path / "m.keras")
    spec = load_model(tmp_path / "m.keras")
    assert [layer.kind for layer in spec.layers[1:]] == ["keras"] * 5 + ["lstm"]
    summary = spec.summary()
    assert "ConvLSTM1D (run by Keras; not traced)" in summary
    assert "GRU (run by Keras; not traced)" in summary
    # run: the Reshape after the ConvLSTM1D has no recorded input shape; Keras's loss and the
    # traced LSTM's kernel gradient come out as Keras computes them
    import tensorflow as tf

    from lstmviz import model_gradients

    rng = np.random.default_rng(6)
    x = rng.standard_normal((3, 5, 6)).astype(np.float32)
    y = rng.standard_normal((3, 2)).astype(np.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.mean_squared_error(y, model(x)))
    want = tape.gradient(loss, model.get_layer("plain").cell.kernel)
    trace = model_gradients(tmp_path / "m.keras", x, y, loss="mse")
    assert float(trace.loss) == pytest.approx(float(loss), rel=1e-5)
    np.testing.assert_allclose(trace["layer0_grad_kernel"], want, rtol=1e-4, atol=1e-7)


def test_keras2_files_neither_keras_nor_lstmviz_runs(keras2_files, tmp_path):
    import shutil

    path = tmp_path / "act.h5"
    shutil.copy(keras2_files["gru"][0], path)

    def custom(config):
        for layer in config["config"]["layers"]:
            if layer["config"]["name"] == "gru_1":
                layer["config"]["activation"] = "my_act"

    rewrite_config(path, custom)
    with pytest.raises(ModelError, match=r"'gru_1' \(GRU\).*'my_act', not a built-in"):
        load_model(path)

    path = tmp_path / "bn.h5"
    import tf_keras as k2

    k2.Sequential([k2.Input((5, 3)), k2.layers.BatchNormalization(axis=1, name="bn"),
                   k2.layers.LSTM(2)]).save(path)  # fmt: skip
    with pytest.raises(ModelError, match=r"'bn' \(BatchNormalization\) \(axis=1; lstmviz "
                                         r"normalizes the last axis\) is not supported"):
        load_model(path)


def test_rnn_of_a_keras_cell_is_that_layer(tmp_path):
    """RNN(LSTMCell) / RNN(GRUCell) / RNN(SimpleRNNCell) are the LSTM, GRU and SimpleRNN."""
    import keras
    import tf_keras as k2

    for lib, suffix in ((keras, "keras"), (k2, "h5")):
        L = lib.layers
        model = lib.Sequential([
            lib.Input((5, 3)),
            L.RNN(L.GRUCell(3, reset_after=False), return_sequences=True, name="g"),
            L.RNN(L.SimpleRNNCell(2, activation="relu"), return_sequences=True, name="s"),
            L.RNN(L.LSTMCell(2), go_backwards=True, return_sequences=True, name="l"),
            L.Bidirectional(L.RNN(L.GRUCell(2)), name="bi"),
        ])  # fmt: skip
        randomize(model, 8)
        model.save(tmp_path / f"rnn.{suffix}")
        spec = load_model(tmp_path / f"rnn.{suffix}")
        assert [layer.kind for layer in spec.layers[1:]] == ["gru", "simple_rnn", "lstm",
                                                             "bidirectional"]  # fmt: skip
        for spec_layer, keras_layer in zip(spec.layers[1:], model.layers, strict=True):
            assert_same_weights(spec_layer, keras_weights(keras_layer))
        g, s, lstm, bi = spec.layers[1:]
        assert bi.args["cell"] == "gru" and bi.args["backward"]["go_backwards"] is True
        assert g.args["reset_after"] is False and s.args["activation"] == "relu"
        assert lstm.args["go_backwards"] is True and g.args["return_sequences"] is True
        assert "RNN(GRUCell) (reset_after=False)" in spec.summary()


def test_cli_refuses_what_neither_keras_nor_lstmviz_runs(keras2_files, tmp_path):
    """A Keras 2 file with a custom cell, or a GRU whose bias does not fit: exit 2, one line
    naming the layer and why, nothing written."""
    import shutil
    import subprocess
    import sys

    import tf_keras as k2

    class Twice(k2.layers.Layer):  # a custom cell
        def __init__(self, units=2, **kwargs):
            super().__init__(**kwargs)
            self.units = self.state_size = units

        def call(self, x, states):
            return 2 * x[:, : self.units] + states[0], [states[0]]

        def get_config(self):
            return {**super().get_config(), "units": self.units}

    model = k2.Sequential([k2.Input((5, 3)), k2.layers.RNN(Twice(), name="mine"),
                           k2.layers.Dense(1)])  # fmt: skip
    model.save(tmp_path / "cell.h5")
    bad = tmp_path / "bias.h5"
    shutil.copy(keras2_files["gru"][0], bad)
    with h5py.File(bad, "r+") as f:
        cell = f["model_weights/gru_1/gru_1/gru_cell"]
        del cell["bias:0"]
        cell["bias:0"] = np.zeros(7, np.float32)
    out = tmp_path / "t.npz"
    cases = [
        (tmp_path / "cell.h5", "layer 'mine' (RNN) has a custom cell 'Twice'"),
        (bad, "layer 'gru_1' (GRU): GRU weights of 3 units do not fit: bias [7] (expected [9])"),
    ]
    for path, message in cases:
        done = subprocess.run(
            [sys.executable, "-m", "lstmviz", "run", "--mode", "model", "--model", str(path),
             "--out", str(out)], capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, done.stderr
        assert message in lines[0] and "Traceback" not in done.stderr, (message, lines)
        assert not out.exists()
