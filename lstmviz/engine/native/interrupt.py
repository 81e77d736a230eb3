"""Stop the native kernels (LSTM, GRU, SimpleRNN) in the middle of a run, from any thread.

A run is one TensorFlow call that Python cannot interrupt; the native kernels poll a counter
once per timestep. `interrupt()` bumps it through ctypes, so the GUI thread can call it without
touching TensorFlow (this module does not import it). The kernels running at that moment then
fail with `tf.errors.CancelledError`, which the engines turn into a cancelled run; kernels
started afterwards run to the end.

`cancel_run(set_flag)` is how a caller cancels a run: it sets the run's cancel flag and stops
the kernels as one step, and a run that keeps what it has done calls `wait_for_cancel()`
first, so the kernels that compute the kept trace start after that interrupt and are not
stopped by it.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

_STOPS: list[Callable[[], None]] = []
_CANCELLING = threading.RLock()  # re-entrant: a second Ctrl-C may arrive inside the first


def register(library_path: str) -> None:
    """Called by `native` once it has loaded the kernels from `library_path`."""
    _STOPS.append(ctypes.CDLL(library_path).lstmviz_interrupt)


def interrupt() -> None:
    """Make every native sequence op running now stop at its next step (no-op without them)."""
    for stop in _STOPS:
        stop()


def cancel_run(set_flag: Callable[[], object]) -> None:
    """Cancel a run: `set_flag()` (whatever makes the run's `cancelled()` true), then
    `interrupt()`, as one step that `wait_for_cancel()` waits for."""
    with _CANCELLING:
        set_flag()
        interrupt()


def wait_for_cancel() -> None:
    """Return once a `cancel_run` in progress has interrupted the kernels. A run that saw its
    cancel flag calls this before computing the trace it keeps."""
    with _CANCELLING:
        pass
