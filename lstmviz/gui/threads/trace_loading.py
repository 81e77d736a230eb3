"""Opening a big trace file off the window's thread. Reading a 1.3 GB trace (its arrays
decompressed and checked) and reducing its gradients for the heatmaps takes seconds; in a
thread of its own the window stays responsive and shows the trace when it arrives. NumPy only
in that thread: no Qt object is made there, no widget touched; the result comes back through
a queued signal."""

from __future__ import annotations

import sys
import threading

from PySide6.QtCore import QObject, Signal

from lstmviz.core.errors import LstmvizError
from lstmviz.io.trace import GradientTrace
from lstmviz.plots import prepare

# A trace file this big is read in a thread (reading it would stall the window); a smaller
# one at once, which lets its opener say at once whether it opened.
IN_THREAD_BYTES = 64 << 20


class TraceLoader(QObject):
    """Reads trace files in threads. `start` gives a ticket and `loaded(ticket, path, trace or
    None, error message or "")` arrives in the window's thread; only the latest ticket counts
    (`current`): `drop` abandons the load under way (another file opened, a run started)."""

    loaded = Signal(int, str, object, str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.current = 0
        self.pending: str | None = None  # the path being read for the current ticket

    def start(self, path: str, view: tuple[bool, bool]) -> int:
        """Read `path` in a thread, with the heatmaps' images made for `view` (View → Log
        scale, Normalise) when the panels' modules are imported."""
        self.current += 1
        self.pending = path
        threading.Thread(target=self._read, args=(self.current, path, view), daemon=True,
                         name="lstmviz-open-trace").start()  # fmt: skip
        return self.current

    def drop(self) -> None:
        self.current += 1
        self.pending = None

    def take(self, ticket: int) -> bool:
        """Whether a result with `ticket` is the one wanted (then nothing is pending)."""
        if ticket != self.current:
            return False
        self.pending = None
        return True

    def _read(self, ticket: int, path: str, view: tuple[bool, bool]) -> None:
        try:
            trace = GradientTrace.load(path)
            # the reductions the first draw needs, here; not before the window has imported
            # pyqtgraph itself (a thread importing it while the window makes Qt types crashes)
            if "lstmviz.plots.style" in sys.modules:
                prepare.warm(trace.arrays, *view)
        except LstmvizError as exc:
            self.loaded.emit(ticket, path, None, str(exc))
        except MemoryError:
            self.loaded.emit(ticket, path, None, f"{path}: not enough memory to read it")
        except Exception as exc:  # noqa: BLE001 (a thread's error would be lost: say it)
            self.loaded.emit(ticket, path, None, f"{path}: {type(exc).__name__}: {exc}")
        else:
            self.loaded.emit(ticket, path, trace, "")
