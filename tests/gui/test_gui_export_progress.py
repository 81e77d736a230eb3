"""Exports from the window of a long trace: a progress dialog names each step, and Cancel in
it stops the export with nothing written."""

from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QFileDialog, QProgressDialog  # noqa: E402

from lstmviz.gui.main_window import MainWindow  # noqa: E402
from tests.helpers.gui_checks import export_with  # noqa: E402
from tests.helpers.trace_fixtures import long_trace  # noqa: E402


@pytest.fixture
def window(qtbot, settings, errors):
    """The window showing a long trace, not waiting for TensorFlow; error dialogs in `errors`."""
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.area.drawn, timeout=20_000):
        win.show_trace(long_trace(steps=4_000, rows=20), 1.0)
    yield win
    win.close()


@pytest.fixture
def out(tmp_path):
    """An empty folder for the exports (the settings file is in tmp_path)."""
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


def watch_progress(window, cancel: bool) -> list[str]:
    """Once the event loop runs (only the export's progress dialog runs it), note the label of
    every QProgressDialog of `window` each 10 ms, and press its Cancel button if `cancel`."""
    labels: list[str] = []

    def look():
        for dialog in window.findChildren(QProgressDialog):
            labels.append(dialog.labelText())
            if cancel:
                dialog.cancel()

    timer = QTimer(window, interval=10)
    timer.timeout.connect(look)
    timer.start()
    QTimer.singleShot(0, look)
    return labels


def test_cancel_in_the_progress_dialog_writes_nothing(window, monkeypatch, out, errors):
    labels = watch_progress(window, cancel=True)
    assert not export_with(monkeypatch, window, str(out / "fig"), ("png", "svg", "csv"))
    assert labels and labels[0].endswith("…")
    assert list(out.iterdir()) == [] and not errors
    assert "cancelled" in window.message.text() and "nothing written" in window.message.text()
    assert not [d for d in window.findChildren(QProgressDialog) if d.isVisible()]


def test_the_progress_dialog_names_each_step_and_the_files_are_written(window, monkeypatch,
                                                                       out, errors):  # fmt: skip
    monkeypatch.setattr("lstmviz.gui.dialogs.export_dialog.PROGRESS_AFTER_MS", 0)  # shown at once
    labels = watch_progress(window, cancel=False)
    assert export_with(monkeypatch, window, str(out / "fig"), ("png", "svg", "csv")), errors
    assert sorted(p.name for p in out.iterdir()) == ["fig.csv", "fig.png", "fig.svg",
                                                     "fig_diagnosis.csv"]
    steps = list(dict.fromkeys(labels))
    order = ["Writing the CSV…", "Drawing the panels…", "Rendering the PNG…",
             "Rendering the SVG…", "Writing the files…"]  # fmt: skip
    assert steps and all(step in order for step in steps), steps
    assert steps == sorted(steps, key=order.index)
    assert not [d for d in window.findChildren(QProgressDialog) if d.isVisible()]


def test_a_panel_export_can_be_cancelled_too(window, monkeypatch, out, errors):
    target = out / "norm.svg"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    watch_progress(window, cancel=True)
    window.area.norm.export_action.trigger()
    assert list(out.iterdir()) == [] and not errors
    assert "cancelled" in window.message.text()

