"""The window's computing process: TensorFlow runs only there; Stop ends a computation
within 100 ms wherever it is; a process that crashes or is killed from outside gives a dialog,
the window stays as it was and the next run works; quitting mid-run exits 0 and leaves no
process; a run's arrays cross as memory-mapped files, removed with the trace."""

from __future__ import annotations

import functools
import gc
import os
import queue
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.engine.process import (
    computing,  # noqa: E402
    messages,  # noqa: E402
)
from lstmviz.gui.threads import worker as worker_module  # noqa: E402
from lstmviz.gui.threads.worker import exit_text  # noqa: E402
from tests.helpers import gui_fakes  # noqa: E402
from tests.helpers.gui_checks import alive, ended_at, run_to_end  # noqa: E402
from tests.helpers.processes.app_process import App  # noqa: E402

SMALL = RunConfig(mode="taped", steps=10, batch=2, input_dim=3, hidden=4)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


# ---- Stop --------------------------------------------------------------------------------------


def stop_while_stuck(qtbot, window, tmp_path, polls: bool) -> tuple[int, float, str]:
    """Start a `gui_fakes.stuck` run (`polls`: it looks at the cancel between beats) and Stop
    it once it computes: the window is idle at once. Returns the computing process's pid
    before, the seconds from Stop to `cancelled` and the heartbeat file."""
    beats = str(tmp_path / "beats.txt")
    window.worker.engine = functools.partial(gui_fakes.stuck, heartbeat=beats, polls=polls)
    first = window.worker.pid
    ended = ended_at(window.worker)
    assert window.start_run(SMALL)
    qtbot.waitUntil(lambda: gui_fakes.beats(beats) >= 5, timeout=60_000)
    start = time.perf_counter()
    window.stop_action.trigger()
    assert not window.state.running and window.run_button.isEnabled()
    qtbot.waitUntil(lambda: bool(ended), timeout=2_000)
    return first, ended[0] - start, beats


@pytest.mark.serial  # times the stop: alone under xdist
def test_stop_ends_a_computation_that_never_looks_at_the_cancel_within_100_ms(
    qtbot, window, tmp_path
):
    """Like TensorFlow tracing a function: the process is ended; the next run starts a new
    one, warm."""
    first, seconds, beats = stop_while_stuck(qtbot, window, tmp_path, polls=False)
    # `GRACE` and the kill take a fraction of this on an idle machine; the bound leaves room
    # for a busy one
    assert seconds < 1.0
    qtbot.waitUntil(lambda: not alive(first), timeout=5_000)
    count = gui_fakes.beats(beats)
    time.sleep(0.1)
    assert gui_fakes.beats(beats) == count  # nothing computes any more
    assert window.trace is None and "stopped" in window.message.text()

    window.worker.engine = None
    qtbot.waitUntil(lambda: window.worker.pid not in (None, first), timeout=5_000)
    run_to_end(qtbot, window)
    assert window.trace.grad_h_total.shape == (10, 2, 4)


@pytest.mark.serial  # times the stop: alone under xdist
def test_stop_between_units_stops_the_run_and_keeps_the_process(qtbot, window, tmp_path,
                                                                monkeypatch):
    # a generous grace, so that a busy machine does not turn the polite stop into a kill.
    # `stuck` drops the GIL every 5 ms (its beats): a cancel carried by the process's reader
    # thread alone waited up to seconds for the GIL here; the shared stop flag does not.
    monkeypatch.setattr(worker_module, "GRACE", 1.0)
    first, seconds, beats = stop_while_stuck(qtbot, window, tmp_path, polls=True)
    assert seconds < 1.0
    assert window.worker.pid == first and alive(first)
    count = gui_fakes.beats(beats)
    time.sleep(0.1)
    assert gui_fakes.beats(beats) == count
    window.worker.engine = None
    run_to_end(qtbot, window)
    assert window.worker.pid == first


# ---- a process that ends by itself -----------------------------------------------------------


def test_a_process_killed_mid_run_gives_a_dialog_and_the_next_run_works(
    qtbot, window, errors, tmp_path
):
    """The window and the files loaded stay as they were; the dialog names the signal."""
    from lstmviz.weights import random_weights

    w = random_weights(3, 4, np.random.default_rng(0))
    np.savez(tmp_path / "w.npz", kernel=w.kernel, recurrent_kernel=w.recurrent_kernel,
             bias=w.bias)  # fmt: skip
    assert window.open_path(str(tmp_path / "w.npz"))
    before = window.params.config()
    beats = str(tmp_path / "beats.txt")
    window.worker.engine = functools.partial(gui_fakes.stuck, heartbeat=beats)
    first = window.worker.pid
    assert window.start_run()
    qtbot.waitUntil(lambda: gui_fakes.beats(beats) >= 3, timeout=60_000)
    os.kill(first, signal.SIGKILL)  # what the kernel's out-of-memory killer sends
    qtbot.waitUntil(lambda: bool(errors), timeout=10_000)
    assert "killed by signal 9 (SIGKILL: out of memory, or killed from outside)" in errors[-1]
    assert not window.state.running and window.run_button.isEnabled()
    assert window.params.config() == before and before.weights == str(tmp_path / "w.npz")
    assert "run failed" in window.message.text()

    window.worker.engine = None
    run_to_end(qtbot, window)
    assert window.worker.pid != first and len(errors) == 1
    np.testing.assert_array_equal(window.trace.kernel, w.kernel)  # the loaded weights ran


def test_a_crash_in_the_process_gives_a_dialog_naming_it(qtbot, window, errors):
    window.worker.engine = gui_fakes.crash
    first = window.worker.pid
    assert window.start_run(SMALL)
    qtbot.waitUntil(lambda: bool(errors), timeout=30_000)
    assert "killed by signal 11 (SIGSEGV: a crash)" in errors[-1] and len(errors) == 1
    assert not window.state.running and window.run_button.isEnabled()
    window.worker.engine = None
    run_to_end(qtbot, window)
    assert window.worker.pid != first


def test_a_process_killed_while_idle_gives_a_dialog_and_a_new_one_starts(
    qtbot, window, errors
):
    run_to_end(qtbot, window)
    shown = window.trace
    first = window.worker.pid
    os.kill(first, signal.SIGTERM)
    qtbot.waitUntil(lambda: bool(errors), timeout=10_000)
    assert "killed by signal 15 (SIGTERM)" in errors[-1]
    assert window.trace is shown  # still shown
    qtbot.waitUntil(lambda: window.worker.pid not in (None, first), timeout=5_000)
    run_to_end(qtbot, window)
    assert len(errors) == 1


def test_exit_text_names_the_signal_or_the_code():
    assert exit_text(-signal.SIGSEGV) == "killed by signal 11 (SIGSEGV: a crash)"
    assert exit_text(3) == "exit code 3"
    assert exit_text(-signal.SIGTERM) == "killed by signal 15 (SIGTERM)"


# ---- traces across the boundary ----------------------------------------------------------------


def test_a_runs_arrays_arrive_mapped_read_only_and_their_folder_goes_with_the_trace(
    qtbot, window
):
    """Equal to the same run in this process (the engine's own generator, no window)."""
    from lstmviz.engine.runner import run

    config = RunConfig(mode="taped", steps=300, batch=8, input_dim=3, hidden=16, seed=4)
    run_to_end(qtbot, window, config)
    trace = window.trace
    grad = trace.grad_h_total  # [300, 8, 16] float32: 150 KiB, a file
    assert isinstance(grad, np.memmap) and not grad.flags.writeable
    folder = Path(grad.filename).parent
    assert folder.is_dir() and folder.parent == window.worker.folder
    *_, here = run(config)
    assert sorted(trace.keys()) == sorted(here.keys())
    for key, value in here.arrays.items():
        if np.asarray(value).dtype.kind == "f":
            np.testing.assert_allclose(trace[key], value, rtol=1e-6, atol=0, err_msg=key)
        else:
            np.testing.assert_array_equal(trace[key], value, err_msg=key)
    del trace, grad
    run_to_end(qtbot, window)  # another trace is shown
    gc.collect()
    qtbot.waitUntil(lambda: not folder.exists(), timeout=5_000)  # removed in a thread


def test_a_finished_traces_big_reductions_are_made_off_the_windows_thread(
    qtbot, window, monkeypatch
):
    """The heatmaps' reductions of grad_h_total and their images, the summary's NaN/Inf counts
    of the big arrays it checks and its scale for the reference check are computed in the
    worker thread (`plots.prepare`); the window's draw finds them."""
    from lstmviz.analysis import values
    from lstmviz.plots import style

    threads: list[tuple[str, int]] = []  # (what, the thread) for arrays of WARM_SIZE or more
    for name in ("_unit_means", "_sample_norms", "_nonfinite", "_max_abs"):
        reduce = getattr(values, name)

        def counted(v, reduce=reduce, name=name):
            if np.size(v) >= values.WARM_SIZE:
                threads.append((name, threading.get_ident()))
            return reduce(v)

        monkeypatch.setattr(values, name, counted)
    colour = style.colour  # what a finished trace's heatmap images are coloured with

    def coloured(shown, levels, out=None):
        threads.append(("colour", threading.get_ident()))
        return colour(shown, levels, out)

    monkeypatch.setattr(style, "colour", coloured)
    config = RunConfig(mode="taped", steps=400, batch=16, input_dim=3, hidden=32, seed=2)
    run_to_end(qtbot, window, config)  # grad_h_total: 204 800 values
    units, grad = window.area.units.data.copy(), window.trace.grad_h_total
    # a multi-pass trace: the summary checks its reference gradients (819 200 values)
    config = RunConfig(mode="multipass", passes=40, steps=20, batch=16, input_dim=8, hidden=64)
    run_to_end(qtbot, window, config)
    main = threading.get_ident()
    names = {name for name, _ in threads}
    assert names >= {"_unit_means", "_sample_norms", "_nonfinite", "_max_abs", "colour"}, names
    assert all(thread != main for _, thread in threads), threads
    np.testing.assert_allclose(units, values._unit_means(grad), rtol=1e-6)
    heatmap = window.area.rows  # the multi-pass trace's rows: one per pass, as stored
    np.testing.assert_array_equal(heatmap.data, window.trace["norm_h_total_by_pass"])
    expected = style.finished_image(np.array(heatmap.data), True, False)  # a new array: made now
    np.testing.assert_array_equal(heatmap.rgba, expected[3])
    assert heatmap.levels == expected[2]


def test_pack_writes_large_arrays_once_and_unpack_maps_them(tmp_path):
    rng = np.random.default_rng(0)
    big = rng.standard_normal((200, 200)).astype(np.float32)  # 160 KB, every other row 80 KB
    arrays = {"big": big, "small": np.float32(0.5), "text": np.array("cancelled")}
    packed = computing.pack(arrays, tmp_path / "a")
    assert packed["big"] == str(tmp_path / "a" / "big.npy")
    assert isinstance(packed["small"], np.ndarray) and packed["text"] == np.array("cancelled")
    mapped = computing.unpack(packed)
    assert isinstance(mapped["big"], np.memmap) and not mapped["big"].flags.writeable
    np.testing.assert_array_equal(mapped["big"], big)
    again = computing.pack({"big": mapped["big"], "view": mapped["big"][::2]}, tmp_path / "b")
    assert again["big"] == packed["big"]  # a mapped file crosses as its name
    assert again["view"] == str(tmp_path / "b" / "view.npy")  # a view is written
    np.testing.assert_array_equal(computing.unpack(again)["view"], big[::2])
    assert sorted(os.listdir(tmp_path / "b")) == ["view.npy"]


def test_a_dropped_traces_files_are_unmapped_in_a_thread_once_the_window_lets_go(tmp_path):
    """The window's last array of a dropped trace going does not unmap its file there (the
    release thread holds the map, and unmaps it without the GIL once it alone holds it)."""
    import weakref

    rng = np.random.default_rng(1)
    arrays = {"big": rng.standard_normal((300, 300)).astype(np.float32), "loss": np.float32(1)}
    trace = computing.received_trace(messages.PackedTrace("taped", RunConfig(),
                                                      computing.pack(arrays, tmp_path / "run")),
                                 tmp_path / "run")  # fmt: skip
    held = trace.big  # a panel's reference
    mapping = weakref.ref(held.base)
    del trace
    gc.collect()
    deadline = time.monotonic() + 5
    while (tmp_path / "run").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not (tmp_path / "run").exists()  # the folder goes with the trace
    np.testing.assert_array_equal(held, arrays["big"])  # still readable, mapped
    time.sleep(3 * computing.RELEASE_POLL)
    assert mapping() is not None
    del held  # the window lets go: not unmapped here…
    assert mapping() is not None
    deadline = time.monotonic() + 5
    while mapping() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert mapping() is None  # …but in the release thread


def test_the_reader_cancels_flags_and_stops_the_kernels_of_the_run_in_progress_only(monkeypatch):
    from lstmviz.engine.native import interrupt

    calls = []
    monkeypatch.setattr(interrupt, "interrupt", lambda: calls.append("stop"))

    class Script:
        def __init__(self, messages):
            self.messages = list(messages)

        def recv(self):
            return self.messages.pop(0)

    flags = computing._Flags()
    flags.current = 4
    requests: queue.Queue = queue.Queue()
    run = messages.Run(8, SMALL, None, "folder")
    script = [messages.Cancel(3), messages.Cancel(4), messages.Finish(5), messages.Pause(6),
              messages.Resume(6), messages.Pause(7), run, messages.Close()]  # fmt: skip
    computing._read(Script(script), requests, flags)
    assert calls == ["stop"]  # run 4 only: 3 and 5 are not computing
    assert flags.cancelled == {3, 4, 5} and flags.finish == {5} and flags.paused == {7}
    assert requests.get_nowait() == run and requests.get_nowait() is None


# ---- the real app in a subprocess ------------------------------------------------------------


@pytest.mark.parametrize("how", ["SIGTERM", "Ctrl-C"])
@pytest.mark.slow
def test_quitting_mid_run_exits_0_and_leaves_no_process(tmp_path, how):
    app = App(tmp_path, "--demo")
    try:
        app.wait_for("first-update")
        started = children(app.proc.pid)
        spawned = [pid for pid in started if b"spawn_main" in Path(f"/proc/{pid}/cmdline")
                     .read_bytes()]  # fmt: skip
        assert spawned, started
        if how == "SIGTERM":
            app.proc.send_signal(signal.SIGTERM)
        else:  # a terminal's Ctrl-C: SIGINT to the whole process group
            os.killpg(app.proc.pid, signal.SIGINT)
        assert app.exit_code() == 0, app.err()
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in started if alive(pid)]
        assert "Traceback" not in app.stderr_text()
    finally:
        app.close()


@pytest.fixture
def two_lstms(tmp_path) -> Path:
    """Weights of two stacked LSTMs (a file that asks which layer)."""
    import keras

    stack = keras.Sequential([keras.Input((6, 3)), keras.layers.LSTM(4, return_sequences=True),
                              keras.layers.LSTM(2)])  # fmt: skip
    stack.save_weights(tmp_path / "two.weights.h5")
    return tmp_path / "two.weights.h5"


def test_a_signal_closes_the_app_while_it_asks_which_layer_of_a_file(tmp_path, two_lstms):
    """`lstmviz gui FILE` with several LSTMs in FILE asks which one inside the event loop, so
    SIGTERM still closes the window (and the picker) and the app exits 0."""
    app = App(tmp_path, str(two_lstms))
    try:
        app.wait_for("window-shown")
        time.sleep(1.0)  # the picker is up
        app.terminate()
        assert app.exit_code(timeout=20) == 0, app.err()
    finally:
        app.close()


def test_a_screenshot_of_a_file_with_several_lstms_names_them_and_exits(tmp_path, two_lstms):
    app = App(tmp_path, str(two_lstms), "--screenshot", str(tmp_path / "shot.png"))
    try:
        assert app.exit_code(timeout=60) == 1
        assert "holds 2 LSTMs" in app.stderr_text() and "Traceback" not in app.stderr_text()
    finally:
        app.close()


REPORT = """
import sys
from lstmviz.gui import app
code = app.main(demo=True, screenshot=sys.argv[1])
print("in-window-process", "tensorflow" in sys.modules, "keras" in sys.modules, flush=True)
sys.exit(code)
"""


@pytest.mark.slow
def test_the_window_process_never_imports_tensorflow_through_a_run(tmp_path):
    shot = tmp_path / "shot.png"
    app = App(tmp_path, str(shot), code=REPORT)
    try:
        app.wait_for("first-update")  # the demo ran (in the computing process)
        assert app.wait_for("in-window-process").split()[1:] == ["False", "False"]
        assert app.exit_code() == 0, app.err()
        assert shot.is_file()
    finally:
        app.close()
