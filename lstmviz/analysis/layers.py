"""What the model panels show, computed from a model trace's arrays (NumPy only, no Qt).

A model trace has one entry per recurrent *direction* k (forward before backward, in model
order): `layer_names` [L], `layer{k}_cell` ("lstm", "gru", "simple_rnn"; absent: lstm),
`layer{k}_grad_h_total` [T, B, H_k], `layer{k}_gates_mean` and `layer{k}_gates_saturated`
[G, T] with `layer{k}_gate_names` [G], the rows `norm_h_total_by_layer` [L, T], `saliency` [B, T],
`x` [T, B] token ids or [T, B, I], and `mask` [T, B] (True where a step counts) when the model
masks. Every per-timestep array is indexed by input position t.
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from lstmviz.analysis import values
from lstmviz.analysis.values import Arrays
from lstmviz.core import modes
from lstmviz.core.schema import CELL_CLASSES, CELL_GATES

GATES = CELL_GATES["lstm"]  # input, forget, candidate, output: an LSTM's order of `gates_*`
CELL_TEXT = CELL_CLASSES  # a cell's name in the panels: Keras's class
BACKWARD = "/backward"
SHORT_STEM = 10  # characters of a layer's name kept in a short label (before its "_<n>")
MIDDLE_MARGIN = 4  # characters kept beyond the fewest that tell names cut in the middle apart
# Keras's default names of the layers with LSTM directions, shortened in short labels.
SHORT_NAMES = {"bidirectional": "bi"}


def is_model(arrays: Arrays, mode: str | None = None) -> bool:
    """Whether `arrays` are (or, for a run of a `mode` that runs a whole model, will be) a
    model trace's."""
    whole = mode is not None and modes.find(mode).whole_model
    return whole or "norm_h_total_by_layer" in arrays or "layer_names" in arrays


def layer_count(arrays: Arrays) -> int:
    """L, the number of LSTM directions the arrays hold (0 for none)."""
    if "layer_names" in arrays:
        return int(np.size(arrays["layer_names"]))
    if "norm_h_total_by_layer" in arrays:
        return int(np.shape(arrays["norm_h_total_by_layer"])[0])
    return sum(1 for key in arrays if key.startswith("layer") and key.endswith("_gates_mean"))


def layer_names(arrays: Arrays) -> list[str]:
    """The name of every direction: `layer_names`, else "layer 1" … (a live run's rows come
    before the names)."""
    if "layer_names" in arrays:
        return [str(name) for name in np.ravel(arrays["layer_names"])]
    return [f"layer {k + 1}" for k in range(layer_count(arrays))]


def cell_of(arrays: Arrays, k: int) -> str:
    """Direction k's cell: `layer{k}_cell`, "lstm" for traces without it."""
    cell = arrays.get(f"layer{k}_cell")
    return "lstm" if cell is None else str(np.asarray(cell))


def gate_names_of(arrays: Arrays, k: int) -> tuple[str, ...]:
    """Direction k's gate names in the order of its `gates_*` rows."""
    names = arrays.get(f"layer{k}_gate_names")
    if names is not None:
        return tuple(str(n) for n in np.ravel(names))
    return CELL_GATES.get(cell_of(arrays, k), GATES)


def has_cell_state(arrays: Arrays, k: int) -> bool:
    """Whether direction k has a cell state (an LSTM): by `layer{k}_cell`, else (a recording's
    rows) unless its row of `norm_c_total_by_layer` is NaN throughout."""
    if f"layer{k}_cell" in arrays:
        return cell_of(arrays, k) == "lstm"
    rows = arrays.get("norm_c_total_by_layer")
    if rows is None:
        return True
    rows = np.asarray(rows)
    return not bool(np.isnan(rows[:, k] if rows.ndim == 3 else rows[k]).all())


def direction_layer(name: str) -> str:
    """The layer of a direction: "bi/forward" and "bi/backward" -> "bi", "lstm_1" -> "lstm_1"."""
    return _split_direction(name)[0]


def _split_direction(name: str) -> tuple[str, str]:
    """(layer, arrow): "bi/forward" -> ("bi", " →"), "bi/backward" -> ("bi", " ←")."""
    for end, arrow in (("/forward", " →"), (BACKWARD, " ←")):
        if name.endswith(end):
            return name.removesuffix(end), arrow
    return name, ""


def direction_label(name: str) -> str:
    """A direction's row label: "bi/forward" -> "bi →", "bi/backward" -> "bi ←" (as the layer
    table writes them): a long name left the heatmap beside it a sliver."""
    layer, arrow = _split_direction(name)
    return layer + arrow


def short_direction_label(name: str, keep: int = SHORT_STEM, middle: bool = False) -> str:
    """A direction's short row label: Keras's "bidirectional_2/backward" -> "bi_2 ←"; a layer
    name longer than `keep` characters cut with "…", its "_<n>" kept ("encoder_layer_12" ->
    "encoder_l…_12"); `middle`: cut in the middle, a third of what is kept from its start and
    the rest from its end ("encoder_first_block", 10 -> "enc…_block")."""
    layer, arrow = _split_direction(name)
    stem, number = re.fullmatch(r"(.*?)(_\d+)?", layer, re.S).groups()
    stem = SHORT_NAMES.get(stem, stem)
    if len(stem) > keep:
        tail = 2 * (keep - 1) // 3 if middle else 0  # names tend to differ towards the end
        stem = stem[: keep - 1 - tail] + "…" + stem[len(stem) - tail :]
    return stem + (number or "") + arrow


def layer_label(name: str, short: bool = False) -> str:
    """A direction's layer as a legend names it: "bidirectional_2/forward" -> "bidirectional_2",
    short: "bi_2" (`short_direction_label` without the arrow)."""
    layer = direction_layer(name)
    return short_direction_label(layer) if short else layer


def row_labels(names: list[str], short: bool) -> list[str]:
    """The rows' labels: `direction_label`s, or when `short` the `short_direction_label`s,
    those that tell the directions apart: cut at the end, else cut in the middle keeping a few
    more characters than the fewest that differ, else (or when that would save less than a
    third) the full labels."""
    full = [direction_label(name) for name in names]
    if not short:
        return full
    distinct = len(set(full))
    shorter = [short_direction_label(name) for name in names]
    if len(set(shorter)) == distinct:
        return shorter
    longest = max((len(direction_layer(name)) for name in names), default=0)

    def cut(keep: int) -> list[str] | None:
        labels = [short_direction_label(name, keep, middle=True) for name in names]
        return labels if len(set(labels)) == distinct else None

    fewest = next((keep for keep in range(SHORT_STEM, longest) if cut(keep)), None)
    if fewest is None:
        return full
    # a few more characters than the fewest that differ: "enco…first_block", not
    # "enco…t_block"; names that this would shorten by less than a third stay whole
    keep = fewest + MIDDLE_MARGIN
    return (cut(keep) or full) if keep <= 2 * longest // 3 else full


def layer_groups(names: list[str]) -> list[tuple[int, bool]]:
    """(layer index, backward) per direction: the two halves of a Bidirectional share their
    layer's index (one colour), the backward one is marked (dashed)."""
    groups, seen = [], {}
    for name in names:
        layer = direction_layer(name)
        groups.append((seen.setdefault(layer, len(seen)), name.endswith(BACKWARD)))
    return groups


def masked_steps(arrays: Arrays) -> np.ndarray | None:
    """[T] bool: the timesteps masked in every sample (padding everywhere), where the panels
    leave a blank; None when the model does not mask."""
    mask = arrays.get("mask")
    if mask is None or np.ndim(mask) != 2:
        return None
    return ~np.asarray(mask, bool).any(axis=1)


def blank_masked(rows: np.ndarray, arrays: Arrays) -> np.ndarray:
    """`rows` [R, T] (float64) with the columns masked in every sample set to NaN."""
    rows = np.array(rows, np.float64)
    masked = masked_steps(arrays)
    if masked is not None and masked.shape[0] == rows.shape[-1]:
        rows[..., masked] = np.nan
    return rows


def layer_rows(arrays: Arrays) -> np.ndarray | None:
    """The total gradient norm per direction and timestep [L, T] (float64), fully masked
    timesteps NaN; None before there are any."""
    rows = arrays.get("norm_h_total_by_layer")
    if rows is None or np.ndim(rows) != 2:
        return None
    return blank_masked(rows, arrays)


def saliency_rows(arrays: Arrays) -> np.ndarray | None:
    """[B + 1, T] (float64): the mean over the samples' unmasked steps in row 0, then each
    sample's ‖dL/d input_t‖ (`saliency`), NaN where a sample's step is masked."""
    saliency = arrays.get("saliency")
    if saliency is None or np.ndim(saliency) != 2:
        return None
    rows = np.array(saliency, np.float64)
    mask = arrays.get("mask")
    if mask is not None and np.shape(mask) == rows.shape[::-1]:
        rows[~np.asarray(mask, bool).T] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a step masked in every sample: NaN
        mean = np.nanmean(rows, axis=0)
    return np.vstack([mean[None], rows])


def token_at(arrays: Arrays, t: int, sample: int) -> int | None:
    """The token id at step t of `sample`, for a model of token ids (x [T, B] integers)."""
    x = arrays.get("x")
    if x is None or np.ndim(x) != 2 or np.asarray(x).dtype.kind not in "iu":
        return None
    if not (0 <= t < np.shape(x)[0] and 0 <= sample < np.shape(x)[1]):
        return None
    return int(x[t, sample])


def units_of_layer(arrays: Arrays, k: int) -> np.ndarray | None:
    """mean |dL/dh_t,j| of direction k over the samples whose step t counts, units × timesteps
    [H_k, T] (float64); NaN at steps masked in every sample. Kept with the gradient array
    (`values.kept`), so the worker thread computes it ahead of the window (`plots.prepare`)."""
    g = arrays.get(f"layer{k}_grad_h_total")
    if g is None or np.ndim(g) != 3:
        return None
    mask = arrays.get("mask")
    return values.kept(g, "layer units", lambda g: _unit_means(g, mask))


def _unit_means(g: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    g = np.abs(np.asarray(g))  # exact in float32: no float64 copy of [T, B, H]
    if mask is None or np.shape(mask) != g.shape[:2]:
        weight = np.ones(g.shape[:2], g.dtype)
    else:
        weight = np.asarray(mask, g.dtype)
    # one matrix product per step (BLAS): faster than a float64 mean over B (bench/bench_gui.py
    # --only redraw); a float32 sum of B values is exact enough
    sums = np.einsum("tbh,tb->th", g, weight, optimize=True)
    count = weight.sum(axis=1, dtype=np.float64)  # [T]
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sums / np.where(count > 0, count, np.nan)[:, None]).T


def gates_of_layer(arrays: Arrays, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(mean activation, saturated fraction) of direction k's G gates (`gate_names_of`), each
    [G, T] (float64), NaN at steps masked in every sample; None when the trace has none."""
    mean, saturated = arrays.get(f"layer{k}_gates_mean"), arrays.get(f"layer{k}_gates_saturated")
    if mean is None or saturated is None:
        return None
    return blank_masked(mean, arrays), blank_masked(saturated, arrays)
