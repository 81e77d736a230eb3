"""Cancel with keep, every mode: the kept trace equals the trace of a run asked for the units done.

The references are independent runs: a fresh seeded run of k units where the seed draws the
same first k units (batches, training steps, multi-pass with mean_h and zero state), and the
API on the same arrays where it does not (a multi-pass target and random state are drawn after
the whole sequence, so a seeded run of k passes draws others).
"""

import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from lstmviz.core.config import RunConfig
from lstmviz.engine.modes import multipass
from lstmviz.engine.modes.multipass import multipass_gradients
from lstmviz.engine.native import interrupt, kernels
from lstmviz.engine.problem.seeded import seeded_problem
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.engine.runner import run
from lstmviz.io.trace import GradientTrace, TraceUpdate
from tests.helpers.kept_traces import assert_same_trace, check_stop_keys


def cancel_after(updates: int):
    """A `cancelled` that turns true once `updates` units have reported (TraceUpdate.done)."""
    seen = []

    def cancelled() -> bool:
        return bool(seen) and seen[-1] >= updates

    return seen, cancelled


def drive(config: RunConfig, units: int, keep: bool = True) -> list:
    """Run `config`, cancelling once `units` units are done; every item."""
    seen, cancelled = cancel_after(units)
    items = []
    for item in run(config, cancelled, keep=lambda: keep):
        items.append(item)
        if isinstance(item, TraceUpdate):
            seen.append(item.done)
    return items


MULTIPASS = RunConfig(mode="multipass", steps=5, batch=3, input_dim=2, hidden=4, passes=5)


def test_multipass_keeps_the_passes_done_as_a_fresh_seeded_run_gives():
    *_, kept = drive(MULTIPASS, 2)
    assert isinstance(kept, GradientTrace) and kept.check() is kept
    check_stop_keys(kept, 2, 5)
    assert kept.config == replace(MULTIPASS, passes=2)
    *_, fresh = run(replace(MULTIPASS, passes=2))
    assert_same_trace(kept, fresh)
    assert kept.norm_h_truncated_by_pass.shape == (2, 5)


@pytest.mark.parametrize("loss", ["last_mse", "seq_mse"])
def test_multipass_kept_trace_equals_the_api_on_the_passes_done(loss):
    config = replace(MULTIPASS, loss=loss, random_state=True)
    *_, kept = drive(config, 3)
    check_stop_keys(kept, 3, 5)
    problem = seeded_problem(config, steps=25, passes=5)
    target = problem.target[:3] if loss == "last_mse" else problem.target[:15]
    api = multipass_gradients(
        problem.x[:15].reshape(3, 5, 3, 2), problem.weights, loss, target, problem.h0, problem.c0
    )
    np.testing.assert_array_equal(kept.target, target)
    # Truncated gradients count each pass's loss 1/3 (three passes kept), not 1/5.
    assert_same_trace(kept, api)


def test_batchwise_keeps_the_batches_done_as_a_fresh_seeded_run_gives():
    config = RunConfig(mode="batchwise", steps=6, batch=2, input_dim=3, hidden=4, batches=4,
                       generator="hypernetwork")  # fmt: skip
    *_, kept = drive(config, 2)
    assert isinstance(kept, GradientTrace) and kept.check() is kept
    check_stop_keys(kept, 2, 4)
    assert kept.config == replace(config, batches=2)
    *_, fresh = run(replace(config, batches=2))
    assert_same_trace(kept, fresh, skip=("batch_seconds",))
    assert kept.loss_by_batch.shape == (2,) and kept.grad_generator_norm.shape == (2,)


def test_taped_cancelled_before_the_connectivity_map_keeps_the_trace_without_it():
    config = RunConfig(mode="taped", steps=7, batch=2, input_dim=3, hidden=4, connectivity=True)
    *_, kept = drive(config, 1)
    check_stop_keys(kept, 1, 1)
    assert "connectivity" not in kept and not kept.config.connectivity
    *_, fresh = run(replace(config, connectivity=False))
    assert_same_trace(kept, fresh)


@pytest.mark.parametrize(
    "config",
    [
        MULTIPASS,
        RunConfig(mode="batchwise", steps=4, batch=2, input_dim=3, hidden=4, batches=3),
        RunConfig(mode="train", task="adding", train_steps=10, steps=5, batch=2, hidden=3),
        RunConfig(mode="taped", steps=7, batch=2, input_dim=3, hidden=4, connectivity=True),
    ],
    ids=lambda config: config.mode,
)
def test_no_trace_without_keep_or_before_the_first_unit(config):
    items = drive(config, 1, keep=False)
    assert items and not any(isinstance(item, GradientTrace) for item in items)
    items = list(run(config, cancelled=lambda: True, keep=lambda: True))
    assert all(isinstance(item, TraceUpdate) and item.done == 0 for item in items)


def test_a_pass_whose_kernel_was_interrupted_does_not_count(monkeypatch):
    """The cancel interrupts pass 3's full forward after its truncated pass ran: the kept
    trace holds passes 1 and 2, both paths alike."""
    flag = threading.Event()
    real = multipass.pass_states
    calls = []

    def pass_states(*args):
        calls.append(1)
        if len(calls) == 3:
            interrupt.cancel_run(flag.set)
            raise tf.errors.CancelledError(None, None, "LSTM run interrupted")
        return real(*args)

    monkeypatch.setattr(multipass, "pass_states", pass_states)
    *updates, kept = run(MULTIPASS, flag.is_set, keep=lambda: True)
    assert [u.done for u in updates] == [1, 2]
    check_stop_keys(kept, 2, 5)
    monkeypatch.setattr(multipass, "pass_states", real)
    *_, fresh = run(replace(MULTIPASS, passes=2))
    assert_same_trace(kept, fresh)


@pytest.mark.parametrize("stage", ["compute_taped", "named_gradients"])
def test_a_cancel_in_the_final_computation_keeps_every_pass(monkeypatch, stage):
    """Interrupted after the last pass, in the reference or in the full backward (whose tape
    is then spent): with keep it runs again, the full path on a new tape, and gives the trace
    of all P passes; without keep, nothing."""
    flag = threading.Event()
    real = getattr(multipass, stage)

    def interrupted(*args):
        result = real(*args)  # the backward consumes the tape before the kernel is stopped
        if not flag.is_set():
            interrupt.cancel_run(flag.set)
            raise tf.errors.CancelledError(None, None, "LSTM run interrupted")
        return result

    *_, complete = run(MULTIPASS)
    monkeypatch.setattr(multipass, stage, interrupted)
    *_, kept = run(MULTIPASS, flag.is_set, keep=lambda: True)
    check_stop_keys(kept, 5, 5)
    assert_same_trace(kept, complete)
    flag.clear()
    items = list(run(MULTIPASS, flag.is_set))
    assert not any(isinstance(item, GradientTrace) for item in items)


@pytest.mark.skipif(kernels.library() is None, reason="needs the native kernels")
def test_the_kept_trace_is_not_stopped_by_the_interrupt_of_its_own_cancel(monkeypatch):
    """A caller sets the cancel flag, then interrupts the kernels (`interrupt.cancel_run`);
    the run sees the flag in between and starts its kept trace. `wait_for_cancel()` holds that
    computation until the interrupt has landed, so its kernels run to the end the first time."""
    config = RunConfig(mode="multipass", steps=4000, batch=8, input_dim=4, hidden=64, passes=3)
    flag = threading.Event()
    finals = []
    real = multipass.multipass_arrays

    def multipass_arrays(*args):
        finals.append(args)
        return real(*args)

    monkeypatch.setattr(multipass, "multipass_arrays", multipass_arrays)

    def slow_flag() -> None:
        flag.set()
        time.sleep(0.1)  # the run sees the flag well before the interrupt comes

    items = run(config, flag.is_set, keep=lambda: True)
    assert next(items).done == 1
    threading.Thread(target=interrupt.cancel_run, args=(slow_flag,)).start()
    flag.wait()
    *_, kept = items
    assert isinstance(kept, GradientTrace)
    check_stop_keys(kept, 1, 3)
    assert len(finals) == 1  # never interrupted, so never run again
