"""Stop the native LSTM kernels in the middle of a run, from any thread.

A run is one TensorFlow call that Python cannot interrupt; the native kernels poll a flag once
per timestep. `interrupt()` sets it through ctypes, so the GUI thread can call it without
touching TensorFlow (this module does not import it). The kernels' ops then fail with
`tf.errors.CancelledError`, which the engines turn into a cancelled run.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

_STOPS: list[Callable[[], None]] = []


def register(library_path: str) -> None:
    """Called by `native` once it has loaded the kernels from `library_path`."""
    _STOPS.append(ctypes.CDLL(library_path).lstmviz_interrupt)


def interrupt() -> None:
    """Make every native LSTM op running now stop at its next step (no-op without them)."""
    for stop in _STOPS:
        stop()
