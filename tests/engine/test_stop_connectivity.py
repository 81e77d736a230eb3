"""Stopping a taped run's connectivity map: the map runs in chunks and polls the cancel between
them, so Stop and Ctrl-C end it promptly; the map itself does not depend on the chunks.

References: the one-step NumPy BPTT of `tests.engine.test_train` (T backward passes, one per L_t)
and a fresh run without the map.
"""

import time
from dataclasses import replace

import numpy as np
import pytest

from lstmviz.core.config import RunConfig
from lstmviz.engine.autodiff import connectivity as connectivity_module
from lstmviz.engine.modes.taped import connectivity_map, taped_gradients
from lstmviz.engine.runner import run
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.weights import random_weights
from tests.helpers.kept_traces import assert_same_trace, check_stop_keys
from tests.helpers.processes.cli_process import CliRun, files_in
from tests.helpers.references.mode_references import np_connectivity
from tests.helpers.references.reference import assert_close

TAPED = RunConfig(mode="taped", steps=30, batch=2, input_dim=3, hidden=4, connectivity=True)


@pytest.mark.parametrize("first", [1, 7, 1000], ids=["one-step", "seven", "whole"])
def test_the_map_in_any_chunks_equals_one_step_numpy_bptt(monkeypatch, rng, first):
    """Chunks of one step each (CHUNK_SECONDS 0), or a first chunk of 7 steps, or of them all:
    the same map, against T independent NumPy BPTT passes, and bit for bit alike."""
    steps, batch, hidden = 23, 3, 5
    w = random_weights(4, hidden, rng)
    x = rng.standard_normal((steps, batch, 4)).astype(np.float32)
    target = rng.uniform(-0.5, 0.5, (steps, batch, hidden)).astype(np.float32)
    h0, c0 = (rng.uniform(-0.5, 0.5, (batch, hidden)).astype(np.float32) for _ in range(2))
    calls = []
    real = connectivity_module._chunk
    monkeypatch.setattr(connectivity_module, "_chunk", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(connectivity_module, "CHUNK_SECONDS", 0.0)
    monkeypatch.setattr(connectivity_module, "FIRST_CHUNK", first)
    c = connectivity_map(x, w, loss="seq_mse", target=target, h0=h0, c0=c0)
    assert len(calls) == {1: steps, 7: steps - 6, 1000: 1}[first]
    trace = taped_gradients(x, w, loss="seq_mse", target=target, h0=h0, c0=c0)
    ref = np_connectivity(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0, trace.grad_h_direct)
    assert_close(c, ref, what="connectivity")
    assert np.all(np.triu(c, 1) == 0)
    monkeypatch.setattr(connectivity_module, "FIRST_CHUNK", 4)
    monkeypatch.setattr(connectivity_module, "CHUNK_SECONDS", 1e9)  # the rest in one chunk
    np.testing.assert_array_equal(connectivity_map(x, w, "seq_mse", target, h0, c0), c)


def _count_chunks(monkeypatch) -> list:
    """Make the map's chunks one step each; the returned list grows by one per chunk run."""
    calls = []
    real = connectivity_module._chunk
    monkeypatch.setattr(connectivity_module, "_chunk", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(connectivity_module, "CHUNK_SECONDS", 0.0)
    monkeypatch.setattr(connectivity_module, "FIRST_CHUNK", 1)
    return calls


def test_a_cancel_during_the_map_stops_it_and_keeps_the_trace_without_it(monkeypatch):
    calls = _count_chunks(monkeypatch)
    *updates, kept = run(TAPED, lambda: len(calls) >= 3, keep=lambda: True)
    assert len(calls) == 3  # the next poll, after the third chunk, stopped the map
    assert [u.message for u in updates][-1] == "computing the connectivity map…"
    assert isinstance(kept, GradientTrace) and kept.check() is kept
    check_stop_keys(kept, 1, 1)
    assert "connectivity" not in kept and not kept.config.connectivity
    *_, fresh = run(replace(TAPED, connectivity=False))
    assert_same_trace(kept, fresh)


def test_a_cancel_during_the_map_without_keep_ends_the_run_without_a_trace(monkeypatch):
    calls = _count_chunks(monkeypatch)
    items = list(run(TAPED, lambda: len(calls) >= 2))
    assert len(calls) == 2
    assert items and all(isinstance(item, TraceUpdate) for item in items)


def test_a_map_not_cancelled_runs_every_chunk_to_the_end(monkeypatch):
    calls = _count_chunks(monkeypatch)
    *_, trace = run(TAPED, lambda: False, keep=lambda: True)
    assert len(calls) == TAPED.steps and trace.connectivity.shape == (30, 30)
    assert "stopped" not in trace and trace.config.connectivity


# --- the command line: Ctrl-C during a map of minutes -----------------------------------------

# the whole map: minutes on 2 cores, far longer than the test waits
LONG_MAP = ["--mode", "taped", "--steps", "3000", "--batch", "8", "--hidden", "32",
            "--connectivity"]  # fmt: skip


@pytest.mark.slow
@pytest.mark.serial  # times the exit after Ctrl-C: alone under xdist
def test_ctrl_c_during_the_map_keeps_the_trace_without_it_at_once(tmp_path):
    run = CliRun([*LONG_MAP, "--keep-partial", "--out", "t.npz"], tmp_path)
    run.wait_for("computing the connectivity map")
    time.sleep(2.0)  # past the tracing of the map's chunk
    code, elapsed = run.interrupt()
    text = run.text()
    assert code == 130, text
    # the bound leaves room for a busy machine's exit
    assert elapsed < 10, (elapsed, text)
    assert "lstmviz: stopping (keeping the trace without its connectivity map); press " in text
    assert "lstmviz: interrupted during the connectivity map; kept the trace without the map " \
           "in t.npz\n" in text  # fmt: skip
    assert "Traceback" not in text and files_in(tmp_path) == {"t.npz"}
    trace = GradientTrace.load(tmp_path / "t.npz")  # runs GradientTrace.check too
    assert "connectivity" not in trace and not trace.config.connectivity
    check_stop_keys(trace, 1, 1)
    assert trace.grad_h_total.shape == (3000, 8, 32)


@pytest.mark.slow
@pytest.mark.serial  # times the exit after Ctrl-C: alone under xdist
def test_ctrl_c_during_the_map_without_keep_stops_it_and_writes_nothing(tmp_path):
    run = CliRun([*LONG_MAP, "--out", "t.npz"], tmp_path)
    run.wait_for("computing the connectivity map")
    time.sleep(2.0)
    code, elapsed = run.interrupt()
    text = run.text()
    assert code == 130 and elapsed < 10, (elapsed, text)
    assert text.endswith("lstmviz: stopping (nothing will be written); press Ctrl-C again to "
                         "quit at once\nlstmviz: interrupted; nothing written\n"), text  # fmt: skip
    assert files_in(tmp_path) == set()


def test_a_training_runs_map_stops_between_its_chunks():
    """A training run that completed its steps, stopped during its connectivity map: with keep
    the trace of every step without the map (as a taped run's); without keep nothing."""
    from lstmviz.engine.modes import train as train_module

    config = RunConfig(mode="train", task="adding", train_steps=3, steps=6, batch=3, hidden=4,
                       connectivity=True)  # fmt: skip
    mapping = []
    real = train_module.connectivity

    def watched(arrays, cancelled=bool):
        mapping.append(1)
        return real(arrays, cancelled)

    for keep in (True, False):
        mapping.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(train_module, "connectivity", watched)
            items = list(train_module.run_train(config, cancelled=lambda: bool(mapping),
                                                keep=lambda k=keep: k))  # fmt: skip
        traces = [item for item in items if isinstance(item, GradientTrace)]
        assert mapping == [1]
        if not keep:
            assert traces == []
            continue
        (trace,) = traces
        trace.check()
        assert "connectivity" not in trace and not trace.config.connectivity
        assert str(trace.stopped) == "cancelled" and int(trace.units_done) == 3
        full = train_module.train(task="adding", train_steps=3, steps=6, batch=3, hidden=4)
        np.testing.assert_array_equal(trace.loss_by_step, full.loss_by_step)
