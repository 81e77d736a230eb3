"""The run-state model without a window: start, pause, stop keeping or discarding the units
done, failures, and reports of runs it no longer follows."""

import numpy as np
import pytest
from PySide6.QtCore import QObject, Signal

from lstmviz.core.config import RunConfig
from lstmviz.gui.state.run_state import Outcome, Phase, RunState, Stop
from lstmviz.io.trace import GradientTrace, TraceUpdate


class FakeWorker(QObject):
    """The Worker's signals and request methods, recording the requests."""

    progress = Signal(int, object)
    finished_run = Signal(int, object)
    cancelled = Signal(int)
    failed = Signal(int, str)
    paused = Signal(int, int)

    def __init__(self):
        super().__init__()
        self.calls = []

    def __getattr__(self, name):
        if name in ("request_run", "cancel", "pause", "resume", "finish_early"):
            return lambda *args: self.calls.append((name, *args))
        raise AttributeError(name)


@pytest.fixture
def state():
    return RunState(FakeWorker())


def events(state):
    seen = []
    for name in ("started", "updated", "finished", "ended", "failed", "changed"):
        getattr(state, name).connect(lambda *a, n=name: seen.append(n))
    return seen


def rows(n, t=4):
    return {"norm_h_total_by_pass": np.ones((n, t), np.float32)}


def test_start_progress_finish(state):
    seen = events(state)
    config = RunConfig(mode="multipass", passes=3)
    assert state.start(config) and not state.start(config)  # one run at a time
    run_id = state.active
    assert state.worker.calls == [("request_run", run_id, config)]
    state.worker.progress.emit(run_id, TraceUpdate(1, 4, "pass 1/3", rows(1)))
    assert state.done == 1 and state.rows_total == 4 and state.message == "pass 1/3"
    assert state.units_text() == "1/4 passes"
    trace = GradientTrace("multipass", config, rows(3))
    state.worker.finished_run.emit(run_id, trace)
    assert not state.running and state.trace is trace
    assert seen == ["started", "changed", "updated", "changed", "finished"]


def test_curves_are_not_rows(state):
    state.start(RunConfig(mode="taped"))
    curve = {"norm_h_total": np.ones(3)}
    state.worker.progress.emit(state.active, TraceUpdate(1, 1, "done", curve))
    assert state.rows_total is None and "norm_h_total" in state.pending


def test_pause_and_resume(state):
    state.start(RunConfig(mode="train"))
    run_id = state.active
    state.set_paused(True)
    state.worker.paused.emit(run_id, 7)
    assert state.paused and "paused after 7/0 training steps" in state.message
    state.set_paused(False)
    assert state.worker.calls[1:] == [("pause", run_id), ("resume", run_id)]
    state.stop_now()
    state.start(RunConfig(mode="taped"))  # one piece of work: it pauses between its stages
    state.set_paused(True)
    state.worker.paused.emit(state.active, 0)
    assert state.message == "paused (Resume: Ctrl+P)"


def test_time_paused_or_held_by_the_keep_question_is_not_run_time(state, monkeypatch):
    from lstmviz.gui.state import run_state

    clock = [100.0]
    monkeypatch.setattr(run_state.time, "monotonic", lambda: clock[0])
    config = RunConfig(mode="multipass", passes=3)
    state.start(config)
    run_id = state.active
    clock[0] += 2.0
    state.set_paused(True)
    clock[0] += 30.0  # paused
    assert state.elapsed() == 2.0
    state.set_paused(False)
    clock[0] += 1.0
    state.worker.progress.emit(run_id, TraceUpdate(1, 3, "pass 1/3", rows(1)))
    assert state.stop() is Stop.ASK
    clock[0] += 20.0  # the question is open
    state.go_on()
    clock[0] += 0.5
    assert state.elapsed() == 3.5
    state.worker.finished_run.emit(run_id, GradientTrace("multipass", config, rows(3)))
    assert state.seconds == 3.5


def test_stop_keep_ends_with_the_trace_of_the_units_done(state):
    state.start(RunConfig(mode="batchwise", batches=5))
    run_id = state.active
    state.worker.progress.emit(run_id, TraceUpdate(2, 5, "batch 2/5"))
    assert state.stop() is Stop.ASK and state.running
    state.keep()
    assert state.finishing and state.worker.calls[1:] == [("pause", run_id),
                                                          ("finish_early", run_id)]  # fmt: skip
    assert state.stop() is Stop.NOTHING  # a second Stop while the trace is built does nothing
    kept = GradientTrace("batchwise", RunConfig(mode="batchwise", batches=2), {})
    state.worker.finished_run.emit(run_id, kept)
    assert state.trace is kept and not state.running and not state.finishing


def test_stop_discard_and_go_on(state):
    state.start(RunConfig(mode="train"))
    run_id = state.active
    state.worker.progress.emit(run_id, TraceUpdate(3, 10, "loss 0.5"))
    assert state.stop() is Stop.ASK
    state.go_on()
    assert state.running and state.worker.calls[-1] == ("resume", run_id)
    ended = []
    state.ended.connect(ended.append)
    assert state.stop() is Stop.ASK
    state.discard()
    assert not state.running and state.worker.calls[-1] == ("cancel", run_id)
    assert ended and ended[0].startswith("stopped after")
    # the run's late reports are ignored
    state.worker.finished_run.emit(run_id, GradientTrace("train", RunConfig(mode="train"), {}))
    assert state.trace is None


def test_a_run_with_nothing_done_or_no_units_stops_at_once(state):
    state.start(RunConfig(mode="multipass"))
    assert state.stop() is Stop.STOPPED and not state.running  # no pass done yet
    state.start(RunConfig(mode="taped"))
    state.worker.progress.emit(state.active, TraceUpdate(1, 1, "done"))
    assert state.stop() is Stop.STOPPED  # one unit: nothing to keep


def test_failure_goes_to_a_dialog(state):
    failed = []
    state.failed.connect(failed.append)
    state.start(RunConfig())
    state.worker.failed.emit(state.active, "--weights: bad file")
    assert failed == ["--weights: bad file"] and not state.running


def finished(state, config):
    """Run `config` to its end (the fake worker's report); returns the trace."""
    state.start(config)
    trace = GradientTrace(config.mode, config, rows(3))
    state.worker.finished_run.emit(state.active, trace)
    return trace


@pytest.mark.parametrize("how", ["discard", "stop_now", "cancelled", "failed"])
def test_a_run_that_ends_without_a_trace_leaves_the_one_before(state, how):
    """Stopped with nothing kept, cancelled by the worker or failed: the trace shown before the
    run (its config and run time too) is back, and `ended` says so."""
    config = RunConfig(mode="multipass", passes=3)
    before = finished(state, config)
    seconds = state.seconds
    assert seconds is not None and state.restored is False
    ended = []
    state.ended.connect(ended.append)
    other = RunConfig(mode="train", train_steps=50)
    state.start(other)
    assert state.trace is None and state.config is other and state.seconds is None
    state.worker.progress.emit(state.active, TraceUpdate(3, 50, "loss 0.5", {"loss": np.ones(3)}))
    if how == "discard":
        assert state.stop() is Stop.ASK
        state.discard()
    elif how == "stop_now":
        state.stop_now()
    elif how == "cancelled":
        state.worker.cancelled.emit(state.active)
    else:
        state.worker.failed.emit(state.active, "boom")
    assert not state.running and state.restored
    assert state.trace is before and state.config is config and state.seconds == seconds
    assert state.pending == {} and state.rows_total is None
    assert state.outcome is (Outcome.FAILED if how == "failed" else Outcome.STOPPED)
    assert len(ended) == 1 and "the trace from before is shown again" in ended[0]
    # the next run to finish replaces it; one after that that fails leaves the new one
    newer = finished(state, other)
    assert state.trace is newer and not state.restored and state.outcome is Outcome.DONE
    state.start(config)
    state.stop_now()
    assert state.trace is newer


def test_nothing_before_a_run_that_keeps_nothing_leaves_nothing(state):
    ended = []
    state.ended.connect(ended.append)
    state.start(RunConfig(mode="train"))
    state.worker.progress.emit(state.active, TraceUpdate(2, 9, "loss 0.5", {"loss": np.ones(2)}))
    state.stop_now()
    assert state.trace is None and state.config is None and state.restored
    assert state.pending == {} and ended == [ended[0]] and "from before" not in ended[0]


def test_an_opened_trace_ends_the_run_and_is_not_replaced_by_the_one_before(state):
    before = finished(state, RunConfig(mode="taped"))
    state.start(RunConfig(mode="multipass"))
    opened = GradientTrace("taped", RunConfig(mode="taped", seed=5), {})
    state.show(opened)
    assert not state.running and not state.restored and state.trace is opened
    assert state.seconds is None and state.config is opened.config
    assert state.worker.calls[-1] == ("cancel", state.last_id)
    state.start(RunConfig(mode="multipass"))
    state.stop_now()
    assert state.trace is opened and state.trace is not before


def test_keep_says_that_the_trace_is_being_built(state):
    messages = []
    state.updated.connect(lambda: messages.append(state.message))
    state.start(RunConfig(mode="batchwise", batches=5))
    state.worker.progress.emit(state.active, TraceUpdate(2, 5, "batch 2/5"))
    assert state.stop() is Stop.ASK
    state.keep()
    assert messages[-1].startswith("stopping: building the trace")
    state.worker.finished_run.emit(state.active, GradientTrace("batchwise", state.config, {}))
    assert state.outcome is Outcome.KEPT


def test_a_run_paused_by_the_user_stays_paused_after_the_keep_question(state):
    """Pause, Stop (the question), Cancel: the run is held by the user still, and nothing
    resumes it; Pause off then resumes it."""
    state.start(RunConfig(mode="train"))
    run_id = state.active
    state.worker.progress.emit(run_id, TraceUpdate(3, 10, "loss 0.5"))
    state.set_paused(True)
    assert state.phase is Phase.PAUSED and state.stop() is Stop.ASK
    assert state.phase is Phase.ASKING and state.paused
    state.go_on()
    assert state.phase is Phase.PAUSED and state.worker.calls[-1] == ("pause", run_id)
    state.set_paused(False)
    assert state.phase is Phase.RUNNING and state.worker.calls[-1] == ("resume", run_id)
    state.stop_now()
    assert state.phase is Phase.IDLE and state.outcome is Outcome.STOPPED
