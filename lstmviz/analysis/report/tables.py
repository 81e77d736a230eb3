"""The diagnosis and the comparison as tables for CSV files. NumPy and the csv module only.

Diagnosis CSV (`lstmviz export --csv F.csv` writes it beside the curves as `F_diagnosis.csv`):
one row per direction and curve (‖dL/dh_t‖ "h", ‖dL/dc_t‖ "c"), columns `record` (the training
step of a recording's record, of a training trace's step or the batch of a per-batch trace;
empty for the whole trace), `direction`, `cell`, `of`, `decay_per_step`, `steps_per_decade`,
`reach`, `trend`, `loss_step`, `anchor` (the step t* whose loss alone was followed back where
the loss enters at every step: the error of one step, docs/diagnosis.md), `units_unreached`,
`verdict`. Empty fields: not defined.

Comparison CSV (`lstmviz compare A B --out F.csv`): a row per aligned timestep t; per direction
`{name}_a_h`, `{name}_b_h`, `{name}_log10_ratio_h` (and `_c` for LSTMs; `_anchor_h`, the
error of one step, where the comparison has it), empty past a direction's own aligned steps.
"""

from __future__ import annotations

import csv
import io

import numpy as np

from lstmviz.analysis.layers import direction_steps, has_cell_state, masked_steps
from lstmviz.analysis.records import panel_arrays
from lstmviz.core import schema

HEADER = ("record", "direction", "cell", "of", "decay_per_step", "steps_per_decade", "reach",
          "trend", "loss_step", "anchor", "units_unreached", "verdict")  # fmt: skip


def diagnosis_rows(diagnosis) -> list[tuple]:
    """The diagnosis CSV's rows (HEADER's columns) of a Diagnosis or a RecordingDiagnosis."""
    if hasattr(diagnosis, "records"):
        return [row for step, d in zip(diagnosis.step, diagnosis.records, strict=True)
                for row in _rows(d, int(step))]  # fmt: skip
    rows = _rows(diagnosis, "")
    for d in diagnosis.layers:  # training steps or batches
        rows += [(label, d.name, d.cell, "h", *_decay(x), "", "") for label, x in d.rows]
    return rows


def _rows(diagnosis, record) -> list[tuple]:
    out = []
    for d in diagnosis.layers:
        for of, x in (("h", d.h), ("c", d.c)):
            if x is not None:
                out.append((record, d.name, d.cell, of, *_decay(x),
                            _field(d.units_unreached), d.verdict))  # fmt: skip
    return out


def _decay(x) -> tuple:
    return (_field(x.decay_per_step), _field(x.steps_per_decade), _field(x.reach),
            x.trend or "", _field(x.loss_step), _field(x.anchor))  # fmt: skip


def _field(value) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return ""
    return f"{value:.9g}" if isinstance(value, float) else str(value)


def diagnosis_csv(diagnosis) -> str:
    """The diagnosis CSV's text (RFC 4180 quoting: verdicts hold commas)."""
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(diagnosis_rows(diagnosis))
    return text.getvalue()


def comparison_columns(comparison) -> list[tuple[str, np.ndarray]]:
    """(header, values [T]) of the comparison CSV, t first."""
    columns = [("t", np.arange(comparison.T))]
    for layer in comparison.layers:
        # a direction of fewer aligned steps (a graph's): empty fields after its own
        past = np.arange(comparison.T) >= (layer.steps or comparison.T)
        for of in ("h", "c", "anchor_h"):
            ratio = getattr(layer, f"log10_ratio_{of}")
            if ratio is not None:
                columns += [(f"{layer.name}_{part}", np.ma.masked_array(values, mask=past)
                             if past.any() else values)
                            for part, values in ((f"a_{of}", getattr(layer, f"a_{of}")),
                                                 (f"b_{of}", getattr(layer, f"b_{of}")),
                                                 (f"log10_ratio_{of}", ratio))]  # fmt: skip
    return columns


def without_c(a, key: str, k: int) -> bool:
    """Whether `key` is the cell norm and direction k has no cell state (a GRU or SimpleRNN):
    no column for it."""
    return key.startswith("norm_c_total") and not has_cell_state(a, k)


RECORD_COLUMNS = ("step", "epoch", "loss", "train_loss", "record_seconds")
STATISTICS = {"mean": np.mean, "min": np.min, "max": np.max}  # of a norm over t


def recording_columns(recording) -> list[tuple[str, np.ndarray]]:
    """(header, values [S]) for every column of a `Recording`'s CSV (`lstmviz.plots.export.writer`'s
    docstring). The statistics over t leave out the steps padded in every recorded sample
    (the last record's mask, when its trace was read: the data is the same at every record),
    as the panels leave them blank; and each direction's padding after its own T_k (the last
    record's trace says T_k)."""
    a = recording.arrays
    last = recording.last.arrays if recording.last is not None else {}
    columns = [(key, np.asarray(a[key])) for key in RECORD_COLUMNS]
    # the norms [S, L, T] (not the anchored rows [S, L, A, T]: the diagnosis CSV has their use)
    norms = sorted((k for k in a if k.startswith("norm_") and k.endswith("_by_layer")),
                   key=schema.order)  # fmt: skip
    padded = masked_steps(panel_arrays(recording))  # [T] or None
    for k, name in enumerate(a["layer_names"]):  # a block per direction, as a model trace's
        for key in norms:
            if without_c(a, key, k):
                continue
            base = key.removesuffix("_by_layer")
            rows = np.asarray(a[key][:, k])  # [S, T]
            rows = rows[:, : direction_steps(last, k) if last else None]
            if padded is not None and padded.shape == rows.shape[1:] and not padded.all():
                rows = rows[:, ~padded]
            for stat, reduce in STATISTICS.items():
                columns.append((f"{name}_{base}_{stat}", reduce(rows, axis=-1)))
    return columns
