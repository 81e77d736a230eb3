"""Checks the window's tests share (pytest-qt)."""

from __future__ import annotations

import time


def stop_within_a_second(qtbot, window) -> None:
    """Stop the run in `window`: idle at once, the computation ended (`cancelled`) within a
    second, no trace kept and "stopped" in the status line."""
    start = time.perf_counter()
    with qtbot.waitSignal(window.worker.cancelled, timeout=1_000):
        window.stop_action.trigger()
        assert not window.state.running and window.run_button.isEnabled()
    assert time.perf_counter() - start < 1.0
    assert window.trace is None and "stopped" in window.message.text()
