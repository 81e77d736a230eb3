"""What the panels show, computed from a trace's arrays (NumPy only, no Qt).

Keys read: the rows `lstmviz.core.schema` marks for the rows heatmap (`norm_h_total_by_pass`
[P, Tp] with `pass_length`, `…_by_batch` [N, T], `…_by_step` [S, T], `…_by_layer` [L, T]) and
`grad_h_total` [T, B, H].
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping

import numpy as np

from lstmviz.core import schema

Arrays = Mapping[str, np.ndarray]

ROW_LABELS = {"step": "training step"}  # what a row is called on an axis, where it differs


def rows_source(arrays: Arrays) -> tuple[np.ndarray, str] | None:
    """The total gradient norm's rows as stored [R, T] (no copy), and what a row is (the
    schema's row name: "pass", "batch", "training step", "layer"); None without such rows."""
    key = schema.heatmap_rows(arrays)
    if key is None:
        return None
    row = schema.row_name(key)
    # the stored array itself where it is 2-D (a memory-mapped one included): what is kept
    # with it (`kept`) is found again
    return np.atleast_2d(np.asanyarray(arrays[key])), ROW_LABELS.get(row, row)


# Reductions of a trace's big arrays (the heatmaps' matrices of `grad_h_total`, up to ~1 GB;
# the summary's NaN/Inf counts and scale), kept while the array lives: `plots.prepare`
# computes them off the window's thread (NumPy releases the GIL in the reductions) so that the
# first draw of a finished trace finds them instead of stalling the window's thread
# (bench/bench_gui.py --only life).
_REDUCED: dict[tuple[int, str], tuple[weakref.ref, np.ndarray]] = {}
WARM_SIZE = 100_000  # arrays at least this big get their reductions kept


def kept(g: np.ndarray, name: str, reduce: Callable[[np.ndarray], object]):
    """`reduce(g)` (an array is made read-only), computed once while `g` lives."""
    key = (id(g), name)
    found = _REDUCED.get(key)
    if found is not None and found[0]() is g:
        return found[1]
    result = reduce(g)
    if isinstance(result, np.ndarray):
        result.setflags(write=False)  # shared by every panel that asks
    try:
        # the table bound now: at interpreter exit the module's globals are gone first
        ref = weakref.ref(g, lambda _, key=key, table=_REDUCED: table.pop(key, None))
    except TypeError:  # not an ndarray (a list in a test): nothing to keep
        return result
    _REDUCED[key] = (ref, result)
    return result


# Bytes of a block of timesteps `_unit_means` takes |g| of at a time: a copy of the whole
# gradient (up to ~1 GB) would need its size in memory, and filling its fresh pages would take
# most of the time.
BLOCK_BYTES = 1 << 20


def _sample_norms(g: np.ndarray) -> np.ndarray:
    """[T, B, H] -> [B, T] float64, accumulated in float64 without a float64 copy of `g`."""
    return np.sqrt(np.einsum("tbh,tbh->bt", g, g, dtype=np.float64))


def _unit_means(g: np.ndarray) -> np.ndarray:
    """[..., T, B, H] -> [H, T]: mean |g| over the leading axes and B, in float64, taking
    |g| (exact in float32) a block of timesteps at a time."""
    g = np.asarray(g)
    g = g.reshape(-1, *g.shape[-3:])  # [lead, T, B, H]
    steps = g.shape[1]
    out = np.empty((steps, g.shape[-1]), np.float64)
    block = max(1, BLOCK_BYTES // max(1, g[:, :1].nbytes))
    for t in range(0, steps, block):
        out[t : t + block] = np.abs(g[:, t : t + block]).mean(axis=(0, 2), dtype=np.float64)
    return out.T


def _nonfinite(v: np.ndarray) -> np.ndarray:
    return np.asarray(np.size(v) - np.count_nonzero(np.isfinite(v)), np.int64)


def nonfinite_count(v: np.ndarray) -> int:
    """How many values of float array `v` are NaN or ±Inf (kept with `v` when it is large)."""
    if np.size(v) < WARM_SIZE:
        return int(_nonfinite(v))
    return int(kept(v, "nonfinite", _nonfinite))


def _max_abs(v: np.ndarray) -> np.ndarray:
    """max |v| as max(max v, -min v): no |v| copy of the array (NaN when v holds one)."""
    if not np.size(v):
        return np.asarray(0.0, np.float64)
    return np.asarray(np.maximum(np.float64(np.max(v)), -np.float64(np.min(v))))


def max_abs(v: np.ndarray) -> float:
    """max |v| (0 for an empty array; kept with `v` when it is large)."""
    if np.size(v) < WARM_SIZE:
        return float(_max_abs(v))
    return float(kept(v, "max abs", _max_abs))


def rows_matrix(arrays: Arrays) -> tuple[np.ndarray, str] | None:
    """Total gradient norm as rows × timesteps (float64), and what a row is. Taped runs have
    one sequence, so their rows are the batch samples (norm over units only)."""
    found = rows_source(arrays)
    if found is not None:
        return np.asarray(found[0], np.float64), found[1]
    g = arrays.get("grad_h_total")
    if g is not None and np.ndim(g) == 3:
        return kept(g, "sample norms", _sample_norms), "batch sample"
    return None


def rows_shown(arrays: Arrays) -> tuple[np.ndarray, str] | None:
    """What the rows heatmap shows: the stored rows (no float64 copy) or, for a taped trace,
    the batch samples' norms (`rows_matrix`)."""
    return rows_source(arrays) or rows_matrix(arrays)


def finite_range(v: np.ndarray) -> tuple[float, float]:
    """(min, max) of the finite values of `v`; (inf, -inf) when none is finite."""
    finite = v[np.isfinite(v)]
    return (float(finite.min()), float(finite.max())) if finite.size else (np.inf, -np.inf)


def units_matrix(arrays: Arrays) -> np.ndarray | None:
    """mean over the batch of |dL/dh_t,j|, units × timesteps (leading axes averaged too)."""
    g = arrays.get("grad_h_total")
    if g is None or np.ndim(g) < 3:
        return None
    return kept(g, "unit means", _unit_means)


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
    The heatmaps ask for float32 (what they colour, and faster; bench/bench_gui.py --only
    redraw)."""
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
    """Mean of the finite values among the last `window` values at every position (fewer at
    the start); NaN where none is finite. y [S] -> [S] float64. A NaN or Inf step (a loss that
    blew up) leaves a gap of `window` values, not NaN for the rest of the run."""
    y = np.asarray(y, np.float64)
    if y.size == 0:
        return y
    finite = np.isfinite(y)
    sums = np.cumsum(np.insert(np.where(finite, y, 0.0), 0, 0.0))
    counts = np.cumsum(np.insert(finite, 0, False))
    ends = np.arange(1, y.size + 1)
    starts = np.maximum(ends - window, 0)
    n = counts[ends] - counts[starts]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (sums[ends] - sums[starts]) / np.maximum(n, 1), np.nan)
