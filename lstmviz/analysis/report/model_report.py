"""The PDF report's parts for a model trace: the model summary table, and what its gradient
flow says in a few lines; `going_back`, which way a direction's norm goes back in its time
(the notebook's extremes table). NumPy only; the keys are in `lstmviz.analysis.layers`."""

from __future__ import annotations

import html

import numpy as np

from lstmviz.analysis.layers import (
    BACKWARD,
    CELL_TEXT,
    cell_of,
    gate_names_of,
    gates_of_layer,
    input_names,
    layer_names,
    layer_rows,
    saliency_rows,
)
from lstmviz.analysis.report.summary import fmt
from lstmviz.analysis.values import Arrays

MAX_LINES = 8  # directions listed one by one; of more, the first ones and the last


def shown_directions(count: int) -> list[int | None]:
    """The directions listed, by index, None where "… and n more" stands: all of up to
    MAX_LINES + 1 (the line saying one more would take as much room), else the first
    MAX_LINES - 1 and the last (the top layer, nearest the loss)."""
    if count <= MAX_LINES + 1:
        return list(range(count))
    return [*range(MAX_LINES - 1), None, count - 1]


def model_table_html(arrays: Arrays) -> str:
    """The model summary (`model_summary`: name, class, output shape, parameters per layer)
    as a monospaced block; "" for other traces."""
    if "model_summary" not in arrays:
        return ""
    text = html.escape(str(arrays["model_summary"]))
    return f"<p style='margin-top:6px'><b>Model</b></p><pre style='font-size:7pt'>{text}</pre>"


def extremes(values: np.ndarray) -> tuple[int, int] | None:
    """(t of the largest, t of the smallest) of `values` [T], NaN and Inf left out; None when
    no value is finite."""
    finite = np.flatnonzero(np.isfinite(values))
    if not finite.size:
        return None
    return int(finite[np.argmax(values[finite])]), int(finite[np.argmin(values[finite])])


def going_back(name: str, largest_t: int, smallest_t: int) -> str:
    """Whether ‖dL/dh_t‖ shrinks or grows going back in the time of direction `name`, from
    the input positions t of its largest and smallest values: " (shrinks going back in time)"
    when the smallest lies earlier, "" when both are at one step. A Bidirectional's backward
    direction ("…/backward") reads the sequence from its end, so back in its time is towards
    larger t, while its rows, as every direction's, are indexed by input position."""
    if largest_t == smallest_t:
        return ""
    if name.endswith(BACKWARD):
        way = "shrinks" if smallest_t > largest_t else "grows"
        return f" ({way} going back in its time, towards larger t)"
    return f" ({'shrinks' if smallest_t < largest_t else 'grows'} going back in time)"


def model_lines(arrays: Arrays) -> list[str]:
    """Summary lines of a model trace ([] for others): each direction's largest and smallest
    ‖dL/dh_t‖ and where (t in its own steps), the saturated forget gates, the input saliency's
    range (of each input)."""
    rows = layer_rows(arrays)
    if rows is None:
        return []
    names = layer_names(arrays)
    lines = []
    shown = shown_directions(min(len(names), len(rows)))
    for k in shown:
        if k is None:
            lines.append(f"… and {len(names) - MAX_LINES} more directions")
            continue
        cell = cell_of(arrays, k)
        name = names[k] + (f" ({CELL_TEXT.get(cell, cell)})" if cell != "lstm" else "")
        found = extremes(rows[k])
        if found is None:
            lines.append(f"{html.escape(name)}: no finite ‖dL/dh_t‖")
            continue
        hi, lo = found
        lines.append(
            f"{html.escape(name)}: ‖dL/dh_t‖ largest {fmt(rows[k, hi])} at t={hi}, smallest "
            f"{fmt(rows[k, lo])} at t={lo} (ratio {fmt(rows[k, lo] / rows[k, hi])})"
            if rows[k, hi] > 0
            else f"{html.escape(name)}: ‖dL/dh_t‖ is zero at every step"
        )
    stuck = []
    for k in filter(lambda k: k is not None, shown):
        name = names[k]
        gates = gates_of_layer(arrays, k)
        if "f" not in gate_names_of(arrays, k):  # an LSTM's forget gate; GRU, SimpleRNN none
            continue
        forget = gate_names_of(arrays, k).index("f")
        if gates is not None and np.isfinite(gates[1][forget]).any():
            share = float(np.nanmean(gates[1][forget]))
            stuck.append(f"{html.escape(name)} {fmt(100 * share)}%")
    if stuck:
        lines.append("saturated forget gates (mean over t): " + ", ".join(stuck))
    for name in input_names(arrays):
        saliency = saliency_rows(arrays, name)
        found = None if saliency is None else extremes(saliency[0])
        if found is not None:
            hi, lo = found
            what = f"input {html.escape(name)}" if name else "input"
            lines.append(
                f"{what} saliency (mean over samples): largest {fmt(saliency[0, hi])} at t={hi}, "
                f"smallest {fmt(saliency[0, lo])} at t={lo}"
            )
    return lines
