"""The mode registry: a mode registered once appears in the CLI, the GUI's mode list and the
dock, runs through the runner, and its traces open."""

import numpy as np
import pytest

from lstmviz.cli import build_parser
from lstmviz.core import modes
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import ConfigError
from lstmviz.engine.runner import run
from lstmviz.io.trace import GradientTrace, TraceUpdate


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
        run="tests.core.test_modes:toy_run", unit="half", count="steps",
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
    from lstmviz.gui.widgets.params import ParamsEditor

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


def test_the_rules_a_mode_follows_are_its_attributes(tmp_path):
    """Every rule reads what the registry says a mode is, never its name: a toy mode that
    lists weight files, counts its steps per unit, keeps two copies, trains and runs a whole
    model gets each of those rules."""
    from lstmviz.analysis.layout import panels_for
    from lstmviz.analysis.verify import verify_trace
    from lstmviz.io.absolute_paths import listed_weights
    from lstmviz.io.trace import GradientTrace

    plain = dict(name="toy", label="toy", help="", run="tests.core.test_modes:toy_run", unit="half",
                 count="batches", params=frozenset({"weights", "generator", "batches"}))
    modes.register(modes.Mode(**plain))
    try:
        one = RunConfig(mode="toy", weights="a.npz", batches=3)
        assert not listed_weights(one, "weights") and not one.weight_files_listed()
        base = one.estimated_bytes()
        modes.register(modes.Mode(**plain, lists_weight_files=True, steps_per_unit=True,
                                  copies=2, trains=True, whole_model=True))  # fmt: skip
        listed = RunConfig(mode="toy", weights="a.npz,b.npz", batches=3, generator="files")
        assert listed_weights(listed, "weights") and listed.weight_files_listed()
        with pytest.raises(ConfigError, match="--weights: empty file name in the list"):
            RunConfig(mode="toy", weights="a.npz,", generator="files").check_flags()
        with pytest.raises(ConfigError, match="weights files need --generator files"):
            RunConfig(mode="toy", weights="a.npz,b.npz").check_flags()
        assert listed.estimated_bytes() > 5 * base  # 3 units' steps, twice (seeding aside)
        assert panels_for({}, listed)[0] == "layers"  # a whole model: the model panels
        trace = GradientTrace("toy", listed, {"norm_h_total": np.ones(3, np.float32)})
        with pytest.raises(Exception, match="cannot be verified"):
            verify_trace(trace)  # not `verifiable`
        assert "loss='mse'" in repr(trace)  # training on a task: the task's loss
    finally:
        modes.unregister("toy")
    assert modes.find("toy").lead == () and not modes.find("toy").whole_model
