"""The desktop app, driven with pytest-qt (offscreen): runs, live updates, Stop, errors, files."""

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import QPointF, Qt, QTimer  # noqa: E402
from PySide6.QtGui import QImage  # noqa: E402

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.gui.main_window import MainWindow  # noqa: E402
from lstmviz.io.trace import GradientTrace  # noqa: E402
from tests.helpers import gui_fakes  # noqa: E402
from tests.helpers.gui_checks import stop_within_a_second  # noqa: E402
from tests.helpers.gui_fakes import PASSES, TP  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def fake_multipass(delay: float = 0.0):
    """Stands in for the multi-pass engine in the computing process: live rows per pass, then
    a final trace (`Worker.engine`)."""
    return functools.partial(gui_fakes.multipass, delay=delay)


def run_and_wait(qtbot, win, timeout=60_000):
    with qtbot.waitSignal(win.settled, timeout=timeout):
        win.run_button.click()


def test_taped_run_draws_the_engine_numbers_and_verifies(qtbot, window):
    assert "TF" in window.windowTitle() and "CPU" in window.device_label.text()
    widgets = window.params.widgets
    for name, value in (("steps", 30), ("batch", 4), ("input_dim", 3), ("hidden", 6)):
        widgets[name].setValue(value)
    widgets["loss"].setCurrentIndex(widgets["loss"].findData("last_mse"))
    widgets["mode"].setCurrentIndex(widgets["mode"].findData("taped"))
    run_and_wait(qtbot, window)
    trace = window.trace
    assert trace is not None and trace.grad_h_total.shape == (30, 4, 6)
    assert trace.config.loss == "last_mse"

    norm = window.area.norm
    np.testing.assert_array_equal(norm.curves["norm_h_total"].yData, trace.norm_h_total)
    window.log_action.trigger()  # linear axes: the direct curve's zeros are drawn as zeros
    np.testing.assert_array_equal(norm.curves["norm_h_direct"].yData, trace.norm_h_direct)
    np.testing.assert_array_equal(norm.curves["norm_c_total"].yData, trace.norm_c_total)
    g = trace.grad_h_total.astype(np.float64)
    np.testing.assert_allclose(window.area.rows.data, np.sqrt((g**2).sum(-1)).T, rtol=1e-12)
    np.testing.assert_allclose(window.area.units.data, np.abs(g).mean(axis=1).T, rtol=1e-12)
    assert f"loss {float(trace.loss):.3g}" in window.summary.text.text()
    assert "no NaN/Inf" in window.summary.text.text()
    qtbot.wait(50)  # let the view range settle
    view = norm.plot.getPlotItem().getViewBox()
    norm._hover(view.mapViewToScene(QPointF(5.2, float(np.mean(view.viewRange()[1])))))
    assert norm.readout.text().startswith("t = 5 · total ")

    window.summary.verify_button.click()
    qtbot.waitUntil(lambda: "entries" in window.summary.verify_result.text(), timeout=10_000)
    assert "✓" in window.summary.verify_result.text()


def test_live_multipass_updates_fill_rows_and_mark_passes(qtbot, window, monkeypatch):
    window.worker.engine = fake_multipass(delay=0.2)
    seen = []
    window.worker.progress.connect(lambda _id, update: seen.append(update.done))
    window.run_button.click()
    qtbot.waitUntil(lambda: window.state.pending.get("norm_h_total_by_pass", []).__len__() == 2)
    window.run_view.flush()
    while window.area.busy():  # the panels draw one per event-loop turn: the others now
        window.area.turn()
    assert window.area.rows.data.shape == (PASSES, TP)  # rows not computed yet are blank (NaN)
    rows = window.area.rows.data
    assert np.isnan(rows[2:]).all() and np.isfinite(rows[:2]).all()
    qtbot.waitSignal(window.settled, timeout=10_000).wait()
    full = window.trace.norm_h_total_by_pass
    for p in range(PASSES):
        solid, dashed = window.area.norm.row_curves[p]
        np.testing.assert_array_equal(solid.xData, p * TP + np.arange(TP))
        np.testing.assert_allclose(solid.yData, full[p])
        np.testing.assert_allclose(dashed.yData, full[p] / 2)
    assert list(window.area.norm.boundaries.positions) == [TP - 0.5, 2 * TP - 0.5, 3 * TP - 0.5]
    assert not window.area.norm.boundaries.boundingRect().isEmpty()
    assert "✓" in window.summary.text.text() and "3.0e-08" in window.summary.text.text()
    assert window.progress.value() == window.progress.maximum()


def test_a_run_leaves_the_panels_their_size_from_its_start_to_its_end(qtbot, window):
    """The summary line under the panels is one line at a run's start and two at its end (at
    the window's default width); its height must not change, or every panel is resized and
    repainted in one event-loop turn."""
    window.resize(1280, 820)
    widgets = window.params.widgets
    for name, value in (("steps", 20), ("batch", 2), ("input_dim", 2), ("hidden", 4)):
        widgets[name].setValue(value)
    widgets["mode"].setCurrentIndex(widgets["mode"].findData("taped"))
    qtbot.wait(50)
    before = window.area.height()
    heights = set()
    poll = QTimer(interval=2, timeout=lambda: heights.add(window.area.height()))
    poll.start()
    run_and_wait(qtbot, window)
    qtbot.wait(50)  # the layout after the finished summary
    poll.stop()
    text = window.summary.text
    assert text.heightForWidth(text.width()) > 1.5 * text.fontMetrics().lineSpacing()
    assert heights == {before}


@pytest.mark.serial  # times the stop: alone under xdist
def test_stop_cancels_a_long_run_within_a_second(qtbot, window):
    window.worker.engine = fake_multipass(delay=0.3)
    window.run_button.click()
    qtbot.waitUntil(lambda: window.progress.value() >= 1, timeout=5_000)
    stop_within_a_second(qtbot, window)


def test_invalid_parameters_show_an_error_and_start_nothing(qtbot, idle, errors, monkeypatch):
    window = idle  # nothing here runs: no computing process
    calls = []
    monkeypatch.setattr(window.worker, "request_run", lambda *a: calls.append(a))
    for name, value in (("steps", 100_000), ("batch", 4096), ("hidden", 4096)):
        window.params.widgets[name].setValue(value)
    assert window.start_run() is False
    assert errors and "GiB" in errors[-1]
    window.params.set_config(RunConfig())
    window.params.set_path("weights", "/no/such/weights.h5")
    assert window.start_run() is False and "no such file" in errors[-1]
    assert not window.state.running and not calls


def test_engine_errors_become_a_dialog(qtbot, window, errors):
    window.worker.engine = gui_fakes.broken
    run_and_wait(qtbot, window)
    assert "engine exploded" in errors[-1] and not window.state.running


def test_open_a_saved_trace_and_a_corrupt_one(qtbot, idle, errors, tmp_path):
    window = idle  # nothing here runs: no computing process
    config = RunConfig(steps=PASSES * TP, batch=3, hidden=5)
    trace = next(item for item in gui_fakes.multipass(config) if isinstance(item, GradientTrace))
    path = trace.save(tmp_path / "t.npz")
    window.open_path(str(path))  # what dropping the file on the window does
    norm = window.area.norm
    np.testing.assert_allclose(norm.row_curves[0][0].yData, trace.norm_h_total_by_pass[0])
    assert window.params.config().steps == PASSES * TP
    assert window.files.recent()[0] == str(path.resolve())
    assert "loaded from file" in window.summary.text.text()
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    window.files.open_trace(str(tmp_path / "bad.npz"))
    assert errors[-1].startswith(str(tmp_path / "bad.npz"))
    window.open_path(str(tmp_path / "w.h5"))  # a weights file that is not there: refused
    assert errors[-1].startswith(str(tmp_path / "w.h5")) and "no such file" in errors[-1]
    assert window.params.config().weights is None


def test_quitting_during_a_run_leaves_no_thread_nor_process_and_settings_persist(
    qtbot, settings, errors
):
    win = MainWindow(settings=settings)
    win.worker.engine = fake_multipass(delay=0.3)
    qtbot.addWidget(win)
    win.params.widgets["seed"].setValue(1234)
    win.start_run()
    qtbot.waitUntil(lambda: win.progress.value() >= 1, timeout=60_000)
    pid = win.worker.pid
    win.close()
    assert win.worker.isFinished() and win.worker.pid is None
    assert not Path(f"/proc/{pid}").exists()  # ended and reaped
    again = MainWindow(settings=settings)
    qtbot.addWidget(again)
    assert again.params.config().seed == 1234
    again.close()


def _env(tmp_path):
    return dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path))


def test_demo_screenshot_is_saved_and_the_app_exits_0(tmp_path):
    shot = tmp_path / "shot.png"
    cmd = [sys.executable, "main.py", "--demo", "--screenshot", str(shot)]
    result = subprocess.run(cmd, cwd=ROOT, env=_env(tmp_path), capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    image = QImage(str(shot))
    assert image.width() > 800 and image.height() > 500
    pixels = {
        image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)
    }
    assert len(pixels) > 50  # plots and colour maps, not a blank window


def test_closing_while_tensorflow_loads_or_runs_exits_0(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "main.py", "--demo"], cwd=ROOT, env=_env(tmp_path), stderr=subprocess.PIPE
    )
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=15)
    assert proc.returncode == 0, stderr.decode()[-2000:]


@pytest.mark.parametrize("loss", ["mean_h", "last_mse", "seq_mse"])
def test_verify_agrees_with_numpy_bptt_and_catches_a_wrong_gradient(rng, loss):
    from lstmviz.analysis.verify import verify_trace
    from lstmviz.weights import random_weights
    from tests.helpers.references.reference import np_bptt, np_forward, np_loss

    T, B, I, H = 12, 3, 4, 5
    w = random_weights(I, H, rng)
    x = rng.standard_normal((T, B, I))
    h0, c0 = rng.uniform(-0.5, 0.5, (2, B, H))
    target = {"mean_h": None, "last_mse": rng.uniform(-1, 1, (B, H))}.get(loss)
    target = rng.uniform(-1, 1, (T, B, H)) if loss == "seq_mse" else target
    h, _, _ = np_forward(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0)
    _, direct = np_loss(loss, h, target)
    grads = np_bptt(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0, direct)
    arrays = dict(x=x, kernel=w.kernel, recurrent_kernel=w.recurrent_kernel, bias=w.bias)
    arrays.update(h0=h0, c0=c0, grad_h_total=grads["dh"])
    if target is not None:
        arrays["target"] = target
    trace = GradientTrace("taped", RunConfig(steps=T, loss=loss), arrays)
    assert verify_trace(trace).worst_rel < 1e-6
    arrays["grad_h_total"] = grads["dh"] * 1.01
    assert not verify_trace(trace).ok


def test_gui_modules_do_not_import_tensorflow():
    code = (
        "import sys, lstmviz.gui.app, lstmviz.gui.main_window, lstmviz.gui.threads.worker,"
        " lstmviz.analysis.verify, lstmviz.engine.process.computing;"
        "sys.exit('tensorflow' in sys.modules or 'keras' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_the_window_and_its_worker_come_before_pyqtgraph():
    """What the window needs for its first paint does not import pyqtgraph (slow to import): the
    panels' modules come after it (`MainWindow.prepare_panels`)."""
    code = (
        "import sys, lstmviz.gui.app, lstmviz.gui.main_window, lstmviz.gui.threads.worker;"
        "sys.exit('pyqtgraph' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_long_curves_are_drawn_aliased_then_thin_on_screen(qtbot):
    """On screen the norm panel's curves keep their pens' width and antialiasing up to
    SMOOTH_UP_TO points and drop antialiasing above (a wide antialiased pen on a long curve is
    slow to paint); dashed curves drop to 1 px there too (wider dashes are stroked as a path),
    solid ones above THIN_ABOVE. The model panels' pens follow the same rule."""
    from lstmviz.plots.panels.curves import MAIN_CURVES, SMOOTH_UP_TO, THIN_ABOVE, NormPanel
    from lstmviz.plots.panels.model_curves import line_pen

    assert SMOOTH_UP_TO < THIN_ABOVE
    panel = NormPanel()
    qtbot.addWidget(panel)
    solid, dashed = MAIN_CURVES["norm_h_total"][1], MAIN_CURVES["norm_h_direct"][1]
    assert solid.style() == Qt.SolidLine and dashed.style() != Qt.SolidLine
    assert solid.widthF() > 1 and dashed.widthF() > 1
    for steps, smooth, solid_width, dashed_width in (
        (SMOOTH_UP_TO, True, solid.widthF(), dashed.widthF()),
        (SMOOTH_UP_TO + 1, False, solid.widthF(), 1.0),
        (THIN_ABOVE + 1, False, 1.0, 1.0),
    ):
        norms = np.linspace(1, 2, steps, dtype=np.float32)
        panel.draw({"norm_h_total": norms, "norm_h_direct": norms})
        for key, width in (("norm_h_total", solid_width), ("norm_h_direct", dashed_width)):
            curve = panel.curves[key]
            assert len(curve.yData) == steps
            assert curve.opts["antialias"] is smooth and curve.opts["pen"].widthF() == width
        assert line_pen("r", steps).widthF() == (2.0 if solid_width > 1 else 1.0)
        assert line_pen("r", steps, dashed=True).widthF() == (2.0 if dashed_width > 1 else 1.0)


def test_panels_are_made_from_the_parts_made_ahead_in_earlier_turns(qtbot, monkeypatch):
    """`PanelArea.prepare` makes each panel's parts (plot, colour bar) in turns of their own
    before the panel, which takes them instead of making its own."""
    from collections import defaultdict

    from lstmviz.gui.widgets.panel_area import PanelArea
    from lstmviz.plots.panels.heatmaps import colour_bar
    from lstmviz.plots.panels.panel import SPARES, plot_widget

    area = PanelArea()
    qtbot.addWidget(area)
    made: list[tuple[object, object]] = []  # (factory, part) in the order made
    original = SPARES.make

    def make(factory):
        made.append((factory, original(factory)))

    monkeypatch.setattr(SPARES, "make", make)
    monkeypatch.setattr(SPARES, "made", defaultdict(list))  # none left by earlier windows
    with qtbot.waitSignal(area.drawn, timeout=10_000):
        area.prepare(("norm", "rows"))
    assert [factory for factory, _ in made] == [plot_widget, plot_widget, colour_bar]
    assert area.by_name["norm"].plot is made[0][1] and area.by_name["rows"].plot is made[1][1]
    assert area.by_name["rows"].bar is made[2][1]
    assert not SPARES.waiting(plot_widget) and not SPARES.waiting(colour_bar)


def test_grid_lines_are_opaque_blends_drawn_under_the_curves(qtbot):
    """The norm panel's axes give pyqtgraph's translucent grid colours pre-blended with the
    background (same pixels on the plain background, far cheaper to stroke) and sit below
    the ViewBox, so curves are drawn over the grid."""
    import pyqtgraph as pg
    from PySide6.QtGui import QPainter

    from lstmviz.plots.panels.curves import NormPanel

    panel = NormPanel()
    qtbot.addWidget(panel)
    item = panel.plot.getPlotItem()
    item.setYRange(1e-4, 1e-1)
    axis = item.getAxis("left")
    image = QImage(200, 200, QImage.Format_ARGB32)
    painter = QPainter(image)
    try:
        ours = axis.generateDrawSpecs(painter)[1]
        theirs = pg.AxisItem.generateDrawSpecs(axis, painter)[1]
    finally:
        painter.end()
    background = pg.mkColor(pg.getConfigOption("background"))
    assert len(ours) == len(theirs) > 5
    assert any(pen.color().alpha() < 255 for pen, _, _ in theirs)  # pyqtgraph's are translucent
    for (pen, a, b), (translucent, a0, b0) in zip(ours, theirs, strict=True):
        assert (a, b) == (a0, b0) and pen.color().alpha() == 255
        c, alpha = translucent.color(), translucent.color().alphaF()
        for got, fg, bg in zip(pen.color().getRgbF()[:3], c.getRgbF()[:3],
                               background.getRgbF()[:3], strict=True):  # fmt: skip
            assert got == pytest.approx(alpha * fg + (1 - alpha) * bg, abs=1 / 255)
    assert axis.zValue() < item.getViewBox().zValue()


def test_a_log_axis_spanning_less_than_a_decade_still_has_distinct_labels(qtbot):
    """pyqtgraph's log ticks are 1..9 × 10^n, labelled with one digit: between 0.0013 and
    0.0019 there were none (an axis without numbers) — now evenly spaced ticks, told apart."""
    from lstmviz.plots.panels.curves import NormPanel

    panel = NormPanel()
    qtbot.addWidget(panel)
    axis = panel.plot.getPlotItem().getAxis("left")
    axis.setLogMode(False, True)
    lo, hi = np.log10(1.3e-3), np.log10(1.9e-3)
    values = [v for _, level in axis.tickValues(lo, hi, 300) for v in level]
    assert len(values) >= 3 and all(lo <= v <= hi for v in values)
    labels = axis.tickStrings(values, 1.0, 0.0)
    assert len(set(labels)) == len(labels)
    assert [float(s) for s in labels] == pytest.approx(10.0 ** np.array(values), rel=1e-6)
    decades = [v for _, level in axis.tickValues(-4.0, -1.0, 300) for v in level]
    assert {-4.0, -3.0, -2.0, -1.0} <= {round(v, 9) for v in decades}  # wide: pyqtgraph's own


def test_the_norm_legend_sits_below_the_plot_not_over_the_curves(qtbot):
    from lstmviz.plots.panels.curves import NormPanel

    panel = NormPanel()
    qtbot.addWidget(panel)
    panel.resize(700, 400)
    panel.show()
    curve = np.exp(np.linspace(0, 5, 50)).astype(np.float32)
    panel.draw({"norm_h_total": curve, "norm_h_direct": curve / 2, "norm_c_total": curve * 2},
               RunConfig(mode="taped", steps=50))  # fmt: skip
    qtbot.waitUntil(lambda: len(panel.legend.items) == 3)
    qtbot.wait(50)
    view = panel.plot.getPlotItem().getViewBox().sceneBoundingRect()
    legend = panel.legend.sceneBoundingRect()
    assert legend.height() > 0 and legend.top() >= view.bottom()


def test_a_trace_opened_over_loaded_weights_shows_its_own_sizes(qtbot, idle, tmp_path):
    """The demo's weights (I=2, H=16) loaded, then a trace of seeded weights (I=5, H=7)
    opened: the dock shows the trace's sizes, unlocked (they had stayed 2 and 16, so Run would
    not have rerun the trace)."""
    window = idle  # nothing here runs: no computing process
    from lstmviz.gui.main_window import demo_config

    window.params.set_config(demo_config())
    window.files.reload_sources()
    widgets = window.params.widgets
    assert (widgets["input_dim"].value(), widgets["hidden"].value()) == (2, 16)
    assert not widgets["hidden"].isEnabled()  # fixed by the weights file
    config = RunConfig(mode="taped", steps=PASSES * TP, batch=3, input_dim=5, hidden=7)
    trace = next(item for item in gui_fakes.multipass(config) if isinstance(item, GradientTrace))
    window.files.open_trace(str(trace.save(tmp_path / "t.npz")))
    assert (widgets["input_dim"].value(), widgets["hidden"].value()) == (5, 7)
    assert widgets["hidden"].isEnabled() and window.params.config().weights is None
