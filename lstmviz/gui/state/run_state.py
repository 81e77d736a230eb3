"""The run in progress and its result, apart from the window (which only shows it).

`RunState` starts, pauses and stops runs through a worker (`gui.threads.worker.Worker`, or anything
with its request methods), receives the worker's reports, keeps the partial arrays a live run
has sent and the finished trace, and tells its views through signals. It needs no window and
no TensorFlow: the tests drive it with a fake worker.

Stopping: a run whose mode works in units (passes, batches, training steps: the registry's
`Mode.unit`) and has finished some can keep them: `stop()` says so (`Stop.ASK`), the view
asks the user while the run is held, then calls `keep()` (the runner yields the complete trace
of the units done), `discard()`, or `go_on()`.

Nothing is lost: a run that ends without a trace (stopped, discarded, failed) leaves the trace
shown before it (`Shown.trace_shown`: trace, config, seconds, file) as it was, and `restored` tells
the views to show it again; only a finished run or an opened trace replaces it.
"""

from __future__ import annotations

import time
from enum import Enum

import numpy as np
from PySide6.QtCore import QObject, Signal, Slot

from lstmviz.core import modes, schema
from lstmviz.core.config import RunConfig
from lstmviz.gui.state.shown import Shown, ShownTrace
from lstmviz.io.trace import GradientTrace, TraceUpdate


class Phase(Enum):
    """Where the run is in its life."""

    IDLE = "idle"  # no run
    RUNNING = "running"
    PAUSED = "paused"  # held by the user (Pause)
    ASKING = "asking"  # held while the view asks whether to keep the units done
    FINISHING = "finishing"  # stopped: the trace of the units done is being built


class Outcome(Enum):
    """How the last run ended (its `value`: the progress bar's words)."""

    NONE = ""  # no run has ended since the last start
    DONE = "done"
    KEPT = "kept"  # stopped, the units done kept as a trace
    STOPPED = "stopped"
    FAILED = "failed"


class Stop(Enum):
    """What `RunState.stop` did."""

    NOTHING = "nothing"  # no run, or it is finishing already
    ASK = "ask"  # held: the view asks whether to keep the units done
    STOPPED = "stopped"  # cancelled, nothing to keep


class RunState(QObject):
    """The run's `phase` (a `Phase`) and the last run's `outcome`; what is shown is `shown`'s
    (one made here when none is given). Signals carry what the views need."""

    started = Signal(object)  # RunConfig
    updated = Signal()  # new partial arrays (`pending`) or progress
    finished = Signal(object, float)  # the GradientTrace, seconds since start
    ended = Signal(str)  # idle again without a new trace: what happened, in a few words
    failed = Signal(str)  # the run failed: the message for a dialog
    changed = Signal()  # the phase changed: enable or disable controls

    def __init__(self, worker, shown: Shown | None = None) -> None:
        super().__init__()
        self.worker = worker
        self.shown = shown if shown is not None else Shown()
        self.active: int | None = None  # id of the run in progress
        self.last_id = 0
        self.phase = Phase.IDLE
        # RUNNING or PAUSED: what the user chose (Pause) while ASKING or FINISHING, the phase
        # a run held by the keep question goes back to
        self._chosen = Phase.RUNNING
        # what was shown when the run in progress started: shown again if it ends without a
        # trace of its own
        self.before = ShownTrace()
        self.restored = False  # the last run ended without a trace: `before` is back
        self.outcome = Outcome.NONE
        self.pending: dict[str, np.ndarray] = {}
        self.rows_total: int | None = None  # rows a live run's row arrays will reach
        self.done = 0
        self.total = 0
        self.message = ""
        self._started = 0.0  # moved on by the time the run was held: that is not run time
        self._held_since: float | None = None
        worker.progress.connect(self._on_progress)
        worker.finished_run.connect(self._on_finished)
        worker.cancelled.connect(self._on_cancelled)
        worker.failed.connect(self._on_failed)
        worker.paused.connect(self._on_paused)

    # ---- what the views read ---------------------------------------------------------------

    @property
    def trace(self) -> GradientTrace | None:
        """The trace shown (None during a run)."""
        return self.shown.trace

    @property
    def config(self) -> RunConfig | None:
        """The run's configuration, or the trace's shown."""
        return self.shown.config

    @property
    def seconds(self) -> float | None:
        """The run time of `trace` (None: opened from a file)."""
        return self.shown.seconds

    @property
    def running(self) -> bool:
        return self.active is not None

    @property
    def paused(self) -> bool:
        """Held by the user (Pause), also while the keep question is asked or the trace of
        the units done is built."""
        return self.phase is Phase.PAUSED or (
            self.phase in (Phase.ASKING, Phase.FINISHING) and self._chosen is Phase.PAUSED
        )

    @property
    def finishing(self) -> bool:
        return self.phase is Phase.FINISHING

    def elapsed(self) -> float:
        """Seconds the run has run: paused or held by the keep question does not count."""
        if not self.running:
            return 0.0
        return (self._held_since or time.monotonic()) - self._started

    def mode(self) -> modes.Mode | None:
        return None if self.config is None else modes.get(self.config.mode)

    def keepable(self) -> bool:
        """The run has units of work done (passes, batches, training steps) that Stop could
        keep as a trace."""
        mode = self.mode()
        return self.running and mode is not None and bool(mode.unit) and self.done > 0

    # ---- commands --------------------------------------------------------------------------

    def start(self, config: RunConfig) -> bool:
        """Start a run of the (validated) `config`; False while another runs."""
        if self.running:
            return False
        self.last_id += 1
        self.before = self.shown.trace_shown
        self.active = self.last_id
        self.shown.show_run(config)
        self.restored, self.outcome = False, Outcome.NONE
        self.pending, self.rows_total, self.done, self.total = {}, None, 0, 0
        self.phase, self._chosen = Phase.RUNNING, Phase.RUNNING
        self.message = "starting…"
        self._started, self._held_since = time.monotonic(), None
        self.worker.request_run(self.active, config)
        self.started.emit(config)
        self.changed.emit()
        return True

    def show(self, trace: GradientTrace) -> None:
        """Show a trace that did not come from a run (opened from a file): it ends any run, and
        replaces what was shown before it."""
        if self.running:
            self.worker.cancel(self.active)
            self._end(f"stopped after {self.elapsed():.1f} s", Outcome.STOPPED, restore=False)
        self.shown.show_trace(trace)
        self.pending, self.rows_total = {}, None

    def set_paused(self, paused: bool) -> None:
        """Hold the run after its current unit of work, or let it go on."""
        if not self.running or self.finishing or paused == self.paused:
            return
        to = Phase.PAUSED if paused else Phase.RUNNING
        if self.phase is Phase.ASKING:
            self._chosen = to
        else:
            self.phase = to
        self._clock()
        (self.worker.pause if paused else self.worker.resume)(self.active)
        self.message = "pausing…" if paused else "running…"
        self.changed.emit()

    def stop(self) -> Stop:
        """Stop the run. Returns `Stop.ASK` when it has units of work done that could be kept
        (the run is held until `keep()`, `discard()` or `go_on()`), `Stop.STOPPED` when it was
        cancelled, `Stop.NOTHING` when nothing runs (or it is finishing)."""
        if not self.running or self.finishing:
            return Stop.NOTHING
        if self.keepable():
            if self.phase is not Phase.ASKING:
                self._chosen, self.phase = self.phase, Phase.ASKING
            self._clock()
            self.worker.pause(self.active)
            return Stop.ASK
        self.stop_now()
        return Stop.STOPPED

    def keep(self) -> None:
        """End the held run with the complete trace of the units done (`finished` follows)."""
        if not self.running:
            return
        if self.phase is not Phase.ASKING:
            self._chosen = self.phase
        self.phase = Phase.FINISHING
        self._clock()
        self.message = "stopping: building the trace of the finished work…"
        self.worker.finish_early(self.active)
        self.changed.emit()
        self.updated.emit()  # the message

    def discard(self) -> None:
        """End the held run keeping nothing: the trace shown before it is back."""
        self.stop_now()

    def go_on(self) -> None:
        """The user changed their mind: the held run goes on (unless paused by them)."""
        if self.running and self.phase is Phase.ASKING:
            self.phase = self._chosen
            self._clock()
            if self.phase is Phase.RUNNING:
                self.worker.resume(self.active)

    def stop_now(self) -> None:
        """Cancel the run; idle at once (a computation in flight ends in the background and
        its result is dropped), the trace shown before it back."""
        if not self.running:
            return
        self.worker.cancel(self.active)
        self._end(f"stopped after {self.elapsed():.1f} s", Outcome.STOPPED)

    def _clock(self) -> None:
        """Stop the run's clock while it is paused or held, and start it again after."""
        holding, now = self.paused or self.phase is Phase.ASKING, time.monotonic()
        if holding and self._held_since is None:
            self._held_since = now
        elif not holding and self._held_since is not None:
            self._started += now - self._held_since
            self._held_since = None

    def units_text(self) -> str:
        """ "2/5 passes" for the status line."""
        mode = self.mode()
        if mode is None or not mode.unit:
            return f"{self.done}/{self.total}"
        return f"{self.done}/{self.total} {modes.plural(mode.unit)}"

    # ---- the worker's reports (main thread) ----------------------------------------------

    @Slot(int, object)
    def _on_progress(self, run_id: int, update: TraceUpdate) -> None:
        if run_id != self.active:
            return
        self.done, self.total = update.done, update.total
        self.pending.update(update.arrays)
        mode = self.config.mode
        if any(schema.role(key, mode) == schema.ROWS for key in update.arrays):
            self.rows_total = update.total
        if self.phase is Phase.RUNNING:
            self.message = update.message
        self.updated.emit()

    @Slot(int, int)
    def _on_paused(self, run_id: int, done: int) -> None:
        if run_id == self.active and self.paused:
            self.done = done
            mode = self.mode()
            after = f" after {self.units_text()}" if mode is not None and mode.unit else ""
            self.message = f"paused{after} (Resume: Ctrl+P)"  # a one-piece run: between stages
            self.updated.emit()

    @Slot(int, object)
    def _on_finished(self, run_id: int, trace: GradientTrace) -> None:
        if run_id != self.active:
            return
        seconds = self.elapsed()
        self.shown.show_trace(trace, seconds)
        self.before = ShownTrace()
        self.outcome = Outcome.KEPT if self.finishing else Outcome.DONE
        self._idle()
        self.finished.emit(trace, seconds)

    @Slot(int)
    def _on_cancelled(self, run_id: int) -> None:
        if run_id == self.active:
            self._end("stopped", Outcome.STOPPED)

    @Slot(int, str)
    def _on_failed(self, run_id: int, message: str) -> None:
        if run_id != self.active:
            return
        self._end("run failed", Outcome.FAILED)
        self.failed.emit(message)

    def _end(self, message: str, outcome: Outcome, restore: bool = True) -> None:
        """The run ends without a trace (`outcome`: STOPPED or FAILED): idle, and with
        `restore` the trace shown before it is shown again (`ended` says so)."""
        self.pending, self.rows_total = {}, None
        self.outcome, self.restored = outcome, restore
        if restore:
            self.shown.trace_shown = self.before
            if self.trace is not None:
                message += " · nothing kept: the trace from before is shown again"
        self.before = ShownTrace()
        self._idle()
        self.ended.emit(message)

    def _idle(self) -> None:
        self.active = None
        self.phase = Phase.IDLE
        self.changed.emit()
