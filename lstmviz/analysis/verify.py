"""Check a trace's dL/dh_t by central finite differences, in float64 NumPy (no TensorFlow).

An LSTM treats batch rows independently, so nudging h_t[b, j] changes only row b from step t on:
each check re-runs one row from t to the end, which is cheap even for long sequences. Works for
any trace holding one set of weights (taped, multi-pass and training runs); the loss is rebuilt
from the trace's RunConfig as `engine/problem/losses.py` defines it (multi-pass `last_mse`:
a target per pass end; training: its task's loss on the dense read-out, at the final weights and the
last batch).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from lstmviz.core import modes
from lstmviz.core.errors import InputError
from lstmviz.io.trace import GradientTrace

# This rebuilds the loss of the modes the registry calls `verifiable`: `config.loss` on the
# LSTM's own h, or training's on a dense read-out (batchwise runs have a set of weights per
# batch, model runs a whole model).
_NEEDED = ("x", "kernel", "recurrent_kernel", "bias", "h0", "c0", "grad_h_total")


@dataclass
class Verification:
    """`entries` (t, b, j) checked; `worst_abs` = max |FD − dL/dh|; `worst_rel` divides it by
    the largest |dL/dh_t| in the trace, so it does not blow up at entries that are ~0."""

    entries: list[tuple[int, int, int]]
    worst_abs: float
    worst_rel: float

    @property
    def ok(self) -> bool:
        return self.worst_rel < 1e-3


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _row_states(zx: np.ndarray, recurrent: np.ndarray, h: np.ndarray, c: np.ndarray, start: int):
    """Run one batch row from step `start` (h, c: the state after step start-1).
    Returns h for steps start..T-1 [T-start, H] and the last c."""
    out = []
    for t in range(start, zx.shape[0]):
        i, f, g, o = np.split(zx[t] + h @ recurrent, 4)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        out.append(h)
    return np.array(out).reshape(-1, recurrent.shape[0]), c


def verify_trace(
    trace: GradientTrace | str | os.PathLike, samples: int = 8, seed: int = 0
) -> Verification:
    """Compare `samples` random entries of grad_h_total (plus its largest one) with central
    differences of the loss. `trace`: a GradientTrace or a trace file of a taped, multi-pass
    or training run (`Mode.verifiable`). Raises InputError when the trace is of another mode or
    lacks what this needs."""
    if isinstance(trace, str | os.PathLike):
        trace = GradientTrace.load(trace)
    if not isinstance(trace, GradientTrace):
        raise InputError(f"verify_trace takes a GradientTrace or a trace file, not a "
                         f"{type(trace).__name__}")  # fmt: skip
    if not modes.find(trace.mode).verifiable:
        raise InputError(f"a {trace.mode} trace cannot be verified (this check rebuilds the "
                         "loss of taped, multi-pass and training runs only)")  # fmt: skip
    if isinstance(samples, bool) or not isinstance(samples, int | np.integer) or samples < 0:
        raise InputError(f"samples must be a whole number >= 0, got {samples!r}")
    a = trace.arrays
    missing = [k for k in _NEEDED if k not in a]
    if missing:
        raise InputError(f"this trace cannot be verified (no {', '.join(missing)})")
    if np.ndim(a["kernel"]) != 2 or np.shape(a["grad_h_total"])[:2] != np.shape(a["x"])[:2]:
        raise InputError("this trace cannot be verified (one set of weights and x [T, B, I])")
    x = np.asarray(a["x"], np.float64)
    kernel, recurrent, bias = (np.asarray(a[k], np.float64) for k in _NEEDED[1:4])
    grad = np.asarray(a["grad_h_total"], np.float64)
    target = np.asarray(a["target"], np.float64) if "target" in a else None
    steps, batch, hidden = grad.shape
    loss = trace.config.loss
    if modes.find(trace.mode).trains:
        row_loss = _readout_row_loss(trace, target)
    else:
        row_loss = _hidden_row_loss(loss, target, grad.shape)
    rng = np.random.default_rng(seed)
    picks = [np.unravel_index(int(np.argmax(np.abs(grad))), grad.shape)]
    picks += zip(rng.integers(steps, size=samples), rng.integers(batch, size=samples),
                 rng.integers(hidden, size=samples), strict=True)  # fmt: skip
    entries = [(int(t), int(b), int(j)) for t, b, j in picks]
    worst, eps = 0.0, 1e-6
    for t, b, j in entries:
        zx = x[:, b] @ kernel + bias
        h_row, c_t = _row_states(
            zx[: t + 1], recurrent, *(np.asarray(a[k][b], np.float64) for k in ("h0", "c0")), 0
        )
        shifted = []
        for sign in (1.0, -1.0):
            h_t = h_row[t].copy()
            h_t[j] += sign * eps
            later, _ = _row_states(zx, recurrent, h_t, c_t, t + 1)
            shifted.append(row_loss(b, np.concatenate([h_row[:t], h_t[None], later])))
        worst = max(worst, abs((shifted[0] - shifted[1]) / (2 * eps) - grad[t, b, j]))
    scale = float(np.max(np.abs(grad))) or 1.0
    return Verification(entries, float(worst), float(worst) / scale)


def _hidden_row_loss(loss: str, target, shape: tuple[int, int, int]):
    """Row b's share of a loss on h itself (the hidden losses of `engine/problem/losses.py`), as a
    function of b and the row's h [T, H] (the other rows do not change)."""
    steps = shape[0]
    size = float(np.prod(shape))

    def row_loss(b: int, h_row: np.ndarray) -> float:
        if loss == "mean_h":
            return h_row.sum() / size
        if loss == "seq_mse":
            return np.sum((h_row - target[:, b]) ** 2) / size
        if target.ndim == 3:  # multi-pass last_mse: mean over passes of each pass end's MSE
            ends = (np.arange(len(target)) + 1) * (steps // len(target)) - 1
            return np.sum((h_row[ends] - target[:, b]) ** 2) / target.size
        return np.sum((h_row[-1] - target[b]) ** 2) / target.size

    return row_loss


def _readout_row_loss(trace: GradientTrace, target):
    """Row b's share of a training run's task loss (`engine/losses.readout_loss`): the dense
    read-out [H, O] + [O] of every step's h (target [T, B, O]) or of the last one's ([B, O]),
    mean squared error or softmax cross-entropy against one-hot targets."""
    a = trace.arrays
    if target is None or "readout_kernel" not in a:
        raise InputError("this training trace cannot be verified (no target or read-out)")
    kernel = np.asarray(a["readout_kernel"], np.float64)
    bias = np.asarray(a["readout_bias"], np.float64)
    per_step = bool(a.get("readout_per_step", target.ndim == 3))
    kind = trace.config.task_loss()

    def row_loss(b: int, h_row: np.ndarray) -> float:
        out = (h_row if per_step else h_row[-1:]) @ kernel + bias  # [T or 1, O]
        y = target[:, b] if per_step else target[b][None]
        if kind == "xent":
            shifted = out - out.max(axis=-1, keepdims=True)
            log_p = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
            return -np.sum(y * log_p) / (target.size / target.shape[-1])
        return np.sum((out - y) ** 2) / target.size

    return row_loss
