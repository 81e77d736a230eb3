"""The plots, drawn from a trace's arrays alone: pyqtgraph items, the panels and the offscreen
figure that `lstmviz export` writes. No window and no TensorFlow here; the window (`lstmviz.gui`)
shows these same panels. Rooms: `panels/` (the panels) and `export/` (the offscreen figures and
the files); here `style`, `axis` and `prepare` (what the window's worker computes ahead).

Importing this package first guards the process against a reference-counting bug of PySide6
(see `pin_singletons`), so every Qt user below the window is covered too.
"""

import sys


def pin_singletons() -> None:
    """Work around a reference-counting bug of PySide6 6.12 on CPython < 3.12.

    Measured here (PySide6 6.12.0 abi3 wheel, CPython 3.11): every call of a `void` Qt method
    returns `None` without taking a reference, and `SignalInstance.emit()` returns `True`
    without one, so each call drops one reference to `None` or `True`. They start with ~17 000
    and ~150 references (more once TensorFlow is imported); drawing the gradient-norm panel
    once costs ~230 `None` references and pyqtgraph emits on every paint and mouse move, so a
    session soon ends in "Fatal Python error: none_dealloc / bool_dealloc" (mid-run or at
    exit). A huge reference count makes the three effectively immortal, as CPython 3.12 and
    later make them (where this bug is harmless).
    """
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return
    import ctypes

    for value in (None, True, False):
        count = ctypes.c_ssize_t.from_address(id(value))  # ob_refcnt, the first field
        if count.value < 1 << 40:
            count.value += 1 << 40


pin_singletons()
