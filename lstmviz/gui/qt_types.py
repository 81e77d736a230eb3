"""PySide6's Python types, all made in the GUI thread before another thread may ask for one.

PySide6 makes a Qt class's Python type the first time Python asks for it. Two threads making
types at once crash the process (SIGSEGV) or hang it: making a type runs Python code (its
enums), so the other thread runs in the middle of it, and both change PySide's table of the
types still to make. The panels' modules are imported in a thread of their own after the
first paint (`MainWindow.prepare_panels`), and pyqtgraph's import asks for every type of the
Qt modules it uses (`from PySide6.QtCore import *`), while the GUI thread makes the types its
events need. So the GUI thread makes them all first, a few milliseconds per event-loop turn,
and the thread starts after: it then finds every type made.
"""

from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Iterator

# The PySide6 modules pyqtgraph imports.
MODULES = ("QtCore", "QtGui", "QtWidgets", "QtSvg", "QtOpenGL", "QtOpenGLWidgets", "QtTest")
TURN_SECONDS = 0.006  # the work done before giving the event loop a turn


def making() -> Iterator[None]:
    """Make the types of MODULES, pausing (yielding) after each TURN_SECONDS of work; ends
    when every type is made."""
    start = time.perf_counter()
    for name in MODULES:
        module = importlib.import_module(f"PySide6.{name}")
        for attribute in dir(module):
            getattr(module, attribute, None)
            if time.perf_counter() - start > TURN_SECONDS:
                yield
                start = time.perf_counter()


def unmade() -> list[str]:
    """The types of MODULES not made yet ("QtGui.QPainter"), asking for none of them; a
    module not imported yet counts as one."""
    missing = []
    for name in MODULES:
        module = sys.modules.get(f"PySide6.{name}")
        if module is None:
            missing.append(name)
        else:
            made = vars(module)
            missing += [f"{name}.{attribute}" for attribute in dir(module) if attribute not in made]
    return missing
