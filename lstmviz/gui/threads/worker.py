"""The worker thread: owns the computing process where TensorFlow runs
(`engine/process/computing.py`), sends it the window's requests (engine runs, verifications, saving
trained weights) and turns its answers into signals received by main-thread objects. This process
never imports TensorFlow: importing it, tracing and computing would hold the GIL for seconds and
freeze the window.

The thread starts the process at once (multiprocessing's "spawn": a process holding Qt is never
forked), so TensorFlow is warm by the first Run, and waits on three things: the window's
requests (a queue and a pipe that wakes the thread), the process's answers and its end.

Stopping: `cancel(run_id)` asks the process to cancel the run (its flag and the native LSTM
kernels' interrupt, which stop at their next timestep). A run that has not ended `GRACE`
seconds later is inside something that cannot be interrupted (tracing, one long TensorFlow
op): the process is killed, the run reported cancelled and a new process started, warm in the
background; requests it had not answered go to the new one. `finish_early` (cancel and keep
the units done) and `pause` never kill: the process holds the run or builds its trace.

A process that ends unexpectedly (a crash, out of memory, killed from outside) fails what it
had in flight with a message naming how it ended (a signal, an exit code), or, with nothing in
flight, emits `crashed`; a new one starts, unless it never got TensorFlow loaded (the next
request tries again).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue
import shutil
import signal
import tempfile
import time
import weakref
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import wait
from pathlib import Path

from PySide6.QtCore import QThread, Signal

from lstmviz.core.config import RunConfig
from lstmviz.engine.process import messages as m
from lstmviz.engine.process.computing import describe, pack, received_trace, serve
from lstmviz.io.trace import GradientTrace
from lstmviz.plots import prepare

GRACE = 0.05  # seconds a cancelled run may take to end before its process is killed


def exit_text(code: int | None) -> str:
    """How a process ended, in words: "killed by signal 9 (SIGKILL: …)", "exit code 3"."""
    if code is None:
        return "ended"
    if code >= 0:
        return f"exit code {code}"
    number = -code
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    cause = {signal.SIGKILL: ": out of memory, or killed from outside",
             signal.SIGSEGV: ": a crash", signal.SIGABRT: ": aborted",
             signal.SIGBUS: ": a crash"}.get(number, "")  # fmt: skip
    return f"killed by signal {number} ({name}{cause})"


class Worker(QThread):
    """Signals carry the request id first, so the window can ignore runs it has abandoned.
    The request methods are thread-safe and return at once.

    `engine` is the function the process runs a RunConfig with (None: `runner.run`); another
    one (tests, benchmarks) must have its signature and be picklable (a module-level function,
    or a functools.partial of one)."""

    ready = Signal(object)  # device_description() dict, once TensorFlow is first imported
    progress = Signal(int, object)  # run id, TraceUpdate
    finished_run = Signal(int, object)  # run id, GradientTrace (large arrays mapped read-only)
    cancelled = Signal(int)  # run id: its computation has ended
    failed = Signal(int, str)  # run id (0: loading TensorFlow), message
    verified = Signal(int, object)  # request id, Verification or an error message (str)
    paused = Signal(int, int)  # run id, units done: the process holds the run
    saved = Signal(int, str, str)  # request id, path written (or ""), error message (or "")
    crashed = Signal(str)  # the process ended unexpectedly with nothing in flight: how
    notice = Signal(str)  # a line for the status bar (the native kernels built on a first run)

    def __init__(self, engine: Callable | None = None) -> None:
        super().__init__()
        self.engine = engine
        self._inbox: queue.Queue = queue.Queue()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_write, False)
        # open for the object's life: a request after the thread's end writes into nothing else
        weakref.finalize(self, os.close, self._wake_read)
        weakref.finalize(self, os.close, self._wake_write)
        self._closing = False
        self.folder: Path | None = None  # this session's runs and requests, removed at the end
        self.process = None  # the computing process (multiprocessing.Process)
        self._connection = None
        # (request class, id) → the request sent, not answered yet
        self._inflight: dict[tuple[type, int], m.Request] = {}
        self._running: int | None = None  # the run the process has started
        self._stopping: tuple[int, float] | None = None  # a cancelled run, the time to kill it
        self._loaded = False  # the process has TensorFlow
        self.view = (True, False)  # the window's View → Log scale, Normalise (`prepare.warm`)
        self._announced = False  # `ready` was emitted
        self._broken = ""  # why TensorFlow did not load in the process

    @property
    def pid(self) -> int | None:
        """The computing process's id (None when there is none)."""
        return self.process.pid if self.process is not None else None

    # ---- requests (any thread) -----------------------------------------------------------

    # The thread's inbox holds the messages of `engine/process/messages.py` as the process will get
    # them, except that a Run's folder is not named yet and a Verify's or Save's trace is the
    # GradientTrace itself: the thread packs it (`_request`).

    def request_run(self, run_id: int, config: RunConfig) -> None:
        self._post(m.Run(run_id, config, self.engine, ""))

    def request_verify(self, request_id: int, trace: GradientTrace) -> None:
        self._post(m.Verify(request_id, trace))

    def request_save_weights(self, request_id: int, trace: GradientTrace, path: str) -> None:
        """Write a training trace's final weights (`.weights.h5` needs Keras: the process)."""
        self._post(m.Save(request_id, trace, path))

    def cancel(self, run_id: int) -> None:
        """Stop run `run_id` (or never start it): `cancelled` follows within `GRACE` seconds
        plus the time to end the process."""
        self._post(m.Cancel(run_id))

    def pause(self, run_id: int) -> None:
        """Hold run `run_id` at its next yield until `resume`, `cancel` or `finish_early`."""
        self._post(m.Pause(run_id))

    def resume(self, run_id: int) -> None:
        self._post(m.Resume(run_id))

    def finish_early(self, run_id: int) -> None:
        """Cancel run `run_id`, keeping the units it has done as a complete trace."""
        self._post(m.Finish(run_id))

    def close(self) -> None:
        """End the process (whatever it computes) and the thread; drop waiting requests."""
        self._closing = True
        self._post(m.Close())

    def _post(self, message) -> None:
        self._inbox.put(message)
        with contextlib.suppress(BlockingIOError):  # full: the thread has wake-ups waiting
            os.write(self._wake_write, b"\0")

    # ---- the thread ----------------------------------------------------------------------

    def run(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="lstmviz-"))
        try:
            self._start()
            while not self._closing:
                self._step()
        finally:
            self._end()
            shutil.rmtree(self.folder, ignore_errors=True)

    def _step(self) -> None:
        """Wait for a request, an answer, the process's end or a stop's deadline; handle it."""
        waiting = [self._wake_read]
        if self.process is not None:
            waiting += [self._connection, self.process.sentinel]
        timeout = None
        if self._stopping is not None:
            timeout = max(0.0, self._stopping[1] - time.monotonic())
        ready = wait(waiting, timeout)
        if self._wake_read in ready:
            os.read(self._wake_read, 4096)
        self._take_requests()
        if self.process is not None:
            self._receive()
            if not self.process.is_alive():
                self._lost()
        if self._stopping is not None and time.monotonic() >= self._stopping[1]:
            self._kill_stopped()

    def _take_requests(self) -> None:
        while not self._closing:
            try:
                message = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(message, m.Close):
                self._closing = True
            elif isinstance(message, (m.Run, m.Verify, m.Save)):
                self._request(message)
            elif isinstance(message, m.Cancel):
                self._cancel(message.run_id)
            elif self.process is not None:  # Pause, Resume, Finish
                self._send(message)

    def _request(self, message: m.Request) -> None:
        """Send a run, verify or save request to the process (starting one if there is none);
        traces go as `pack` gives them, in a folder of their own."""
        kind, request_id = _key(message)
        folder = self._folder(kind, request_id)
        if isinstance(message, m.Run):
            sent = replace(message, folder=str(folder))
        else:
            trace = message.trace
            sent = replace(message, trace=m.PackedTrace(trace.mode, trace.config,
                                                         pack(trace.arrays, folder)))
        if self.process is None and not self._start():
            self._answer(kind, request_id, "the computing process did not start")
            return
        self._inflight[(kind, request_id)] = sent
        self._send(sent)

    def _answer(self, kind: type, request_id: int, message: str) -> bool:
        """End request `request_id` (of class `kind`) with an error `message` (its signal);
        True for a run or a save (they show a dialog)."""
        shutil.rmtree(self._folder(kind, request_id), ignore_errors=True)
        if kind is m.Run:
            self.failed.emit(request_id, message)
        elif kind is m.Verify:
            self.verified.emit(request_id, message)
        else:
            self.saved.emit(request_id, "", message)
        return kind is not m.Verify

    def _folder(self, kind: type, request_id: int) -> Path:
        """Where request `request_id`'s files go: "run-3", "verify-2", "save-1"."""
        return self.folder / f"{kind.__name__.lower()}-{request_id}"

    def _send(self, message) -> None:
        with contextlib.suppress(OSError):  # the process has ended: `_lost` reports it
            self._connection.send(message)

    def _cancel(self, run_id: int) -> None:
        if (m.Run, run_id) not in self._inflight:
            return  # ended (its answer is on its way) or never sent
        self._stop.value = run_id
        self._send(m.Cancel(run_id))
        self._stopping = (run_id, time.monotonic() + GRACE)

    def _kill_stopped(self) -> None:
        """The cancelled run has not ended in time: if it is computing, end the process."""
        run_id, _ = self._stopping
        self._stopping = None
        self._receive()  # it may have ended just now
        if (m.Run, run_id) not in self._inflight or self._running != run_id:
            return  # ended, or still queued behind a request: it never starts
        others = [sent for key, sent in self._inflight.items() if key != (m.Run, run_id)]
        self.process.kill()  # nothing runs in it from here on (the kernel frees it after)
        self.cancelled.emit(run_id)
        self._end()
        shutil.rmtree(self._folder(m.Run, run_id), ignore_errors=True)
        self._start()
        for message in others:  # not answered by the ended process: the new one answers
            self._inflight[_key(message)] = message
            self._send(message)

    def _receive(self) -> None:
        while self._connection is not None:
            try:
                if not self._connection.poll():
                    return
                message = self._connection.recv()
            except (EOFError, OSError):  # the process has ended: `_lost` reports it
                return
            self._handle(message)

    def _handle(self, message) -> None:
        if isinstance(message, m.Ready):
            self._loaded = True
            if not self._announced:
                self._announced = True
                self.ready.emit(message.device)
        elif isinstance(message, m.Notice):
            self.notice.emit(message.text)
        elif isinstance(message, m.Broken):
            self._broken = message.message
        elif isinstance(message, m.Started):
            self._running = message.run_id
        elif isinstance(message, m.Progress):
            self.progress.emit(message.run_id, message.update)
        elif isinstance(message, m.Paused):
            self.paused.emit(message.run_id, message.done)
        elif isinstance(message, (m.Finished, m.Cancelled, m.Failed)):
            self._run_ended(message)
        elif isinstance(message, (m.Verified, m.Saved)):
            kind = m.Verify if isinstance(message, m.Verified) else m.Save
            self._inflight.pop((kind, message.request_id), None)
            shutil.rmtree(self._folder(kind, message.request_id), ignore_errors=True)
            if isinstance(message, m.Verified):
                self.verified.emit(message.request_id, message.result)
            else:
                self.saved.emit(message.request_id, message.path, message.error)

    def _run_ended(self, message: m.RunEnd) -> None:
        run_id = message.run_id
        self._inflight.pop((m.Run, run_id), None)
        self._running = None
        if self._stopping is not None and self._stopping[0] == run_id:
            self._stopping = None
        folder = self._folder(m.Run, run_id)
        if isinstance(message, m.Finished):
            trace = received_trace(message.trace, folder)
            prepare.warm(trace.arrays, *self.view)  # here, not in the window's first draw
            self.finished_run.emit(run_id, trace)
            return
        shutil.rmtree(folder, ignore_errors=True)
        if isinstance(message, m.Cancelled):
            self.cancelled.emit(run_id)
        else:
            self.failed.emit(run_id, message.message)

    def _lost(self) -> None:
        """The process ended by itself: fail what it had in flight, start a new one."""
        code = self.process.exitcode
        loaded, broken = self._loaded, self._broken
        inflight = dict(self._inflight)
        self._end()
        if broken:
            message = f"TensorFlow did not load:\n{broken}"
        else:
            message = (f"The computing process (TensorFlow) ended unexpectedly: "
                       f"{exit_text(code)}. The next run starts a new one.")  # fmt: skip
        reported = False
        for kind, request_id in inflight:
            reported = self._answer(kind, request_id, message) or reported
        if broken and not self._announced:
            self.failed.emit(0, message)
        elif not reported:
            self.crashed.emit(message)
        if loaded and not broken:
            self._start()  # warm for the next run

    # ---- the process ---------------------------------------------------------------------

    def _start(self) -> bool:
        """Start a computing process; False (after `failed(0, …)`) when it cannot start."""
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        self._stop = context.RawValue("q", -1)  # the cancelled run's id, read there directly
        process = context.Process(target=serve, args=(theirs, str(self.folder), self._stop),
                                  name="lstmviz-compute", daemon=True)  # fmt: skip
        try:
            process.start()
        except Exception as exc:
            ours.close()
            self.failed.emit(0, f"The computing process did not start:\n{describe(exc)}")
            return False
        finally:
            theirs.close()
        self.process, self._connection = process, ours
        self._loaded, self._broken, self._running = False, "", None
        return True

    def _end(self) -> None:
        """Kill the process (it holds nothing to save) and forget what it had in flight."""
        if self.process is None:
            return
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self._connection.close()
        self.process = self._connection = None
        self._inflight.clear()
        self._running = self._stopping = None


def _key(request: m.Request) -> tuple[type, int]:
    """(its class, its id): how `Worker._inflight` knows a request."""
    return type(request), request.run_id if isinstance(request, m.Run) else request.request_id
