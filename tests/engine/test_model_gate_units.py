"""Model mode's per-unit gate means and the diagnosis's gate saturation against the gates
recomputed in NumPy from the Keras layer's weights, and the diagnosis's per-unit forget-gate
timescale from them.

The reference runs the LSTM in NumPy (Keras's gate order i, f, c, o in its kernel; a masked
step carries h and c over), independent of lstmviz's cells and `gate_activity`.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

import lstmviz
from lstmviz.analysis.diagnosis import timescale

T, B, I, H = 6, 4, 2, 3


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def numpy_gates(x: np.ndarray, keep: np.ndarray, kernel, recurrent, bias) -> np.ndarray:
    """Gate activations [T, B, 4, H] (i, f, g, o) of a Keras LSTM over x [B, T, I], `keep`
    [B, T] bool (a masked step keeps h and c), float64."""
    h = np.zeros((B, H))
    c = np.zeros((B, H))
    out = []
    for t in range(T):
        z = x[:, t] @ kernel + h @ recurrent + bias
        i, f, g, o = (z[:, n * H : (n + 1) * H] for n in range(4))
        i, f, g, o = sigmoid(i), sigmoid(f), np.tanh(g), sigmoid(o)
        c_new = f * c + i * g
        h_new = o * np.tanh(c_new)
        k = keep[:, t, None]
        c, h = np.where(k, c_new, c), np.where(k, h_new, h)
        out.append(np.stack([i, f, g, o], axis=1))
    return np.stack(out)


@pytest.fixture(scope="module", params=["plain", "masked"])
def run(request):
    """(trace, reference gates [T, B, 4, H], keep [T, B]) of a tiny LSTM regression model, with
    large weights so that some gates saturate."""
    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(B, T, I)).astype(np.float32) * 2
    keep = np.ones((B, T), bool)
    layers = [keras.Input((T, I))]
    if request.param == "masked":
        keep[0, 4:] = keep[2, :2] = keep[3, 3] = False
        x[~keep] = 0.0
        layers.append(keras.layers.Masking(0.0))
    lstm = keras.layers.LSTM(H, return_sequences=True)
    model = keras.Sequential([*layers, lstm, keras.layers.Dense(1)])
    kernel, recurrent, bias = (w * 3 for w in lstm.get_weights())
    bias[H : 2 * H] = [3.0, -1.0, 0.5]  # forget biases: one unit saturated, one far from it
    lstm.set_weights([kernel, recurrent, bias])
    model.compile(loss="mse")
    y = rng.normal(size=(B, T, 1)).astype(np.float32)
    trace = lstmviz.model_gradients(model, x, y)
    gates = numpy_gates(x.astype(np.float64), keep, *(w.astype(np.float64) for w in
                                                     (kernel, recurrent, bias)))  # fmt: skip
    return trace, gates, keep.T


def test_unit_means_are_the_gates_mean_per_unit(run):
    trace, gates, keep = run
    expected = gates[keep].mean(axis=0)  # [4, H] over the unmasked (t, b)
    np.testing.assert_allclose(trace["layer0_gates_unit_mean"], expected, atol=2e-5)


def test_saturation_beyond_005(run):
    trace, gates, keep = run
    kept = gates[keep]  # [n, 4, H]
    beyond = (kept < 0.05) | (kept > 0.95)
    beyond[:, 2] = np.abs(kept[:, 2]) > 0.95  # the candidate, a tanh
    expected = beyond.mean(axis=(0, 2))
    assert expected.max() > 0 and expected.min() < 1  # a test that can fail
    np.testing.assert_allclose(trace["layer0_gates_saturated_diagnosis"], expected, atol=1e-6)
    d = trace.diagnosis.layers[0]
    np.testing.assert_allclose([d.gates_saturated[g] for g in "ifgo"], expected, atol=1e-6)


def test_step_means_and_saturation_within_001(run):
    """The per-step statistics (with the native library, one op over the activations:
    gate_stats.cc) against the NumPy gates: each gate's mean over the unmasked (b, j) at every
    step, and the fraction within 0.01 of a bound (0 where a step is all masked)."""
    trace, gates, keep = run
    saturated = (gates < 0.01) | (gates > 0.99)
    saturated[:, :, 2] = np.abs(gates[:, :, 2]) > 0.99  # the candidate, a tanh
    weight = keep[:, :, None, None].astype(np.float64)  # [T, B, 1, 1]
    count = np.maximum(weight.sum(axis=1) * H, 1)  # [T, 1, 1]
    for key, values in (("gates_mean", gates), ("gates_saturated", saturated)):
        expected = ((values * weight).sum(axis=(1, 3)) / count[:, :, 0]).T  # [4, T]
        np.testing.assert_allclose(trace[f"layer0_{key}"], expected, atol=2e-6, err_msg=key)
    fraction = trace["layer0_gates_saturated"]
    assert fraction.max() > 0 and fraction.min() < 1  # a test that can fail


def test_per_unit_forget_timescale(run):
    trace, gates, keep = run
    forget = gates[keep][:, 1].mean(axis=0)  # [H]
    d = trace.diagnosis.layers[0]
    assert d.forget_timescale.shape == (H,)
    np.testing.assert_allclose(d.forget_timescale, -1 / np.log(forget), rtol=1e-4)
    np.testing.assert_allclose(d.forget_timescale, timescale(trace["layer0_gates_unit_mean"][1]))


def test_traces_without_the_keys_fall_back(run):
    trace, _, _ = run
    arrays = {k: v for k, v in trace.arrays.items()
              if k not in ("layer0_gates_unit_mean", "layer0_gates_saturated_diagnosis")}
    old = lstmviz.GradientTrace(trace.mode, trace.config, arrays).check()
    d = old.diagnosis.layers[0]
    assert d.forget_timescale.shape == (1,)
    mean_saturated = trace["layer0_gates_saturated"].mean(axis=1)
    np.testing.assert_allclose([d.gates_saturated[g] for g in "ifgo"], mean_saturated,
                               rtol=1e-6)  # fmt: skip
    assert any("gates_unit_mean" in note for note in d.notes)
