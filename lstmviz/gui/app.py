"""Start the desktop app: `lstmviz gui`, `python main.py`."""

from __future__ import annotations

import sys


def main(demo: bool = False, screenshot: str | None = None) -> int:
    """Show the main window; with `screenshot`, save it as PNG once idle and quit. Returns 0."""
    import pyqtgraph as pg
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("lstmviz")
    window = QMainWindow()
    window.setWindowTitle("lstmviz — gradient flow through an LSTM")
    plot = pg.PlotWidget(title="Gradient norm over timesteps")
    plot.setLabel("bottom", "timestep t")
    plot.setLabel("left", "‖dL/dh_t‖")
    window.setCentralWidget(plot)
    window.resize(1000, 640)
    window.show()
    if screenshot:
        QTimer.singleShot(300, lambda: (window.grab().save(screenshot), app.quit()))
    code = app.exec()
    window.deleteLater()
    return int(code)
