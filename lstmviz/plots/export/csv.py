"""CSV: a trace's curves as columns (`csv_columns`: one row per timestep, each column named
after the trace key it comes from; docs/traces.md#csv-columns) and any columns as CSV text
(`csv_of_columns`: a recording's rows too, `lstmviz.analysis.report.tables`). `F_diagnosis.csv`
goes beside `F.csv` (`diagnosis_path`)."""

from __future__ import annotations

import csv as csv_module  # the standard library's, not this module
import io
from pathlib import Path

import numpy as np

from lstmviz.analysis.layers import direction_steps
from lstmviz.analysis.report.tables import without_c
from lstmviz.core import schema
from lstmviz.core.errors import ExportError
from lstmviz.io.trace import GradientTrace


def csv_columns(trace: GradientTrace) -> list[tuple[str, np.ndarray]]:
    """(header, values [T]) for every column of the CSV, in order (docs/traces.md#csv-columns):
    the trace's curves and rows as `lstmviz.core.schema` names them."""
    a, mode = trace.arrays, trace.mode
    curves = [k for k in schema.keys_with(schema.CURVE, a, mode) if np.ndim(a[k]) == 1]
    rows = [k for k in schema.keys_with(schema.ROWS, a, mode) if np.ndim(a[k]) == 2]
    joined = {k: schema.lookup(k)[0].joins for k in rows if schema.lookup(k)[0].joins}
    if curves:
        length = len(a[curves[0]])
    elif rows:
        first = np.shape(a[rows[0]])
        length = first[0] * first[1] if rows[0] in joined else first[1]
    else:
        raise ExportError("the trace has no per-timestep gradient norms (norm_h_total)")
    t = np.arange(length)
    columns: list[tuple[str, np.ndarray]] = [("t", t)]
    if joined:  # passes side by side on the time axis
        tp = int(a.get("pass_length", np.shape(a[next(iter(joined))])[-1]))
        columns += [("pass", t // tp + 1), ("t_in_pass", t % tp)]
    mask = a.get("mask")
    if mask is not None and np.shape(mask)[:1] == (length,):  # 0: padded in every sample,
        columns.append(("unmasked_samples", np.asarray(mask).sum(axis=1).astype(np.int64)))
    late = [k for k in curves if k.startswith("step0_")]  # the initial weights' curves last
    columns += [(k, np.asarray(a[k])) for k in curves if k not in late]
    by_layer = [k for k in rows if schema.row_name(k) == "layer"]
    columns += _layer_columns(a, by_layer, length)
    for key in (k for k in rows if k not in by_layer):
        value = np.asarray(a[key])
        if key in joined:
            if joined[key] not in a:  # else the same numbers are already a column
                columns.append((joined[key], value.reshape(-1)))
        elif value.shape[1] == length and value.dtype.kind == "f":
            base, row = key.rsplit("_by_", 1)[0], schema.row_name(key)
            columns += [(f"{base}_{row}{r + 1}", value[r]) for r in range(len(value))]
    columns += [(k, np.asarray(a[k])) for k in late]
    return columns


def _layer_columns(a, keys: list[str], length: int) -> list[tuple[str, np.ndarray]]:
    """One block per recurrent direction of the rows `keys` ([L, T] each): `<layer>_<base>`."""
    shaped = [k for k in keys if np.shape(a[k])[1:] == (length,)]
    if not shaped:
        return []
    count = np.shape(a[shaped[0]])[0]
    names = [str(n) for n in np.ravel(a.get("layer_names", []))]
    if len(names) != count:
        names = [f"layer{k + 1}" for k in range(count)]
    return [(f"{name}_{key.rsplit('_by_', 1)[0]}", _own_steps(np.asarray(a[key][k]), a, k))
            for k, name in enumerate(names) for key in shaped
            if not without_c(a, key, k)]  # fmt: skip


def _own_steps(row: np.ndarray, a, k: int) -> np.ndarray:
    """Direction k's row [T]; masked after its own T_k (a graph's shorter direction): empty
    fields, not its NaN padding."""
    steps = direction_steps(a, k)
    if steps is None or steps >= len(row):
        return row
    return np.ma.masked_array(row, mask=np.arange(len(row)) >= steps)


def diagnosis_path(csv_path: Path) -> Path:
    """Where the diagnosis CSV goes beside the curves' CSV `F.csv`: `F_diagnosis.csv`."""
    return csv_path.with_name(f"{csv_path.stem}_diagnosis.csv")


def csv_text(trace: GradientTrace) -> str:
    """The trace's curves, one row per timestep."""
    return csv_of_columns(csv_columns(trace))


CSV_BLOCK = 20_000  # rows formatted between two progress reports


def csv_of_columns(columns: list[tuple[str, np.ndarray]], step=None) -> str:
    """The columns as CSV text: a header, then a row per value; a field with a comma or a
    quote (a Keras layer's name may hold them) quoted as RFC 4180 says. Integers as they are,
    floats with 9 significant digits (`nan`, `inf`, `-inf` as Python writes them). `step`:
    called with the fraction of rows done after each block of `CSV_BLOCK` rows."""
    text = io.StringIO()
    writer = csv_module.writer(text, lineterminator="\n")
    writer.writerow(name for name, _ in columns)
    # one %-format per row: the fields are numbers, never quoted; a masked array's masked
    # values (a direction's steps past its own length) are empty fields
    formats = ["%d" if np.asarray(values).dtype.kind in "iub" else "%.9g" for _, values in columns]
    data = [_fields(values, f) if np.ma.isMaskedArray(values) else np.asarray(values).tolist()
            for (_, values), f in zip(columns, formats, strict=True)]  # fmt: skip
    row_format = ",".join("%s" if np.ma.isMaskedArray(values) else f
                          for (_, values), f in zip(columns, formats, strict=True)) + "\n"
    rows = list(zip(*data, strict=True))
    for start in range(0, len(rows), CSV_BLOCK):
        text.write("".join([row_format % row for row in rows[start:start + CSV_BLOCK]]))
        if step is not None:
            step(min(start + CSV_BLOCK, len(rows)) / len(rows))
    return text.getvalue()


def _fields(values: np.ma.MaskedArray, spec: str) -> list[str]:
    """A masked column's CSV fields: its values as `spec` formats them, "" where masked."""
    mask = np.ma.getmaskarray(values)
    return ["" if m else spec % v for v, m in zip(np.ma.getdata(values).tolist(), mask.tolist(),
                                                   strict=True)]  # fmt: skip
