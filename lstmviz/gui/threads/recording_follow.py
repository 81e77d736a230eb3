"""Following a recording (`.lvz`) while `model.fit` writes it, without blocking the window.

`RecordingFollower` looks at the file every `POLL_MS` from the window's thread (a `stat`: its
inode, size and modification time), and when it changed (or every `FORCE_S` regardless, for
file systems whose times are coarse) reads it in a thread of its own: the rows first
(`load_recording(trace=False)`, small), then, when the number of records or the file itself
changed, again with the last record's full trace. What it read arrives in the window's thread
as the `read` signal (a `Recording`; its `last` is None when the last record is the one shown
already). A recording the writer has closed (`finished`) stops the polling.

Reading needs h5py, never TensorFlow or Qt; h5py lets other threads run while it reads.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from lstmviz.core.errors import LstmvizError
from lstmviz.io.recording import Recording, load_recording

POLL_MS = 500
FORCE_S = 5.0  # read at least this often while the recording is not finished
FAILURES = 3  # reads in a row that fail before following stops (`failed`)


def file_key(path: Path) -> tuple[int, int, int] | None:
    """(inode, size, modification time in ns) of `path`: what a write changes; None when the
    file cannot be looked at."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def read_changes(path: Path, records: int, inode: int | None) -> Recording:
    """The recording at `path` as it is now: its rows, and its last record's trace unless it
    still has `records` records and the inode `inode` (then `last` is None). Runs in the
    reading thread."""
    rows = load_recording(path, trace=False)
    key = file_key(path)
    if len(rows) == records and key is not None and key[0] == inode:
        return rows
    return load_recording(path, trace=True)


class RecordingFollower(QObject):
    """Polls one recording, shown with `shown` records from the file with inode `inode`, and
    reads what changes off the window's thread. `read` (a Recording), `failed` (a message
    naming the file, after FAILURES reads in a row failed: following has stopped), `waiting`
    (a read failed and the next poll tries again: the message). `stop()` before letting it go
    (it waits for a read in flight, a fraction of a second)."""

    read = Signal(object)
    failed = Signal(str)
    waiting = Signal(str)
    _arrived = Signal(int, object)  # from the reading thread: (generation, Recording or error)

    def __init__(self, path: str | os.PathLike, shown: Recording, parent: QObject | None = None):
        super().__init__(parent)
        self.path = Path(path)
        self.records = len(shown)
        self.finished = shown.finished
        key = file_key(self.path)
        self._key = key
        self._inode = None if key is None else key[0]
        self._last_read = time.monotonic()
        self._failures = 0
        self._generation = 0  # a read started before `stop` is dropped
        self._future: Future | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lstmviz-recording")
        self.reading_threads: set[str] = set()  # names of the threads reads ran in (tests)
        self._arrived.connect(self._on_arrived)
        self.timer = QTimer(self, interval=POLL_MS)
        self.timer.timeout.connect(self.poll)

    @property
    def following(self) -> bool:
        return self.timer.isActive()

    def start(self) -> None:
        """Poll the file until the writer closes it (nothing to do when it has)."""
        if not self.finished:
            self.timer.start()

    def stop(self) -> None:
        """Stop polling; a read in flight is waited for and its result dropped."""
        self.timer.stop()
        self._generation += 1
        self._pool.shutdown(wait=True, cancel_futures=True)

    @Slot()
    def poll(self) -> None:
        """Read the file in the reading thread when it changed (or FORCE_S have passed)."""
        if self._future is not None or not self.following:
            return
        key = file_key(self.path)
        if key == self._key and time.monotonic() - self._last_read < FORCE_S:
            return
        self._key, self._last_read = key, time.monotonic()
        generation, records, inode = self._generation, self.records, self._inode
        try:
            self._future = self._pool.submit(self._read, generation, records, inode)
        except RuntimeError:  # stopped meanwhile
            self._future = None

    def _read(self, generation: int, records: int, inode: int | None) -> None:
        """The reading thread: read, and hand the outcome to the window's thread."""
        self.reading_threads.add(threading.current_thread().name)
        try:
            outcome: Recording | LstmvizError = read_changes(self.path, records, inode)
        except LstmvizError as exc:
            outcome = exc
        except Exception as exc:  # noqa: BLE001 - a bug: said in the dialog, polling goes on
            outcome = LstmvizError(f"{self.path}: cannot read ({type(exc).__name__}: {exc})")
        self._arrived.emit(generation, outcome)

    @Slot(int, object)
    def _on_arrived(self, generation: int, outcome) -> None:
        self._future = None
        if generation != self._generation:
            return
        if isinstance(outcome, LstmvizError):
            self._failures += 1
            self._key = None  # read again at the next poll
            if self._failures >= FAILURES:
                self.timer.stop()
                self.failed.emit(str(outcome))
            else:
                self.waiting.emit(str(outcome))
            return
        self._failures = 0
        if outcome.last is not None:
            key = file_key(self.path)
            self._inode = None if key is None else key[0]
        self.records, self.finished = len(outcome), outcome.finished
        if self.finished:
            self.timer.stop()
        self.read.emit(outcome)
