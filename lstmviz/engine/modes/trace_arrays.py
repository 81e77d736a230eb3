"""Trace building shared by every mode: the problem's arrays and the per-timestep norms."""

from __future__ import annotations

import numpy as np

from lstmviz.engine.native.kernels import kernel_name
from lstmviz.engine.problem.seeded import Problem
from lstmviz.io.trace import step_norm

# gradient key -> norm key; a mode adds its own pairs (truncated, reference, ...).
NORMS = {
    "grad_h_total": "norm_h_total",
    "grad_h_direct": "norm_h_direct",
    "grad_c_total": "norm_c_total",
}


def problem_arrays(problem: Problem) -> dict[str, np.ndarray]:
    """x, kernel, recurrent_kernel, bias, h0, c0, (when the loss has one) target, and
    lstm_kernel: which implementation computed the LSTM ("native" or "while_loop")."""
    arrays = {
        "lstm_kernel": np.array(kernel_name()),
        "x": problem.x,
        "kernel": problem.weights.kernel,
        "recurrent_kernel": problem.weights.recurrent_kernel,
        "bias": problem.weights.bias,
        "h0": problem.h0,
        "c0": problem.c0,
    }
    if problem.target is not None:
        arrays["target"] = problem.target
    return arrays


# A graph's float32 norm below this is recomputed: squares of entries under 1.1e-19 fall below
# float32's smallest normal number (1.2e-38) and lose digits or flush to zero, so a vanishing
# gradient of 1e-30 would show a norm of 0. Above it, what the B·H ≤ 2^30 entries of a step can
# lose (< 2^30 · 1.2e-38) is less than 1e-9 of the squared norm.
TINY_NORM = 1e-10


def exact_norm(norm: np.ndarray, grad, scale: np.float32 | None = None,
               exact: bool = False) -> np.ndarray:  # fmt: skip
    """A float32 per-step norm [..., T] computed in a graph, with the entries float32 cannot
    be trusted with recomputed from grad [..., T, B, H] in float64: non-finite ones (the squares
    overflow for |g| > 1e19) and those below TINY_NORM (they underflow). Only NaN or Inf in grad
    then give a non-finite norm, and a norm is zero only where grad is. With `scale`, `norm` is
    that of scale·grad (float32, as a trace stores it) and grad is unscaled. `exact`: the graph
    summed those steps exactly itself (the native ops, `kernels.exact_norms`), and `norm` is
    kept as it is."""
    if exact and scale is None:
        return norm
    redo = ~(np.isfinite(norm) & (norm >= TINY_NORM))
    if not redo.any():
        return norm
    grad = np.asarray(grad)
    zero = redo & (norm == 0)
    if zero.any():  # steps without a nonzero entry (a direct gradient off the loss's steps)
        redo &= ~zero | grad.reshape(*grad.shape[:-2], -1).any(axis=-1)
        if not redo.any():
            return norm
    norm = np.array(norm, np.float32)
    for where in _runs(redo):  # slices of a [T] norm, no copies of grad's rows
        rows = grad[where]
        norm[where] = step_norm(rows if scale is None else scale * rows)
    return norm


def _runs(redo: np.ndarray) -> list:
    """Indexes of grad's steps where `redo` [..., T] holds: for a [T] mask one slice per run of
    consecutive steps (vanishing steps come in runs), else the mask itself."""
    if redo.ndim != 1:
        return [redo]
    edges = np.flatnonzero(np.diff(np.concatenate([[False], redo, [False]]).astype(np.int8)))
    return [slice(start, stop) for start, stop in zip(edges[::2], edges[1::2], strict=True)]


def add_norms(arrays: dict[str, np.ndarray], pairs: dict[str, str] = NORMS,
              exact: bool = False) -> None:  # fmt: skip
    """Add norm[t] = sqrt(sum_{b,j} g[t,b,j]^2) for each gradient present in `arrays`, and
    `nonfinite_steps` (int64): the timesteps t where any state or gradient is NaN or Inf.

    A norm already in `arrays` (float32, computed in the engine's graph) is kept, through
    `exact_norm` (`exact`: the graph's norms are exact already). States h, c [..., T, B, H]
    are scanned step by step only when a last step holds NaN or Inf: a NaN or Inf in a state
    stays in every later state (f·c + i·g and o·tanh(c) keep it), so finite last states mean
    finite states throughout.
    """
    bad = None
    for grad_key, norm_key in pairs.items():
        if grad_key in arrays:
            norm = arrays.get(norm_key)
            grad = arrays[grad_key]
            norm = step_norm(grad) if norm is None else exact_norm(norm, grad, exact=exact)
            arrays[norm_key] = norm
            # A norm is finite exactly when every g[t, b, j] is (it sums their squares).
            step_bad = ~np.isfinite(norm)
            bad = step_bad if bad is None else bad | step_bad
    for key in ("h", "c"):
        if key in arrays and not np.isfinite(arrays[key][..., -1, :, :]).all():
            step_bad = ~np.isfinite(arrays[key]).all(axis=(-2, -1))
            bad = step_bad if bad is None else bad | step_bad
    if bad is not None:
        # Modes with leading axes ([P, Tp], [N, T]) report the flat timestep of the sequence.
        arrays["nonfinite_steps"] = np.flatnonzero(bad.reshape(-1, bad.shape[-1]).any(axis=0))
