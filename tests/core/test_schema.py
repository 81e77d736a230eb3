"""The trace schema: every key a mode writes is known, unknown keys fail, per-layer keys, and
traces of earlier versions open in today's keys."""

import numpy as np
import pytest

from lstmviz.core import schema
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import TraceError
from lstmviz.engine.runner import run
from lstmviz.io.trace import GradientTrace

SMALL = dict(steps=5, batch=2, input_dim=3, hidden=4)
RUNS = {
    "taped": RunConfig(mode="taped", loss="last_mse", connectivity=True, **SMALL),
    "multipass": RunConfig(mode="multipass", passes=2, loss="seq_mse", **SMALL),
    "batchwise": RunConfig(mode="batchwise", batches=2, generator="hypernetwork", **SMALL),
    "train": RunConfig(mode="train", steps=6, batch=2, hidden=4, train_steps=3,
                       connectivity=True),
}  # fmt: skip


@pytest.fixture(scope="module")
def traces():
    return {mode: list(run(config))[-1] for mode, config in RUNS.items()}


@pytest.mark.parametrize("mode", list(RUNS))
def test_every_key_a_mode_writes_is_in_the_schema(traces, mode):
    trace = traces[mode]
    unknown = [k for k in trace.arrays if schema.lookup(k, mode) is None]
    assert not unknown
    trace.check()


@pytest.mark.parametrize("mode", list(RUNS))
def test_an_unknown_key_fails_the_check_and_the_save(traces, mode, tmp_path):
    trace = traces[mode]
    bad = GradientTrace(mode, trace.config, {**trace.arrays, "norm_h_totl": np.ones(5)})
    with pytest.raises(TraceError, match="'norm_h_totl' is not a trace key"):
        bad.check()
    with pytest.raises(TraceError, match="norm_h_totl"):
        bad.save(tmp_path / "t.npz")
    assert not list(tmp_path.iterdir())


def test_live_rows_and_final_rows_use_the_same_keys(traces):
    """Per-batch runs: the rows a live update sends are the final trace's rows."""
    items = list(run(RUNS["batchwise"]))
    live = items[-2].arrays
    for key in live:
        assert schema.role(key, "batchwise") == schema.ROWS
        np.testing.assert_array_equal(live[key], items[-1][key])


def test_roles_find_curves_and_rows(traces):
    assert schema.keys_with(schema.CURVE, traces["taped"].arrays) == [
        "norm_h_total", "norm_h_direct", "norm_c_total"]  # fmt: skip
    assert schema.keys_with(schema.ROWS, traces["train"].arrays) == ["norm_h_total_by_step"]
    assert schema.row_name("norm_h_total_by_pass") == "pass"
    assert schema.lookup("norm_h_total_by_pass")[0].joins == "norm_h_total"
    assert schema.role("connectivity") == schema.MAP


def test_per_layer_keys_have_their_own_widths():
    """Model traces: layer k's arrays are [T, B, H_k], widths differing by layer."""
    T, B = 6, 2
    arrays = {"layer_names": np.array(["bi/forward", "bi/backward", "top"]),
              "norm_h_total_by_layer": np.ones((3, T), np.float32)}  # fmt: skip
    for k, (inputs, hidden) in enumerate(((5, 4), (5, 4), (8, 3))):
        arrays[f"layer{k}_grad_h_total"] = np.ones((T, B, hidden), np.float32)
        arrays[f"layer{k}_grad_kernel"] = np.ones((inputs, 4 * hidden), np.float32)
        arrays[f"layer{k}_gates_mean"] = np.ones((4, T), np.float32)
    trace = GradientTrace("model", RunConfig(), arrays)
    trace.check()
    arrays["layer2_grad_kernel"] = np.ones((8, 4 * 4), np.float32)  # H of layer 2 is 3
    with pytest.raises(TraceError, match=r"layer2_grad_kernel.*lstm direction of 3 units"):
        trace.check()
    arrays["layer2_cell"] = np.array("gru")  # a GRU's gate blocks are 3H wide
    with pytest.raises(TraceError, match=r"layer2_grad_kernel.*gru direction .* 3·H2 = 9"):
        trace.check()
    arrays["layer2_grad_kernel"] = np.ones((8, 9), np.float32)
    arrays["layer2_gates_mean"] = np.ones((3, T), np.float32)
    trace.check()
    arrays["layer2_grad_kernel"] = np.ones((8, 12), np.float32)
    del arrays["layer2_cell"]
    arrays["layer2_gates_mean"] = np.ones((4, T), np.float32)
    # each direction keeps its own length (an encoder 15 steps, its decoder 10), but one
    arrays["layer1_grad_h_total"] = np.ones((T + 1, B, 4), np.float32)
    with pytest.raises(TraceError, match=r"axis \d \(T1\) is"):
        trace.check()


def test_traces_of_earlier_versions_open_in_todays_keys(traces, tmp_path):
    """Per-batch traces kept their norms [N, T] under the plain keys; training traces counted
    their steps in steps_done / steps_requested."""
    batchwise = traces["batchwise"]
    old = dict(batchwise.arrays)
    for name in ("norm_h_total", "norm_h_direct", "norm_c_total"):
        old[name] = old.pop(f"{name}_by_batch")
    train = traces["train"]
    old_train = {k: v for k, v in train.arrays.items() if not k.startswith("units_")}
    old_train |= {"steps_done": train["units_done"], "steps_requested": train["units_requested"]}
    for mode, arrays, expected in (("batchwise", old, batchwise), ("train", old_train, train)):
        path = tmp_path / f"{mode}.npz"
        meta = {"mode": np.array(mode), "config_json": np.array(expected.config.to_json())}
        np.savez(path, **arrays, **meta, format_version=np.array(1, np.int32))
        back = GradientTrace.load(path)
        assert sorted(back.arrays) == sorted(expected.arrays)
        for key in expected.arrays:
            np.testing.assert_array_equal(back[key], expected[key])
