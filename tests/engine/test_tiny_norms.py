"""Per-step norms of vanishing gradients: every mode's norm[t] equals the L2 norm of its own
gradient array at step t, also where that gradient is below 1e-19 and the squares of its
entries underflow float32 (the run below has ~140 such steps out of 300); and in model mode
where they overflow (finite gradients above 1e19 are not NaN/Inf steps).

The expected norms are the trace's own float32 arrays summed in float64 NumPy; the arrays
themselves are checked against float64 BPTT in test_independent_checks.py.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from lstmviz.engine.modes.batchwise import batchwise_gradients
from lstmviz.engine.modes.model import model_gradients
from lstmviz.engine.modes.multipass import multipass_gradients
from lstmviz.engine.modes.taped import connectivity_map, taped_gradients
from lstmviz.engine.modes.train import train
from lstmviz.engine.native import kernels
from lstmviz.weights import random_weights
from tests.helpers.kernel_choice import kernel as kernel  # the fixture: both LSTM kernels

T, B, I, H = 300, 2, 3, 8  # last_mse from step T-1: dL/dh_t falls below 1e-19 by t ~ 160


def expected_norms(grad) -> np.ndarray:
    """[..., T, B, H] -> [..., T]: sqrt of the sum of squares in float64, rounded to float32."""
    g = np.asarray(grad, np.float64)
    return np.sqrt((g * g).sum(axis=(-2, -1))).astype(np.float32)


def assert_norms(norm, grad, what: str) -> None:
    """norm[t] equals the norm of grad[t] at every step, to 1e-5 of that step's own norm (zero
    exactly where grad[t] is zero), and the case holds steps whose squares underflow."""
    expected = expected_norms(grad)
    assert ((expected > 0) & (expected < 1e-19)).sum() >= 20, f"{what}: no vanishing steps"
    np.testing.assert_allclose(np.asarray(norm), expected, rtol=1e-5, atol=0, err_msg=what)


@pytest.fixture
def case():
    rng = np.random.default_rng(5)
    w = random_weights(I, H, rng)
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    return x, w, rng.uniform(-0.5, 0.5, (B, H))


def test_taped_norms_of_vanishing_gradients(kernel, case):  # noqa: F811
    x, w, target = case
    trace = taped_gradients(x, w, loss="last_mse", target=target)
    kernel.ran(trace)
    assert_norms(trace.norm_h_total, trace.grad_h_total, "norm_h_total")
    assert_norms(trace.norm_c_total, trace.grad_c_total, "norm_c_total")


def test_a_step_traced_with_the_loops_is_not_taken_for_exact(case, monkeypatch):
    """The compiled step is kept per kernel: the while-loops' graph (float32 norms, which NumPy
    corrects) is not run again once the native kernels (exact norms, kept as they are) are
    back; a reused graph would show norms of 0 at the vanishing steps."""
    if kernels.library() is None:
        pytest.skip(kernels.status())
    x, w, target = case
    loaded = kernels.library
    monkeypatch.setattr(kernels, "library", lambda: None)
    loops = taped_gradients(x, w, loss="last_mse", target=target)
    monkeypatch.setattr(kernels, "library", loaded)
    fast = taped_gradients(x, w, loss="last_mse", target=target)
    assert (str(loops["lstm_kernel"]), str(fast["lstm_kernel"])) == ("while_loop", "native")
    for trace in (loops, fast):
        assert_norms(trace.norm_h_total, trace.grad_h_total, str(trace["lstm_kernel"]))


def test_connectivity_of_vanishing_gradients(case):
    """last_mse: the map's last row is ‖∂L/∂h_s‖, the norms of dL/dh_s."""
    x, w, target = case
    trace = taped_gradients(x, w, loss="last_mse", target=target)
    c = connectivity_map(x, w, loss="last_mse", target=target)
    assert_norms(c[-1], trace.grad_h_total, "connectivity[T-1]")


def test_multipass_norms_of_vanishing_gradients(kernel, case):  # noqa: F811
    x, w, _ = case
    rng = np.random.default_rng(6)
    x_passes = np.stack([x, rng.standard_normal(x.shape).astype(np.float32)])  # [2, T, B, I]
    target = rng.uniform(-0.5, 0.5, (2, B, H))
    trace = multipass_gradients(x_passes, w, loss="last_mse", target=target)
    kernel.ran(trace)
    for kind in ("total", "truncated", "reference"):
        assert_norms(trace[f"norm_h_{kind}"], trace[f"grad_h_{kind}"], f"norm_h_{kind}")
    assert_norms(trace.norm_c_truncated, trace.grad_c_truncated, "norm_c_truncated")
    for kind in ("total", "truncated"):
        rows = trace[f"norm_h_{kind}_by_pass"]
        np.testing.assert_array_equal(rows.reshape(-1), trace[f"norm_h_{kind}"])


def test_batchwise_norms_of_vanishing_gradients(case):
    x, w, target = case
    trace = batchwise_gradients(x[None], [w], loss="last_mse", target=target[None])
    assert_norms(trace.norm_h_total_by_batch[0], trace.grad_h_total[0], "norm_h_total_by_batch")


def test_training_norms_of_vanishing_gradients():
    """The adding task's loss on the last step: the row of step 0 is the norm of its own
    dL/dh_t (step0_grad_h_total), and the final trace's norm that of grad_h_total."""
    trace = train(task="adding", train_steps=2, steps=T, batch=B, hidden=H, seed=1)
    assert_norms(trace.norm_h_total_by_step[0], trace.step0_grad_h_total, "by_step[0]")
    assert_norms(trace.norm_h_total, trace.grad_h_total, "norm_h_total")


def vanishing_model_trace(x, cell: str = "LSTM"):
    """Model mode on `cell`(H) → Dense(1) over x [T, B, I] (batch-major for Keras), mse."""
    keras.utils.set_random_seed(2)
    layer = getattr(keras.layers, cell)(H)
    model = keras.Sequential([keras.Input((T, I)), layer, keras.layers.Dense(1)])
    model.compile(loss="mse")
    batch_major = np.ascontiguousarray(np.swapaxes(x, 0, 1))
    return model_gradients(model, batch_major, np.ones((B, 1), np.float32))


@pytest.mark.parametrize("cell", ["LSTM", "GRU", "SimpleRNN"])
def test_model_norms_of_vanishing_gradients(kernel, case, cell):  # noqa: F811
    """Each cell's backward (native: the norms it sums as it writes dL/dh_t, a step summed
    again in double where float squares underflow)."""
    trace = vanishing_model_trace(case[0], cell)
    if cell == "LSTM":  # the fixture counts the LSTM's op
        kernel.ran(trace)
    assert str(trace["lstm_kernel"]) == kernel.name
    for key in ("h_total", "c_total") if cell == "LSTM" else ("h_total",):
        grad = trace[f"layer0_grad_{key}"]
        assert_norms(trace[f"norm_{key}_by_layer"][0], grad, f"norm_{key}_by_layer")


def test_model_saliency_of_vanishing_gradients(kernel, case):  # noqa: F811
    """saliency [B, T] is the norm over E of grad_input [T, B, E] at every step (native: the
    per-step norms op over its rows; while-loops: TensorFlow's in float64)."""
    trace = vanishing_model_trace(case[0])
    kernel.ran(trace)
    g = np.asarray(trace.grad_input, np.float64)
    expected = np.sqrt((g * g).sum(axis=-1)).T.astype(np.float32)  # [B, T]
    assert ((expected > 0) & (expected < 1e-19)).sum() >= 20
    np.testing.assert_allclose(trace.saliency, expected, rtol=1e-5, atol=0)


def test_model_norms_of_exploding_gradients(case):
    """A head of weights ~1e12 makes dL/dh_t ~1e24: finite, but its float32 squares overflow;
    the norms are still those of the arrays and no step counts as NaN/Inf."""
    x, _, _ = case
    keras.utils.set_random_seed(2)
    model = keras.Sequential([keras.Input((6, I)), keras.layers.LSTM(H), keras.layers.Dense(1)])
    model.compile(loss="mse")
    head, bias = model.layers[-1].get_weights()
    model.layers[-1].set_weights([np.full_like(head, 1e12), bias])
    batch_major = np.ascontiguousarray(np.swapaxes(x[:6], 0, 1))
    trace = model_gradients(model, batch_major, np.zeros((B, 1), np.float32))
    grad = trace["layer0_grad_h_total"]
    assert np.isfinite(grad).all() and np.abs(grad).max() > 1e20
    np.testing.assert_allclose(trace.norm_h_total_by_layer[0], expected_norms(grad), rtol=1e-5)
    assert len(trace.nonfinite_steps) == 0
