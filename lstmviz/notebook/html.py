"""What a notebook shows for a GradientTrace or a Recording: one compact HTML block
(`_repr_html_`), the key facts first and the list of arrays folded away.

    trace            # the last expression of a cell: the summary line the app shows (mode,
                     # sizes, loss, kernel, NaN/Inf), the largest and smallest ‖dL/dh_t‖ and
                     # where (per LSTM direction, batch or pass), the arrays grouped by shape
                     # (click to unfold)
    load_recording("run.lvz")   # records, steps, epochs, loss first → last, directions

The facts come from the helpers the app's summaries use (`lstmviz.analysis.report.summary`,
`lstmviz.analysis.records`, `lstmviz.analysis.layers`: NumPy only), so the notebook and the window
say the same. No Qt and no TensorFlow are imported. Every text from a trace or a file is
escaped; colours are inherited (no background is set), so light and dark themes both read.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np

from lstmviz.analysis.layers import layer_names, layer_rows
from lstmviz.analysis.records import (
    evolution_lines,
    panel_arrays,
    record_count,
    record_rows,
    record_text,
    recording_summary,
    steps_of,
)
from lstmviz.analysis.report.model_report import extremes, going_back
from lstmviz.analysis.report.summary import WARNING_STYLE, fmt, summary_text
from lstmviz.core import modes, schema
from lstmviz.core.shapes import array_groups

SHOWN_TEXT = 60  # characters of a text value shown in the arrays table
# a notebook's theme may be dark: its own error colour, then VS Code's, then one readable on both
_WARNING = "color:var(--jp-error-color1,var(--vscode-errorForeground,#e5483f))"
_LOADED = "loaded from file"  # summary_text's part for a run of unknown duration

# Inherit the notebook's colours and font; JupyterLab centres tables and right-aligns cells.
_BOX = "color:inherit;background:transparent;line-height:1.5;max-width:100%;overflow-x:auto"
_TABLE = "border-collapse:collapse;margin:4px 0 6px 0;color:inherit;background:transparent"
_CELL = ("text-align:left;padding:2px 10px 2px 0;vertical-align:top;"
         "border-bottom:1px solid rgba(128,128,128,0.3)")  # fmt: skip
_HEAD = _CELL + ";font-weight:600"
_CODE = "font-family:var(--jp-code-font-family,monospace);font-size:0.92em"
_MUTED = "opacity:0.7"


def trace_html(trace) -> str:
    """A GradientTrace as HTML: its summary line, ‖dL/dh_t‖'s extremes per direction, its
    arrays grouped by shape and dtype (folded), a model's summary (folded)."""
    arrays, mode = trace.arrays, trace.mode
    seconds = arrays.get("model_seconds")  # a model run times itself; other traces do not
    line = _summary(mode, arrays, trace.config, None if seconds is None else float(seconds))
    parts = [f"<div><b>GradientTrace</b> · {line}</div>"]
    rows = _norm_rows(arrays)
    if rows is not None:
        norms, names, starts = rows
        parts.append(extremes_table(norms, names, starts=starts))
    parts.append(arrays_details(arrays, mode, "arrays"))
    parts.append(_text_details(arrays))
    return _box(parts)


def recording_html(recording) -> str:
    """A Recording as HTML: the file and whether fit is still writing it; records, steps,
    epochs, directions, loss first → last; ‖dL/dh_t‖'s extremes per direction at the last
    record; the loss and norms over the records; its rows grouped by shape (folded)."""
    arrays = recording.arrays
    path = Path(recording.path)
    state = ("finished" if recording.finished
             else "still being written (fit running, or its writer was stopped)")  # fmt: skip
    head = (f"<b>Recording</b> <span style='{_CODE}' title='{_attr(str(path))}'>"
            f"{html.escape(path.name)}</span> · {state}")  # fmt: skip
    count, steps = record_count(arrays), steps_of(arrays)
    line = recording_summary(arrays)
    if steps:
        line += f" · T={steps}"
    parts = [f"<div>{head}</div>", f"<div>{line}</div>"]
    if count and steps:
        shown = panel_arrays(recording)  # with the last trace's mask: padded steps left out
        norms = record_rows(shown, count - 1)
        names = layer_names(arrays)[: len(norms)]
        caption = f"‖dL/dh_t‖ at the last record, {record_text(arrays, count - 1)}"
        parts.append(extremes_table(norms, names, caption))
    lines = evolution_lines(arrays)
    if lines:
        parts.append("<ul style='margin:2px 0 4px 0;padding-left:1.4em'>"
                     + "".join(f"<li>{item}</li>" for item in lines) + "</ul>")  # fmt: skip
    parts.append(arrays_details(arrays, schema.RECORDING, "rows"))
    parts.append(_text_details(arrays))
    last = recording.last
    if last is not None:
        parts.append(f"<div style='{_MUTED}'><code style='{_CODE}'>.last</code>: the last "
                     f"record's model trace ({len(last.arrays)} arrays)</div>")  # fmt: skip
    return _box(parts)


def extremes_table(norms: np.ndarray, names: list[str], caption: str = "‖dL/dh_t‖",
                   starts: list[int] | None = None) -> str:  # fmt: skip
    """A row per direction of `norms` [L, T]: the largest and the smallest ‖dL/dh_t‖ and their
    t, and their ratio, the vanishing (or exploding) gradient in one number. `starts`: the t
    of each row's first column (multi-pass rows are passes of one sequence); 0 by default."""
    rows = []
    starts = [0] * len(norms) if starts is None else starts
    for name, row, start in zip(names, norms, starts, strict=False):
        row = np.asarray(row, np.float64)
        found = extremes(row)
        if found is None:
            cells = ["no finite value", "", ""]
        else:
            hi_t, lo_t = found
            hi, lo = row[hi_t], row[lo_t]
            if lo > 0:
                ratio = f"{fmt(hi / lo)}{going_back(name, hi_t, lo_t)}"
            else:
                ratio = "∞ (the smallest is 0)"
            cells = [f"{fmt(hi)} at t = {start + hi_t}", f"{fmt(lo)} at t = {start + lo_t}",
                     ratio]  # fmt: skip
        cells = [html.escape(name), *cells]
        rows.append("<tr>" + "".join(f"<td style='{_CELL}'>{c}</td>" for c in cells) + "</tr>")
    heads = (caption, "largest", "smallest", "largest / smallest")
    head = "".join(f"<th style='{_HEAD}'>{html.escape(h)}</th>" for h in heads)
    return f"<table style='{_TABLE}'><tr>{head}</tr>{''.join(rows)}</table>"


def _shown_groups(arrays) -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    """`trace.array_groups`, its values as text."""
    groups, shown = array_groups(arrays)
    def text(value: np.ndarray) -> str:
        return _value_text(value) if value.ndim == 0 else ", ".join(_cut(str(v)) for v in value)

    return groups, [(key, text(value)) for key, value in shown]


def arrays_details(arrays, mode: str, what: str) -> str:
    """The arrays grouped by shape, folded in a <details>: shape, dtype, what the axes are
    (the schema's symbols), the keys (each with the schema's description as its tooltip)."""
    groups, values = _shown_groups(arrays)
    rows = []
    for shape, keys in groups.items():
        dims = _dims(keys, arrays, mode)
        keys_html = ", ".join(_key(k, mode) for k in keys)
        rows.append(f"<tr><td style='{_CELL};{_CODE};white-space:nowrap'>{html.escape(shape)}"
                    f"</td><td style='{_CELL};{_MUTED}'>{dims}</td><td style='{_CELL}'>"
                    f"{keys_html}</td></tr>")  # fmt: skip
    for key, text in values:
        rows.append(f"<tr><td style='{_CELL}'>{_key(key, mode)}</td><td style='{_CELL}'></td>"
                    f"<td style='{_CELL}'>{html.escape(text)}</td></tr>")  # fmt: skip
    count = len(arrays)
    label = f"{count} {what} in {len(groups)} shape{'s' * (len(groups) != 1)}" + (
        f", {len(values)} value{'s' * (len(values) != 1)}" if values else ""
    )
    head = "".join(f"<th style='{_HEAD}'>{h}</th>" for h in ("shape", "axes", "keys"))
    return (
        f"<details><summary style='cursor:pointer'>{label}</summary>"
        f"<table style='{_TABLE}'><tr>{head}</tr>{''.join(rows)}</table></details>"
    )


def _summary(mode: str, arrays, config, seconds: float | None) -> str:
    """The app's summary line (HTML), without "loaded from file": in a notebook the trace
    is as often fresh from a run as read from a file."""
    parts = summary_text(mode, arrays, config, seconds).split(" · ")
    if _LOADED in parts:
        del parts[len(parts) - 1 - parts[::-1].index(_LOADED)]
    return " · ".join(parts).replace(WARNING_STYLE, _WARNING)


def _norm_rows(arrays) -> tuple[np.ndarray, list[str], list[int]] | None:
    """‖dL/dh_t‖ per row [L, T], the rows' names and the t of their first columns: a row per
    direction of a model (padded steps NaN), per batch of a per-batch-weights trace ("batch
    1", …), per pass of a multi-pass trace ("pass 1", …: each pass's loss makes its own rise,
    which one row would mix up), else one unnamed row; None without norms."""
    rows = layer_rows(arrays)
    if rows is not None:
        return rows, layer_names(arrays), [0] * len(rows)
    batches = arrays.get("norm_h_total_by_batch")
    if batches is not None and np.ndim(batches) == 2 and np.size(batches):
        names = [f"batch {n + 1}" for n in range(len(batches))]
        return np.asarray(batches, np.float64), names, [0] * len(names)
    passes = arrays.get("norm_h_total_by_pass")
    if passes is not None and np.ndim(passes) == 2 and np.size(passes):
        count, length = np.shape(passes)
        return (np.asarray(passes, np.float64), [f"pass {p + 1}" for p in range(count)],
                [p * length for p in range(count)])  # fmt: skip
    norm = arrays.get("norm_h_total")
    if norm is not None and np.ndim(norm) == 1 and np.size(norm):
        return np.asarray(norm, np.float64)[None], ["LSTM"], [0]
    return None


def _text_details(arrays) -> str:
    """A model's summary (Keras's layers, their shapes and parameters), folded."""
    text = arrays.get("model_summary")
    if text is None or not str(text).strip():
        return ""
    return (f"<details><summary style='cursor:pointer'>model summary</summary><pre style="
            f"'{_CODE};color:inherit;background:transparent;margin:4px 0'>"
            f"{html.escape(str(text))}</pre></details>")  # fmt: skip


def _dims(keys: list[str], arrays, mode: str) -> str:
    """The axes a group's keys share, as the schema names them ("T, B, H"; a model's per-
    direction H0, H1 … as H); "" when the keys disagree or the schema allows them any shape."""
    lead = modes.find(mode).lead
    found = set()
    for key in keys:
        try:
            allowed = schema.shapes(key, mode, lead)
        except KeyError:
            return ""
        if allowed is None:  # any shape (a loss's target): the other keys say
            continue
        dims = next((d for d in allowed if len(d) == np.ndim(arrays[key])), None)
        if dims is None:
            return ""
        found.add(tuple(re.sub(r"(?<=[A-Za-z])\d+$", "", d) for d in dims))
    return html.escape(", ".join(found.pop())) if len(found) == 1 else ""


def _key(key: str, mode: str) -> str:
    """A key in code type, with what the schema says of it as its tooltip."""
    found = schema.lookup(key, mode)
    title = f" title='{_attr(found[0].about)}'" if found else ""
    return f"<code style='{_CODE}'{title}>{html.escape(key)}</code>"


def _value_text(value: np.ndarray) -> str:
    """A 0-d array: numbers with 4 significant digits, text's first line cut short."""
    if value.dtype.kind == "U":
        return _cut(str(value))
    if value.dtype.kind == "f":
        return f"{float(value):.4g}"
    return str(value.item())


def _cut(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    return first[:SHOWN_TEXT] + ("…" if len(first) > SHOWN_TEXT or first != text else "")


def _attr(text: str) -> str:
    return html.escape(text, quote=True)


def _box(parts: list[str]) -> str:
    return f"<div class='lstmviz-repr' style='{_BOX}'>{''.join(p for p in parts if p)}</div>"
