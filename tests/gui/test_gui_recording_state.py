"""The window's state around a recording of a real fit (pytest-qt, offscreen): the dock says that
what is shown was recorded during `model.fit` and cannot be re-run from here (and Run says so
instead of starting something else), and a run stopped with nothing kept gives the recording
back at the record and timestep window the user had chosen."""

from __future__ import annotations

import functools
import os

import pytest

pytest.importorskip("pytestqt")

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.io.recording import load_recording  # noqa: E402
from tests.helpers.gui_checks import drain  # noqa: E402
from tests.helpers.models.keras_models import fitted as fitted  # noqa: E402  (the recording of a real fit)

DEMO_MODEL = "resources/demo_lstm.keras"


def choose_window(qtbot, bar, lo: int, hi: int) -> None:
    """Heatmap over a window of timesteps lo…hi, typed into the bar as the user does."""
    from PySide6.QtCore import Qt

    bar.range_box.setCurrentIndex(1)
    bar.range_box.activated.emit(1)
    for box, value in ((bar.last, hi), (bar.first, lo)):
        assert box.isVisible() and box.isEnabled()  # they take keys (a disabled box does not)
        box.setFocus()
        box.selectAll()
        qtbot.keyClicks(box, str(value))
        qtbot.keyClick(box, Qt.Key_Return)


def stop_a_run(qtbot, window) -> None:
    """A multi-pass run (a stand-in engine) started, stopped after its first pass and drained;
    whether its passes are kept is the test's `ask_keep`."""
    from tests.helpers import gui_fakes

    window.worker.engine = functools.partial(gui_fakes.multipass, delay=0.3)
    try:
        assert window.start_run(RunConfig(mode="multipass", steps=10, passes=4))
        qtbot.waitUntil(lambda: window.state.done >= 1, timeout=60_000)
        window.run_view.stop()
        drain(window)
    finally:
        window.worker.engine = None


def test_the_dock_says_the_recording_cannot_be_rerun_and_run_says_so(
    qtbot, idle, errors, fitted, monkeypatch
):
    window = idle  # nothing here runs: no computing process
    calls = []
    monkeypatch.setattr(window.worker, "request_run", lambda *a: calls.append(a))
    assert window.open_path(str(fitted))
    drain(window)
    params = window.params
    model, data = params.widgets["model"], params.widgets["inputs"]
    # what is shown: the recording's model and data, by name, and no file behind either
    assert model.path() is None and data.path() is None
    # the name as the field has room for it, the tag whole; the whole name in the tooltip
    assert model.edit.text().startswith("seq") and model.edit.text().endswith("(recorded)")
    assert "sequential" in model.edit.toolTip()
    assert model.edit.isReadOnly() and "model.fit" in model.edit.toolTip()
    assert "cannot be re-run" in model.edit.toolTip()
    assert "x [16, 7]" in data.edit.text() and "random" in data.edit.toolTip()
    assert "run.lvz" in params.sources.text() and params.sources.isVisibleTo(window)
    # Run: a dialog naming why, nothing started (not "no model file" as if none were shown)
    assert window.start_run() is False
    assert errors[-1].startswith("Model") and "recorded during model.fit" in errors[-1]
    assert "run.lvz" in errors[-1] and not calls and window.recording is not None
    # the user sets up a run of their own: the dock says what that run reads
    mode = params.widgets["mode"]
    mode.setCurrentIndex(mode.findData("taped"))
    assert model.edit.text() == "" and data.edit.text() == ""  # placeholders: none, random
    assert "run.lvz" not in params.sources.text()
    mode.setCurrentIndex(mode.findData("model"))
    assert model.edit.text() == ""  # not the recording's again: Run would not run it

    assert window.open_path(str(fitted))  # again; now a model file is opened for a run
    assert model.edit.text().startswith("seq") and model.edit.text().endswith("(recorded)")
    assert window.files.open_model(DEMO_MODEL)
    assert model.path() == os.path.abspath(DEMO_MODEL) and "demo_lstm.keras" in model.edit.text()
    assert data.path() is None and data.edit.text() == ""  # "random (seeded)": what Run uses
    assert "run.lvz" not in params.sources.text()

    # a trace of the recording's last record: its model too was in the training process's
    # memory, so the dock names it (not "none", as if no model were shown) and Run says why
    assert window.open_path(str(fitted))
    saved = load_recording(fitted).last.save(fitted.parent / "state.npz")
    assert window.files.open_trace(str(saved))
    assert model.edit.text().startswith("seq") and model.edit.text().endswith("(in memory)")
    assert "sequential" in model.edit.toolTip()
    assert "x [16, 7]" in data.edit.text() and "cannot be re-run" in model.edit.toolTip()
    assert "state.npz" in params.sources.text() and "run.lvz" not in params.sources.text()
    assert window.start_run() is False
    assert errors[-1].startswith("Model") and "trace state.npz" in errors[-1]
    assert "model in memory" in errors[-1] and "recorded" not in errors[-1]
    assert not window.state.running and not calls
    # a model trace run from a model file opens with that file in the dock, nothing marked
    params.widgets["mode"].setCurrentIndex(params.widgets["mode"].findData("model"))
    assert window.files.open_model(DEMO_MODEL) and window.files.open_trace(
        str(load_recording(fitted).last.save(fitted.parent / "again.npz"))
    )
    assert "in memory" in model.edit.text()  # that trace names no file either


def test_stop_no_shows_the_recording_again_at_the_record_and_window_chosen(
    qtbot, window, errors, fitted, monkeypatch
):
    from PySide6.QtWidgets import QMessageBox

    assert window.open_path(str(fitted))
    drain(window)
    bar, area = window.recordings.bar, window.area
    bar.slider.setValue(2)
    choose_window(qtbot, bar, 1, 3)
    drain(window)
    assert (bar.record(), bar.t_range(), area.record, area.t_range) == (2, (1, 3), 2, (1, 3))
    asked = []
    monkeypatch.setattr(window.run_view, "ask_keep",
                        lambda done: asked.append(done) or QMessageBox.No)
    stop_a_run(qtbot, window)
    assert asked and not window.state.running and not errors
    assert window.recording is not None and window.recording.path == fitted
    assert bar.slider.value() == 2 and bar.record() == 2 and bar.t_range() == (1, 3)
    assert bar.range_box.currentIndex() == 1 and bar.first.isVisibleTo(window)
    assert area.record == 2 and area.t_range == (1, 3)
    assert "last record only" in bar.note.text()  # the note for an earlier record
    rec = load_recording(fitted)
    norms = area.by_name["record_norms"]
    assert f"step {rec.step[2]}" in norms.title.text() and norms.faded_records == [0, 1]
    assert "t 1–3" in area.by_name["record_map"].title.text()
    shown = window.params.widgets["model"].edit
    assert shown.text().endswith("(recorded)") and "sequential" in shown.toolTip()  # as before

    # the latest record, every timestep: still the latest (it follows new records)
    bar.slider.setValue(bar.slider.maximum())
    bar.range_box.setCurrentIndex(0)
    bar.range_box.activated.emit(0)
    drain(window)
    stop_a_run(qtbot, window)
    assert bar.record() is None and bar.t_range() is None and area.record is None
    assert area.t_range is None and not errors
