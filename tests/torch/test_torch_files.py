"""PyTorch model files: TorchScript and torch.export (.pt2) through the CLI and the window, a
pickled whole module refused; their traces equal model_gradients on the module itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from lstmviz.io import files  # noqa: E402
from lstmviz.io.trace import GradientTrace  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(9, 4)
        self.lstm = nn.LSTM(4, 3, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(6, 3, batch_first=True)
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        out, _ = self.lstm(self.embed(x))
        out, _ = self.gru(out)
        return self.head(out[:, -1])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("torch_files")
    torch.manual_seed(0)
    module = Tagger().eval()
    x = torch.randint(0, 9, (3, 5))
    y = torch.randn(3, 1)
    torch.jit.save(torch.jit.script(module), folder / "tagger.pt")
    torch.export.save(torch.export.export(module, (x,)), folder / "tagger.pt2")
    torch.save(module, folder / "whole.pt")
    np.savez(folder / "data.npz", x=x.numpy(), y=y.numpy())
    from lstmviz.torch import model_gradients

    expected = model_gradients(module, x, y, "mse")
    return folder, expected


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lstmviz", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def same(trace: GradientTrace, expected: GradientTrace) -> None:
    assert list(trace.layer_names) == ["lstm/l0/forward", "lstm/l0/backward", "gru/l0"]
    assert float(trace.loss) == pytest.approx(float(expected.loss), rel=1e-6)
    for key in ("layer0_grad_h_total", "layer1_grad_c_total", "layer2_grad_h_total",
                "layer2_grad_kernel", "saliency", "norm_h_total_by_layer"):  # fmt: skip
        np.testing.assert_allclose(trace[key], expected[key], rtol=1e-5, atol=1e-8, err_msg=key)


def test_a_torchscript_file_runs_from_the_cli(saved):
    folder, expected = saved
    assert files.kind(folder / "tagger.pt") == "model"
    out = folder / "tagger.npz"
    done = cli("run", "--mode", "model", "--model", folder / "tagger.pt", "--inputs",
               folder / "data.npz", "--loss", "mse", "--out", out)  # fmt: skip
    assert done.returncode == 0, done.stderr
    same(GradientTrace.load(out), expected)


def test_a_pt2_program_runs_in_model_mode_on_its_data_or_its_example_inputs(saved):
    from lstmviz.core.config import RunConfig
    from lstmviz.engine.modes.model import run_model

    folder, expected = saved
    path = str(folder / "tagger.pt2")
    assert files.kind(path) == "model"
    config = RunConfig(mode="model", model=path, inputs=str(folder / "data.npz"), loss="mse")
    *_, trace = run_model(config)
    same(trace, expected)
    *_, trace = run_model(RunConfig(mode="model", model=path))  # no data: the example's
    assert trace.x.shape == (5, 3) and "example inputs" in str(trace.inputs_source)


def test_a_pickled_module_is_refused_in_one_line(saved):
    from lstmviz.core.errors import LstmvizError
    from lstmviz.weights.model_files import load_model

    folder, _ = saved
    with pytest.raises(LstmvizError) as caught:
        load_model(folder / "whole.pt")
    line = str(caught.value)
    assert "\n" not in line and "unpickling runs code" in line and "torch.jit.save" in line


def test_a_torchscript_file_opens_and_runs_in_the_window(qtbot, window, errors, saved):
    folder, expected = saved
    window.open_path(str(folder / "tagger.pt"))
    window.open_path(str(folder / "data.npz"))
    window.params.widgets["loss"].setCurrentText("mse")
    with qtbot.waitSignal(window.settled, timeout=120_000):
        window.run_button.click()
    assert not errors
    trace = window.trace
    assert trace is not None and trace.mode == "model"
    same(trace, expected)
    assert window.area.by_name["layer_map"].has_data()


def test_a_pytorch_file_asks_for_one_of_pytorchs_losses(idle, saved):
    """The Loss field offers PyTorch's losses while a PyTorch file is the model: a loss it has
    not (the built-in modes' last_mse, the window's first) is cleared for the user to choose,
    one it has is kept; the model cleared, model mode's Keras names again."""
    folder, _ = saved
    params = idle.params
    loss = params.widgets["loss"]
    names = lambda: [loss.itemText(i) for i in range(loss.count())]  # noqa: E731
    loss.setCurrentText("last_mse")
    idle.open_path(str(folder / "tagger.pt"))
    assert names() == ["mean", "mse", "l1", "cross_entropy", "nll", "bce_with_logits", "bce"]
    assert loss.currentText() == "" and "cross_entropy" in loss.lineEdit().placeholderText()
    loss.setCurrentText("cross_entropy")
    idle.open_path(str(folder / "tagger.pt"))
    assert loss.currentText() == "cross_entropy"
    params.widgets["model"].set_path(None)
    assert "sparse_categorical_crossentropy" in names() and "cross_entropy" not in names()
