"""The worker thread: imports TensorFlow, then runs requests (engine runs, verifications) one at
a time and reports through signals received by main-thread objects.

Why `run()` is a Python loop over a queue and not a Qt event loop with slots: with PySide6 6.12
the thread's Python thread state does not survive from one slot call to the next (a
`threading.local` set in one slot is gone in the next; measured). TensorFlow keeps its eager
context in thread-local storage, so the second slot that touches TensorFlow aborts the process
("double free or corruption"). One long `run()` keeps one thread state for the thread's life.

TensorFlow cannot be interrupted inside one computation, but the native LSTM kernels can:
`cancel(run_id)` stops them at their next timestep (`engine.interrupt`, through ctypes: this
thread runs no TensorFlow), and otherwise is honoured at the engine's next yield. So is
`pause(run_id)`: the worker then stops iterating the engine's
generator (it waits, polling, until `resume`, `cancel` or `finish_early`). `finish_early`
cancels a run of any mode and keeps the units done (passes, batches, training steps) as a
complete trace (the runner's `keep`).
"""

from __future__ import annotations

import queue
import time
import traceback
from pathlib import Path

from PySide6.QtCore import QThread, Signal

from lstmviz.config import RunConfig
from lstmviz.engine.interrupt import cancel_run, interrupt
from lstmviz.errors import LstmvizError
from lstmviz.trace import GradientTrace


def describe(exc: BaseException) -> str:
    """One line for input errors the user can fix; the traceback for anything else."""
    if isinstance(exc, LstmvizError):
        return str(exc)
    return "".join(traceback.format_exception(exc)).strip()


class Worker(QThread):
    """Signals carry the request id first, so the window can ignore runs it has abandoned.
    The request methods are thread-safe and return at once."""

    ready = Signal(object)  # device_description() dict, once TensorFlow is imported
    progress = Signal(int, object)  # run id, TraceUpdate
    finished_run = Signal(int, object)  # run id, GradientTrace
    cancelled = Signal(int)  # run id
    failed = Signal(int, str)  # run id (0: loading TensorFlow), message
    verified = Signal(int, object)  # request id, Verification or an error message (str)
    paused = Signal(int, int)  # run id, units done: the worker holds the run
    saved = Signal(int, str, str)  # request id, path written (or ""), error message (or "")

    def __init__(self) -> None:
        super().__init__()
        self._requests: queue.Queue = queue.Queue()
        self._cancelled: set[int] = set()
        self._paused: set[int] = set()
        self._finish: set[int] = set()
        self._closing = False
        self._current: int | None = None  # the run in progress

    def request_run(self, run_id: int, config: RunConfig) -> None:
        self._requests.put((self._run, run_id, config))

    def request_verify(self, request_id: int, trace: GradientTrace) -> None:
        self._requests.put((self._verify, request_id, trace))

    def request_save_weights(self, request_id: int, trace: GradientTrace, path: str) -> None:
        """Write a training trace's final weights (`.weights.h5` needs Keras: this thread)."""
        self._requests.put((self._save_weights, request_id, (trace, path)))

    def cancel(self, run_id: int) -> None:
        """Ask run `run_id` to stop at its next yield (or not to start); when it is running,
        its native LSTM kernels stop at their next timestep."""
        if run_id == self._current:  # flag and interrupt as one step (see interrupt.settle)
            cancel_run(lambda: self._cancelled.add(run_id))
        else:
            self._cancelled.add(run_id)
            if run_id == self._current:  # it started meanwhile
                interrupt()

    def pause(self, run_id: int) -> None:
        """Hold run `run_id` at its next yield until `resume`, `cancel` or `finish_early`."""
        self._paused.add(run_id)

    def resume(self, run_id: int) -> None:
        self._paused.discard(run_id)

    def finish_early(self, run_id: int) -> None:
        """Cancel run `run_id`, keeping the units it has done as a complete trace."""
        self._finish.add(run_id)
        self.cancel(run_id)

    def close(self) -> None:
        """Drop waiting requests and end the thread after the current one (interrupted)."""
        self._closing = True
        self._requests.put(None)
        if self._current is not None:
            interrupt()

    def run(self) -> None:
        try:
            from lstmviz.engine.device import device_description

            self.ready.emit(device_description())
        except Exception as exc:
            self.failed.emit(0, f"TensorFlow did not load:\n{describe(exc)}")
        while (request := self._requests.get()) is not None and not self._closing:
            method, request_id, payload = request
            method(request_id, payload)

    def _run(self, run_id: int, config: RunConfig) -> None:
        from lstmviz.engine import runner  # attribute access: tests may patch runner.run

        def cancelled() -> bool:
            return run_id in self._cancelled or self._closing

        self._current = run_id
        try:
            if not cancelled():
                items = runner.run(config, cancelled, lambda: run_id in self._finish)
                for item in items:
                    if isinstance(item, GradientTrace):
                        self.finished_run.emit(run_id, item)
                        return
                    self.progress.emit(run_id, item)
                    self._hold(run_id, item.done, cancelled)
                    if cancelled() and run_id not in self._finish:
                        break
            self.cancelled.emit(run_id)
        except Exception as exc:
            self.failed.emit(run_id, describe(exc))
        finally:
            self._current = None
            for flags in (self._cancelled, self._paused, self._finish):
                flags.discard(run_id)

    def _hold(self, run_id: int, done: int, cancelled) -> None:
        """Wait while run `run_id` is paused (and neither cancelled nor finishing)."""
        if run_id not in self._paused or run_id in self._finish:
            return
        self.paused.emit(run_id, done)
        while run_id in self._paused and run_id not in self._finish and not cancelled():
            time.sleep(0.02)

    def _save_weights(self, request_id: int, payload: tuple[GradientTrace, str]) -> None:
        from lstmviz.engine.trained import save_trained_weights

        trace, path = payload
        try:
            written = save_trained_weights(trace, path)
            self.saved.emit(request_id, str(Path(written)), "")
        except Exception as exc:
            self.saved.emit(request_id, "", describe(exc))

    def _verify(self, request_id: int, trace: GradientTrace) -> None:
        from lstmviz.verify import verify_trace

        try:
            self.verified.emit(request_id, verify_trace(trace))
        except Exception as exc:
            self.verified.emit(request_id, describe(exc))
