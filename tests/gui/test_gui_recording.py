"""The window's recording view (pytest-qt, offscreen): a finished recording of a real fit opens
whole (panels against the trace's own gradients, the slider, the timestep range); a growing
one, written by another process, is followed without blocking the window; corrupt files get a
dialog; a drop; the window's export; `lstmviz gui REC.lvz`."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from lstmviz.io.recording import RecordingWriter, load_recording  # noqa: E402
from lstmviz.io.recording import record_rows as rows_of  # noqa: E402
from tests.helpers.gui_checks import coloured_fraction, drain, export_every_format  # noqa: E402
from tests.helpers.models.keras_models import fitted as fitted  # noqa: E402  (the recording of a real fit)
from tests.helpers.recordings import model_trace  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RECORDING_PANELS = {"record_norms", "record_loss", "record_map"}
MODEL_PANELS = {"layers", "gates", "layer_map", "saliency", "layer_units"}


def shown_panels(window) -> set[str]:
    return {name for name, panel in window.area.by_name.items() if panel.isVisibleTo(window)}


def window_norm(gradient: np.ndarray, lo: int, hi: int) -> float:
    """‖dL/dh‖ over (t, b, j) for t in lo…hi, from a direction's gradient [T, B, H]."""
    return float(np.linalg.norm(np.asarray(gradient[lo : hi + 1], np.float64)))


def test_a_finished_recording_opens_whole(qtbot, window, errors, fitted):
    assert window.open_path(str(fitted))  # what a drop does
    drain(window)
    rec = load_recording(fitted)
    count, last = len(rec), rec.last
    assert count == 7 and not errors
    assert shown_panels(window) == RECORDING_PANELS | MODEL_PANELS
    # finished: no polls
    assert window.recording is not None and not window.recordings.follower.following
    assert window.files.recent()[0] == str(fitted.resolve())  # File → Recent files lists it
    bar = window.recordings.bar
    assert bar.isVisibleTo(window) and bar.slider.maximum() == count - 1
    assert bar.slider.value() == count - 1 and bar.record() is None
    assert "finished" in bar.header.text() and "7 records every 2 batches" in bar.header.text()
    assert "Bidirectional(LSTM)" in bar.summary.toPlainText()  # the model summary
    bar.summary_button.click()  # in its own window, every line in view
    widest = max(map(bar.summary.fontMetrics().horizontalAdvance,
                     bar.summary.toPlainText().splitlines()))  # fmt: skip
    assert bar.summary_window.isVisible() and bar.summary.viewport().width() >= widest
    assert "this record's full model trace" in bar.note.text()
    shown_config = window.params.config()  # the dock: the records' parameters, not the last run's
    assert (shown_config.mode, shown_config.steps, shown_config.batch, shown_config.loss) == (
        "model", last.config.steps, last.config.batch, last.config.loss)

    area = window.area
    norms = area.by_name["record_norms"]
    for k in range(3):  # the last record's curves: the rows the file holds for it
        np.testing.assert_allclose(norms.curves[k].yData[:2], rec.norm_h_total_by_layer[-1, k, :2])
    assert norms.faded_records == [0, 1, 2, 3, 4, 5]  # every earlier record, faded
    heatmap = area.by_name["record_map"]
    assert heatmap.data.shape == (3, count)
    for k in range(3):  # the last column against the trace's own gradients over every t
        expected = window_norm(last[f"layer{k}_grad_h_total"], 0, last.config.steps - 1)
        np.testing.assert_allclose(heatmap.data[k, -1], expected, rtol=1e-5)
    loss = area.by_name["record_loss"]
    np.testing.assert_allclose(loss.values, rec.loss)
    assert loss.mark.value() == rec.step[-1]
    np.testing.assert_allclose(area.by_name["layer_map"].data[:, :3],
                               last.norm_h_total_by_layer[:, :3], rtol=1e-6)  # fmt: skip

    bar.slider.setValue(1)  # an earlier record: the curves and marks follow, the model
    drain(window)  # panels stay at the last record, and the bar says so
    assert bar.record() == 1 and "last record only" in bar.note.text()
    for k in range(3):
        np.testing.assert_allclose(norms.curves[k].yData[:2], rec.norm_h_total_by_layer[1, k, :2])
    assert norms.faded_records == [0] and f"step {rec.step[1]}" in norms.title.text()
    assert loss.mark.value() == rec.step[1] and heatmap.mark.value() == 1.5

    assert not bar.first.isVisibleTo(window)  # all timesteps: no range boxes beside it
    bar.range_box.setCurrentIndex(1)  # a window of timesteps: 2…4
    bar.first.setValue(2)
    bar.last.setValue(4)
    bar.range_box.activated.emit(1)
    drain(window)
    assert area.t_range == (2, 4) and "t 2–4" in heatmap.title.text()
    assert bar.first.isVisibleTo(window) and bar.last.isVisibleTo(window)
    for k in range(3):
        expected = window_norm(last[f"layer{k}_grad_h_total"], 2, 4)
        np.testing.assert_allclose(heatmap.data[k, -1], expected, rtol=1e-5)
        np.testing.assert_allclose(heatmap.data[k, 0],
                                   np.linalg.norm(rec.norm_h_total_by_layer[0, k, 2:5]),
                                   rtol=1e-6)  # fmt: skip
    assert norms.region.isVisible() and norms.region.getRegion() == (1.5, 4.5)
    norms.region.setRegion((0.5, 3.5))  # the shaded band dragged: the bar and heatmap follow
    drain(window)
    assert (bar.first.value(), bar.last.value()) == (1, 3) and area.t_range == (1, 3)

    window.files.open_trace(str(last.save(fitted.parent / "last.npz")))  # another file: view closed
    drain(window)
    assert window.recording is None and window.recordings.follower is None
    assert not bar.isVisibleTo(window) and not shown_panels(window) & RECORDING_PANELS
    assert not bar.summary_window.isVisible()


def test_the_recording_panels_fit_the_window_as_records_accumulate(qtbot, idle, errors,
                                                                   tmp_path):  # fmt: skip
    """In the window at its first size, with the model panels below: no legend widens a plot
    past its view (its right part would be cut off), and the heatmap labels as many records
    by their training step as its axis has room for, the labels never overlapping."""
    window = idle  # nothing here runs: no computing process
    from PySide6.QtGui import QFontMetrics

    path = tmp_path / "long.lvz"
    writer = RecordingWriter(path, 100)
    for n in range(1, 61):
        trace = model_trace(n % 5)
        writer.append(rows_of(trace, 100 * n, n // 10), trace)
    writer.close()
    window.resize(1280, 820)
    assert window.open_path(str(path))
    drain(window)
    qtbot.wait(50)
    assert not errors
    for name in RECORDING_PANELS:
        panel = window.area.by_name[name]
        item = panel.plot.getPlotItem()
        assert item.geometry().width() <= panel.plot.width() + 0.5, name
    heatmap = window.area.by_name["record_map"]
    axis, view = heatmap.plot.getAxis("bottom"), heatmap.plot.getViewBox()
    (ticks,) = axis._tickLevels  # what setTicks set: (x, label), x in records
    assert 2 <= len(ticks) < 60 and ticks[0] == (0.5, "100")
    (x0, x1), _ = view.viewRange()
    spacing = (ticks[1][0] - ticks[0][0]) * view.width() / (x1 - x0)
    metrics = QFontMetrics(axis.style["tickFont"] or axis.font())
    assert spacing > max(metrics.horizontalAdvance(label) for _, label in ticks) + 4, spacing
    window.resize(1900, 820)  # wider: more labels
    qtbot.waitUntil(lambda: len(axis._tickLevels[0]) > len(ticks), timeout=5_000)


def test_a_drop_of_a_recording_opens_it_a_run_closes_it_and_the_menu_opens_it(
    qtbot, window, errors, fitted, monkeypatch
):
    from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
    from PySide6.QtGui import QDropEvent

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(fitted))])
    event = QDropEvent(QPointF(20, 20), Qt.CopyAction, mime, Qt.LeftButton, Qt.NoModifier)
    window.dropEvent(event)
    assert window.recording is not None and window.recording.path == fitted and not errors
    from lstmviz.core.config import RunConfig

    with qtbot.waitSignal(window.settled, timeout=60_000):
        window.start_run(RunConfig(mode="taped", steps=5, batch=2, input_dim=2, hidden=3))
    assert window.recording is None and window.trace.mode == "taped"
    assert not shown_panels(window) & (RECORDING_PANELS | MODEL_PANELS)

    from PySide6.QtWidgets import QFileDialog

    asked = []  # File → Open recording…: a dialog that offers .lvz files

    def chosen(parent, caption, folder, wanted):
        asked.append(wanted)
        return str(fitted), wanted

    monkeypatch.setattr(QFileDialog, "getOpenFileName", chosen)
    (action,) = [a for menu in window.menuBar().actions() for a in menu.menu().actions()
                 if a.text() == "Open &recording…"]  # fmt: skip
    action.trigger()
    assert "*.lvz" in asked[0] and window.recording.path == fitted and not errors
    drain(window)
    assert shown_panels(window) == RECORDING_PANELS | MODEL_PANELS


def test_a_run_that_keeps_nothing_shows_the_recording_again(qtbot, window, errors, fitted):
    """Stop (nothing done) or a failed run: the recording shown before the run is back, read
    again, with its panels; the dock keeps what the user set for the run."""
    import functools

    from lstmviz.core.config import RunConfig
    from tests.helpers import gui_fakes

    assert window.open_path(str(fitted))
    drain(window)
    window.params.widgets["seed"].setValue(42)
    wanted = window.params.config()
    window.worker.engine = functools.partial(gui_fakes.multipass, delay=0.5)
    assert window.start_run(RunConfig(mode="multipass", steps=10, passes=4))
    assert window.recording is None
    window.stop_action.trigger()
    drain(window)
    assert window.recording is not None and window.recording.path == fitted
    assert shown_panels(window) == RECORDING_PANELS | MODEL_PANELS
    assert window.trace is not None and window.trace.mode == "model"
    assert window.params.config() == wanted and "stopped" in window.message.text()
    window.worker.engine = gui_fakes.broken
    with qtbot.waitSignal(window.settled, timeout=30_000):
        assert window.start_run(RunConfig(mode="taped", steps=5))
    drain(window)
    assert "engine exploded" in errors[-1] and window.recording.path == fitted
    assert shown_panels(window) == RECORDING_PANELS | MODEL_PANELS
    window.worker.engine = None


def test_corrupt_or_truncated_recordings_get_a_dialog(qtbot, idle, errors, fitted, tmp_path):
    window = idle  # nothing here runs: no computing process
    data = fitted.read_bytes()
    cases = {"half.lvz": data[: len(data) // 2], "text.lvz": b"not hdf5 at all" * 10}
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        assert not window.open_path(str(path))
        text = errors[-1]
        assert text.startswith(str(path)) and "\n" not in text, text
    assert "truncated" in errors[0] and "not a recording" in errors[1]
    assert window.recording is None and window.trace is None and window.recordings.bar is None


WRITER = """
import sys, time
sys.path.insert(0, {root!r})
import tests.helpers.recordings as shapes
shapes.T, shapes.B, shapes.H = 120, 32, 64  # 1 MB per state or gradient array
from tests.helpers.recordings import model_trace
from lstmviz.io.recording import RecordingWriter, record_rows
writer = RecordingWriter({path!r}, 2)
for n in range(1, {count} + 1):
    trace = model_trace(n)
    writer.append(record_rows(trace, 2 * n, n // 4), trace)
    with open({log!r}, "a") as log:
        log.write(f"{{n}} {{time.time()}}\\n")
    if n == 1:
        print("first", flush=True)
    time.sleep({pause})
writer.close()
"""


@pytest.mark.serial  # times the window's thread: alone under xdist
def test_a_growing_recording_is_followed_without_blocking_the_window(
    qtbot, idle, errors, tmp_path, monkeypatch
):
    """A writer process appends a record every 0.25 s. The window picks each up within two
    seconds, reading in its own thread, each read made 0.35 s slower (as from a slow disk): a
    10 ms timer of the window's thread is never late by 0.25 s (drawing the new record takes
    some of that), while the same slow read in the window's thread makes it late by more."""
    window = idle  # nothing here runs: no computing process
    from PySide6.QtCore import QTimer

    from lstmviz.gui.threads import recording_follow

    read_changes = recording_follow.read_changes

    def slow_read(path, *args):
        time.sleep(0.35)
        return read_changes(path, *args)

    monkeypatch.setattr(recording_follow, "read_changes", slow_read)
    path, log, count = tmp_path / "live.lvz", tmp_path / "written.txt", 12
    code = WRITER.format(root=str(ROOT), path=str(path), log=str(log), count=count, pause=0.25)
    writer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    # As the app does (app.freeze_long_lived): a full collection would otherwise walk every
    # object the tests before this one left in this process (TensorFlow's and Keras's among
    # them), a stall of the test's making, not the window's.
    gc.freeze()
    try:
        assert writer.stdout.readline().strip() == "first"
        assert window.recordings.open_recording(str(path))
        assert window.recordings.follower.following
        assert "following" in window.recordings.bar.header.text()
        seen: list[tuple[int, float]] = []
        window.recordings.follower.read.connect(lambda rec: seen.append((len(rec), time.time())))
        ticks: list[float] = []
        timer = QTimer(interval=10)
        timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
        timer.start()
        qtbot.waitUntil(lambda: window.recording.finished, timeout=30_000)
        timer.stop()
        assert writer.wait(10) == 0
    finally:
        writer.kill()
        gc.unfreeze()
    late = np.diff(ticks).max() - 0.010
    assert late < 0.25, f"the window's thread was blocked for {late * 1000:.0f} ms"
    threads = window.recordings.follower.reading_threads
    assert threads and all(name.startswith("lstmviz-recording") for name in threads), threads

    written = dict(line.split() for line in log.read_text().splitlines())
    for n, at in written.items():  # each record shown within two seconds of being written
        shown = next(when for records, when in seen if records >= int(n))
        assert shown - float(at) < 2.0, (n, shown - float(at))
    assert len(seen) >= 4  # it did follow the file as it grew
    drain(window)
    rec = window.recording
    assert len(rec) == count and not window.recordings.follower.following
    np.testing.assert_array_equal(rec.step, 2 * np.arange(1, count + 1))
    np.testing.assert_array_equal(rec.last.layer1_grad_h_total, load_recording(path).last
                                  .layer1_grad_h_total)  # fmt: skip
    assert window.recordings.bar.slider.maximum() == count - 1
    assert window.recordings.bar.record() is None  # at the end: it followed the new records
    assert window.area.by_name["record_map"].data.shape[1] == count
    assert "finished" in window.recordings.bar.header.text() and not errors

    ticks.clear()  # the measure can fail: the same slow read in the window's thread
    timer.start()
    QTimer.singleShot(50, lambda: slow_read(path, 0, None))
    qtbot.wait(600)
    timer.stop()
    assert np.diff(ticks).max() - 0.010 > 0.3


def test_a_recording_that_goes_bad_while_followed_gets_a_dialog(qtbot, idle, errors, tmp_path):
    window = idle  # nothing here runs: no computing process
    path = tmp_path / "run.lvz"
    writer = RecordingWriter(path, 5)
    for n in (1, 2):
        trace = model_trace(n)
        writer.append(rows_of(trace, 5 * n, 0), trace)
    try:
        assert window.recordings.open_recording(str(path)) and window.recordings.follower.following
        broken = tmp_path / "broken"
        broken.write_bytes(path.read_bytes()[:3000])
        os.replace(broken, path)  # what a copy over it, or a damaged disk, leaves
        qtbot.waitUntil(lambda: bool(errors), timeout=10_000)
    finally:
        writer.close()
    assert errors[-1].startswith(str(path)) and "\n" not in errors[-1]
    assert not window.recordings.follower.following
    assert "not followed" in window.recordings.bar.header.text()
    assert len(window.recording) == 2 and window.area.by_name["record_map"].has_data()


def test_the_window_exports_the_recording_it_shows(qtbot, idle, errors, fitted, tmp_path,
                                                  monkeypatch):  # fmt: skip
    window = idle  # nothing here runs: no computing process
    assert window.open_path(str(fitted))
    drain(window)
    window.recordings.bar.slider.setValue(2)
    base = tmp_path / "fig"
    export_every_format(window, monkeypatch, base, 1200, 900)
    assert not errors, errors
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("fig"))
    assert names == ["fig.csv", "fig.npz", "fig.pdf", "fig.png", "fig.svg", "fig_diagnosis.csv"]
    texts = " ".join(ET.parse(base.with_suffix(".svg")).getroot().itertext())
    rec = load_recording(fitted)
    for title in (f"Gradient norm by layer at step {rec.step[2]}", "Loss per record",
                  "Layers × training step (all t)", "Gradient norm by layer over timesteps",
                  "Input saliency", "training recording · run.lvz", *rec.layer_names):  # fmt: skip
        assert title in texts, title
    assert base.with_suffix(".csv").read_text().startswith("step,epoch,loss,train_loss")
    from lstmviz.io.trace import GradientTrace

    saved = GradientTrace.load(base.with_suffix(".npz"))  # the last record's trace
    np.testing.assert_array_equal(saved.layer0_grad_h_total, rec.last.layer0_grad_h_total)


def test_gui_opens_a_recording_on_the_command_line(tmp_path, fitted):
    shot = tmp_path / "shot.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path))
    command = [sys.executable, "-m", "lstmviz", "gui", str(fitted), "--screenshot", str(shot)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]

    assert coloured_fraction(shot) > 0.05  # eight panels of curves and heatmaps


def test_the_faded_legend_says_how_many_earlier_records_it_leaves_out(qtbot):
    """40 records: the faded curves are a sample of the earlier ones, and the legend says of
    how many ("8 earlier records" over 39 read as a recording of 9)."""
    from lstmviz.plots.panels.record_panels import RecordNormPanel

    rng = np.random.default_rng(0)
    count, steps = 40, 6
    arrays = {"step": np.arange(1, count + 1) * 5, "epoch": np.ones(count, np.int64),
              "loss": np.linspace(0.7, 0.5, count), "layer_names": np.array(["a", "b", "c"]),
              "norm_h_total_by_layer": rng.uniform(0.01, 1, (count, 3, steps))}  # fmt: skip
    panel = RecordNormPanel()
    qtbot.addWidget(panel)
    panel.draw(arrays, None)
    texts = [text.text for _, text in panel.legend.items]
    drawn = len(panel.faded_records)
    assert 1 < drawn < count - 1 and f"{drawn} of {count - 1} earlier records (faded)" in texts
    panel.set_view(3, None)  # record 4: its 3 earlier ones, every one drawn
    assert panel.faded_records == [0, 1, 2]
    assert "3 earlier records (faded)" in [text.text for _, text in panel.legend.items]


@pytest.mark.parametrize(("model_source", "inputs_source", "trainer"), [
    ("keras.Model 'tokens' (3 layers)", "GradientFlowCallback data: x [8, 7]", "Keras"),
    ("PyTorch module Net", "GradientFlowRecorder data: x [8, 7]", "PyTorch"),
    ("PyTorch module Net", "lstmviz.lightning.GradientFlowCallback data: x [8, 7]", "Lightning"),
    ("", "", "Keras"),  # a recording of a version that named no source
])  # fmt: skip
def test_the_loss_legend_names_what_trained_the_model(qtbot, model_source, inputs_source,
                                                      trainer):  # fmt: skip
    """The training loss's legend entry names what reported it: Keras's fit, a PyTorch loop or
    Lightning, as the recording's `model_source` and `inputs_source` say."""
    from lstmviz.plots.panels.record_panels import RecordLossPanel

    arrays = {"step": np.array([5, 10]), "epoch": np.zeros(2, np.int64),
              "loss": np.array([0.7, 0.6]), "train_loss": np.array([0.8, 0.65]),
              "model_source": np.array(model_source),
              "inputs_source": np.array(inputs_source)}  # fmt: skip
    panel = RecordLossPanel()
    qtbot.addWidget(panel)
    panel.draw(arrays, None)
    texts = [text.text for _, text in panel.legend.items]
    assert texts == ["recorded data", f"training ({trainer})"]
