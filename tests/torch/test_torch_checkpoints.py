"""A PyTorch checkpoint — a state dict plus the user's module class — in model mode:
`lstmviz run --mode model --model ckpt.pt --module pkg.mod:factory` (`run_checkpoint`).

The user's package is written into a temporary working folder, as a user's project is: the
factory is imported from there. Traces equal `model_gradients` on the module itself."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.core.errors import ConfigError, LstmvizError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

SOURCE = '''
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self, vocab=12, width=4, hidden=5):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.lstm = nn.LSTM(width, hidden, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * hidden, 2)

    def forward(self, x):
        out, _ = self.lstm(self.embed(x))
        return self.head(out[:, -1])


def make():
    return Tagger()


def six():
    return Tagger(hidden=6)


def sized(hidden, vocab=12):
    return Tagger(vocab=vocab, hidden=hidden)


def anything(**kwargs):
    return Tagger(**{k: v for k, v in kwargs.items() if k in ("vocab", "width", "hidden")})


class Wrapper(nn.Module):  # a LightningModule holds its network as an attribute
    def __init__(self, hidden=5):
        super().__init__()
        self.model = Tagger(hidden=hidden)

    def forward(self, x):
        return self.model(x)


def broken():
    raise ValueError("no GPU here")


def not_a_module():
    return 3
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """(the working folder holding userpkg/nets.py, a tagger module, data.npz (x, y), x.npy)."""
    folder = tmp_path_factory.mktemp("project")
    (folder / "userpkg").mkdir()
    (folder / "userpkg" / "__init__.py").write_text("")
    (folder / "userpkg" / "nets.py").write_text(textwrap.dedent(SOURCE))
    (folder / "userpkg" / "fails.py").write_text("import no_such_package_here\n")
    sys.path.insert(0, str(folder))
    try:
        from userpkg import nets
    finally:
        sys.path.remove(str(folder))
    torch.manual_seed(4)
    module = nets.Tagger(hidden=6).eval()
    rng = np.random.default_rng(0)
    x = rng.integers(1, 12, size=(3, 7))
    y = rng.integers(0, 2, size=3)
    np.savez(folder / "data.npz", x=x, y=y)
    np.save(folder / "x.npy", x)
    yield folder, module
    for name in [n for n in sys.modules if n == "userpkg" or n.startswith("userpkg.")]:
        del sys.modules[name]


@pytest.fixture
def inside(project, monkeypatch):
    """The project's folder as the working folder (where --module imports from)."""
    folder, module = project
    monkeypatch.chdir(folder)
    return folder, module


def run(folder: Path, model: str, module: str, **more):
    from lstmviz.torch.checkpoints import run_checkpoint

    config = RunConfig(mode="model", model=str(folder / model), module=module, **more)
    config.validate().check_flags()
    return list(run_checkpoint(config))


def expected(module, folder: Path, loss="cross_entropy"):
    from lstmviz.torch import model_gradients

    data = np.load(folder / "data.npz")
    return model_gradients(module, data["x"], data["y"], loss)


def assert_same(trace, want) -> None:
    assert list(trace.layer_names) == ["lstm/l0/forward", "lstm/l0/backward"]
    assert float(trace.loss) == pytest.approx(float(want.loss), rel=1e-6)
    for key in ("layer0_grad_h_total", "layer1_grad_c_total", "layer0_grad_kernel", "saliency",
                "y_pred"):  # fmt: skip
        np.testing.assert_allclose(trace[key], want[key], rtol=1e-5, atol=1e-7, err_msg=key)


def test_a_state_dict_runs_in_its_modules_class(inside):
    folder, module = inside
    torch.save(module.state_dict(), folder / "plain.pt")
    *updates, trace = run(folder, "plain.pt", "userpkg.nets:six", inputs=str(folder /
                          "data.npz"), loss="cross_entropy")  # fmt: skip
    assert trace.mode == "model" and trace.config.module == "userpkg.nets:six"
    assert "state dict" in updates[0].message
    assert_same(trace, expected(module, folder))
    assert "userpkg.nets:six" in str(trace["model_source"])
    assert trace.config.model == str(folder / "plain.pt")


def test_the_factory_takes_the_checkpoints_hyper_parameters(inside):
    """Lightning's layout: the state dict under "state_dict", its keys prefixed by the
    LightningModule's attribute ("model."), the module's arguments under "hyper_parameters"
    (with others the factory does not take)."""
    folder, module = inside
    state = {f"model.{k}": v for k, v in module.state_dict().items()}
    hyper = {"hidden": 6, "lr": 0.01}
    torch.save({"epoch": 3, "state_dict": state, "optimizer_states": [],
                "hyper_parameters": hyper}, folder / "lightning.ckpt")  # fmt: skip
    data = str(folder / "data.npz")
    *_, trace = run(folder, "lightning.ckpt", "userpkg.nets:sized", inputs=data,
                    loss="cross_entropy")  # fmt: skip
    assert_same(trace, expected(module, folder))
    assert "hidden=6" in str(trace["model_source"])
    *_, trace = run(folder, "lightning.ckpt", "userpkg.nets:Wrapper", inputs=data,
                    loss="cross_entropy")  # the LightningModule itself: keys as they are
    assert list(trace.layer_names) == ["model/lstm/l0/forward", "model/lstm/l0/backward"]


@pytest.mark.parametrize("container", ["model_state_dict", "model"])
def test_ddp_prefixes_and_nested_state_dicts(inside, container):
    folder, module = inside
    state = {f"module.{k}": v for k, v in module.state_dict().items()}  # DistributedDataParallel
    torch.save({container: state, "config": {"hidden": 6}, "step": 10}, folder / "ddp.pth")
    *_, trace = run(folder, "ddp.pth", "userpkg.nets:anything", inputs=str(folder / "data.npz"),
                    loss="cross_entropy")  # fmt: skip
    assert_same(trace, expected(module, folder))


def test_safetensors_and_random_data(inside):
    from safetensors.torch import save_file

    folder, module = inside
    save_file(module.state_dict(), str(folder / "w.safetensors"))
    *_, trace = run(folder, "w.safetensors", "userpkg.nets:six", steps=9, batch=2, seed=3)
    assert trace["x"].shape == (9, 2) and "random data (seed 3)" in str(trace.inputs_source)
    assert trace.config.steps == 9 and trace.config.batch == 2
    assert float(trace.loss) != 0.0


def one_line(caught) -> str:
    text = str(caught.value)
    assert "\n" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize(("module", "words"), [
    ("nowhere.nets:make", "no module 'nowhere' importable from"),
    ("userpkg.nets:missing", "userpkg.nets has no 'missing'"),
    ("userpkg.fails:make", "importing userpkg.fails failed (ModuleNotFoundError"),
    ("userpkg.nets:make", "missing keys (in the module, not the file): "),
    ("userpkg.nets:broken", "making the module failed (ValueError: no GPU here)"),
    ("userpkg.nets:not_a_module", "the factory returned a int, not a torch.nn.Module"),
])  # fmt: skip
def test_bad_factories_are_one_line(inside, module, words):
    folder, tagger = inside
    state = tagger.state_dict()
    state["extra.weight"] = torch.zeros(2)
    del state["head.bias"]
    torch.save(state, folder / "odd.pt")
    with pytest.raises(LstmvizError) as caught:
        run(folder, "odd.pt", module, inputs=str(folder / "x.npy"))
    assert words in one_line(caught)
    if module == "userpkg.nets:make":  # Tagger() has hidden 5: the widths differ too
        assert "head.bias" in str(caught.value) and "unexpected keys" in str(caught.value)
        assert "extra.weight" in str(caught.value)


def test_files_that_are_not_checkpoints_are_one_line(inside):
    folder, tagger = inside
    (folder / "notes.pt").write_text("hello")
    torch.save(tagger, folder / "whole.pt")  # pickled code
    torch.save(tagger.state_dict(), folder / "six.pt")
    torch.save({"weights": [1, 2]}, folder / "list.pt")
    torch.jit.save(torch.jit.script(tagger), folder / "scripted.pt")
    cases = {
        ("notes.pt", "userpkg.nets:make"): "not a PyTorch checkpoint",
        ("whole.pt", "userpkg.nets:make"): "unpickling runs code",
        ("list.pt", "userpkg.nets:make"): "holds no state dict: a dict of 'weights'",
        ("six.pt", "userpkg.nets:make"): "lstm.weight_ih_l0 [24, 4] in the file, [20, 4] in the "
                                         "module",
        ("six.pt", "userpkg.nets:sized"): "the factory needs hidden, which the checkpoint does "
                                          "not give (it holds no hyper-parameters",
        ("scripted.pt", "userpkg.nets:make"): "TorchScript program runs as it is",
    }  # fmt: skip
    for (name, module), words in cases.items():
        with pytest.raises(LstmvizError) as caught:
            run(folder, name, module, inputs=str(folder / "x.npy"))
        assert words in one_line(caught), name


@pytest.mark.parametrize(("fields", "words"), [
    (dict(mode="taped", module="a.b:c"), "--module: only applies to --mode model --model "
                                         "CKPT.pt"),
    (dict(mode="model", model="m.pt", module="a.b"), "--module: 'a.b' is not an import path"),
    (dict(mode="model", model="m.pt", module="a b:c"), "--module: 'a b:c' is not an import"),
])  # fmt: skip
def test_the_module_field_is_checked(fields, words):
    with pytest.raises(ConfigError) as caught:
        RunConfig(**fields).validate().check_flags()
    assert str(caught.value).startswith(words)


def test_the_cli_takes_module(inside, tmp_path):
    """`lstmviz run` with --module: refused in one line where it does not apply (exit 2); a
    checkpoint runs once model mode hands it to `run_checkpoint` (engine.modes.model.run_model)."""
    folder, module = inside
    done = subprocess.run([sys.executable, "-m", "lstmviz", "run", "--mode", "taped", "--module",
                           "userpkg.nets:make", "--out", str(tmp_path / "t.npz")], cwd=folder,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 2 and "--module: only applies to" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    torch.save(module.state_dict(), folder / "cli.pt")
    out = tmp_path / "t.npz"
    done = subprocess.run([sys.executable, "-m", "lstmviz", "run", "--mode", "model", "--model",
                           "cli.pt", "--module", "userpkg.nets:six", "--inputs", "data.npz",
                           "--loss", "cross_entropy", "--out", str(out)], cwd=folder,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    from lstmviz.io.trace import GradientTrace

    assert_same(GradientTrace.load(out), expected(module, folder))
    done = subprocess.run([sys.executable, "-m", "lstmviz", "run", "--mode", "model", "--model",
                           "cli.pt", "--module", "userpkg.nets:nothing", "--out",
                           str(tmp_path / "u.npz")], cwd=folder, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "has no 'nothing'" in done.stderr and not (tmp_path / "u.npz").exists()


def test_the_window_runs_a_checkpoint_with_its_module(inside, qtbot, window, errors):
    """The dock's Module field, then the state dict opened as a model and its data: the run's
    trace is the module's."""
    folder, module = inside
    torch.save(module.state_dict(), folder / "window.pt")
    window.params.widgets["module"].setText("userpkg.nets:six")
    assert window.open_path(str(folder / "window.pt"))
    config = window.params.config()
    assert config.mode == "model" and config.module == "userpkg.nets:six"
    assert window.open_path(str(folder / "data.npz"))
    window.params.widgets["loss"].setCurrentText("cross_entropy")
    with qtbot.waitSignal(window.settled, timeout=120_000):
        window.run_button.click()
    assert not errors, errors
    assert_same(window.trace, expected(module, folder))
    assert window.open_path(str(ROOT / "resources" / "demo_lstm.keras"))  # not a state dict
    assert window.params.config().module is None


def test_lstmviz_gui_takes_module(monkeypatch):
    """`lstmviz gui CKPT DATA --module …` hands the factory to the window (which sets the dock's
    Module field before it opens the files: the window test above runs that)."""
    import lstmviz.cli
    import lstmviz.cli.gui
    import lstmviz.gui.app

    given = {}
    monkeypatch.setattr(lstmviz.gui.app, "main", lambda files, **kw: given.update(kw, files=files)
                        or 0)  # fmt: skip

    def leave(code):  # the app's process would end here
        raise SystemExit(code)

    monkeypatch.setattr(lstmviz.cli.gui, "leave", leave)
    monkeypatch.setattr(lstmviz.cli.gui, "check_flags", lambda args: None)  # no display here
    with pytest.raises(SystemExit) as left:
        lstmviz.cli.main(["gui", str(ROOT / "resources" / "demo_inputs.npy"), "--module",
                          "userpkg.nets:six"])  # fmt: skip
    assert left.value.code == 0
    assert given["module"] == "userpkg.nets:six" and len(given["files"]) == 1
