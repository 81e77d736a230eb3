"""Hardening of the desktop app: clean exit in every situation, Stop on multi-unit
runs, dialogs for bad fields. Subprocess tests run the real app (`python main.py`) offscreen and
read the `LSTMVIZ_TIMING` stamps it prints on stdout to know when the window is up or a run
has started; no wall-clock asserts except the bounds the app promises (Stop within 1 s)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.gui.main_window import MainWindow  # noqa: E402
from tests.helpers.gui_checks import stop_within_a_second  # noqa: E402
from tests.helpers.processes.app_process import App  # noqa: E402

# ---- the real app in a subprocess ------------------------------------------------------------


def cycle(tmp: Path, kind: str) -> tuple[str, int, str]:
    """One start/quit of the real app; returns (kind, exit code, stderr tail)."""
    folder = tmp / f"{kind}-{time.monotonic_ns()}"
    folder.mkdir()
    if kind == "screenshot":  # waits for TensorFlow, then the normal teardown path
        app = App(folder, "--screenshot", str(folder / "shot.png"))
    else:
        app = App(folder, *(["--demo"] if kind == "mid-run" else []))
    try:
        if kind == "loading":  # SIGTERM as soon as the window is up: TensorFlow still importing
            app.wait_for("window-shown")
            app.terminate()
        elif kind == "mid-run":  # SIGTERM after the demo run's first update
            app.wait_for("first-update")
            app.terminate()
        code = app.exit_code()
        return kind, code, app.err()
    finally:
        app.close()


@pytest.mark.slow
def test_twenty_start_quit_cycles_all_exit_0(tmp_path):
    """16 quits while TensorFlow loads, 2 after it loaded (screenshot), 2 in the middle of the
    demo run; two apps at a time. No segfault or abort at interpreter exit."""
    kinds = ["loading"] * 16 + ["screenshot", "mid-run"] * 2
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda kind: cycle(tmp_path, kind), kinds))
    failed = [(kind, code, err) for kind, code, err in results if code != 0]
    assert not failed, f"{len(failed)} of 20 cycles did not exit 0; first: {failed[0]}"


DRIVER = r"""
import os, signal, sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from lstmviz.gui import app as gui_app
from lstmviz.gui.main_window import MainWindow

qapp = QApplication(sys.argv[:1])
how = sys.argv[1]

def window():
    return next(w for w in qapp.topLevelWidgets() if isinstance(w, MainWindow))

def error():
    QTimer.singleShot(300, with_dialog_open)
    window().show_error("Run failed", "engine exploded")  # modal: returns when dismissed
    print("dialog-closed", flush=True)
    if how == "dismiss":
        QTimer.singleShot(100, lambda: os.kill(os.getpid(), signal.SIGTERM))

def with_dialog_open():
    box = qapp.activeModalWidget()
    print("dialog-open", type(box).__name__, flush=True)
    if how == "dismiss":
        box.accept()
    else:  # quit (SIGTERM, like File > Quit) with the dialog still open
        os.kill(os.getpid(), signal.SIGTERM)

QTimer.singleShot(300, error)
sys.exit(gui_app.main())
"""


@pytest.mark.parametrize("how", ["dismiss", "open"])
def test_closing_after_or_during_an_error_dialog_exits_0(tmp_path, how):
    app = App(tmp_path, how, code=DRIVER)
    try:
        app.wait_for("dialog-open")
        if how == "dismiss":
            app.wait_for("dialog-closed")
        assert app.exit_code(timeout=30) == 0, app.err()
    finally:
        app.close()


# ---- in-process: Stop on multi-unit runs, bad fields -------------------------------------------


LONG_RUNS = {  # the real engine; far more units than the test waits for
    "multipass": RunConfig(mode="multipass", steps=20, passes=1000, batch=4, hidden=16),
    "batchwise": RunConfig(mode="batchwise", steps=20, batches=1000, batch=4, hidden=16),
    "train": RunConfig(
        mode="train", task="adding", steps=20, batch=8, hidden=16, train_steps=100_000
    ),  # fmt: skip
}


@pytest.mark.serial  # times the stop: alone under xdist
@pytest.mark.parametrize("mode", sorted(LONG_RUNS))
def test_stop_cancels_a_long_multi_unit_run_within_a_second(qtbot, window, monkeypatch, mode):
    monkeypatch.setattr(window.run_view, "ask_keep", lambda done: QMessageBox.No)  # train asks
    updates = []
    window.worker.progress.connect(lambda run_id, update: updates.append(update.done))
    assert window.start_run(LONG_RUNS[mode])
    qtbot.waitUntil(lambda: len(updates) >= 3, timeout=120_000)  # past tracing, units flowing
    stop_within_a_second(qtbot, window)
    # the window is usable again: a short run of the same mode completes
    small = {"multipass": dict(passes=2), "batchwise": dict(batches=2), "train": {}}[mode]
    config = RunConfig(mode=mode, steps=10, batch=2, hidden=4, train_steps=3, **small)
    with qtbot.waitSignal(window.settled, timeout=120_000):
        assert window.start_run(config)
    assert window.trace is not None and window.trace.mode == mode


def test_invalid_fields_show_a_dialog_naming_the_field_and_start_nothing(
    qtbot, idle, errors, monkeypatch, tmp_path
):
    window = idle  # nothing here runs: no computing process
    calls = []
    monkeypatch.setattr(window.worker, "request_run", lambda *a: calls.append(a))
    widgets = window.params.widgets

    def refused(name: str) -> None:
        assert window.start_run() is False
        assert errors and errors[-1].startswith(name), errors[-1:]
        assert not window.state.running and window.run_button.isEnabled() and not calls
        window.params.set_config(RunConfig())

    for field, value in (("steps", 100_000), ("batch", 4096), ("hidden", 4096)):
        widgets[field].setValue(value)
    refused("memory")  # the estimate in GiB, the same check as the CLI's
    assert "GiB" in errors[-1]
    widgets["mode"].setCurrentIndex(widgets["mode"].findData("multipass"))
    widgets["passes"].setValue(1000)
    widgets["steps"].setValue(20_000)
    widgets["batch"].setValue(512)
    refused("memory")  # passes multiply the steps
    assert "P=1000 × T=20000" in errors[-1]
    window.params.set_path("weights", str(tmp_path / "missing.h5"))
    refused("Weights")
    window.params.set_path("inputs", str(tmp_path / "missing.npy"))
    refused("Inputs")
    for bad, flag in ((RunConfig(steps=0), "--steps"), (RunConfig(mode="bogus"), "--mode"),
                      (RunConfig(loss="l1"), "--loss")):  # fmt: skip
        assert window.start_run(bad) is False  # e.g. a config from a script or a trace
        assert errors[-1].startswith(flag) and not window.state.running and not calls


def test_a_bad_file_is_refused_before_any_work(qtbot, window, errors, tmp_path):
    """A weights file that exists but is not weights: the run fails in the worker before the
    engine starts, with a dialog naming the file, and the window is idle again."""
    bad = tmp_path / "weights.h5"
    bad.write_bytes(b"not an HDF5 file")
    window.params.widgets["weights"].set_path(str(bad))  # as if typed, not opened
    updates = []
    window.worker.progress.connect(lambda *a: updates.append(a))
    with qtbot.waitSignal(window.settled, timeout=60_000):
        window.run_button.click()
    assert errors and str(bad) in errors[-1] and "Traceback" not in errors[-1]
    assert not window.state.running and window.trace is None and not updates


def test_nonfinite_steps_marked_on_curves_and_in_summary(qtbot, tmp_path):
    """A real trace with NaN in x (taped engine) opened in the window: the NaN steps
    are marked on the norm curves, the summary lists them, nothing non-finite is plotted."""
    import lstmviz
    from lstmviz.weights import random_weights

    rng = np.random.default_rng(3)
    x = rng.standard_normal((12, 2, 3)).astype(np.float32)
    x[5, 0, 1] = np.nan
    trace = lstmviz.taped_gradients(x, random_weights(3, 4, rng), loss="mean_h")
    bad = np.asarray(trace.nonfinite_steps)
    assert bad.size and bad.min() <= 5 <= bad.max()
    path = tmp_path / "nan.npz"
    trace.save(str(path))

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings=settings, quiet_errors=True)
    qtbot.addWidget(win)
    win.show()
    assert win.files.open_trace(str(path)) and win.errors == 0
    qtbot.waitUntil(lambda: not win.area.stages)  # the panels draw one per event-loop turn
    np.testing.assert_array_equal(win.area.norm.marks.steps, np.unique(bad))
    assert win.area.norm.marks.spans and not win.area.norm.marks.boundingRect().isEmpty()
    text = win.summary.text.text()
    assert "NaN/Inf at t = " + ", ".join(str(int(t)) for t in bad[:8]) in text
    assert f"({bad.size} step" in text and "no NaN/Inf ✓" not in text
    for key, curve in win.area.norm.curves.items():  # gaps (NaN), never Inf or garbage
        y, source = curve.yData, np.asarray(trace.arrays[key])
        assert y is not None and len(y) == len(source) and not np.isinf(y).any()
        assert np.isnan(y[~np.isfinite(source)]).all()
    assert not np.isfinite(trace.arrays["norm_h_total"]).all()  # something to hide
    assert not np.isinf(win.area.rows.shown).any() and not np.isinf(win.area.units.data).any()
    win.grab()  # paints without an exception
    win.close()


def test_live_heatmap_and_curves_equal_the_trace_after_streaming(qtbot):
    """The incremental paths (rows appended into the heatmap buffer, unchanged curves
    skipped) end with the same numbers as drawing the whole matrix at once."""
    from lstmviz.analysis.values import display_values
    from lstmviz.core.config import RunConfig
    from lstmviz.plots.panels.curves import NormHistoryPanel
    from lstmviz.plots.panels.heatmaps import RowsHeatmap
    from lstmviz.plots.style import colour

    rng = np.random.default_rng(0)
    rows = np.exp(rng.standard_normal((30, 50))).astype(np.float32)
    rows[7, 3] = 0.0  # blank on the log scale
    config = RunConfig(mode="train", steps=50, train_steps=30)
    heat, norm = RowsHeatmap(), NormHistoryPanel()
    qtbot.addWidget(heat)
    qtbot.addWidget(norm)
    for n in range(1, 31):
        live = {"norm_h_total_by_step": rows[:n], "norm_h_total": rows[n - 1]}
        heat.draw(live, config, rows_total=30)
        norm.draw(live, config, rows_total=30)
        assert heat.data.shape == (30, 50)
        np.testing.assert_array_equal(heat.data[:n], rows[:n])
        assert np.isnan(heat.data[n:]).all()
    shown = display_values(rows, log=True, normalise=False)
    np.testing.assert_allclose(heat.shown, shown, rtol=1e-6, equal_nan=True)
    finite = shown[np.isfinite(shown)]
    np.testing.assert_allclose(heat.levels, (finite.min(), finite.max()), rtol=1e-6)
    # what is on screen: those values coloured at those levels (rows coloured as they came,
    # re-coloured when the levels moved), the colour bar showing the same levels
    np.testing.assert_array_equal(heat.image.image, heat.rgba)  # no levels, no table
    assert heat.image.levels is None and heat.image.lut is None
    np.testing.assert_array_equal(heat.rgba, colour(heat.shown, heat.levels))
    np.testing.assert_allclose(heat.bar.levels(), heat.levels)
    # the finished trace's whole image (`style.finished_image`): the same on screen
    done = RowsHeatmap()
    qtbot.addWidget(done)
    done.draw({"norm_h_total_by_step": rows, "norm_h_total": rows[-1]}, config)
    np.testing.assert_array_equal(done.shown, heat.shown)
    assert done.levels == heat.levels
    np.testing.assert_array_equal(done.image.image, heat.rgba)
    np.testing.assert_allclose(done.bar.levels(), heat.levels)
    np.testing.assert_array_equal(norm.curves["norm_h_total"].yData, rows[-1])
    for curve, s in zip(norm.history_shown, norm.history_steps, strict=True):
        np.testing.assert_allclose(curve.yData, rows[s], rtol=1e-6)
    assert norm.history_steps == list(range(0, 29, 2))  # stride 2: at most 24 curves
    labels = [label.text for _, label in norm.legend.items]
    assert sum("earlier steps" in t for t in labels) == 1  # not re-added per update


def test_heatmap_colours_are_pyqtgraphs():
    """The heatmaps upload pre-coloured RGBA: the colours are the ones pyqtgraph gives the
    float values with the same levels and colour map (NaN transparent)."""
    import pyqtgraph as pg

    from lstmviz.plots.style import COLOR_MAP, colour

    rng = np.random.default_rng(3)
    values = rng.standard_normal((40, 60)).astype(np.float32) * 3
    values[5, 7] = np.nan
    levels = (-2.0, 4.5)
    lut = pg.colormap.get(COLOR_MAP).getLookupTable(nPts=256, alpha=True)
    argb, _ = pg.functions.makeARGB(np.nan_to_num(values), lut=lut, levels=levels)
    expected = argb[..., [2, 1, 0, 3]]  # makeARGB is BGRA
    rgba = colour(values, levels)
    finite = np.isfinite(values)
    # same table entry, up to a rounding step at a bin edge
    close = np.abs(rgba[finite].astype(int) - expected[finite].astype(int)).max(axis=-1)
    table = lut.astype(int)
    step = np.abs(np.diff(table, axis=0)).max()
    assert (close <= step).all() and (close == 0).mean() > 0.99
    assert rgba[5, 7, 3] == 0 and (rgba[finite][:, 3] == 255).all()


def test_live_curve_panel_y_range_only_grows_and_holds_the_data(qtbot):
    """During a live run the norm panel's y range (and so its grid) changes only when the
    data leaves it; a finished trace fits the data again."""
    from lstmviz.core.config import RunConfig
    from lstmviz.plots.panels.curves import NormPanel

    panel = NormPanel()
    qtbot.addWidget(panel)
    config = RunConfig(mode="batchwise", steps=50, batches=10)
    view = panel.plot.getPlotItem().getViewBox()
    y = np.exp(np.random.default_rng(0).standard_normal(50))
    panel.draw({"norm_h_total": y}, config, rows_total=10)
    first = view.viewRange()[1]
    panel.draw({"norm_h_total": y * 1.01}, config, rows_total=10)
    assert view.viewRange()[1] == first  # a small change: the axis stays
    panel.draw({"norm_h_total": y * 1000}, config, rows_total=10)
    lo, hi = view.viewRange()[1]
    assert lo <= np.log10(y.min()) and hi >= np.log10(y.max() * 1000)  # grown to hold it
    panel.draw({"norm_h_total": y}, config, rows_total=None)
    assert view.autoRangeEnabled()[1]


def test_staged_redraw_ends_with_every_panel_showing_the_newest_trace(qtbot, tmp_path):
    """The panels draw one per event-loop turn: a trace shown while an earlier one is still
    being drawn replaces it, every panel ends with the newest data, and `settled` (the
    screenshot hook) waits for the last panel."""
    from lstmviz.analysis.values import units_matrix
    from lstmviz.io.trace import GradientTrace, step_norm

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings=settings, quiet_errors=True)
    qtbot.addWidget(win)
    win.show()
    rng = np.random.default_rng(5)
    traces = []
    for steps in (12, 20):
        g = rng.standard_normal((steps, 3, 4)).astype(np.float32)
        arrays = {"grad_h_total": g, "norm_h_total": step_norm(g), "loss": np.float32(1)}
        traces.append(GradientTrace("taped", RunConfig(steps=steps, batch=3, hidden=4), arrays))
    win.show_trace(traces[0], None)
    assert win.area.stages and win.area.units.data.size == 0  # the first panel only, so far
    norm = win.area.norm
    np.testing.assert_array_equal(norm.curves["norm_h_total"].yData, traces[0].norm_h_total)
    win.show_trace(traces[1], None)
    with qtbot.waitSignal(win.settled, timeout=5_000):
        win.settle()  # as when a run ends: the signal waits for the panels left to draw
        assert win.area.stages
    assert not win.area.stages
    newest = traces[1]
    np.testing.assert_array_equal(win.area.norm.curves["norm_h_total"].yData, newest.norm_h_total)
    np.testing.assert_allclose(win.area.units.data, units_matrix(newest.arrays))
    assert win.area.rows.data.shape == (3, 20)
    win.log_action.trigger()  # view options are staged the same way
    qtbot.waitUntil(lambda: not win.area.stages)
    assert all(not panel.log for panel in win.area.panels)
    assert win.area.units.bar.axis.labelText == "mean |dL/dh_t,j|"
    win.close()


def test_per_batch_curves_get_one_colour_each_and_passes_up_to_twenty(qtbot):
    """Batches overlap on the time axis: at most one curve per palette colour (the heatmap
    shows every batch). Passes sit side by side: up to 20."""
    from lstmviz.plots.panels.curves import NormPanel
    from lstmviz.plots.style import PALETTE

    panel = NormPanel()
    qtbot.addWidget(panel)
    rng = np.random.default_rng(0)

    def shown(arrays, config) -> list:
        panel.draw(arrays, config)
        return [full for full, _ in panel.row_curves if full.xData is not None and len(full.xData)]

    rows = np.exp(rng.standard_normal((15, 30))).astype(np.float32)
    batches = shown({"norm_h_total_by_batch": rows, "norm_h_total": rows[0]},
                    RunConfig(mode="batchwise", steps=30, batches=15))  # fmt: skip
    colours = {full.opts["pen"].color().name() for full in batches}
    assert len(batches) == len(PALETTE) == len(colours)
    passes = shown({"norm_h_total_by_pass": rows, "norm_h_total": rows.reshape(-1)},
                   RunConfig(mode="multipass", steps=30, passes=15))  # fmt: skip
    assert len(passes) == 15


def test_summary_flags_a_non_finite_array_the_per_step_check_does_not_cover():
    """With `nonfinite_steps` the summary trusts it for states and normed gradients and scans
    only the other float arrays: a NaN weight gradient is still reported."""
    from lstmviz.analysis.report.summary import summary_text

    steps = 6
    grad = np.ones((steps, 2, 3), np.float32)
    arrays = {
        "h": grad, "c": grad, "grad_h_total": grad, "norm_h_total": np.ones(steps, np.float32),
        "grad_kernel": np.ones((4, 12), np.float32), "nonfinite_steps": np.zeros(0, np.int64),
        "loss": np.float32(0.5),
    }  # fmt: skip
    assert "no NaN/Inf ✓" in summary_text("taped", arrays, None, 0.1)
    arrays["grad_kernel"][1, 2] = np.nan
    assert "1 in grad_kernel" in summary_text("taped", arrays, None, 0.1)


def test_panels_resized_by_a_new_panel_set_repaint_one_per_turn(qtbot, tmp_path):
    """A trace that shows fewer panels than the last resizes the panels left: all but one wait
    with updates off and repaint one per event-loop turn (Qt does not paint them meanwhile),
    and `settled` comes after the last."""
    from PySide6.QtCore import QEvent, QObject

    from lstmviz.io.trace import GradientTrace, step_norm

    settings = QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings=settings, quiet_errors=True)
    qtbot.addWidget(win)
    win.resize(1280, 820)
    win.show()
    rng = np.random.default_rng(3)
    g = rng.standard_normal((16, 3, 4)).astype(np.float32)
    arrays = {"grad_h_total": g, "norm_h_total": step_norm(g), "loss": np.float32(1)}
    wide = dict(arrays, loss_by_step=np.linspace(2, 1, 6, dtype=np.float32),
                connectivity=rng.random((16, 16)).astype(np.float32))  # fmt: skip
    config = RunConfig(steps=16, batch=3, hidden=4)
    with qtbot.waitSignal(win.settled, timeout=5_000):
        win.show_trace(GradientTrace("taped", config, wide), None)
        win.settle()
    assert {"loss", "connectivity"} <= set(win.area.shown)

    painted: list[tuple[str, bool]] = []  # (panel, frozen when it painted)

    class Paints(QObject):
        def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
            if event.type() == QEvent.Type.Paint:
                panel = next(n for n, p in win.area.by_name.items() if p.plot.viewport() is watched)
                painted.append((panel, win.area.by_name[panel] in win.area.frozen))
            return False

    paints = Paints()
    for name in ("norm", "rows", "units"):
        win.area.by_name[name].plot.viewport().installEventFilter(paints)
    with qtbot.waitSignal(win.settled, timeout=5_000):
        win.show_trace(GradientTrace("taped", config, arrays), None)
        frozen = [w for w in win.area.frozen if w in win.area.panels]  # besides plots
        assert len(frozen) == 2 and not any(p.updatesEnabled() for p in frozen)
        win.settle()
    assert set(win.area.shown) == {"norm", "rows", "units"} and not win.area.frozen
    assert all(p.updatesEnabled() for p in win.area.panels)
    assert {name for name, _ in painted} == {"norm", "rows", "units"}
    assert not any(was_frozen for _, was_frozen in painted)
    win.close()
