"""What the model panels show, computed from a model trace's arrays (NumPy only, no Qt).

A model trace has one entry per recurrent *direction* k (forward before backward, in model
order): `layer_names` [L], `layer{k}_cell` ("lstm", "gru", "simple_rnn"; absent: lstm),
`layer{k}_grad_h_total` [T_k, B, H_k], `layer{k}_gates_mean` and `layer{k}_gates_saturated`
[G, T_k] with `layer{k}_gate_names` [G], the rows `norm_h_total_by_layer` [L, T], `saliency` [B, T],
`x` [T, B] token ids or [T, B, I], and `mask` [T, B] (True where a step counts) when the model
masks. Every per-timestep array is indexed by input position t.

A graph's directions keep their own lengths T_k: the rows [L, T] take T = max T_k, each padded
with NaN after its own T_k. `layer{k}_calls` counts the calls of its layer that made direction k
(absent: 1); `layer{k}_initial_from` names the direction whose final state is its initial state
(an encoder handing (h, c) to its decoder; absent or -1: none). Such a *chain* is drawn on one
time axis (`chain_offsets`): the source's steps, then its own. A model of several inputs has
`x_{name}`, `grad_input_{name}` and `saliency_{name}` [B, T_name] per input instead of `x`,
`grad_input` and `saliency` (`input_names`).
"""

from __future__ import annotations

import re
import warnings

import numpy as np

from lstmviz.analysis import values
from lstmviz.analysis.decay import anchored_decay, loss_steps, runs_backward
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


def direction_steps(arrays: Arrays, k: int) -> int | None:
    """T_k, the steps of direction k: the length of its per-step arrays (`layer{k}_grad_h_total`,
    `_h`, `_gates_mean`), else the rows' T (a recording's, a live run's); None without rows."""
    for key, axis in ((f"layer{k}_grad_h_total", 0), (f"layer{k}_h", 0),
                      (f"layer{k}_gates_mean", 1)):  # fmt: skip
        value = arrays.get(key)
        if value is not None and np.ndim(value) > axis:
            return int(np.shape(value)[axis])
    rows = arrays.get("norm_h_total_by_layer")
    return None if rows is None else int(np.shape(rows)[-1])


def calls_of(arrays: Arrays, k: int) -> int:
    """How many calls of its layer made direction k (`layer{k}_calls`; 1 for traces without)."""
    calls = arrays.get(f"layer{k}_calls")
    return 1 if calls is None else int(np.asarray(calls))


def initial_from(arrays: Arrays, k: int) -> int:
    """The direction whose final state is direction k's initial state (`layer{k}_initial_from`),
    -1 for none (traces without the key; an index out of range or k itself)."""
    source = arrays.get(f"layer{k}_initial_from")
    source = -1 if source is None else int(np.asarray(source))
    return source if 0 <= source < layer_count(arrays) and source != k else -1


def chain_sources(arrays: Arrays) -> list[list[int]]:
    """Per direction k, the directions whose steps come before its own on a chain, nearest
    first ([s, source of s, …]; a loop of hand-overs stops where it closes)."""
    sources = [initial_from(arrays, k) for k in range(layer_count(arrays))]
    out = []
    for k in range(len(sources)):
        path, s = [], sources[k]
        while s >= 0 and s != k and s not in path:
            path.append(s)
            s = sources[s]
        out.append(path)
    return out


def chain_offsets(arrays: Arrays) -> np.ndarray | None:
    """Where each direction's step 0 lies on the chain time axis [L] (int): the sum of the
    steps of the directions before it on its chain (0 for a direction whose initial state is
    its own); None when no direction's initial state comes from another."""
    paths = chain_sources(arrays)
    if not any(paths):
        return None
    steps = [direction_steps(arrays, k) or 0 for k in range(len(paths))]
    return np.array([sum(steps[s] for s in path) for path in paths], np.int64)


def handovers(arrays: Arrays) -> list[tuple[int, int, float]]:
    """(direction k, its source s, x) for every hand-over: on the chain time axis
    (`chain_offsets`) the mark between s's last step and k's first, x = offset_k − 0.5."""
    offsets = chain_offsets(arrays)
    if offsets is None:
        return []
    return [(k, initial_from(arrays, k), float(offsets[k]) - 0.5)
            for k in range(len(offsets)) if initial_from(arrays, k) >= 0]  # fmt: skip


def chain_rows(rows: np.ndarray, arrays: Arrays) -> np.ndarray:
    """Rows [L, T] (each direction's values at its own steps) placed on the chain time axis:
    [L, W] float64, row k's T_k values from column offset_k on, NaN elsewhere; W the end of the
    longest chain. `rows` itself (as float64) when nothing is chained."""
    rows = np.asarray(rows, np.float64)
    offsets = chain_offsets(arrays)
    if offsets is None or rows.ndim != 2:
        return rows
    steps = [min(direction_steps(arrays, k) or rows.shape[1], rows.shape[1])
             for k in range(len(rows))]  # fmt: skip
    width = max(int(offsets[k]) + steps[k] for k in range(len(rows)))
    out = np.full((len(rows), width), np.nan)
    for k in range(len(rows)):
        out[k, offsets[k] : offsets[k] + steps[k]] = rows[k, : steps[k]]
    return out


def chain_names(arrays: Arrays) -> list[str]:
    """Each chain as text, its directions in processing order: ["enc → dec"]."""
    names, paths = layer_names(arrays), chain_sources(arrays)
    ends = [k for k, path in enumerate(paths)
            if path and not any(k in other for other in paths)]  # fmt: skip
    return [" → ".join(names[s] for s in [*reversed(paths[k]), k]) for k in ends]


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
    timesteps NaN (in the directions as long as the mask: in a graph the mask is an input's),
    a direction's padding after its T_k NaN; None before there are any."""
    rows = arrays.get("norm_h_total_by_layer")
    if rows is None or np.ndim(rows) != 2:
        return None
    rows = np.array(rows, np.float64)
    masked = masked_steps(arrays)
    for k in range(len(rows)):
        steps = min(direction_steps(arrays, k) or rows.shape[1], rows.shape[1])
        rows[k, steps:] = np.nan
        if masked is not None and masked.shape[0] == steps:
            rows[k, :steps][masked] = np.nan
    return rows


def input_names(arrays: Arrays) -> list[str]:
    """The inputs with a saliency: [""] for a model of one input (`saliency`), else the names
    of its `saliency_{name}` keys in the trace's order; [] for none."""
    if np.ndim(arrays.get("saliency")) == 2:
        return [""]
    return [key.removeprefix("saliency_") for key in arrays
            if key.startswith("saliency_") and np.ndim(arrays[key]) == 2]  # fmt: skip


def _input_key(base: str, name: str) -> str:
    return f"{base}_{name}" if name else base


def saliency_rows(arrays: Arrays, name: str = "") -> np.ndarray | None:
    """[B + 1, T] (float64): the mean over the samples' unmasked steps in row 0, then each
    sample's ‖dL/d input_t‖ (`saliency`, or input `name`'s `saliency_{name}`), NaN where a
    sample's step is masked."""
    saliency = arrays.get(_input_key("saliency", name))
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


def saliency_blocks(arrays: Arrays) -> tuple[np.ndarray, list[tuple[str, int, int]]] | None:
    """Every input's `saliency_rows` stacked, a block per input in `input_names` order: the
    rows [R, T] (float64; T the longest input's, a shorter one's padded with NaN) and
    (name, first row, steps) per block. None without saliency."""
    blocks = [(name, saliency_rows(arrays, name)) for name in input_names(arrays)]
    blocks = [(name, rows) for name, rows in blocks if rows is not None]
    if not blocks:
        return None
    width = max(rows.shape[1] for _, rows in blocks)
    out = np.full((sum(len(rows) for _, rows in blocks), width), np.nan)
    where, first = [], 0
    for name, rows in blocks:
        out[first : first + len(rows), : rows.shape[1]] = rows
        where.append((name, first, rows.shape[1]))
        first += len(rows)
    return out, where


def token_at(arrays: Arrays, t: int, sample: int, name: str = "") -> int | None:
    """The token id at step t of `sample`, for a model of token ids (x [T, B] integers; input
    `name`'s `x_{name}`)."""
    x = arrays.get(_input_key("x", name))
    if x is None or np.ndim(x) != 2 or np.asarray(x).dtype.kind not in "iu":
        return None
    if not (0 <= t < np.shape(x)[0] and 0 <= sample < np.shape(x)[1]):
        return None
    return int(x[t, sample])


def units_of_layer(arrays: Arrays, k: int) -> np.ndarray | None:
    """mean |dL/dh_t,j| of direction k over the samples whose step t counts, units × timesteps
    [H_k, T_k] (float64); NaN at steps masked in every sample. Kept with the gradient array
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
    [G, T_k] (float64), NaN at steps masked in every sample; None when the trace has none."""
    mean, saturated = arrays.get(f"layer{k}_gates_mean"), arrays.get(f"layer{k}_gates_saturated")
    if mean is None or saturated is None:
        return None
    return blank_masked(mean, arrays), blank_masked(saturated, arrays)


# ---- the error of one step (docs/diagnosis.md): `anchors_by_layer` [L, A] and ------------------
# `anchor_norm_h_by_layer` [L, A, T], ‖∂L_t*/∂h_t‖ of the loss of anchor step t* alone


def anchor_count(arrays: Arrays) -> int:
    """A, the anchors each direction follows; 0 when the trace has no anchored norms."""
    anchors, rows = arrays.get("anchors_by_layer"), arrays.get("anchor_norm_h_by_layer")
    if anchors is None or rows is None or np.ndim(anchors) != 2 or np.ndim(rows) != 3:
        return 0
    return int(np.shape(anchors)[1])


def anchor_labels(arrays: Arrays) -> list[str]:
    """A label per anchor a [A]: "t*=12" when row a is one step in every direction (several
    anchors), else its distinct steps in model order, "t*=23 / 0" (the default single anchor:
    the last step for forward directions, the first for backward ones)."""
    anchors = np.asarray(arrays.get("anchors_by_layer", np.zeros((0, 0))), np.int64)
    return ["t*=" + " / ".join(str(t) for t in dict.fromkeys(anchors[:, a].tolist()))
            for a in range(anchor_count(arrays))]  # fmt: skip


def _runs_backward(arrays: Arrays, k: int, steps: int) -> bool:
    """Whether direction k reads the sequence from its end, as its diagnosis decides it
    (`decay.runs_backward` on its own steps' norm rows)."""
    direct = arrays.get("norm_h_direct_by_layer")
    direct = None if direct is None else np.asarray(direct[k][:steps], np.float64)
    total = np.asarray(arrays["norm_h_total_by_layer"][k][:steps], np.float64)
    return runs_backward(layer_names(arrays)[k], total, loss_steps(direct, steps))


def anchored_rows(
    arrays: Arrays, k: int, reached=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Direction k's error of one step per anchor: (rows [A, T_k] ‖∂L_t*/∂h_t‖ as stored (float32),
    anchors [A] t* (int64), reach [A] the input position of the farthest step each row reaches
    from its t* as docs/diagnosis.md defines the reach, −1 where not defined or not asked:
    `reached` the anchors a whose reach is wanted, None every one); None when the trace has no
    anchored norms."""
    if anchor_count(arrays) == 0 or not 0 <= k < len(arrays["anchors_by_layer"]):
        return None
    steps = direction_steps(arrays, k) or int(np.shape(arrays["anchor_norm_h_by_layer"])[-1])
    rows = np.asarray(arrays["anchor_norm_h_by_layer"][k], np.float32)[:, :steps]
    anchors = np.asarray(arrays["anchors_by_layer"][k], np.int64)
    reverse = _runs_backward(arrays, k, steps)
    reach = np.full(len(anchors), -1, np.int64)
    for a, t in enumerate(anchors):
        if 0 <= t < steps and (reached is None or a in reached):
            decay = anchored_decay(rows[a : a + 1], anchors[a : a + 1], steps, reverse)
            if decay.reach is not None:
                reach[a] = t + (decay.reach - 1) * (1 if reverse else -1)
    return rows, anchors, reach


def anchored_curves(arrays: Arrays, anchor: int | None = None):
    """Every direction's error of one step, for the curves: (rows [L, T] float64, NaN after a
    direction's T_k and at steps masked in every sample; anchors [L] the t* each row follows;
    reach [L] the input position of the farthest step each reaches, −1 where not defined).
    `anchor`: the anchor a shown (from 0); None or out of range: for each direction the anchor
    its diagnosis follows (`decay.anchored_decay`: the median decay per step). None when the
    trace has no anchored norms."""
    count = anchor_count(arrays)
    if count == 0:
        return None
    stored = arrays["anchor_norm_h_by_layer"]
    L, T = len(stored), int(np.shape(stored)[-1])
    out = np.full((L, T), np.nan)
    anchors, reach = np.full(L, -1, np.int64), np.full(L, -1, np.int64)
    for k in range(L):
        rows, t_stars, _ = anchored_rows(arrays, k, reached=())
        steps = rows.shape[1]
        inside = [a for a in range(count) if 0 <= t_stars[a] < steps]
        if not inside:
            continue
        a = anchor if anchor is not None and anchor in inside else None
        if a is None:  # the diagnosis's: the anchor whose decay is the median
            median = anchored_decay(rows[inside], t_stars[inside], steps,
                                    _runs_backward(arrays, k, steps))  # fmt: skip
            a = next(i for i in inside if t_stars[i] == median.anchor)
        out[k, :steps] = rows[a]
        anchors[k], reach[k] = t_stars[a], anchored_rows(arrays, k, reached=(a,))[2][a]
    return blank_masked(out, arrays), anchors, reach
