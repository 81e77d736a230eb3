"""Opening a big trace file: read in a thread, the window's thread free meanwhile; the trace
shown when it arrives, a bad file's dialog then, a file opened or a run started meanwhile
winning over it. `IN_THREAD_BYTES` is set to 0 so that small traces take that path."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.gui.threads import trace_loading  # noqa: E402
from lstmviz.io.trace import GradientTrace  # noqa: E402
from tests.helpers import gui_fakes  # noqa: E402
from tests.helpers.gui_checks import idle_window  # noqa: E402
from tests.helpers.gui_fakes import PASSES, TP  # noqa: E402


def saved_trace(path, hidden=5):
    config = RunConfig(steps=PASSES * TP, batch=3, hidden=hidden)
    trace = next(item for item in gui_fakes.multipass(config) if isinstance(item, GradientTrace))
    return trace.save(path)


@pytest.fixture
def idle(qtbot, settings):
    """Its dialogs not recorded (the conftest's `idle` records them): an unexpected one fails."""
    win = idle_window(qtbot, settings)
    win.show()
    return win


@pytest.fixture
def threaded(monkeypatch):
    """Every trace file read in a thread; returns the threads `GradientTrace.load` ran in."""
    monkeypatch.setattr(trace_loading, "IN_THREAD_BYTES", 0)
    threads, load = [], GradientTrace.load

    def recorded(path, *args, **kwargs):
        threads.append(threading.current_thread())
        if "slow" in str(path):
            time.sleep(0.5)
        return load(path, *args, **kwargs)

    monkeypatch.setattr(GradientTrace, "load", staticmethod(recorded))
    return threads


def test_a_big_trace_is_read_off_the_windows_thread_and_shown(qtbot, idle, errors, threaded,
                                                              tmp_path):  # fmt: skip
    path = saved_trace(tmp_path / "t.npz")
    assert idle.open_path(str(path))
    assert idle.files.opening() and "opening" in idle.message.text()
    qtbot.waitUntil(lambda: idle.trace is not None, timeout=10_000)
    assert threaded and threaded[0] is not threading.main_thread()
    expected = np.load(path)["norm_h_total_by_pass"]
    np.testing.assert_array_equal(idle.trace.norm_h_total_by_pass, expected)
    assert not idle.files.opening() and "opened" in idle.message.text() and not errors


def test_a_bad_big_file_gets_its_dialog_when_read(qtbot, idle, errors, threaded, tmp_path):
    arrays = dict(np.load(saved_trace(tmp_path / "t.npz")))
    arrays["norm_h_total_by_pass"] = arrays["norm_h_total_by_pass"][:, :-1]  # disagrees
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    assert idle.open_path(str(path))
    qtbot.waitUntil(lambda: bool(errors), timeout=10_000)
    assert str(path) in errors[0] and idle.trace is None and not idle.files.opening()


def test_the_file_opened_last_wins_over_a_slower_one(qtbot, idle, errors, threaded, tmp_path):
    slow = saved_trace(tmp_path / "slow.npz", hidden=5)
    quick = saved_trace(tmp_path / "quick.npz", hidden=7)
    assert idle.open_path(str(slow)) and idle.open_path(str(quick))
    qtbot.waitUntil(lambda: idle.trace is not None, timeout=10_000)
    qtbot.wait(800)  # the slow one has arrived by now, and was dropped
    assert idle.trace.config.hidden == 7 and not errors


def test_a_run_started_while_reading_drops_the_file(qtbot, idle, errors, threaded, tmp_path,
                                                    monkeypatch):  # fmt: skip
    slow = saved_trace(tmp_path / "slow.npz")
    monkeypatch.setattr(idle.state, "start", lambda config: True)  # no computing process
    assert idle.open_path(str(slow))
    assert idle.start_run()
    assert not idle.files.opening() and "not opened" in idle.message.text()
    qtbot.wait(800)
    assert idle.trace is None and not errors
