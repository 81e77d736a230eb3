"""What a file is, by its content where its name does not say: a Keras 2.0/2.1 full-model `.h5`
(its Sequential config the list of its layers) is a model, and a TorchScript program is one
whatever its name ends in — from the CLI, `lstmviz gui FILE --run`, a drop and File → Open."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from lstmviz.core.config import RunConfig
from lstmviz.io import files
from lstmviz.io.trace import GradientTrace
from tests.helpers.models.model_fixtures import randomize

ROOT = Path(__file__).resolve().parents[2]


def cli(*args, settings: Path | None = None) -> subprocess.CompletedProcess:
    """`lstmviz ARGS` in a subprocess; `settings`: the app's settings folder (not the user's)."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    if settings is not None:
        env["XDG_CONFIG_HOME"] = str(settings)
    return subprocess.run([sys.executable, "-m", "lstmviz", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


# ---- Keras 2.0/2.1: a Sequential's config is the list of its layers ---------------------------


def _initializer(name: str, **config) -> dict:
    return {"class_name": name, "config": config}


def keras21_h5(path: Path, model) -> None:
    """Write the tf_keras Sequential Embedding → LSTM → Dense `model` as Keras 2.1.6 wrote a
    full model (`keras.models.save_model`): the attributes as fixed-length bytes, the config
    a list of layers (no InputLayer: the first layer has `batch_input_shape`), the arrays in
    `model_weights/<layer>/<layer>/<name>:0` with each group's `weight_names`."""
    emb, lstm, head = model.layers
    steps = int(model.input_shape[1])
    layers = [
        {"class_name": "Embedding", "config": {
            "name": emb.name, "trainable": True, "batch_input_shape": [None, steps],
            "dtype": "float32", "input_dim": emb.input_dim, "output_dim": emb.output_dim,
            "embeddings_initializer": _initializer("RandomUniform", minval=-0.05, maxval=0.05,
                                                   seed=None),
            "embeddings_regularizer": None, "activity_regularizer": None,
            "embeddings_constraint": None, "mask_zero": True, "input_length": steps}},
        {"class_name": "LSTM", "config": {
            "name": lstm.name, "trainable": True, "return_sequences": False,
            "return_state": False, "go_backwards": False, "stateful": False, "unroll": False,
            "units": lstm.units, "activation": "tanh", "recurrent_activation": "hard_sigmoid",
            "use_bias": True, "kernel_initializer": _initializer("VarianceScaling", scale=1.0,
                                                                 mode="fan_avg",
                                                                 distribution="uniform",
                                                                 seed=None),
            "recurrent_initializer": _initializer("Orthogonal", gain=1.0, seed=None),
            "bias_initializer": _initializer("Zeros"), "unit_forget_bias": True,
            "kernel_regularizer": None, "recurrent_regularizer": None,
            "bias_regularizer": None, "activity_regularizer": None, "kernel_constraint": None,
            "recurrent_constraint": None, "bias_constraint": None, "dropout": 0.0,
            "recurrent_dropout": 0.0, "implementation": 1}},
        {"class_name": "Dense", "config": {
            "name": head.name, "trainable": True, "units": head.units,
            "activation": "sigmoid", "use_bias": True,
            "kernel_initializer": _initializer("VarianceScaling", scale=1.0, mode="fan_avg",
                                               distribution="uniform", seed=None),
            "bias_initializer": _initializer("Zeros"), "kernel_regularizer": None,
            "bias_regularizer": None, "activity_regularizer": None, "kernel_constraint": None,
            "bias_constraint": None}},
    ]  # fmt: skip
    training = {"optimizer_config": {"class_name": "Adam", "config": {
        "lr": 0.001, "beta_1": 0.9, "beta_2": 0.999, "decay": 0.0, "epsilon": 1e-07,
        "amsgrad": False}}, "loss": "binary_crossentropy", "metrics": ["accuracy"],
        "sample_weight_mode": None, "loss_weights": None}  # fmt: skip
    names = {emb: ["embeddings"], lstm: ["kernel", "recurrent_kernel", "bias"],
             head: ["kernel", "bias"]}  # fmt: skip
    with h5py.File(path, "w") as f:
        f.attrs["keras_version"] = b"2.1.6"
        f.attrs["backend"] = b"tensorflow"
        f.attrs["model_config"] = json.dumps({"class_name": "Sequential",
                                              "config": layers}).encode()  # fmt: skip
        f.attrs["training_config"] = json.dumps(training).encode()
        weights = f.create_group("model_weights")
        weights.attrs["layer_names"] = np.array([layer.name.encode() for layer in names])
        weights.attrs["backend"] = b"tensorflow"
        weights.attrs["keras_version"] = b"2.1.6"
        for layer, arrays in names.items():
            group = weights.create_group(layer.name)
            listed = [f"{layer.name}/{name}:0".encode() for name in arrays]
            group.attrs["weight_names"] = np.array(listed)
            for name, value in zip(listed, layer.get_weights(), strict=True):
                group.create_dataset(name.decode(), data=value)


@pytest.fixture(scope="module")
def keras21(tmp_path_factory):
    """(folder with model.h5 (Keras 2.1.6) and data.npz, the tf_keras model it holds)."""
    import tf_keras as k2
    from tf_keras import layers as L

    folder = tmp_path_factory.mktemp("keras21")
    k2.utils.set_random_seed(3)
    model = k2.Sequential([
        L.Embedding(20, 4, mask_zero=True, input_length=7, name="embedding_1"),
        L.LSTM(5, recurrent_activation="hard_sigmoid", name="lstm_1"),
        L.Dense(1, activation="sigmoid", name="dense_1"),
    ])  # fmt: skip
    randomize(model, 21)
    keras21_h5(folder / "model.h5", model)
    rng = np.random.default_rng(0)
    x = rng.integers(1, 20, size=(3, 7))
    x[0, 5:] = 0
    np.savez(folder / "data.npz", x=x, y=rng.integers(0, 2, size=(3, 1)).astype(np.float32))
    return folder, model


def test_a_keras21_list_config_is_a_model(keras21):
    from lstmviz.weights.model_files import load_model

    folder, _ = keras21
    path = folder / "model.h5"
    with h5py.File(path) as f:
        assert isinstance(json.loads(f.attrs["model_config"])["config"], list)
    assert files.layer_classes(files.keras_config(path)) == ["Embedding", "LSTM", "Dense"]
    assert files.is_model(path) and files.kind(path) == "model"
    spec = load_model(path)
    assert "Keras 2.1.6" in spec.source and spec.loss == "binary_crossentropy"


def test_a_keras21_model_runs_as_keras_computes_it(keras21):
    from lstmviz.engine.modes.model import run_model

    folder, model = keras21
    config = RunConfig(mode="model", model=str(folder / "model.h5"),
                       inputs=str(folder / "data.npz"))  # fmt: skip
    *_, trace = run_model(config)
    data = np.load(folder / "data.npz")
    np.testing.assert_allclose(trace["y_pred"], model.predict(data["x"], verbose=0), atol=1e-5)
    assert list(trace.layer_names) == ["lstm_1"]


def test_a_keras21_model_dropped_or_opened_is_a_model(qtbot, window, errors, keras21,
                                                      monkeypatch):  # fmt: skip
    from PySide6.QtWidgets import QFileDialog

    folder, model = keras21
    assert window.open_path(str(folder / "model.h5"))  # a drop
    assert window.params.config().mode == "model" and window.params.model_spec is not None
    assert window.params.config().model == str(folder / "model.h5")
    window.params.widgets["mode"].setCurrentIndex(window.params.widgets["mode"].findData("taped"))
    offered = []

    def chosen(parent, title, folder_, wanted):
        offered.append(wanted)
        return str(folder / "model.h5"), wanted

    monkeypatch.setattr(QFileDialog, "getOpenFileName", chosen)
    window.files.open_model_dialog()  # File → Open model…
    assert window.params.config().mode == "model" and "All files (*)" in offered[0]
    assert window.open_path(str(folder / "data.npz"))
    with qtbot.waitSignal(window.settled, timeout=120_000):
        window.run_button.click()
    assert not errors
    data = np.load(folder / "data.npz")
    np.testing.assert_allclose(window.trace["y_pred"], model.predict(data["x"], verbose=0),
                               atol=1e-5)  # fmt: skip


def gui_runs(tmp_path: Path, *paths) -> None:
    """`lstmviz gui PATHS --run --screenshot` exits 0 having saved the window."""
    shot = tmp_path / "shot.png"
    done = cli("gui", *paths, "--run", "--screenshot", shot, settings=tmp_path)
    assert done.returncode == 0, done.stderr
    assert shot.is_file()


def test_lstmviz_gui_runs_a_keras21_model(keras21, tmp_path):
    folder, _ = keras21
    gui_runs(tmp_path, folder / "model.h5", folder / "data.npz")


# ---- TorchScript by content, whatever the name -------------------------------------------------


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """(folder, the module) with a scripted tagger saved as tagger.jit, tagger.bin and
    tagger.pt, its state dict sd.pt, data.npz (x, y) and x.npy, and a module stepping an
    nn.LSTMCell in a loop (cell.jit)."""
    torch = pytest.importorskip("torch")
    from torch import nn

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(3, 4, batch_first=True)
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            out, _ = self.lstm(x)
            return self.head(out[:, -1])

    class Stepped(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.LSTMCell(3, 4)

        def forward(self, x):
            h = torch.zeros(x.shape[0], 4)
            c = torch.zeros(x.shape[0], 4)
            for t in range(x.shape[1]):
                h, c = self.cell(x[:, t], (h, c))
            return h

    folder = tmp_path_factory.mktemp("scripted")
    torch.manual_seed(0)
    module = Tagger().eval()
    for name in ("tagger.jit", "tagger.bin", "tagger.pt"):
        torch.jit.save(torch.jit.script(module), folder / name)
    torch.jit.save(torch.jit.script(Stepped()), folder / "cell.jit")
    torch.save(module.state_dict(), folder / "sd.pt")
    x = torch.randn(2, 5, 3)
    np.savez(folder / "data.npz", x=x.numpy(), y=torch.randn(2, 2).numpy())
    np.save(folder / "x.npy", x.numpy())
    return folder, module


def test_torchscript_is_told_by_its_content(scripted, tmp_path):
    folder, _ = scripted
    for name in ("tagger.jit", "tagger.bin", "tagger.pt"):
        assert files.torch_program(folder / name) == "torchscript", name
        assert files.kind(folder / name) == "model", name
    assert files.torch_program(folder / "sd.pt") is None  # a state dict: weights
    assert files.kind(folder / "sd.pt") == "weights"
    assert files.torch_program(folder / "data.npz") is None
    (tmp_path / "notes.jit").write_text("not a program")
    assert files.torch_program(tmp_path / "notes.jit") is None
    with pytest.raises(Exception, match="notes.jit: not a TorchScript or torch.export program: "
                       "it is a text file"):  # fmt: skip
        files.kind(tmp_path / "notes.jit")


def test_a_jit_file_runs_from_the_cli(scripted, tmp_path):
    from lstmviz.torch import model_gradients

    folder, module = scripted
    out = tmp_path / "t.npz"
    done = cli("run", "--mode", "model", "--model", folder / "tagger.jit", "--inputs",
               folder / "data.npz", "--loss", "mse", "--out", out)  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = np.load(folder / "data.npz")
    expected = model_gradients(module, data["x"], data["y"], "mse")
    trace = GradientTrace.load(out)
    assert list(trace.layer_names) == ["lstm/l0"]
    assert float(trace.loss) == pytest.approx(float(expected.loss), rel=1e-6)
    np.testing.assert_allclose(trace["layer0_grad_h_total"], expected["layer0_grad_h_total"],
                               rtol=1e-5, atol=1e-8)  # fmt: skip


def test_a_program_pytorch_cannot_convert_is_one_line_exit_2(scripted, tmp_path):
    folder, _ = scripted
    out = tmp_path / "t.npz"
    done = cli("run", "--mode", "model", "--model", folder / "cell.jit", "--inputs",
               folder / "x.npy", "--out", out)  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "cell.jit" in lines[0] and "loop" in lines[0]
    assert "--module" in lines[0] and "torch.export" in lines[0]
    assert not out.exists()


def test_an_internal_assertion_of_the_conversion_is_one_line(scripted, monkeypatch):
    from torch._export import converter

    from lstmviz.core.errors import LstmvizError
    from lstmviz.torch.programs import run_program

    folder, _ = scripted

    def dies(self):
        raise RuntimeError("r INTERNAL ASSERT FAILED at \"torch/csrc/jit/ir.cpp\":1234, please "
                           "report a bug to PyTorch.\nException raised from f at x.cpp:1 (most "
                           "recent call first):\nframe #0: c10::Error")  # fmt: skip

    monkeypatch.setattr(converter.TS2EPConverter, "convert", dies)
    config = RunConfig(mode="model", model=str(folder / "tagger.jit"),
                       inputs=str(folder / "data.npz"), loss="mse")  # fmt: skip
    with pytest.raises(LstmvizError) as caught:
        list(run_program(config))
    line = str(caught.value)
    assert "\n" not in line and "INTERNAL ASSERT FAILED" in line and "frame #0" not in line
    assert "--module" in line and "torch.export" in line


def test_a_jit_file_dropped_or_opened_is_a_model(qtbot, bare_window, scripted, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    folder, _ = scripted
    window = bare_window
    assert window.open_path(str(folder / "tagger.bin"))  # a drop, any name
    assert window.params.config().mode == "model"
    assert window.params.config().model == str(folder / "tagger.bin")
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        lambda *a: (str(folder / "tagger.jit"), ""))  # fmt: skip
    window.files.open_model_dialog()
    assert window.params.config().model == str(folder / "tagger.jit")


def test_lstmviz_gui_runs_a_jit_file(scripted, tmp_path):
    folder, _ = scripted
    gui_runs(tmp_path, folder / "tagger.jit", folder / "x.npy")
