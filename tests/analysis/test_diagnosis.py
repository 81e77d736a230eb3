"""The diagnosis (lstmviz.analysis) on cases known in closed form.

- An LSTM with zero kernels, the input gate shut and the output gate open: dL/dh_t = 0 before
  the loss step (nothing carries h forward), and dL/dc_t = f · dL/dc_{t+1} with f = σ(b_f), so
  ‖dL/dc_t‖ falls by exactly σ(b_f) per step back from a loss on the last step.
- Zero inputs, h0 = c0 = 0, the forget gate shut, the input and output gates open and the
  candidate's recurrent weights a·I: the state stays 0, and dL/dh_{t-1} = a · i · o · dL/dh_t
  ≈ a · dL/dh_t: the gradient explodes by a per step back.
Both are computed by the real engine (`taped_gradients`); the rest are synthetic traces whose
norms are exact geometric series."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from lstmviz.analysis.decay import lag_profile, profile_decay
from lstmviz.analysis.diagnosis import snr, units_unreached
from lstmviz.core.config import RunConfig
from lstmviz.io.trace import GradientTrace

T, B, I, H = 24, 3, 2, 4


def _weights(b_i, b_f, b_o, recurrent_g=0.0):
    """LSTMWeights with zero kernels except the candidate's recurrent block (a·I), and these
    gate biases (b_g = 0)."""
    from lstmviz import LSTMWeights

    recurrent = np.zeros((H, 4 * H), np.float32)
    recurrent[:, 2 * H : 3 * H] = recurrent_g * np.eye(H)
    bias = np.concatenate([np.full(H, b) for b in (b_i, b_f, 0.0, b_o)]).astype(np.float32)
    return LSTMWeights(np.zeros((I, 4 * H), np.float32), recurrent, bias)


@pytest.fixture(scope="module")
def engine_traces():
    import lstmviz

    rng = np.random.default_rng(0)
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    target = rng.standard_normal((B, H)).astype(np.float32)
    b_f = math.log(4.0)  # σ(b_f) = 0.8
    forgetting = lstmviz.taped_gradients(x, _weights(-20.0, b_f, 20.0), loss="last_mse",
                                         target=target)  # fmt: skip
    exploding = lstmviz.taped_gradients(np.zeros_like(x), _weights(20.0, -20.0, 20.0, 2.0),
                                        loss="last_mse", target=target)  # fmt: skip
    return forgetting, exploding


def test_cell_gradient_falls_by_the_forget_gate_per_step(engine_traces):
    d = engine_traces[0].diagnosis.layer("lstm")
    assert d.c.decay_per_step == pytest.approx(0.8, rel=1e-5)
    assert d.c.steps_per_decade == pytest.approx(math.log(10) / -math.log(0.8), rel=1e-4)
    assert d.c.trend == "vanishing"
    # 0.8^n ≥ 1e-3 while n ≤ 30.96: every step of T = 24 is reached
    assert d.c.reach == T
    assert d.h.trend == "not reached" and d.h.decay_per_step is None  # zero recurrent kernel
    # every forget gate is σ(b_f): the timescale −1/ln 0.8 per unit, and the measured one too
    np.testing.assert_allclose(d.forget_timescale, -1 / math.log(0.8), rtol=1e-5)
    np.testing.assert_allclose(d.measured_timescale, -1 / math.log(0.8), rtol=1e-4)
    assert d.gates_saturated["i"] == 1.0 and d.gates_saturated["o"] == 1.0
    assert d.gates_saturated["f"] == 0.0
    assert "not reached" in d.verdict and "t=23" in d.verdict


def test_exploding_gradient_grows_by_the_recurrent_gain(engine_traces):
    d = engine_traces[1].diagnosis.layer("lstm")
    assert d.h.decay_per_step == pytest.approx(2.0, rel=1e-5)
    assert d.h.trend == "exploding"
    assert d.h.exceeds_at == T - 1 - 10  # 2^10 = 1024 > 1000 ten steps back
    assert d.h.reach == T
    assert d.verdict.startswith("exploding: grows 10× every 3.32 steps")
    assert f"t={T - 11}" in d.verdict


def test_to_dict_is_the_json_contract(engine_traces):
    out = json.loads(json.dumps(engine_traces[0].diagnosis.to_dict()))
    assert set(out) == {"T", "layers"} and out["T"] == T
    (layer,) = out["layers"]
    assert set(layer) == {"name", "cell", "h", "c", "units_unreached", "gates_saturated",
                          "anchors", "verdict"}  # fmt: skip
    assert layer["anchors"] == []  # the loss on one step: no anchor followed
    for d in (layer["h"], layer["c"]):
        assert set(d) == {"decay_per_step", "steps_per_decade", "reach", "trend", "anchor"}
        assert d["anchor"] is None
    assert layer["h"]["decay_per_step"] is None and layer["h"]["trend"] == "not reached"
    assert set(layer["gates_saturated"]) == {"i", "f", "g", "o"}


def _model_trace(rows_h, rows_c=None, direct=None, names=None, cells=None) -> GradientTrace:
    """A model-mode trace holding only norms [L, T] (and each direction's cell kind)."""
    rows_h = np.asarray(rows_h, np.float32)
    L, t = rows_h.shape
    names = names or [f"layer{k}" for k in range(L)]
    if direct is None:  # the loss on the last step
        direct = np.zeros_like(rows_h)
        direct[:, -1] = rows_h[:, -1]
    arrays = {"layer_names": np.array(names), "norm_h_total_by_layer": rows_h,
              "norm_h_direct_by_layer": np.asarray(direct, np.float32),
              "norm_c_total_by_layer": np.asarray(rows_h if rows_c is None else rows_c,
                                                  np.float32)}  # fmt: skip
    for k, cell in enumerate(cells or []):
        arrays[f"layer{k}_cell"] = np.array(cell)
    return GradientTrace("model", RunConfig(mode="model", steps=t), arrays)


def test_backward_direction_and_gru_without_a_cell_state():
    n = np.arange(30)
    forward = 0.5 ** n[::-1]  # falls going back from t = 29
    backward = 0.9**n  # a backward direction: its loss enters at t = 0, it falls towards T-1
    direct = np.zeros((2, 30))
    direct[0, -1], direct[1, 0] = 1.0, 1.0
    c = np.stack([forward, np.full(30, np.nan)])
    trace = _model_trace([forward, backward], c, direct, ["bi/forward", "bi/backward"],
                         ["lstm", "gru"])  # fmt: skip
    diag = trace.diagnosis
    fw, bw = diag.layers
    assert fw.h.decay_per_step == pytest.approx(0.5) and fw.h.reach == 10  # 0.5^9 ≥ 1e-3 > 0.5^10
    assert bw.reverse and bw.h.decay_per_step == pytest.approx(0.9) and bw.h.loss_step == 0
    assert bw.c is None and bw.cell == "gru" and "c" not in bw.to_dict()
    assert fw.h.trend == "vanishing" and bw.h.trend == "vanishing"


def test_go_backwards_found_from_where_the_gradient_is():
    n = np.arange(12)
    direct = np.zeros((1, 12))
    direct[0, 0] = 1.0
    d = _model_trace([0.7**n], direct=direct, names=["rev"]).diagnosis.layers[0]
    assert d.reverse and d.h.decay_per_step == pytest.approx(0.7)


def test_stable_not_reached_and_every_step_a_loss():
    n = np.arange(50)
    stable = 0.99 ** n[::-1]  # 0.99^49 = 0.61: less than 10× over the span
    flat_zero = np.zeros(50)
    flat_zero[-1] = 1.0
    diag = _model_trace([stable, flat_zero, stable], direct=np.stack(
        [np.eye(50)[-1], np.eye(50)[-1], np.ones(50)])).diagnosis  # fmt: skip
    s, z, e = diag.layers
    assert s.h.trend == "stable" and s.h.reach == 50
    assert s.h.decay_per_step == pytest.approx(0.99)
    assert z.h.trend == "not reached" and z.h.reach == 1
    assert e.h.trend is None and e.h.decay_per_step is None
    assert "cannot be separated" in e.verdict


def test_steps_per_decade_and_reach_of_a_geometric_series():
    d = profile_decay(0.1 ** (np.arange(10) / 4.0), full=10)  # 10× every 4 steps
    assert d.steps_per_decade == pytest.approx(4.0)
    assert d.reach == 10  # 0.1^(n/4) ≥ 1e-3 while n ≤ 12: never falls that far in 10 steps
    assert profile_decay(0.1 ** (np.arange(20) / 4.0), full=20).reach == 13
    grow = profile_decay(1.5 ** np.arange(30), full=30)
    assert grow.trend == "exploding" and grow.exceeds_at == 18  # 1.5^18 = 1478 > 1000 > 1.5^17


def test_nonfinite_step_is_named():
    n = np.arange(20)
    row = (0.8 ** n[::-1]).astype(np.float32)
    row[5] = np.inf
    diag = _model_trace([row]).diagnosis
    assert diag.nonfinite == (5, "layer0")
    assert diag.layers[0].verdict.startswith("non-finite from t=5; vanishing")
    assert diag.table().endswith("first non-finite gradient norm: t=5 in layer0")


def test_connectivity_lag_profile_separates_losses_at_every_step():
    t = 16
    C = np.zeros((t, t))
    for row in range(t):
        for col in range(row + 1):
            C[row, col] = (1.0 + row) * 0.6 ** (row - col)  # each loss's own size, one decay
    np.testing.assert_allclose(lag_profile(C)[:3], [1, 0.6, 0.36])
    arrays = {"norm_h_total": np.ones(t, np.float32), "norm_h_direct": np.ones(t, np.float32),
              "connectivity": C.astype(np.float32)}  # fmt: skip
    d = GradientTrace("taped", RunConfig(steps=t), arrays).diagnosis.layers[0]
    assert d.h.decay_per_step == pytest.approx(0.6, rel=1e-5)
    assert d.h.source == "connectivity lag profile" and "lag profile" in d.verdict


def test_units_unreached_and_snr():
    g = np.ones((10, 2, 4))
    g[:, :, 0] = 0.0  # unit 0 never reached
    g[5:, :, 1] = 1e-9  # unit 1 falls below 1e-6 of the largest before the farthest tenth
    assert units_unreached(g) == 0.5
    same = np.ones((3, 4, 2))
    spread = np.stack([np.ones((4, 2)), np.array([[1.0, 1], [-1, -1], [1, 1], [-1, -1]]),
                       np.array([[2.0, 0], [0, 2], [2, 0], [0, 2]])])  # fmt: skip
    got = snr(spread)
    assert np.isnan(snr(same)).all()  # no spread: undefined, not infinite
    assert np.isnan(got[0]) and got[1] == 0.0  # mean 0: no signal
    assert got[2] == pytest.approx(2.0 / 2.0)  # ‖(1, 1)‖² / mean ‖(±1, ∓1)‖²


def test_adding_task_reach_grows_as_the_lstm_learns():
    """The adding task at T=30 (seed 0, 400 Adam steps, B=32, H=16: the fewest that learn; CPU
    deterministic): once it learns (loss from ~0.17, predicting the mean, to < 0.02), its
    gradient falls far more slowly and reaches every step. The per-step rows are the
    training trace's `norm_h_total_by_step` (`Diagnosis.layers[0].rows`)."""
    import lstmviz
    from lstmviz.analysis.diagnosis import row_series

    trace = lstmviz.train(task="adding", train_steps=400, steps=30, batch=32, hidden=16, seed=0)
    series = row_series(trace.diagnosis)["lstm"]
    early, late = slice(20, 100), slice(-40, None)
    assert np.median(trace.loss_by_step[late]) < 0.02  # it learned
    assert np.median(series["reach"][late]) == 30 > np.median(series["reach"][early])
    assert np.median(series["steps_per_decade"][late]) > 3 * np.median(
        series["steps_per_decade"][early])  # fmt: skip


def test_batchwise_joins_its_batches_and_multipass_fits_its_last_pass():
    n = np.arange(10)
    rows = np.stack([3.0 * 0.5 ** n[::-1], 4.0 * 0.5 ** n[::-1]]).astype(np.float32)
    direct = np.zeros_like(rows)
    direct[:, -1] = rows[:, -1]
    arrays = {"norm_h_total_by_batch": rows, "norm_h_direct_by_batch": direct}
    d = GradientTrace("batchwise", RunConfig(mode="batchwise", steps=10),
                      arrays).diagnosis.layers[0]  # fmt: skip
    assert d.h.decay_per_step == pytest.approx(0.5, rel=1e-6)  # of √(3² + 4²) · 0.5^n
    assert [label for label, _ in d.rows] == [1, 2]
    assert [x.decay_per_step for _, x in d.rows] == pytest.approx([0.5, 0.5], rel=1e-6)
    # three passes of 8 with a loss at each pass's end: the fit covers the last pass only
    curve = np.concatenate([np.full(8, 1e-9), np.full(8, 1e-9), 0.8 ** np.arange(8)[::-1]])
    direct = np.zeros(24)
    direct[[7, 15, 23]] = 1.0
    arrays = {"norm_h_total": curve.astype(np.float32), "norm_h_direct": direct}
    d = GradientTrace("multipass", RunConfig(mode="multipass", steps=8, passes=3),
                      arrays).diagnosis.layers[0]  # fmt: skip
    assert d.h.span == 8 and d.h.loss_step == 23
    assert d.h.decay_per_step == pytest.approx(0.8, rel=1e-5) and d.h.reach == 8
