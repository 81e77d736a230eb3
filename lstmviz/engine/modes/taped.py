"""The taped engine: dL/dh_t and dL/dc_t at every step, direct and total, one LSTM under a
GradientTape (the native kernels, or the while-loops where they do not run: `cell`).

`taped_gradients` is the API; `run_taped` the generator the CLI and the GUI drive.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from lstmviz.core.config import RunConfig
from lstmviz.engine.autodiff.connectivity import connectivity
from lstmviz.engine.autodiff.gradients import HiddenLoss, compiled_step, numpy_arrays
from lstmviz.engine.modes.trace_arrays import add_norms, problem_arrays
from lstmviz.engine.native.kernels import exact_norms, kernel_name
from lstmviz.engine.problem.seeded import Problem, check_order, check_problem, seeded_problem
from lstmviz.engine.stopping import Units
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.weights import LSTMWeights


def compute_taped(problem: Problem, loss: str) -> dict[str, np.ndarray]:
    """Run the compiled step on a checked problem; return the trace arrays (NumPy)."""
    w = problem.weights
    target = np.zeros([0], np.float32) if problem.target is None else problem.target
    _, batch, input_dim = problem.x.shape
    step = compiled_step(HiddenLoss(loss), batch, input_dim, w.hidden)
    named = step(problem.x, w.kernel, w.recurrent_kernel, w.bias, problem.h0, problem.c0, target)
    arrays = problem_arrays(problem) | numpy_arrays(named)
    add_norms(arrays, exact=exact_norms())
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
    norm_h_total, norm_h_direct, norm_c_total [T]; and loss. h0/c0 [B, H] default to zeros.

    `loss`: "mean_h" (the mean of every h_t; no target), "last_mse" (MSE of h_{T-1} against
    `target` [B, H]) or "seq_mse" (of every h_t against `target` [T, B, H]). `weights`: an
    LSTMWeights in Keras's layout. The arrays are copied; bad shapes or values raise
    InputError or WeightsError naming the argument.
    """
    check_order(x, "x", "taped_gradients")
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
    part of `loss`; see `lstmviz.engine.autodiff.connectivity`. Arguments as `taped_gradients`."""
    check_order(x, "x", "connectivity_map")
    problem = check_problem(x, weights, loss, target, h0, c0)
    return connectivity(compute_taped(problem, loss))


def progress_text(steps: int) -> str:
    """The progress line of a taped run over `steps` steps, naming what computes the LSTM
    (`kernels.kernel_name()`, the trace's `lstm_kernel`)."""
    runs = "taped, native kernels" if kernel_name() == "native" else "taped while-loop"
    return f"{runs}, T={steps}"


def run_taped(
    config: RunConfig,
    problem: Problem | None = None,
    cancelled: Callable[[], bool] = bool,
    keep: Callable[[], bool] = bool,
) -> Iterator[TraceUpdate | GradientTrace]:
    """Generator: one TraceUpdate when it starts, then the GradientTrace (with `connectivity`
    [T, T] when `config.connectivity`).

    The problem defaults to the one seeded by `config`. The run is one unit of work (see
    `runner.run`): `cancelled` is checked before it, before the connectivity map and between
    the map's chunks (`connectivity`: about every 0.1 s); a run cancelled before or during the
    map keeps, when `keep()`, the trace without it.
    """
    problem = problem or seeded_problem(config)
    yield TraceUpdate(0, 1, progress_text(problem.x.shape[0]))
    units, results = Units(1, cancelled, keep), []
    for _ in units:
        units.run(lambda: results.append(compute_taped(problem, config.loss)))
    if not results:
        return
    arrays = results[0]
    # the map's T²/2 backward steps can take far longer than the run itself: say it is under way
    message = "computing the connectivity map…" if config.connectivity else "done"
    yield TraceUpdate(1, 1, message, {k: arrays[k] for k in ("norm_h_total", "norm_h_direct")})
    if config.connectivity:
        mapped = connectivity(arrays, cancelled)  # None: cancelled before or during the map
        if mapped is None:
            if not keep():
                return
            units.stopped = "cancelled"
            arrays |= units.keys()
            config = replace(config, connectivity=False)
        else:
            arrays["connectivity"] = mapped
    yield GradientTrace("taped", config, arrays)
