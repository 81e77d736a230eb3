"""Trace building shared by every mode: the problem's arrays and the per-timestep norms."""

from __future__ import annotations

import numpy as np

from lstmviz.engine.problem import Problem
from lstmviz.trace import step_norm

# gradient key -> norm key; a mode adds its own pairs (truncated, reference, ...).
NORMS = {
    "grad_h_total": "norm_h_total",
    "grad_h_direct": "norm_h_direct",
    "grad_c_total": "norm_c_total",
}


def problem_arrays(problem: Problem) -> dict[str, np.ndarray]:
    """x, kernel, recurrent_kernel, bias, h0, c0 and (when the loss has one) target."""
    arrays = {
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


def add_norms(arrays: dict[str, np.ndarray], pairs: dict[str, str] = NORMS) -> None:
    """Add norm[t] = sqrt(sum_{b,j} g[t,b,j]^2) for each gradient present in `arrays`."""
    for grad_key, norm_key in pairs.items():
        if grad_key in arrays:
            arrays[norm_key] = step_norm(arrays[grad_key])
