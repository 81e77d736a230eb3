"""The mode registry: a mode registered once appears in the CLI, the GUI's mode list and the
dock, runs through the runner, and its traces open."""

import numpy as np
import pytest

from lstmviz import modes
from lstmviz.cli import build_parser
from lstmviz.config import RunConfig
from lstmviz.engine.runner import run
from lstmviz.errors import ConfigError
from lstmviz.trace import GradientTrace, TraceUpdate


def toy_run(config, cancelled=bool, keep=bool):
    """A mode of two units whose trace is a curve over T."""
    yield TraceUpdate(0, 2, "toy starting")
    yield TraceUpdate(1, 2, "half", {"norm_h_total": np.ones(config.steps, np.float32)})
    norms = np.arange(config.steps, dtype=np.float32)
    yield GradientTrace("toy", config, {"norm_h_total": norms, "loss": np.float32(1)})


@pytest.fixture
def toy():
    mode = modes.register(modes.Mode(
        name="toy", label="toy mode", help="a mode for the tests", params=frozenset({"loss"}),
        run="tests.test_modes:toy_run", unit="half", count="steps",
    ))  # fmt: skip
    yield mode
    modes.unregister("toy")


def test_a_registered_mode_appears_in_the_cli_and_runs(toy, tmp_path):
    parser = build_parser()
    args = parser.parse_args(["run", "--mode", "toy", "--steps", "5", "--out", "t.npz"])
    assert args.mode == "toy"
    mode_help = next(a for a in parser._subparsers._group_actions[0].choices["run"]._actions
                     if a.dest == "mode")  # fmt: skip
    assert "toy" in mode_help.choices and "a mode for the tests" in mode_help.help
    *updates, trace = run(RunConfig(mode="toy", steps=5))
    assert [u.message for u in updates] == ["toy starting", "half"]
    back = GradientTrace.load(trace.save(tmp_path / "t.npz"))
    assert back.mode == "toy" and list(back.norm_h_total) == [0, 1, 2, 3, 4]
    with pytest.raises(ConfigError, match="--connectivity: only applies to --mode taped"):
        RunConfig(mode="toy", connectivity=True).check_flags()  # a field it does not read


def test_a_registered_mode_appears_in_the_gui(toy, qtbot):
    from lstmviz.gui.params import ParamsEditor

    editor = ParamsEditor()
    qtbot.addWidget(editor)
    combo = editor.widgets["mode"]
    names = [combo.itemData(i) for i in range(combo.count())]
    assert names == list(modes.names()) and combo.itemText(names.index("toy")) == "toy mode"
    combo.setCurrentIndex(names.index("toy"))
    enabled = {name for name, widget in editor.widgets.items() if widget.isEnabled()}
    assert enabled == {"mode", "steps", "batch", "hidden", "seed", "loss"}
    assert editor.validated().mode == "toy"


def test_unknown_modes_are_refused_by_name():
    with pytest.raises(ConfigError, match="--mode: unknown value 'toy'"):
        RunConfig(mode="toy").validate()
    assert modes.label("toy") == "toy"  # a trace of a mode this version lacks still shows
