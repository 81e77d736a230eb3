"""The window's drawing in event-loop turns and its dock (pytest-qt, offscreen): a finished
run's panels drawn one a turn and painted in the turn after, updates faster than the panels
draw, long-lived objects kept out of full collections, the dock's own refusals and width."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from lstmviz.core.config import RunConfig  # noqa: E402


@pytest.fixture
def shown(bare_window):
    return bare_window


def taped_arrays(seed: int, steps: int) -> dict[str, np.ndarray]:
    """A small taped trace's arrays: grad_h_total [steps, 2, 3], its norms and a loss."""
    from lstmviz.io.trace import step_norm

    g = np.random.default_rng(seed).standard_normal((steps, 2, 3)).astype(np.float32)
    return {"grad_h_total": g, "norm_h_total": step_norm(g), "loss": np.float32(1)}


def test_a_finished_runs_first_panel_is_drawn_in_a_turn_of_its_own(qtbot, shown):
    """At a run's end the window's bookkeeping takes its turn and the first panel is drawn in
    the next (`at_once=False`); a trace shown otherwise draws its first panel at once."""
    from lstmviz.io.trace import GradientTrace

    win, arrays = shown, taped_arrays(4, 10)
    trace = GradientTrace("taped", RunConfig(steps=10, batch=2, hidden=3), arrays)
    with qtbot.waitSignal(win.area.drawn, timeout=5_000):
        win.show_trace(trace, 0.1, at_once=False)
        assert win.area.norm.curves["norm_h_total"].yData is None  # nothing drawn yet
        assert len(win.area.stages) == len(win.area.panels)
    np.testing.assert_array_equal(win.area.norm.curves["norm_h_total"].yData, trace.norm_h_total)
    win.show_trace(GradientTrace("taped", trace.config, dict(arrays, loss=np.float32(2))), 0.1)
    assert len(win.area.stages) == len(win.area.panels) - 1  # the first drawn at once


def test_panels_paint_in_the_turn_after_their_draw(qtbot, shown):
    """A panel is drawn with its plot's updates off and painted in the next event-loop turn,
    so its draw and its paint (which redoes the axes and every curve when the range moves)
    are not one long turn; live or finished."""
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    from lstmviz.io.trace import GradientTrace

    win, arrays = shown, taped_arrays(5, 12)
    config = RunConfig(steps=12, batch=2, hidden=3)
    with qtbot.waitSignal(win.area.drawn, timeout=5_000):
        win.area.draw(arrays, config, None, live=True)
    area, view = win.area, win.area.norm.plot.viewport()
    paints: list[int] = []

    class Paints(QObject):
        def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
            if event.type() == QEvent.Type.Paint:
                paints.append(1)
            return False

    view.installEventFilter(Paints(view))
    win.show_trace(GradientTrace("taped", config, dict(arrays, loss=np.float32(2))), 0.1)
    area.stage_timer.stop()  # the turns are taken by hand below
    np.testing.assert_array_equal(area.norm.curves["norm_h_total"].yData, arrays["norm_h_total"])
    assert area.frozen[:1] == [view] and not view.updatesEnabled()
    for _ in range(5):
        QApplication.processEvents()
        qtbot.wait(10)
    assert not paints  # drawn, not painted
    area.turn()  # its turn: painted now, the next panel drawn in the turn after
    area.stage_timer.stop()
    qtbot.waitUntil(lambda: bool(paints), timeout=2_000)
    assert view.updatesEnabled() and view not in area.frozen
    held = []  # the other plots held by their draws' turns
    with qtbot.waitSignal(win.area.drawn, timeout=5_000):
        while area.busy():
            area.turn()
            held += [w for w in area.frozen[:1] if not w.updatesEnabled()]
    assert area.rows.plot.viewport() in held and area.units.plot.viewport() in held
    assert not area.frozen and all(p.plot.viewport().updatesEnabled() for p in area.panels)
    area.draw(dict(arrays, norm_h_total=arrays["norm_h_total"] * 2), config, 12, live=True)
    assert area.frozen[:1] == [view] and not view.updatesEnabled()


def test_the_windows_long_lived_objects_are_left_out_of_full_collections(qtbot, shown):
    """`gui.app.freeze_long_lived`: what exists when the window is shown, and what was made
    until it first settles, is frozen (a full collection as the panels were made stalled the
    window); objects made later are collected as usual."""
    import gc

    from PySide6.QtCore import QObject

    from lstmviz.gui.app import freeze_long_lived

    win = shown
    gc.unfreeze()
    try:
        freeze_long_lived(win)
        first = gc.get_freeze_count()
        assert first > 0
        made = [QObject() for _ in range(100)]  # made before the window settles
        win.settled.emit()
        second = gc.get_freeze_count()
        assert second >= first + len(made)
        win.settled.emit()  # only the first time
        later = [[] for _ in range(100)]
        win.settled.emit()
        assert gc.get_freeze_count() == second and gc.is_tracked(later[0])
    finally:
        gc.unfreeze()


def test_updates_faster_than_the_panels_draw_still_reach_every_panel(qtbot, shown):
    """A training run streams ~30 updates a second, more than the panels draw one per turn:
    each live redraw waits for the last one's panels instead of restarting them, so the panel
    last in the order (the training loss) fills in during the run, not only at its end."""
    win, rng = shown, np.random.default_rng(6)
    win.shown.show_run(RunConfig(mode="train", steps=12, batch=2, hidden=3, train_steps=400))
    drawn_while_streaming = []
    for n in range(1, 80):
        norms = rng.uniform(0.1, 1.0, (n, 12)).astype(np.float32)
        win.state.pending = {"loss_by_step": rng.uniform(size=n).astype(np.float32),
                             "norm_h_total_by_step": norms, "norm_h_total": norms[-1]}  # fmt: skip
        win.run_view.dirty = True
        win.run_view.flush()
        qtbot.wait(3)  # the next update comes before a stage turn (STAGE_MS) is due
        loss = win.area.by_name.get("loss")
        drawn_while_streaming.append(loss is not None and loss.loss.size > 0)
    assert any(drawn_while_streaming)
    qtbot.waitUntil(lambda: not win.area.busy(), timeout=5_000)
    win.run_view.flush()  # the last update, drawn once the panels are free
    qtbot.waitUntil(lambda: not win.area.busy(), timeout=5_000)
    np.testing.assert_array_equal(win.area.by_name["loss"].loss, win.state.pending["loss_by_step"])


def test_the_dock_refuses_a_run_in_its_own_words(shown, capsys):
    """A run the dock's fields do not allow gets a message naming the fields as the dock
    does (model mode without a model says how to open one), not the command line's flags."""
    win, widgets = shown, shown.params.widgets
    widgets["mode"].setCurrentIndex(widgets["mode"].findData("model"))
    assert not win.start_run()
    error = capsys.readouterr().err
    assert "Model: model mode needs a model file: File → Open model… (Ctrl+M)" in error
    widgets["mode"].setCurrentIndex(widgets["mode"].findData("taped"))
    widgets["layer"].setText("lstm_1")  # a layer without a weights file
    assert not win.start_run()
    error = capsys.readouterr().err
    assert "Layer: only applies together with a Weights file" in error and "--" not in error


def test_a_file_opened_before_tensorflow_is_ready_stays_in_the_status_line(shown, tmp_path):
    from lstmviz.io.trace import GradientTrace

    win = shown
    device = {"device": "CPU", "lstm": "native", "cudnn": "no", "tensorflow": "2",
              "lstm_detail": ""}
    win.message.setText("loading TensorFlow…")
    win._on_ready(device)
    assert win.message.text().startswith("ready")
    path = GradientTrace("taped", RunConfig(steps=10, batch=2, hidden=3),
                         taped_arrays(7, 10)).save(tmp_path / "early.npz")  # fmt: skip
    win.message.setText("loading TensorFlow…")
    assert win.open_path(str(path))
    opened = win.message.text()
    assert "early.npz" in opened
    win._on_ready(device)
    assert win.message.text() == opened


def test_a_file_field_shows_the_names_and_keeps_the_paths(qtbot):
    """The dock is narrow: a file field shows the file's name (a path cut at its start said
    nothing), the whole path in its tooltip; empty, the tooltip says what that means."""
    from lstmviz.gui.widgets.params import FileField

    field = FileField("random (seeded)")
    qtbot.addWidget(field)
    assert field.path() is None and field.edit.toolTip() == "random (seeded)"
    field.set_path("/data/runs/2026/w.keras")
    assert field.edit.text() == "w.keras" and field.path() == "/data/runs/2026/w.keras"
    assert field.edit.toolTip() == "/data/runs/2026/w.keras"
    field.set_path("/a/one.npz,/b/two.keras")  # per-batch weights files
    assert field.edit.text() == "one.npz, two.keras" and field.path() == "/a/one.npz,/b/two.keras"
    field.set_path(None)
    assert field.path() is None and field.edit.text() == ""


def test_a_panel_a_live_run_has_no_data_for_does_not_ask_to_press_run(qtbot, shown):
    win = shown
    config = RunConfig(mode="train", steps=12, batch=2, hidden=3, train_steps=400)
    rows = np.ones((3, 12), np.float32)
    live = {"loss_by_step": np.ones(3, np.float32), "norm_h_total_by_step": rows,
            "norm_h_total": rows[-1]}  # fmt: skip
    win.area.draw(live, config, 400, live=True)
    units = win.area.by_name["units"]  # per-unit gradients come with the finished trace
    assert units.stack.currentWidget() is units.placeholder
    assert "Run" not in units.placeholder.text() and "as the run goes" in units.placeholder.text()
    win.area.draw({}, None, None, live=False)
    assert "press Run" in units.placeholder.text()


def test_the_dock_is_never_narrower_than_its_fields(shown):
    """However narrow a saved window state or the user's drag asks the dock to be, Qt stops
    at its minimum: that must leave the fields their own minimum width beside the scroll
    bar (a fixed 270 px minimum once let a restored state clip them at the right)."""
    from PySide6.QtWidgets import QScrollArea

    area = shown.dock.widget().findChild(QScrollArea)
    fields = area.widget().minimumSizeHint().width()
    scroll = area.verticalScrollBar().sizeHint().width()
    assert shown.dock.minimumSizeHint().width() >= fields + scroll


def test_a_stopped_runs_trace_from_before_is_drawn_after_the_stops_turn(qtbot, shown,
                                                                        monkeypatch):  # fmt: skip
    """Stop with nothing kept shows the trace from before again: its first panel is drawn in
    the next turn, not in the turn of the click (which also lays the panels out again)."""
    from lstmviz.io.trace import GradientTrace

    win = shown
    monkeypatch.setattr(win.worker, "request_run", lambda *a: None)
    monkeypatch.setattr(win.worker, "cancel", lambda *a: None)
    before = GradientTrace("taped", RunConfig(steps=10, batch=2, hidden=3), taped_arrays(6, 10))
    with qtbot.waitSignal(win.area.drawn, timeout=5_000):
        win.show_trace(before, 0.1)
    win.area.norm.curves["norm_h_total"].setData([], [])  # what a run's live draw leaves
    assert win.state.start(RunConfig(steps=12, batch=2, hidden=3))
    win.state.stop_now()
    shown = win.area.norm.curves["norm_h_total"].yData
    assert win.trace is before and (shown is None or shown.size == 0)
    with qtbot.waitSignal(win.area.drawn, timeout=5_000):
        pass
    np.testing.assert_array_equal(win.area.norm.curves["norm_h_total"].yData,
                                  before.norm_h_total)  # fmt: skip
