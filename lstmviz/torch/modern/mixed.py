"""A module that holds modern layers and classic nn.LSTM/GRU/RNN layers or cells: both traced,
their directions in one trace in the order the forward first calls them.

`lstmviz.torch.tracer` traces the classic directions (the modern layers on their traced
forwards, nothing kept: autograd carries the gradient through them), `model.run` the modern
ones (the classic layers run as plain PyTorch modules: autograd carries it through those): two
forwards and two backwards (and each side's anchored passes). During the modern forward
`classic_calls` counts, for every call of a classic module, the modern calls (pieces) recorded
before it; with each direction's first call that orders the directions (`order`), and `merged`
renumbers the two sides' `layer{k}_…` keys into that order and joins their [L, T] rows.

Needs nothing of `lstmviz.torch` outside this package: the classic side hands its arrays and
the index of each direction's first call.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import numpy as np
from torch import nn

CLASSIC = (nn.LSTM, nn.GRU, nn.RNN, nn.LSTMCell, nn.GRUCell, nn.RNNCell)
# [L, T] rows and [L, A, T] anchored rows: padded with NaN to the longest direction
_ROWS = ("norm_h_total_by_layer", "norm_h_direct_by_layer", "norm_c_total_by_layer")
_ANCHORED = ("anchor_norm_h_by_layer", "anchor_norm_c_by_layer")
_PER_DIRECTION = re.compile(r"layer(\d+)_(.+)")
# the first direction's keys, [T, B, ·] ([B, T] the saliency), from the side that has it
_FIRST = ("grad_input", "saliency", "mask", "x")


@contextlib.contextmanager
def classic_calls(module: nn.Module, pieces: list) -> Iterator[list[int]]:
    """Within: each call of the module's classic layers and cells appends to the list yielded
    how many modern calls `pieces` held when it began (forward pre-hooks: one per module call,
    as `capture.capture` records one Call per call)."""
    before: list[int] = []
    handles = [sub.register_forward_pre_hook(lambda *_: before.append(len(pieces)))
               for sub in module.modules() if isinstance(sub, CLASSIC)]  # fmt: skip
    try:
        yield before
    finally:
        for handle in handles:
            handle.remove()


def order(classic_firsts: list[int], modern_firsts: list[int], before: list[int]) -> list:
    """The directions in call order, as ("classic" | "modern", index on its side): a classic
    direction by its first call n (`before[n]` modern calls ran before it), a modern one by its
    first piece m; call n comes first when before[n] ≤ m. A classic call the pre-hooks missed
    (its forward called directly) counts as before every modern call."""

    def key(side: str, k: int, first: int) -> tuple:
        if side == "modern":
            return first, 1, k
        return (before[first] if first < len(before) else 0), 0, k

    found = [("classic", k, n) for k, n in enumerate(classic_firsts)]
    found += [("modern", k, m) for k, m in enumerate(modern_firsts)]
    return [(side, k) for side, k, _ in sorted(found, key=lambda d: key(*d))]


def merged(classic: dict, modern: dict, ordered: list) -> dict:
    """One trace's direction arrays from the two sides' (each numbered from layer0 on its own,
    with its [L, T] rows, `layer_names`, anchors, `nonfinite_steps`, the first direction's
    `grad_input`, `saliency` [and `mask`, `x`]): per-direction keys renumbered into `ordered`
    (`order`), rows [L, T] and anchored rows [L, A, T] padded with NaN to the longest direction
    (A: the larger side's; the other side's anchors after its own repeat its last, NaN rows),
    `layer{k}_initial_from` renumbered, the first direction's keys from its side (padded with
    NaN, a mask with False, to T; `x` only where it has T steps). Keys neither per direction nor
    listed here (a module of several inputs' `x_{name}`, `grad_input_{name}`) are kept; the
    classic side's win where both have one (`lstm_kernel`)."""
    sides = {"classic": classic, "modern": modern}
    new = {(side, k): n for n, (side, k) in enumerate(ordered)}
    steps = max(side["norm_h_total_by_layer"].shape[1] for side in sides.values())
    count = max(side["anchors_by_layer"].shape[1] for side in sides.values())
    out: dict[str, np.ndarray] = {}
    for name, arrays in sides.items():
        for key, value in arrays.items():
            match = _PER_DIRECTION.fullmatch(key)
            if match is None:
                continue
            k = new[(name, int(match[1]))]
            if match[2] == "initial_from" and value >= 0:
                value = np.int64(new[(name, int(value))])
            out[f"layer{k}_{match[2]}"] = value
    for key in _ROWS + _ANCHORED + ("anchors_by_layer",):
        rows = [_fitted(sides[side][key][k], steps, count) for side, k in ordered]
        out[key] = np.stack(rows)
    out["layer_names"] = np.array([str(sides[side]["layer_names"][k]) for side, k in ordered])
    out["nonfinite_steps"] = np.union1d(classic["nonfinite_steps"], modern["nonfinite_steps"])
    first = sides[ordered[0][0]]
    for key in _FIRST:
        if key in first and (key != "x" or len(first[key]) == steps):
            out[key] = _padded(first[key], steps, 1 if key == "saliency" else 0)
    for arrays in (classic, modern):
        out |= {key: value for key, value in arrays.items()
                if key not in out and key not in _FIRST
                and _PER_DIRECTION.fullmatch(key) is None}  # fmt: skip
    if any(key.startswith("grad_input_") for key in classic):  # several inputs: theirs alone
        out.pop("grad_input", None)
        out.pop("saliency", None)
    return out


def _fitted(row: np.ndarray, steps: int, count: int) -> np.ndarray:
    """A direction's row [T'] ([A', T'] anchored; [A'] its anchors) as [steps] ([count, steps];
    [count]): NaN after its end and in the anchors it lacks (their steps its last one's)."""
    if row.ndim == 1 and row.dtype.kind in "iu":  # anchors
        return np.concatenate([row, np.repeat(row[-1:], count - len(row))])
    row = _padded(row, steps, row.ndim - 1)
    if row.ndim == 2 and len(row) < count:
        row = np.concatenate([row, np.full([count - len(row), steps], np.nan, row.dtype)])
    return row


def _padded(value: np.ndarray, steps: int, axis: int) -> np.ndarray:
    """`value` with NaN (False for a bool mask) after its end along `axis` up to `steps`."""
    short = steps - value.shape[axis]
    if short <= 0:
        return value
    shape = list(value.shape)
    shape[axis] = short
    fill = np.zeros(shape, bool) if value.dtype == bool else np.full(shape, np.nan, value.dtype)
    return np.concatenate([value, fill], axis)
