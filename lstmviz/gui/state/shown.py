"""What the window shows, apart from Qt: the trace (or a run's configuration while it computes),
the recording, the file they came from, and how they are drawn (`lstmviz.core.view.ViewOptions`).

One `Shown` per window. `RunState` writes the trace a run finishes with (and puts back the one
shown before a run that kept nothing: `ShownTrace`, a snapshot); the window's parts write what
they open and what the user chooses to see; the title, the menus and the exports read it.
NumPy and the standard library only: the tests drive it without a window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lstmviz.core.config import RunConfig
from lstmviz.core.view import ViewOptions
from lstmviz.io.trace import GradientTrace

if TYPE_CHECKING:  # h5py: not needed to hold one
    from lstmviz.io.recording import Recording


@dataclass(frozen=True)
class ShownTrace:
    """A trace shown and what goes with it: its run's configuration, the seconds its run took
    (None: opened from a file) and the name of the file it was opened from or saved to (None:
    a run's own trace, not saved)."""

    trace: GradientTrace | None = None
    config: RunConfig | None = None
    seconds: float | None = None
    file: str | None = None


@dataclass
class Shown:
    """`trace_shown`: the trace shown (None during a run: its `config` is the run's). `recording`:
    the recording shown (its last record's trace is `trace_shown.trace`), None when there is none.
    `view`: log scale, normalise, the model direction, the recording's record and timesteps."""

    trace_shown: ShownTrace = field(default_factory=ShownTrace)
    recording: Recording | None = None
    view: ViewOptions = field(default_factory=ViewOptions)

    @property
    def trace(self) -> GradientTrace | None:
        return self.trace_shown.trace

    @property
    def config(self) -> RunConfig | None:
        return self.trace_shown.config

    @property
    def seconds(self) -> float | None:
        return self.trace_shown.seconds

    def show_trace(self, trace: GradientTrace, seconds: float | None = None) -> None:
        """`trace` is shown: a run's (it took `seconds`) or an opened one (`seconds` None,
        its file named by `set_file`)."""
        self.trace_shown = ShownTrace(trace, trace.config, seconds)

    def show_run(self, config: RunConfig) -> None:
        """A run of `config` starts: no trace until it finishes."""
        self.trace_shown = ShownTrace(None, config)

    def set_file(self, path: str) -> None:
        """The trace shown was opened from `path`, or saved to it (the title names it)."""
        if self.trace is not None:
            self.trace_shown = ShownTrace(self.trace, self.config, self.seconds, Path(path).name)

    def file_name(self) -> str | None:
        """The name of the file whose contents are shown (the recording, or the trace opened
        or saved), None for a run's own trace or nothing shown."""
        if self.recording is not None:
            return self.recording.path.name
        return self.trace_shown.file if self.trace is not None else None

    def current(self):
        """What an export writes and a comparison takes: the recording, else the trace."""
        return self.recording if self.recording is not None else self.trace
