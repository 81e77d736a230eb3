"""The taped while-loop engine: dL/dh_t and dL/dc_t at every step, direct and total.

`taped_gradients` is the API; `run_taped` the generator the CLI and the GUI drive.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import numpy as np

from lstmviz.config import RunConfig
from lstmviz.engine.arrays import add_norms, problem_arrays
from lstmviz.engine.cell import lstm_sequence
from lstmviz.engine.connectivity import connectivity
from lstmviz.engine.losses import hidden_loss
from lstmviz.engine.problem import Problem, check_problem, seeded_problem
from lstmviz.engine.tfload import tf
from lstmviz.trace import GradientTrace, TraceUpdate
from lstmviz.weights import LSTMWeights

_GRAD_KEYS = (
    "grad_h_direct",
    "grad_h_total",
    "grad_c_total",
    "grad_kernel",
    "grad_recurrent_kernel",
    "grad_bias",
    "grad_h0",
    "grad_c0",
)
_SPEC = tf.TensorSpec


def signature(
    batch: int | None = None, input_dim: int | None = None, hidden: int | None = None
) -> tuple[tf.TensorSpec, ...]:
    """Input specs (x, kernel, recurrent_kernel, bias, h0, c0, target) of a compiled run.

    T is always free; B, I and H are free when None. Fixed B, I, H give the loops static
    shapes, which TensorFlow turns into cheaper slicing (~5% at T=500 B=64 H=128); a new B, I
    or H then traces again (~0.7 s), a new T does not.
    """
    gates = None if hidden is None else 4 * hidden
    return (
        _SPEC([None, batch, input_dim], tf.float32),  # x [T, B, I]
        _SPEC([input_dim, gates], tf.float32),  # kernel [I, 4H]
        _SPEC([hidden, gates], tf.float32),  # recurrent_kernel [H, 4H]
        _SPEC([gates], tf.float32),  # bias [4H]
        _SPEC([batch, hidden], tf.float32),  # h0 [B, H]
        _SPEC([batch, hidden], tf.float32),  # c0 [B, H]
        _SPEC(None, tf.float32),  # target (any rank; unused by mean_h)
    )


SIGNATURE = signature()  # every dimension free


def graph_step_norm(g: tf.Tensor) -> tf.Tensor:
    """[T, B, H] -> [T] (TensorFlow, float32): sqrt of the sum of squares over batch and units;
    `arrays.exact_norm` fixes the steps where the squares overflow."""
    return tf.sqrt(tf.reduce_sum(tf.square(g), axis=[1, 2]))


@functools.lru_cache(maxsize=8)  # a long GUI session tries many shapes; keep the recent ones
def taped_step_function(loss: str, batch: int, input_dim: int, hidden: int) -> Callable:
    """The compiled forward + backward for `loss` on x [T, batch, input_dim] with `hidden`
    units (traced once per B, I, H; any T)."""

    def taped(x, kernel, recurrent_kernel, bias, h0, c0, target):
        probe_h = tf.zeros([tf.shape(x)[0], tf.shape(h0)[0], tf.shape(h0)[1]])
        probe_c = tf.zeros_like(probe_h)
        sources = [probe_h, probe_c, kernel, recurrent_kernel, bias, h0, c0]
        with tf.GradientTape() as tape:
            tape.watch(sources)
            h, c = lstm_sequence(x, h0, c0, kernel, recurrent_kernel, bias, probe_h, probe_c)
            value = hidden_loss(loss, h, target)
        grads = tape.gradient(
            value, [h, *sources], unconnected_gradients=tf.UnconnectedGradients.ZERO
        )
        # Per-step norms of grad_h_total, grad_h_direct, grad_c_total [3, T] (float32; see
        # arrays.exact_norm for overflow), here rather than in NumPy: multi-threaded, and no
        # pass over the big arrays after the run.
        norms = tf.stack([graph_step_norm(g) for g in (grads[1], grads[0], grads[2])])
        return value, h, c, grads, norms

    return tf.function(taped, input_signature=signature(batch, input_dim, hidden))


def compute_taped(problem: Problem, loss: str) -> dict[str, np.ndarray]:
    """Run the compiled function on a checked problem; return the trace arrays (NumPy)."""
    w = problem.weights
    target = np.zeros([0], np.float32) if problem.target is None else problem.target
    _, batch, input_dim = problem.x.shape
    step = taped_step_function(loss, batch, input_dim, w.hidden)
    value, h, c, grads, norms = step(
        problem.x, w.kernel, w.recurrent_kernel, w.bias, problem.h0, problem.c0, target
    )
    # np.asarray shares the tensors' buffers (read-only); .numpy() would copy each [T, B, H].
    arrays = problem_arrays(problem)
    arrays.update(loss=np.float32(value), h=np.asarray(h), c=np.asarray(c))
    arrays.update({key: np.asarray(g) for key, g in zip(_GRAD_KEYS, grads, strict=True)})
    norm_keys = ("norm_h_total", "norm_h_direct", "norm_c_total")
    arrays.update(zip(norm_keys, np.asarray(norms), strict=True))
    add_norms(arrays)
    return arrays


def config_for(mode: str, problem: Problem, loss: str, **extra) -> RunConfig:
    """A RunConfig describing a run whose arrays came from the API rather than a seed."""
    steps, batch, input_dim = problem.x.shape
    return RunConfig(
        mode=mode,
        steps=int(steps),
        batch=int(batch),
        input_dim=int(input_dim),
        hidden=problem.weights.hidden,
        loss=loss,
        **extra,
    )


def taped_gradients(
    x,
    weights: LSTMWeights,
    loss: str = "mean_h",
    target=None,
    h0=None,
    c0=None,
) -> GradientTrace:
    """Gradients of `loss` with respect to every state of an LSTM over x [T, B, I] (time-major).

    Returns a GradientTrace with h, c [T, B, H]; grad_h_direct (the partial ∂L/∂h_t through the
    stacked states only), grad_h_total and grad_c_total (dL/dh_t, dL/dc_t through the
    recurrence); grad_kernel, grad_recurrent_kernel, grad_bias, grad_h0, grad_c0; the norms
    norm_h_total, norm_h_direct, norm_c_total [T]; and loss. h0/c0 default to zeros.
    """
    problem = check_problem(x, weights, loss, target, h0, c0)
    return GradientTrace("taped", config_for("taped", problem, loss), compute_taped(problem, loss))


def connectivity_map(
    x,
    weights: LSTMWeights,
    loss: str = "mean_h",
    target=None,
    h0=None,
    c0=None,
) -> np.ndarray:
    """C [T, T] with C[t, s] = ‖∂L_t/∂h_s‖ (s ≤ t; zero above the diagonal), L_t the step-t
    part of `loss`; see `lstmviz.engine.connectivity`. Arguments as `taped_gradients`."""
    problem = check_problem(x, weights, loss, target, h0, c0)
    return connectivity(compute_taped(problem, loss))


def run_taped(
    config: RunConfig, problem: Problem | None = None, cancelled: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Generator: one TraceUpdate when it starts, then the GradientTrace (with `connectivity`
    [T, T] when `config.connectivity`).

    The problem defaults to the one seeded by `config`. `cancelled` is checked before the run
    starts and before the connectivity map; inside the run only the native kernels stop
    (`interrupt.interrupt()`, then `runner.run` ends the run quietly).
    """
    problem = problem or seeded_problem(config)
    yield TraceUpdate(0, 1, f"taped while-loop, T={problem.x.shape[0]}")
    if cancelled():
        return
    arrays = compute_taped(problem, config.loss)
    yield TraceUpdate(1, 1, "done", {k: arrays[k] for k in ("norm_h_total", "norm_h_direct")})
    if config.connectivity:
        if cancelled():
            return
        arrays["connectivity"] = connectivity(arrays)
    yield GradientTrace("taped", config, arrays)
