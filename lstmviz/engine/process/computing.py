"""The desktop app's computing process: TensorFlow runs here, never in the window's process.

`gui.threads.worker.Worker` starts this process (multiprocessing, "spawn") with `serve` as its
target and one duplex connection. Importing this module imports neither TensorFlow nor Qt: the
window uses `pack`/`unpack`; `serve` imports TensorFlow in the child. The messages both ends
exchange are the dataclasses of `engine/process/messages.py`.

A run's final arrays cross as `.npy` files in the run's `folder` (given by the window, which
maps them read-only and removes the folder once the trace is dropped); arrays up to
`INLINE_BYTES` and every TraceUpdate are pickled through the connection.

Two threads: the main thread imports TensorFlow and runs one request at a time; a reader
thread takes the messages, queues requests and applies cancel, pause and finish at once (a
cancel also stops the native LSTM kernels, `interrupt.cancel_run`). A cancel is also written to
`stop`, a shared integer the running request reads without the reader thread: that thread needs
the GIL to take a message, and a main thread that drops the GIL and takes it back at once, more
often than the interpreter's switch interval (short I/O, many small TensorFlow calls), can keep
it waiting for seconds. When the window's process ends, the connection reaches its end and this
process leaves at once.
"""

from __future__ import annotations

import contextlib
import faulthandler
import mmap
import os
import queue
import shutil
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lstmviz.core.errors import LstmvizError
from lstmviz.engine.process.messages import (
    Broken,
    Cancel,
    Cancelled,
    Close,
    Failed,
    Finish,
    Finished,
    Notice,
    PackedTrace,
    Pause,
    Paused,
    Progress,
    Ready,
    Resume,
    Run,
    Save,
    Saved,
    Started,
    Verified,
    Verify,
)
from lstmviz.io.trace import GradientTrace

INLINE_BYTES = 1 << 16  # smaller arrays are pickled with the message
HOLD_POLL = 0.01  # seconds between looks at the flags while a run is held (paused)
NICE = 10  # this process's niceness above the window's
RELEASE_WAIT = 60.0  # seconds a dropped trace's maps wait for the window to let go of them
RELEASE_POLL = 0.05  # seconds between looks


def describe(exc: BaseException) -> str:
    """One line for input errors the user can fix; the traceback for anything else."""
    if isinstance(exc, LstmvizError):
        return str(exc)
    return "".join(traceback.format_exception(exc)).strip()


# ---- arrays across the process boundary -----------------------------------------------------


def pack(arrays: dict[str, np.ndarray], folder: Path) -> dict[str, np.ndarray | str]:
    """`arrays` ready to pickle: small ones as they are, larger ones as the path of a `.npy`
    file (an array already mapped whole from a `.npy` file keeps its file; others are written
    into `folder`, created when needed)."""
    packed: dict[str, np.ndarray | str] = {}
    for key, value in arrays.items():
        value = value if isinstance(value, np.ndarray) else np.asarray(value)  # memmaps stay
        if value.nbytes <= INLINE_BYTES or value.dtype.hasobject:
            packed[key] = np.array(value)  # a memmap pickles as a plain array
        elif _mapped_whole(value):
            packed[key] = str(value.filename)
        else:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{key}.npy"
            np.save(path, value)
            packed[key] = str(path)
    return packed


def _mapped_whole(value: np.ndarray) -> bool:
    """A whole `.npy` file mapped by `np.load` with `mmap_mode` (not a view of one)."""
    return (
        isinstance(value, np.memmap)
        and isinstance(value.base, mmap.mmap)
        and str(value.filename or "").endswith(".npy")
    )


def unpack(packed: dict[str, np.ndarray | str]) -> dict[str, np.ndarray]:
    """The arrays of `pack`: files mapped read-only (no copy), the others as they came."""
    return {
        key: np.load(value, mmap_mode="r", allow_pickle=False) if isinstance(value, str) else value
        for key, value in packed.items()
    }


def _release_soon(folder: Path, maps: list) -> None:
    """Remove `folder` and unmap its files in a thread of its own, each map once the window
    holds no array of it (`maps` holds the mmap objects, so the window's last array of one
    going does not unmap it). A trace is dropped when the window starts the next run:
    unlinking a big trace's files there, or unmapping them when its last panel redrew,
    stalled the window's event loop (bench/bench_gui.py --only life); CPython unmaps without
    the GIL, so here it costs the window nothing."""

    def release() -> None:
        shutil.rmtree(folder, ignore_errors=True)
        deadline = time.monotonic() + RELEASE_WAIT
        while maps and time.monotonic() < deadline:
            time.sleep(RELEASE_POLL)
            for i in reversed(range(len(maps))):
                if sys.getrefcount(maps[i]) <= 2:  # the list's and the call's: ours alone
                    del maps[i]
        maps.clear()  # arrays held longer: unmapped wherever their last one goes

    threading.Thread(target=release, name="lstmviz-release", daemon=True).start()


def received_trace(sent: PackedTrace, folder: Path) -> GradientTrace:
    """The trace a run sent: its files mapped; `folder` is removed and the files unmapped
    once the trace is dropped (`_release_soon`)."""
    trace = GradientTrace(sent.mode, sent.config, unpack(sent.arrays))
    maps = [a.base for a in trace.arrays.values() if isinstance(getattr(a, "base", None),
                                                                 mmap.mmap)]  # fmt: skip
    weakref.finalize(trace, _release_soon, folder, maps)
    return trace


# ---- the child ------------------------------------------------------------------------------


class _Flags:
    """What the reader thread sets and the running request reads."""

    def __init__(self, stop=None) -> None:
        self.cancelled: set[int] = set()
        self.finish: set[int] = set()
        self.paused: set[int] = set()
        self.current: int | None = None  # the run in progress
        self.stop = stop  # the shared id of a cancelled run (`serve`)

    def is_cancelled(self, run_id: int) -> bool:
        return run_id in self.cancelled or (self.stop is not None and self.stop.value == run_id)


def serve(connection, folder: str, stop=None) -> None:
    """The child's main: read requests from `connection` until `Close` or the window's
    process is gone, run them one at a time, answer on `connection`. `folder` is where the
    runs' files go (each run names its own folder inside). `stop`: a shared integer
    (multiprocessing.RawValue "q") holding the id of a run the window has cancelled."""
    with contextlib.suppress(AttributeError, RuntimeError, ValueError, OSError):
        faulthandler.enable()  # a native crash here says where, on the app's terminal
    # Ctrl-C in a terminal reaches the whole process group: the window ends this process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The window's process comes first when both want the CPU (TensorFlow's threads would
    # otherwise take every core and delay the event loop); alone, this one runs at full speed.
    os.nice(NICE)
    requests: queue.Queue = queue.Queue()
    flags = _Flags(stop)
    threading.Thread(target=_read, args=(connection, requests, flags), daemon=True).start()
    send = connection.send
    try:
        from lstmviz.engine.device import device_description
        from lstmviz.engine.native import kernels

        kernels.report_to(lambda text: send(Notice(text)))  # a first run's build of the kernels
        send(Ready(device_description()))
    except Exception as exc:
        send(Broken(describe(exc)))
        os._exit(0)
    handlers = {Run: _run, Verify: _verify, Save: _save}
    while (request := requests.get()) is not None:
        handlers[type(request)](send, flags, request)
    # TensorFlow's threads can abort the interpreter's teardown: nothing is left to save
    os._exit(0)


def _read(connection, requests: queue.Queue, flags: _Flags) -> None:
    """The reader thread: flags at once, requests into the queue; the window's end ends us."""
    from lstmviz.engine.native.interrupt import cancel_run, interrupt

    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            os._exit(0)  # the window's process is gone
        if isinstance(message, Close):
            requests.put(None)
            return
        if isinstance(message, (Cancel, Finish)):
            run_id = message.run_id
            if isinstance(message, Finish):
                flags.finish.add(run_id)
            if run_id == flags.current:  # flag and interrupt as one step (wait_for_cancel)
                cancel_run(lambda run_id=run_id: flags.cancelled.add(run_id))
            else:
                flags.cancelled.add(run_id)
                if run_id == flags.current:  # it started meanwhile
                    interrupt()
        elif isinstance(message, Pause):
            flags.paused.add(message.run_id)
        elif isinstance(message, Resume):
            flags.paused.discard(message.run_id)
        else:
            requests.put(message)


def _run(send, flags: _Flags, request: Run) -> None:
    from lstmviz.engine import runner

    run_id = request.run_id

    def cancelled() -> bool:
        return flags.is_cancelled(run_id)

    def keep() -> bool:
        return run_id in flags.finish

    flags.current = run_id
    send(Started(run_id))
    try:
        if not cancelled():
            for item in (request.engine or runner.run)(request.config, cancelled, keep):
                if isinstance(item, GradientTrace):
                    packed = pack(item.arrays, Path(request.folder))
                    send(Finished(run_id, PackedTrace(item.mode, item.config, packed)))
                    return
                send(Progress(run_id, item))
                _hold(send, flags, run_id, item.done, cancelled)
                if cancelled() and not keep():
                    break
        send(Cancelled(run_id))
    except Exception as exc:
        # an input error keeps its fields marked: the window names them as the dock does
        send(Failed(run_id, exc.marked if isinstance(exc, LstmvizError) else describe(exc)))
    finally:
        flags.current = None
        for held in (flags.cancelled, flags.paused, flags.finish):
            held.discard(run_id)


def _hold(send, flags: _Flags, run_id: int, done: int, cancelled: Callable[[], bool]) -> None:
    """Ask the engine for nothing more while run `run_id` is paused (and neither cancelled
    nor finishing)."""
    if run_id not in flags.paused or run_id in flags.finish:
        return
    send(Paused(run_id, done))
    while run_id in flags.paused and run_id not in flags.finish and not cancelled():
        time.sleep(HOLD_POLL)


def _verify(send, flags: _Flags, request: Verify) -> None:
    from lstmviz.analysis.verify import verify_trace

    try:
        send(Verified(request.request_id, verify_trace(_trace(request.trace))))
    except Exception as exc:
        send(Verified(request.request_id, describe(exc)))


def _save(send, flags: _Flags, request: Save) -> None:
    from lstmviz.engine.modes.trained_weights import save_trained_weights

    try:
        written = save_trained_weights(_trace(request.trace), request.path)
        send(Saved(request.request_id, str(written), ""))
    except Exception as exc:
        send(Saved(request.request_id, "", describe(exc)))


def _trace(sent: PackedTrace) -> GradientTrace:
    return GradientTrace(sent.mode, sent.config, unpack(sent.arrays))
