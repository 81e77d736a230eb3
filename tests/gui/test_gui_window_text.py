"""What the window says about itself to someone opening it for the first time: its title (the
file shown, whether TensorFlow loaded), Help → About (versions, where the docs are), the tips
of the View menu's items and of the buttons, and the status bar after opening a file. The
window is shown with its worker never started: no computing process, no TensorFlow."""

from __future__ import annotations

import gzip
import importlib.metadata
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.gui.main_window import MainWindow  # noqa: E402
from lstmviz.gui.widgets.recording_bar import RecordingBar  # noqa: E402
from lstmviz.io.trace import GradientTrace, step_norm  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "tests" / "data" / "recording_format1.lvz.gz"


@pytest.fixture
def win(qtbot, settings, errors, monkeypatch):
    """The main window, shown; its worker never started, runs it is asked for never end."""
    w = MainWindow(settings=settings)
    w.start_worker = lambda: None
    monkeypatch.setattr(w.worker, "request_run", lambda *args: None)
    qtbot.addWidget(w)
    w.show()
    yield w
    w.close()


def saved_trace(path: Path) -> Path:
    """A small taped trace [T=10, B=2, H=3] saved to `path`."""
    g = np.random.default_rng(0).standard_normal((10, 2, 3)).astype(np.float32)
    arrays = {"grad_h_total": g, "norm_h_total": step_norm(g), "loss": np.float32(1)}
    GradientTrace("taped", RunConfig(steps=10, batch=2, hidden=3), arrays).save(path)
    return path


def wait_drawn(qtbot, win) -> None:
    qtbot.waitUntil(lambda: not win.area.busy(), timeout=10_000)


# ---- the title ----------------------------------------------------------------------------------


def test_the_title_names_the_trace_file_shown_until_a_run_replaces_it(qtbot, win, tmp_path):
    path = saved_trace(tmp_path / "my_run.npz")
    assert win.files.open_trace(str(path))
    wait_drawn(qtbot, win)
    assert win.windowTitle().startswith("my_run.npz — lstmviz")
    assert "taped" in win.windowTitle()
    assert win.start_run(RunConfig(mode="taped", steps=4, batch=1, input_dim=1, hidden=2))
    assert "my_run.npz" not in win.windowTitle()  # the panels show the run, not the file


def test_the_title_names_the_trace_again_after_a_run_that_kept_nothing(qtbot, win, tmp_path):
    assert win.files.open_trace(str(saved_trace(tmp_path / "kept.npz")))
    wait_drawn(qtbot, win)
    assert win.start_run(RunConfig(mode="taped", steps=4, batch=1, input_dim=1, hidden=2))
    win.run_view.stop()  # nothing done: the trace from before is shown again
    qtbot.waitUntil(lambda: not win.state.running)
    assert win.trace is not None and win.windowTitle().startswith("kept.npz — lstmviz")


def test_the_title_names_the_recording_shown(qtbot, win, tmp_path):
    path = tmp_path / "fit_run.lvz"
    with gzip.open(RECORDING) as packed:
        path.write_bytes(packed.read())
    assert win.recordings.open_recording(str(path))
    wait_drawn(qtbot, win)
    assert win.windowTitle().startswith("fit_run.lvz — lstmviz")
    assert win.start_run(RunConfig(mode="taped", steps=4, batch=1, input_dim=1, hidden=2))
    assert "fit_run.lvz" not in win.windowTitle()  # a run takes the panels


def test_the_title_names_no_mode_while_nothing_is_shown_or_run(win):
    """The dock's mode is only a choice until Run: the title named the mode the dock had
    when the window opened, and kept it when the dock's mode changed."""
    combo = win.params.widgets["mode"]
    combo.setCurrentIndex(combo.findData("train"))
    assert win.windowTitle() == "lstmviz · loading TensorFlow…"
    assert win.start_run(RunConfig(mode="train", steps=4, batch=1, input_dim=1, hidden=2))
    assert win.windowTitle() == "lstmviz — training · loading TensorFlow…"


def test_the_title_says_tensorflow_did_not_load_instead_of_loading_forever(win, errors):
    assert "loading" in win.windowTitle()
    win._on_worker_failed(0, "No module named 'tensorflow'")
    assert errors  # the dialog saying so
    assert "loading" not in win.windowTitle()
    assert "TensorFlow not loaded" in win.windowTitle()


# ---- Help → About -------------------------------------------------------------------------------


def test_about_names_keras_qt_and_where_the_docs_are(win, monkeypatch):
    texts = []
    monkeypatch.setattr(QMessageBox, "about", lambda parent, title, text: texts.append(text))
    win.about()
    (text,) = texts
    assert f"Keras {importlib.metadata.version('keras')}" in text
    assert "Qt 6." in text
    readme = ROOT / "README.md"
    assert readme.as_uri() in text  # a link a click opens
    assert (ROOT / "docs").as_uri() in text
    assert "lstmviz run --help" in text


# ---- tips ---------------------------------------------------------------------------------------


def test_every_view_menu_item_and_the_recent_files_menu_have_a_status_tip(win):
    """Hovering a menu item puts its status tip in the status bar: each says what it does."""
    view = next(a.menu() for a in win.menuBar().actions() if "View" in a.text())
    items = [a for a in view.actions() if not a.isSeparator()]
    assert len(items) >= 17
    plain = [a.text() for a in items if not a.statusTip() or a.statusTip() == a.text()]
    assert not plain
    assert win.files.recent_menu.menuAction().statusTip()


def test_verify_button_names_its_shortcut(win):
    assert win.verify_action.shortcut().toString() in win.summary.verify_button.toolTip()


def test_the_recording_bars_timestep_boxes_have_tooltips(qtbot):
    bar = RecordingBar()
    qtbot.addWidget(bar)
    assert "first timestep" in bar.first.toolTip() and "last timestep" in bar.last.toolTip()


# ---- the status bar -----------------------------------------------------------------------------


def test_an_opened_trace_leaves_no_done_of_an_earlier_run_in_the_status_bar(qtbot, win, tmp_path):
    win.progress.setRange(0, 1)
    win.progress.setValue(1)
    win.progress.setFormat("done")  # as an earlier run left it
    win.progress.show()
    assert win.files.open_trace(str(saved_trace(tmp_path / "t.npz")))
    wait_drawn(qtbot, win)
    assert not win.progress.isVisible()


def test_a_status_message_too_long_for_the_bar_keeps_its_end_and_shows_whole_in_a_tooltip(
    qtbot, win
):
    """A narrow window (a 1366 px laptop at scale 2): the bar showed the message's start and
    cut off its end, where "(not found)" says which file is gone."""
    text = ("opened /home/someone/experiments/2026-12-06/a_rather_long_folder_name/"
            "run_with_many_parameters_seed_7.npz · inputs: /data/x.npy (not found)")  # fmt: skip
    win.resize(700, 500)
    win.message.setText(text)
    qtbot.waitUntil(lambda: win.message.width() < win.fontMetrics().horizontalAdvance(text))
    shown = win.message.shown_text()
    assert shown.endswith("x.npy (not found)") and shown.startswith("opened /home")
    assert "…" in shown
    room = win.message.contentsRect().width()
    assert win.message.fontMetrics().horizontalAdvance(shown) <= room
    assert win.message.text() == text and win.message.toolTip() == text
    win.message.setText("ready")  # fits: no tooltip repeating it
    assert win.message.shown_text() == "ready" and not win.message.toolTip()
