"""Model mode on every kind of model file (tests/helpers/models/model_fixtures.py builds real ones),
and bad input through the CLI: one line, exit 2, nothing written."""

from __future__ import annotations

import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest
from safetensors.numpy import save_file

from lstmviz.core.errors import LstmvizError
from lstmviz.engine.modes.model import model_gradients
from tests.helpers.models.model_fixtures import (
    bad_keras3_models,
    keras2_models,
    keras3_models,
    torch_bidirectional_forward,
    torch_state_dict,
)
from tests.helpers.references.model_reference import check_against_keras, close


@pytest.fixture(scope="module")
def k3(tmp_path_factory):
    folder = tmp_path_factory.mktemp("k3")
    models = keras3_models()
    for name, model in models.items():
        model.save(folder / f"{name}.keras")
    return folder, models


@pytest.fixture(scope="module")
def k2(tmp_path_factory):
    folder = tmp_path_factory.mktemp("k2")
    models = keras2_models()
    for name in ("k2seq", "k2fun", "k2cudnn", "k2lstm"):
        models[name].save(folder / f"{name}.h5")
    return folder, models


def fixture_data(model, loss, rng, batch=3):
    shape = model.inputs[0].shape
    steps = shape[1]
    if len(shape) == 2:
        x = rng.integers(1, 20, (batch, steps)).astype(np.int32)
    else:
        x = rng.standard_normal((batch, steps, shape[2])).astype(np.float32)
    out = model.outputs[0].shape
    if loss in ("sparse_categorical_crossentropy",):
        y = rng.integers(0, out[-1], (batch, *out[1:-1])).astype(np.int32)
    elif loss in ("binary_crossentropy",):
        y = rng.integers(0, 2, (batch, *out[1:])).astype(np.float32)
    else:
        y = rng.standard_normal((batch, *out[1:])).astype(np.float32)
    return x, y


@pytest.mark.parametrize("name", ["merge_sum", "merge_mul", "nested", "tokens", "features"])
def test_keras3_files_match_keras(k3, name):
    """Bidirectional sum and mul heads; a model with layers only Keras runs (Conv1D before the
    LSTMs, one inside a nested Sequential, attention and pooling after them); token ids masked
    by Embedding(mask_zero) through a Bidirectional into an LSTM reading backwards; features
    masked by Masking through Bidirectional(ave), an LSTM without bias, TimeDistributed(Dense)
    and a softmax under a label-smoothed loss (masked mean over the steps)."""
    folder, models = k3
    model = models[name]
    loss = model.loss if isinstance(model.loss, str) else "binary_crossentropy"
    if name == "features":
        loss = "categorical_crossentropy"
    x, y = fixture_data(model, loss, np.random.default_rng(7))
    masked = None
    if name == "tokens":
        x[0, :3] = 0  # pre-padding
        x[1, -2:] = 0  # post-padding
        x[2, 3] = 0  # a hole
        masked = x != 0
    elif name == "features":
        x[0, :2] = 0.0
        x[2, -1] = 0.0
        masked = np.any(x != 0, axis=-1)
        y = np.eye(2, dtype=np.float32)[np.random.default_rng(8).integers(0, 2, x.shape[:2])]
    trace = model_gradients(str(folder / f"{name}.keras"), x, y)
    check_against_keras(model, loss, x, y, trace, masked)
    if masked is not None:
        np.testing.assert_array_equal(trace.mask, masked.T)


def test_a_head_without_a_loss_takes_the_one_given(k3):
    folder, models = k3
    path = str(folder / "merge_concat.keras")
    x, y = fixture_data(models["merge_concat"], "mse", np.random.default_rng(8))
    with pytest.raises(LstmvizError, match="no compiled loss; give loss="):
        model_gradients(path, x, y)
    model = models["merge_concat"]
    model.compile(loss="mse")
    check_against_keras(model, "mse", x, y, model_gradients(path, x, y, loss="mse"))


def test_keras2_cudnn_file_runs_as_its_lstm_twin(k2):
    """A Keras 2 CuDNNLSTM model (bias [8H]) gives what the same model with LSTM layers gives
    in Keras 2, which converts the weights when it loads them."""
    folder, models = k2
    twin = models["k2lstm"]
    twin.load_weights(folder / "k2cudnn.h5")  # Keras 2's own conversion
    x = np.random.default_rng(9).standard_normal((3, 5, 3)).astype(np.float32)
    trace = model_gradients(str(folder / "k2cudnn.h5"), x, loss="mean_h")
    close(trace.y_pred, twin(x).numpy(), 1e-5, "y_pred")


def test_keras2_file_keras3_refuses_runs(k2):
    import tf_keras

    folder, models = k2
    model = models["k2seq"]  # time_major, batch_input_shape … in its config
    with pytest.raises(Exception):  # noqa: B017 - Keras 3 itself cannot load it
        keras.models.load_model(folder / "k2seq.h5")
    rng = np.random.default_rng(10)
    x = rng.integers(1, 20, (4, 7)).astype(np.int32)
    x[:, :2] = 0  # padding: the model masks id 0
    y = rng.integers(0, 2, (4, 1)).astype(np.float32)
    trace = model_gradients(str(folder / "k2seq.h5"), x, y)
    close(trace.y_pred, model(x).numpy(), 1e-5, "y_pred")
    expected = tf_keras.losses.binary_crossentropy(y, model(x)).numpy().mean()
    assert float(trace.loss) == pytest.approx(float(expected), rel=1e-5)


def test_pytorch_bidirectional_stack(tmp_path):
    rng = np.random.default_rng(11)
    state = torch_state_dict(rng, [(3, 4), (8, 4)], bidirectional=True)
    save_file(state, tmp_path / "lstm.safetensors")
    x = rng.standard_normal((2, 6, 3)).astype(np.float32)
    trace = model_gradients(str(tmp_path / "lstm.safetensors"), x, loss="mean_h")
    close(trace.y_pred, torch_bidirectional_forward(state, 2, x.astype(np.float64)), 1e-5,
          "y_pred")  # fmt: skip
    assert list(trace.layer_names) == ["l0/forward", "l0/backward", "l1/forward", "l1/backward"]
    # mean_h of the top output: dL/dh_t of the top directions is 1 / (B·T·2H) everywhere
    np.testing.assert_allclose(trace.layer3_grad_h_direct, 1 / (2 * 6 * 8), rtol=1e-6)


# the warnings a fresh Python process does not show (its default filters)
QUIET = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)


def cli(*args):
    return subprocess.run([sys.executable, "-m", "lstmviz", "run", "--mode", "model", *args],
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, k3, capfd):
    """The first case in a fresh process (nothing else on stderr as TensorFlow and Keras
    start), the others through the CLI's `main` in this one (capfd: what TensorFlow writes to
    the file descriptor too), each warning counted as the line it would print."""
    from lstmviz.cli import main

    folder, models = k3
    bad = bad_keras3_models()["custom"][0]
    bad.save(tmp_path / "custom.keras")
    rng = np.random.default_rng(12)
    big = rng.integers(1, 20, (3, 7))
    big[1, 2] = 25
    np.savez(tmp_path / "big.npz", x=big, y=np.zeros((3, 1)))
    np.savez(tmp_path / "short.npz", x=rng.integers(1, 20, (3, 5)), y=np.zeros((3, 1)))
    np.savez(tmp_path / "nan.npz", x=np.full((3, 5, 3), np.nan), y=np.zeros((3, 3)))
    np.save(tmp_path / "x.npy", rng.integers(1, 20, (3, 7)))
    np.save(tmp_path / "y.npy", np.zeros((4, 1)))
    np.savez(tmp_path / "wide.npz", x=rng.integers(1, 20, (3, 7)), y=np.zeros((3, 2)))
    tokens = folder / "tokens.keras"
    out = tmp_path / "t.npz"
    cases = [
        (["--model", tmp_path / "custom.keras"], "'twice' (Twice)"),
        (["--model", tokens, "--inputs", tmp_path / "big.npz"],
         "token id 25 is outside the vocabulary of 20"),
        (["--model", tokens, "--inputs", tmp_path / "short.npz"],
         "x has shape [3, 5], the model takes (None, 7)"),
        (["--model", folder / "merge_sum.keras", "--inputs", tmp_path / "nan.npz"], "NaN"),
        (["--model", tokens, "--inputs", tmp_path / "x.npy", "--targets", tmp_path / "y.npy"],
         "x.npy (y: " + str(tmp_path / "y.npy") + "): y has 4 samples but x has 3"),
        (["--model", tokens, "--inputs", tmp_path / "wide.npz"],
         "y has shape [3, 2], but binary_crossentropy on the model's output (None, 1) takes "
         "[3, 1]"),
        (["--model", folder / "merge_concat.keras"], "--loss: "),
        (["--model", folder / "merge_concat.keras", "--loss", "nonsense"], "unknown loss"),
        (["--model", tokens, "--loss", "nonsense"],
         "the model is compiled with binary_crossentropy; --loss is for a model without"),
        (["--model", tmp_path / "missing.keras"], "no such file"),
    ]  # fmt: skip
    for n, (args, message) in enumerate(cases):
        argv = [*map(str, args), "--out", str(out)]
        if n == 0:
            done = cli(*argv)
            code, err = done.returncode, done.stderr
        else:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")  # as a fresh process shows them
                code = main(["run", "--mode", "model", *argv])
            shown = [w for w in caught if not issubclass(w.category, QUIET)]
            err = capfd.readouterr().err + "".join(f"{w.category.__name__}\n" for w in shown)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, (args, err)
        assert message in lines[0] and "Traceback" not in err, (message, lines)
        assert not out.exists()


def test_random_data_of_the_models_shapes_and_cancel(k3):
    from lstmviz.core.config import RunConfig
    from lstmviz.engine.runner import run
    from lstmviz.io.trace import GradientTrace

    folder, _ = k3
    config = RunConfig(mode="model", model=str(folder / "tokens.keras"), batch=5, seed=3)
    *updates, trace = run(config)
    assert isinstance(trace, GradientTrace) and trace.x.shape == (7, 5)  # the model fixes T
    assert str(trace.inputs_source).startswith("random data (seed 3)")
    assert trace.x.min() >= 1 and trace.x.max() < 20 and trace.y.shape == (5, 1)
    assert trace.config.steps == 7 and trace.config.batch == 5
    assert [type(item) for item in run(config, cancelled=lambda: True)] == [type(updates[0])]


def _keras_loss_and_kernel_gradients(model, x, y):
    """Keras's own: the loss `model.evaluate` reports, the same loss on a tape (regularizers
    included, as Keras adds them) and its gradients on each LSTM direction's kernel, in the
    order of a trace's layer_names."""
    import tensorflow as tf

    kernels = []
    for layer in model.layers:
        halves = ([layer.forward_layer, layer.backward_layer]
                  if isinstance(layer, keras.layers.Bidirectional) else [layer])  # fmt: skip
        kernels += [half.cell.kernel for half in halves if isinstance(half, keras.layers.LSTM)]
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x, y, model(x, training=False))
    evaluated = model.evaluate(x, y, batch_size=len(x), verbose=0)
    assert abs(evaluated - float(loss)) <= 1e-5 * abs(float(loss))
    return evaluated, [g.numpy() for g in tape.gradient(loss, kernels)]


def _check_loss_and_kernels(trace, evaluated, gradients):
    close(trace["loss"], evaluated, 1e-5, "loss")
    for k, gradient in enumerate(gradients):
        close(trace[f"layer{k}_grad_kernel"], gradient, 1e-4, f"layer{k}_grad_kernel")


def cubic_error(y, y_pred):
    return keras.ops.mean(keras.ops.abs(y - y_pred) ** 3, axis=-1)


@pytest.mark.parametrize(
    "case", ["sum", "loss_weights", "ignore_class", "huber_delta", "custom"]
)
def test_compile_options_of_the_loss_are_keras_s(case, tmp_path, rng):
    """The compile's reduction, loss weight, ignore_class and a loss object's arguments are
    the run's (the recorded loss was the plain mean: 16× too small with reduction "sum", 11/16
    with ignore_class); checked against Keras's evaluate and tape, live and from a file."""
    keras.utils.set_random_seed(3)
    classes = 3 if case == "ignore_class" else 2
    model = keras.Sequential([keras.Input((6, 3)), keras.layers.LSTM(4),
                              keras.layers.Dense(classes)])  # fmt: skip
    x = rng.standard_normal((8, 6, 3)).astype(np.float32)
    y = rng.standard_normal((8, 2)).astype(np.float32)
    loss, weights = {
        "sum": (keras.losses.MeanSquaredError(reduction="sum"), None),
        "loss_weights": ("mse", [0.5]),
        "ignore_class": (keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                    ignore_class=0), None),
        "huber_delta": (keras.losses.Huber(delta=0.1), None),
        "custom": (cubic_error, None),
    }[case]  # fmt: skip
    if case == "ignore_class":
        y = np.array([0, 1, 2, 0, 1, 2, 2, 0], np.int32)
    model.compile("sgd", loss, loss_weights=weights)
    if case == "custom":
        with pytest.raises(LstmvizError, match="compiled loss 'cubic_error' is not a Keras loss"):
            model_gradients(model, x, y)
        return
    evaluated, gradients = _keras_loss_and_kernel_gradients(model, x, y)
    _check_loss_and_kernels(model_gradients(model, x, y), evaluated, gradients)
    if case == "huber_delta":
        return  # Keras's file of it keeps no delta (Huber's config leaves it out)
    model.save(tmp_path / "m.keras")
    close(model_gradients(tmp_path / "m.keras", x, y)["loss"], evaluated, 1e-5, "file's loss")


def test_regularization_penalties_are_in_the_loss_as_keras_adds_them(tmp_path, rng):
    """Weight regularizers (LSTM, Bidirectional halves, Embedding, BatchNormalization, Dense)
    and activity regularizers (a layer's, a Bidirectional's halves') add to the loss and the weight
    gradients, as in Keras's loss (they were left out: a loss on another scale than the
    training's); live, .keras and Keras 3's .h5."""
    keras.utils.set_random_seed(4)
    r = keras.regularizers
    model = keras.Sequential([
        keras.Input((7,), dtype="int32"),
        keras.layers.Embedding(12, 4, embeddings_regularizer=r.L2(0.01)),
        keras.layers.LSTM(5, return_sequences=True, kernel_regularizer=r.L2(0.1),
                          recurrent_regularizer=r.L1(0.05), bias_regularizer=r.L1L2(0.1, 0.2),
                          activity_regularizer=r.L2(0.3)),
        keras.layers.BatchNormalization(gamma_regularizer=r.L2(0.2), beta_regularizer=r.L1(0.3)),
        keras.layers.Bidirectional(keras.layers.LSTM(3, kernel_regularizer=r.L1(0.02),
                                                     activity_regularizer=r.L2(0.4))),
        keras.layers.Dense(1, kernel_regularizer=r.L2(0.5)),
    ])  # fmt: skip
    model.compile("sgd", "mse")
    x = rng.integers(1, 12, (6, 7)).astype(np.int32)
    y = rng.standard_normal((6, 1)).astype(np.float32)
    evaluated, gradients = _keras_loss_and_kernel_gradients(model, x, y)
    assert len(gradients) == 3  # the first LSTM, then the Bidirectional's halves
    model.save(tmp_path / "m.keras")
    model.save(tmp_path / "m.h5")
    for source in (model, tmp_path / "m.keras", tmp_path / "m.h5"):
        trace = model_gradients(source, x, y)
        _check_loss_and_kernels(trace, evaluated, gradients)
        assert "mean_squared_error + the layers' regularization penalties" in str(
            trace["model_summary"]), trace["model_summary"]  # fmt: skip


@pytest.mark.parametrize("case", ["pooling", "conv"])
def test_layers_keras_runs_take_and_drop_the_mask_as_in_keras(case, rng):
    """A layer Keras runs gets the mask (GlobalAveragePooling1D averages the unmasked steps)
    and drops it where Keras drops it (after Conv1D the next LSTM runs unmasked); its
    regularization losses are in the loss."""
    keras.utils.set_random_seed(5)
    head = ([keras.layers.GlobalAveragePooling1D()] if case == "pooling" else
            [keras.layers.Conv1D(4, 3, padding="same", kernel_regularizer="l2",
                                 activity_regularizer="l1"), keras.layers.LSTM(3)])  # fmt: skip
    model = keras.Sequential([keras.Input((9,), dtype="int32"),
                              keras.layers.Embedding(15, 4, mask_zero=True),
                              keras.layers.LSTM(5, return_sequences=True), *head,
                              keras.layers.Dense(1, activation="sigmoid")])  # fmt: skip
    model.compile("sgd", "binary_crossentropy")
    x = rng.integers(1, 15, (5, 9)).astype(np.int32)
    for b, length in enumerate([9, 6, 4, 2, 7]):
        x[b, length:] = 0
    y = rng.integers(0, 2, (5, 1)).astype(np.float32)
    evaluated, gradients = _keras_loss_and_kernel_gradients(model, x, y)
    _check_loss_and_kernels(model_gradients(model, x, y), evaluated, gradients)


def test_a_model_ending_in_a_layer_keras_runs_takes_targets_of_its_output(tmp_path, rng):
    """The output shape of a last layer Keras runs comes from Keras (targets of the right
    shape were refused, and so was the random data drawn without any)."""
    keras.utils.set_random_seed(6)
    model = keras.Sequential([keras.Input((8, 3)), keras.layers.LSTM(4, return_sequences=True),
                              keras.layers.Dense(1, activation="sigmoid"),
                              keras.layers.Reshape((8,))])  # fmt: skip
    model.compile("sgd", "binary_crossentropy")
    x = rng.standard_normal((4, 8, 3)).astype(np.float32)
    y = rng.integers(0, 2, (4, 8)).astype(np.float32)
    evaluated, gradients = _keras_loss_and_kernel_gradients(model, x, y)
    _check_loss_and_kernels(model_gradients(model, x, y), evaluated, gradients)
    softmax = keras.Sequential([keras.Input((8, 3)), keras.layers.LSTM(4),
                                keras.layers.Dense(3), keras.layers.Softmax()])  # fmt: skip
    softmax.compile("sgd", "sparse_categorical_crossentropy")
    softmax.save(tmp_path / "s.keras")
    trace = model_gradients(tmp_path / "s.keras")  # random data of the output's shape
    assert trace["y"].shape == (trace["x"].shape[1],) and np.isfinite(trace["loss"])


def test_a_gru_and_a_bidirectional_simple_rnn_beside_lstms_are_traced(tmp_path, rng):
    """A GRU and a Bidirectional(SimpleRNN) beside the LSTMs are traced by lstmviz (CLI trace,
    live model): no row of the summary says "not traced", and every direction names its cell."""
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((6, 3)),
                              keras.layers.LSTM(4, return_sequences=True, name="a"),
                              keras.layers.GRU(3, return_sequences=True, name="gru"),
                              keras.layers.Bidirectional(
                                  keras.layers.SimpleRNN(2, return_sequences=True), name="bi"),
                              keras.layers.Conv1D(3, 2, padding="same", name="conv"),
                              keras.layers.LSTM(2, name="b"),
                              keras.layers.Dense(1, name="out")])  # fmt: skip
    model.compile("sgd", "mse")
    model.save(tmp_path / "m.keras")
    x = rng.standard_normal((3, 6, 3)).astype(np.float32)
    np.savez(tmp_path / "d.npz", x=x, y=np.zeros((3, 1), np.float32))
    done = cli("--model", str(tmp_path / "m.keras"), "--inputs", str(tmp_path / "d.npz"),
               "--out", str(tmp_path / "t.npz"), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "t.npz") as saved:
        traces = [{k: saved[k] for k in saved.files}]
    traces.append(model_gradients(model, x, np.zeros((3, 1), np.float32)).arrays)
    for arrays in traces:
        summary = str(arrays["model_summary"])
        rows = {line.split()[0]: line for line in summary.splitlines()[3:-2]}
        assert set(rows) == {layer.name for layer in model.layers} | {"input"}, summary
        assert "not traced" not in summary
        assert "Bidirectional(SimpleRNN)" in rows["bi"], summary
        assert [str(n) for n in arrays["layer_names"]] == ["a", "gru", "bi/forward",
                                                           "bi/backward", "b"]  # fmt: skip
        cells = [str(arrays[f"layer{k}_cell"]) for k in range(5)]
        assert cells == ["lstm", "gru", "simple_rnn", "simple_rnn", "lstm"]
