"""Checks the window's tests share (pytest-qt): an idle window, a stopped run, an export through
the dialog (`export_with`), the staged draws run now (`drain`), a screenshot's coloured share
(`coloured_fraction`), a process alive (`alive`), when the worker saw a computation end
(`ended_at`), a run to its end (`run_to_end`). Qt is imported by the functions."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from lstmviz.core.config import RunConfig


def idle_window(qtbot, settings):
    """A main window that starts no computing process (its tests run nothing), not shown."""
    from lstmviz.gui.main_window import MainWindow

    win = MainWindow(settings=settings)
    win.worker_started = True
    qtbot.addWidget(win)
    return win


def stop_within_a_second(qtbot, window, before=None) -> None:
    """Stop the run in `window`: idle at once, the computation ended (`cancelled`) within a
    second, no trace kept (the trace shown before the run, `before`, shown again) and
    "stopped" in the status line."""
    start = time.perf_counter()
    with qtbot.waitSignal(window.worker.cancelled, timeout=1_000):
        window.stop_action.trigger()
        assert not window.state.running and window.run_button.isEnabled()
    assert time.perf_counter() - start < 1.0
    assert window.trace is before and "stopped" in window.message.text()


def export_every_format(window, monkeypatch, base, width: int, height: int) -> None:
    """File → Export… with every format ticked, `base`.png picked in the file dialog (mocked),
    width × height px at 96 dpi."""
    from PySide6.QtWidgets import QDialog, QFileDialog

    from lstmviz.gui.dialogs.export_dialog import ExportDialog

    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(base) + ".png", ""))

    def accept(dialog):
        dialog.browse()  # the file dialog (mocked) picks the name
        for box in dialog.checks.values():
            box.setChecked(True)
        dialog.width_box.setValue(width)
        dialog.height_box.setValue(height)
        dialog.dpi_box.setValue(96)
        return QDialog.Accepted

    monkeypatch.setattr(ExportDialog, "exec", accept)
    window.export_action.trigger()


def drawn_labels(panel, qtbot, height: int = 500) -> list[str]:
    """The left axis's tick labels as pyqtgraph draws them with `panel` `height` px tall, in
    numeric order."""
    from PySide6.QtGui import QImage, QPainter

    panel.resize(500, height)
    panel.show()
    qtbot.waitUntil(lambda: panel.height() == height)
    panel.grab()
    image = QImage(10, 10, QImage.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = panel.plot.getAxis("left").generateDrawSpecs(painter)
    finally:
        painter.end()
    return sorted((text for _, _, text in specs[2]), key=float)


def export_with(monkeypatch, window, base: str, formats=("png",), width: int = 320) -> bool:
    """File → Export… with `base` typed as the file name and `formats` ticked."""
    from PySide6.QtWidgets import QDialog

    from lstmviz.gui.dialogs.export_dialog import ExportDialog, export_dialog

    def accept(dialog):
        dialog.base.setText(base)
        for key, box in dialog.checks.items():
            box.setChecked(key in formats)
        dialog.width_box.setValue(width)
        dialog.height_box.setValue(200)
        dialog.dpi_box.setValue(96)
        return QDialog.Accepted

    monkeypatch.setattr(ExportDialog, "exec", accept)
    return export_dialog(window)


def drain(window) -> None:
    """Run the draws the panel area staged (one per event-loop turn) now."""
    while window.area.busy():
        window.area.turn()


def coloured_fraction(png: Path) -> float:
    """The share of strongly coloured pixels: curves and heatmaps, not the grey window."""
    from PySide6.QtGui import QImage

    image = QImage(str(png)).convertToFormat(QImage.Format_RGB32)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), -1, 4)[..., :3]
    spread = pixels.max(axis=-1).astype(int) - pixels.min(axis=-1)
    return float((spread > 80).mean())


def alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie (read from /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def ended_at(worker) -> list[float]:
    """perf_counter() at each `cancelled`, taken in the worker thread as it emits (when it
    knows the computation has ended), not when the window gets round to it."""
    from PySide6.QtCore import Qt

    times: list[float] = []
    worker.cancelled.connect(lambda run_id: times.append(time.perf_counter()),
                             Qt.ConnectionType.DirectConnection)  # fmt: skip
    return times


def run_to_end(qtbot, window, config=None) -> None:
    """Run `config` (a small taped run by default) in `window` until the window settles with
    its trace."""
    config = config or RunConfig(mode="taped", steps=10, batch=2, input_dim=3, hidden=4)
    with qtbot.waitSignal(window.settled, timeout=120_000):
        assert window.start_run(config)
    assert window.trace is not None
