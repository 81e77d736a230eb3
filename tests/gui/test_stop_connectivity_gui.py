"""The window's Stop during a taped run's connectivity map (a real run in the computing
process): the map looks at the cancel between its chunks, so the run ends by itself within a
second and the process, warm, runs the next one."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import Qt  # noqa: E402

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.gui.threads import worker as worker_module  # noqa: E402
from tests.helpers.gui_checks import alive, ended_at, run_to_end  # noqa: E402

# the whole map: about a minute on 2 cores
LONG_MAP = RunConfig(mode="taped", steps=2500, batch=8, input_dim=4, hidden=32, connectivity=True)


@pytest.mark.serial  # times the stop: alone under xdist
def test_stop_during_the_map_ends_the_run_without_ending_the_process(qtbot, window, monkeypatch):
    # a grace far longer than a chunk of the map: ending the process would take this long, and
    # a map that never looked at the cancel would be ended only that way
    monkeypatch.setattr(worker_module, "GRACE", 5.0)
    messages: list[str] = []
    window.worker.progress.connect(lambda run_id, update: messages.append(update.message),
                                   Qt.ConnectionType.DirectConnection)  # fmt: skip
    ended = ended_at(window.worker)
    first = window.worker.pid
    assert window.start_run(LONG_MAP)
    qtbot.waitUntil(lambda: "computing the connectivity map…" in messages, timeout=120_000)
    time.sleep(4.0)  # past the tracing of the map's chunk, also on a busy machine
    start = time.perf_counter()
    window.stop_action.trigger()
    assert not window.state.running and window.run_button.isEnabled()
    qtbot.waitUntil(lambda: bool(ended), timeout=10_000)
    assert ended[0] - start < 1.0  # the map's chunks take ~0.1 s
    assert window.worker.pid == first and alive(first)
    assert window.trace is None and "stopped" in window.message.text()
    run_to_end(qtbot, window, RunConfig(mode="taped", steps=10, batch=2, input_dim=3, hidden=4))
    assert window.worker.pid == first
