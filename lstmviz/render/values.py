"""What the panels show, computed from a trace's arrays (NumPy only, no Qt).

Keys read: `norm_h_total`, `norm_h_direct`, `norm_c_total` [T] (per-batch traces: [N, T]);
`norm_h_total_by_pass` [P, Tp] with `pass_length`; `norm_h_total_by_batch` [N, T];
`norm_h_total_by_step` [S, T]; `grad_h_total` [T, B, H].
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

Arrays = Mapping[str, np.ndarray]

MAIN_NORMS = ("norm_h_total", "norm_h_direct", "norm_c_total")  # the per-timestep curves [T]
ROW_KEYS = {  # rows × timesteps source: row name
    "norm_h_total_by_pass": "pass",
    "norm_h_total_by_batch": "batch",
    "norm_h_total_by_step": "training step",
}


def rows_matrix(arrays: Arrays) -> tuple[np.ndarray, str] | None:
    """Total gradient norm as rows × timesteps, and what a row is. Taped runs have one
    sequence, so their rows are the batch samples (norm over units only)."""
    for key, name in ROW_KEYS.items():
        if key in arrays:
            return np.atleast_2d(np.asarray(arrays[key], np.float64)), name
    g = arrays.get("grad_h_total")
    if g is not None and np.ndim(g) == 3:
        return np.sqrt(np.sum(np.square(g, dtype=np.float64), axis=-1)).T, "batch sample"
    return None


def per_batch_rows(arrays: Arrays) -> Arrays:
    """Per-batch traces keep their norms as [N, T] (`norm_h_total` etc.): draw them as rows,
    one curve per batch, like the live `norm_h_total_by_batch` updates (the [N, T] norms are
    not drawn as curves of T)."""
    if np.ndim(arrays.get("norm_h_total")) != 2:
        return arrays
    shown = {k: v for k, v in arrays.items() if not (k in MAIN_NORMS and np.ndim(v) == 2)}
    shown.setdefault("norm_h_total_by_batch", arrays["norm_h_total"])
    return shown


def units_matrix(arrays: Arrays) -> np.ndarray | None:
    """mean over the batch of |dL/dh_t,j|, units × timesteps (leading axes averaged too)."""
    g = arrays.get("grad_h_total")
    if g is None or np.ndim(g) < 3:
        return None
    g = np.abs(np.asarray(g))  # |x| is exact in float32: no float64 copy of [T, B, H]
    g = g.reshape(-1, *g.shape[-3:]).mean(axis=(0, 2), dtype=np.float64)  # [T, H]
    return g.T


def pass_length(arrays: Arrays) -> int | None:
    """Timesteps per pass of a multi-pass trace (None for the other modes)."""
    if "norm_h_total_by_pass" not in arrays:
        return None
    if "pass_length" in arrays:
        return int(arrays["pass_length"])
    return int(np.shape(arrays["norm_h_total_by_pass"])[-1])


def finite(y: np.ndarray) -> np.ndarray:
    """NaN where `y` is NaN or ±Inf: a gap in the line, never a spike off the plot."""
    return y if np.isfinite(y).all() else np.where(np.isfinite(y), y, np.nan)


def positive(y: np.ndarray) -> np.ndarray:
    """Log axes cannot show zeros: NaN (a break in the line) where `y` is <= 0 or not finite."""
    return np.where((y > 0) & np.isfinite(y), y, np.nan)


def display_values(data: np.ndarray, log: bool, normalise: bool, dtype=np.float64) -> np.ndarray:
    """Rows divided by their maximum (normalise) and/or log10 with non-positive values hidden.
    The heatmaps ask for float32 (what they colour; ~8× faster than float64 for 200 × 2000)."""
    data = np.array(data, dtype)
    if not np.isfinite(data).all():  # NaN/Inf are blank, never a colour or a line
        data[~np.isfinite(data)] = np.nan
    if normalise:
        with np.errstate(invalid="ignore", divide="ignore"):
            peak = np.nanmax(np.abs(data), axis=-1, keepdims=True, initial=0.0)
            data = np.where(peak > 0, data / np.where(peak > 0, peak, 1.0), data)
    if log:
        with np.errstate(invalid="ignore", divide="ignore"):
            data = np.log10(data, where=data > 0, out=np.full(data.shape, np.nan, data.dtype))
    return data


def running_mean(y: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last `window` values at every position (fewer at the start)."""
    y = np.asarray(y, np.float64)
    if y.size == 0:
        return y
    sums = np.cumsum(np.insert(y, 0, 0.0))
    ends = np.arange(1, y.size + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)
