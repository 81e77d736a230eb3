"""The progress of `lstmviz run` on stderr, as `[mode] done/total message · 1.2 s` (`lstmviz
export`: `[export] 45% message · 1.2 s`, and only once it has taken a second).

On a terminal: one line, redrawn in place at every update (a carriage return, the text, then
erase to the end of the line). Anywhere else (a file, a pipe, a CI log, a notebook's
`!lstmviz run` cell): plain lines, a few per run rather than one per update, so a log reads
line by line and a long run does not leave thousands of lines or one line of thousands of
redraws. A line is written for each of the first FIRST updates (the start and the first units:
a sign of life, and how long a unit takes), then when `done` reaches a further tenth of
`total` or INTERVAL seconds have passed since the last line, and always for the last update
(when its turn came before, at `end`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

FIRST = 3  # in a log, the first updates each get a line
TENTHS = 10  # then a line at each tenth of the units done …
INTERVAL = 5.0  # … or when this many seconds have passed since the last line


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal (False for a stream without `isatty`, or closed)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """The progress of one run on `stream` (stderr when None); `terminal` defaults to
    whether the stream is one. Times count from construction (`clock`: seconds). Updates
    before `after` seconds show nothing (work that ends by then stays silent), and `percent`
    shows done/total as a percentage."""

    def __init__(self, label: str, stream: TextIO | None = None, terminal: bool | None = None,
                 clock: Callable[[], float] = time.perf_counter, after: float = 0.0,
                 percent: bool = False):  # fmt: skip
        self.label = label
        self.after, self.percent = after, percent
        self.stream = sys.stderr if stream is None else stream
        self.terminal = is_terminal(self.stream) if terminal is None else terminal
        self.clock = clock
        self.start = clock()
        self.open = False  # terminal: the cursor is at the end of a progress line
        self.pending: tuple[str, float, int] | None = None  # log: the latest update whose
        # line was skipped: (text, time, tenth)
        self.updates = 0
        self.last_line = self.start  # log: when the last line was written
        self.last_tenth = -1  # log: the tenth of the units of the last line

    def update(self, done: int, total: int, message: str) -> None:
        """Show that `done` of `total` units are done (`message`: what is running)."""
        now = self.clock()
        if now - self.start < self.after:
            return
        count = f"{100 * done // max(total, 1)}%" if self.percent else f"{done}/{total}"
        text = f"[{self.label}] {count} {message} · {now - self.start:.1f} s"
        if self.terminal:
            self._write(f"\r{text}\033[K")
            self.open = True
            return
        self.updates += 1
        tenth = done * TENTHS // total if total > 0 else 0
        self.pending = (text, now, tenth)
        if (self.updates <= FIRST or done >= total or tenth > self.last_tenth
                or now - self.last_line >= INTERVAL):  # fmt: skip
            self._line()

    def end(self, ctrl_c: bool = False) -> None:
        """Before another line (a message, an error, the end of the run): on a terminal, end
        the progress line, or the `^C` the terminal echoed (`ctrl_c`); in a log, write the
        latest update if its line was skipped. Either way the next line starts on its own."""
        if self.terminal:
            if self.open or ctrl_c:
                self._write("\n")
            self.open = False
        elif self.pending is not None:
            self._line()

    def _line(self) -> None:
        """Log: write the pending update's line."""
        text, self.last_line, self.last_tenth = self.pending
        self.pending = None
        self._write(text + "\n")

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()
