"""Units of work, the cancel between them, and the trace a cancelled run keeps.

A unit is a pass, a batch or a training step (a taped run is one unit; its connectivity map
comes after it). A mode polls `cancelled()` before every unit (`Units.__iter__`). When it is
true the mode stops; when `keep()` is true too and at least one unit has finished
(`Units.keeps`), it first yields the complete trace of the units done, which records
`Units.keys()`. A native kernel interrupted by the cancel (`interrupt.cancel_run`) raises
`tf.errors.CancelledError`: its unit is not counted (`Units.run`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np

from lstmviz.engine.native import interrupt
from lstmviz.engine.quiet_tensorflow import tf

_T = TypeVar("_T")


class Units:
    """The units of one run: `for n in units` gives the index of each unit to run and ends
    early on a cancel; `units.run(work, n)` runs one and counts it when it finished."""

    def __init__(self, requested: int, cancelled: Callable[[], bool], keep: Callable[[], bool]):
        self.requested = requested
        self.cancelled, self.keep = cancelled, keep
        self.done = 0
        self.stopped = ""  # "completed", "cancelled" or "non-finite" once the loop is over

    def __iter__(self) -> Iterator[int]:
        for n in range(self.done, self.requested):
            if self.stopped:
                return
            if self.cancelled():
                self.stopped = "cancelled"
                return
            yield n
        self.stopped = self.stopped or "completed"

    def run(self, work: Callable[..., object], *args) -> bool:
        """`work(*args)`: True when it finished (the unit counts); False when a native kernel
        in it was interrupted by this run's cancel (nothing counts; end the loop). `work`
        commits its results last, so an interrupted unit leaves nothing behind. A
        CancelledError when the run was not cancelled is raised."""
        if not self._uninterrupted(work, *args):
            return False
        self.done += 1
        return True

    def finish(self, compute: Callable[[], _T]) -> _T | None:
        """`compute()` the trace after the units. When a cancel interrupts it, the run ends
        (None) unless it `keeps()`: then `compute()` runs once more (it must be able to start
        afresh), after the interrupt has landed."""
        results: list[_T] = []
        if self._uninterrupted(lambda: results.append(compute())):
            return results[0]
        if self.keeps() and self._uninterrupted(lambda: results.append(compute())):
            return results[0]
        return None

    def _uninterrupted(self, work: Callable[..., object], *args) -> bool:
        """work(*args); False when this run's cancel interrupted a native kernel in it."""
        try:
            work(*args)
        except tf.errors.CancelledError:
            if not self.cancelled():
                raise
            self.stopped = "cancelled"
            return False
        return True

    def keeps(self) -> bool:
        """Whether the run, cancelled, keeps the trace of the units done: `keep()` and at least
        one done. Then waits for the cancel's interrupt to have landed
        (`interrupt.wait_for_cancel`), so the kernels that compute that trace run to the end."""
        if self.stopped != "cancelled" or not self.done or not self.keep():
            return False
        interrupt.wait_for_cancel()
        return True

    def keys(self) -> dict[str, np.ndarray]:
        """`stopped` (text), `units_done` and `units_requested` (int64) for the trace."""
        return {
            "stopped": np.array(self.stopped or "cancelled"),
            "units_done": np.int64(self.done),
            "units_requested": np.int64(self.requested),
        }
