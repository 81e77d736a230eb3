"""Check a trace's dL/dh_t by central finite differences, in float64 NumPy (no TensorFlow).

An LSTM treats batch rows independently, so nudging h_t[b, j] changes only row b from step t on:
each check re-runs one row from t to the end, which is cheap even for long sequences. Works for
any trace holding one set of weights (taped and multi-pass runs); the loss is rebuilt from the
trace's RunConfig as `engine/losses.py` defines it (multi-pass `last_mse`: one target per pass
end).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lstmviz.errors import InputError
from lstmviz.trace import GradientTrace

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


def verify_trace(trace: GradientTrace, samples: int = 8, seed: int = 0) -> Verification:
    """Compare `samples` random entries of grad_h_total (plus its largest one) with central
    differences of the loss. Raises InputError when the trace lacks what this needs."""
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

    def row_loss(b: int, h_row: np.ndarray) -> float:
        """Row b's share of the loss (the other rows do not change)."""
        if loss == "mean_h":
            return h_row.sum() / grad.size
        if loss == "seq_mse":
            return np.sum((h_row - target[:, b]) ** 2) / grad.size
        if target.ndim == 3:  # multi-pass last_mse: mean over passes of each pass end's MSE
            ends = (np.arange(len(target)) + 1) * (steps // len(target)) - 1
            return np.sum((h_row[ends] - target[:, b]) ** 2) / target.size
        return np.sum((h_row[-1] - target[b]) ** 2) / target.size

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
