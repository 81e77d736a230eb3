"""The worker thread: owns the computing process where TensorFlow runs (`engine/child.py`),
sends it the window's requests (engine runs, verifications, saving trained weights) and turns
its answers into signals received by main-thread objects. This process never imports
TensorFlow: importing it, tracing and computing would hold the GIL for seconds and freeze the
window.

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
from multiprocessing.connection import wait
from pathlib import Path

from PySide6.QtCore import QThread, Signal

from lstmviz.config import RunConfig
from lstmviz.engine.child import describe, pack, received_trace, serve
from lstmviz.render import prepare
from lstmviz.trace import GradientTrace

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
        self._inflight: dict[tuple[str, int], tuple] = {}  # (verb, id) → sent, not answered
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

    def request_run(self, run_id: int, config: RunConfig) -> None:
        self._post(("run", run_id, config, self.engine))

    def request_verify(self, request_id: int, trace: GradientTrace) -> None:
        self._post(("verify", request_id, trace))

    def request_save_weights(self, request_id: int, trace: GradientTrace, path: str) -> None:
        """Write a training trace's final weights (`.weights.h5` needs Keras: the process)."""
        self._post(("save", request_id, trace, path))

    def cancel(self, run_id: int) -> None:
        """Stop run `run_id` (or never start it): `cancelled` follows within `GRACE` seconds
        plus the time to end the process."""
        self._post(("cancel", run_id))

    def pause(self, run_id: int) -> None:
        """Hold run `run_id` at its next yield until `resume`, `cancel` or `finish_early`."""
        self._post(("pause", run_id))

    def resume(self, run_id: int) -> None:
        self._post(("resume", run_id))

    def finish_early(self, run_id: int) -> None:
        """Cancel run `run_id`, keeping the units it has done as a complete trace."""
        self._post(("finish", run_id))

    def close(self) -> None:
        """End the process (whatever it computes) and the thread; drop waiting requests."""
        self._closing = True
        self._post(("close",))

    def _post(self, message: tuple) -> None:
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
            verb = message[0]
            if verb == "close":
                self._closing = True
            elif verb in ("run", "verify", "save"):
                self._request(message)
            elif verb == "cancel":
                self._cancel(message[1])
            elif self.process is not None:  # pause, resume, finish
                self._send(message)

    def _request(self, message: tuple) -> None:
        """Send a run, verify or save request to the process (starting one if there is none);
        traces go as `pack` gives them, in a folder of their own."""
        verb, request_id, payload, *rest = message
        if verb == "run":
            sent = ("run", request_id, payload, rest[0], str(self._folder(verb, request_id)))
        else:
            trace = payload
            packed = pack(trace.arrays, self._folder(verb, request_id))
            sent = (verb, request_id, (trace.mode, trace.config, packed), *rest)
        if self.process is None and not self._start():
            self._answer(verb, request_id, "the computing process did not start")
            return
        self._inflight[(verb, request_id)] = sent
        self._send(sent)

    def _answer(self, verb: str, request_id: int, message: str) -> bool:
        """End request `request_id` with an error `message` (its signal); True for a run or
        a save (they show a dialog)."""
        shutil.rmtree(self._folder(verb, request_id), ignore_errors=True)
        if verb == "run":
            self.failed.emit(request_id, message)
        elif verb == "verify":
            self.verified.emit(request_id, message)
        else:
            self.saved.emit(request_id, "", message)
        return verb != "verify"

    def _folder(self, verb: str, request_id: int) -> Path:
        return self.folder / f"{verb}-{request_id}"

    def _send(self, message: tuple) -> None:
        with contextlib.suppress(OSError):  # the process has ended: `_lost` reports it
            self._connection.send(message)

    def _cancel(self, run_id: int) -> None:
        if ("run", run_id) not in self._inflight:
            return  # ended (its answer is on its way) or never sent
        self._stop.value = run_id
        self._send(("cancel", run_id))
        self._stopping = (run_id, time.monotonic() + GRACE)

    def _kill_stopped(self) -> None:
        """The cancelled run has not ended in time: if it is computing, end the process."""
        run_id, _ = self._stopping
        self._stopping = None
        self._receive()  # it may have ended just now
        if ("run", run_id) not in self._inflight or self._running != run_id:
            return  # ended, or still queued behind a request: it never starts
        others = [m for key, m in self._inflight.items() if key != ("run", run_id)]
        self.process.kill()  # nothing runs in it from here on (the kernel frees it after)
        self.cancelled.emit(run_id)
        self._end()
        shutil.rmtree(self._folder("run", run_id), ignore_errors=True)
        self._start()
        for message in others:  # not answered by the ended process: the new one answers
            self._inflight[(message[0], message[1])] = message
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

    def _handle(self, message: tuple) -> None:
        verb, *args = message
        if verb == "ready":
            self._loaded = True
            if not self._announced:
                self._announced = True
                self.ready.emit(args[0])
        elif verb == "broken":
            self._broken = args[0]
        elif verb == "started":
            self._running = args[0]
        elif verb == "progress":
            self.progress.emit(*args)
        elif verb == "paused":
            self.paused.emit(*args)
        elif verb in ("finished", "cancelled", "failed"):
            self._run_ended(verb, *args)
        elif verb in ("verified", "saved"):
            kind = "verify" if verb == "verified" else "save"
            self._inflight.pop((kind, args[0]), None)
            shutil.rmtree(self._folder(kind, args[0]), ignore_errors=True)
            (self.verified if verb == "verified" else self.saved).emit(*args)

    def _run_ended(self, verb: str, run_id: int, *args) -> None:
        self._inflight.pop(("run", run_id), None)
        self._running = None
        if self._stopping is not None and self._stopping[0] == run_id:
            self._stopping = None
        folder = self._folder("run", run_id)
        if verb == "finished":
            mode, config, packed = args
            trace = received_trace(mode, config, packed, folder)
            prepare.warm(trace.arrays, *self.view)  # here, not in the window's first draw
            self.finished_run.emit(run_id, trace)
            return
        shutil.rmtree(folder, ignore_errors=True)
        if verb == "cancelled":
            self.cancelled.emit(run_id)
        else:
            self.failed.emit(run_id, args[0])

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
        for verb, request_id in inflight:
            reported = self._answer(verb, request_id, message) or reported
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
