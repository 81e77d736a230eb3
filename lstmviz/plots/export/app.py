"""Qt for drawing offscreen, started in one place: the QApplication the figures draw in
(`ensure_app`: the running one, or a new one, offscreen when there is no display), the choice
of the offscreen platform for a command that writes files (`offscreen_for_files`), and
pyqtgraph's options as the window sets them (`gui_style`).

Qt and pyqtgraph are imported by the functions that need them, so that a command can choose
its platform before anything imports Qt.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from lstmviz.core import display


def has_display() -> bool:
    """Whether Qt can open a window here: a display server that answers and the X11 plugin
    loads (`lstmviz.core.display`), or a system that always has one (macOS, Windows)."""
    return display.window_problem() is None


def offscreen_for_files() -> None:
    """A command that writes files needs no window: Qt renders offscreen unless a platform was
    asked for (QT_QPA_PLATFORM) on a display. Call before the QApplication is made."""
    on_display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if not on_display or not os.environ.get("QT_QPA_PLATFORM"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"


def _quiet_messages(kind, context, message: str) -> None:
    """Qt's messages on stderr, less the offscreen plugin's note about size hints (it comes
    with every hidden widget that is shown and means nothing for an export)."""
    if "propagateSizeHints" not in message:
        sys.stderr.write(message + "\n")


def ensure_app():
    """The running QApplication, or a new one (offscreen when there is no display)."""
    from PySide6.QtCore import qInstallMessageHandler
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        if not has_display():
            os.environ["QT_QPA_PLATFORM"] = "offscreen"
        qInstallMessageHandler(_quiet_messages)
        app = QApplication(sys.argv[:1] or ["lstmviz"])
    return app


@contextlib.contextmanager
def gui_style() -> Iterator[None]:
    """pyqtgraph's options as the GUI sets them, restored afterwards (the axes read the
    foreground colour when they paint, so rendering happens inside)."""
    import pyqtgraph as pg

    from lstmviz.plots.style import STYLE

    saved = {key: pg.getConfigOption(key) for key in STYLE}
    pg.setConfigOptions(**STYLE)
    try:
        yield
    finally:
        pg.setConfigOptions(**saved)
