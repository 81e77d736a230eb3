"""The diagnosis and the comparison as tables for CSV files. NumPy and the csv module only.

Diagnosis CSV (`lstmviz export --csv F.csv` writes it beside the curves as `F_diagnosis.csv`):
one row per direction and curve (‖dL/dh_t‖ "h", ‖dL/dc_t‖ "c"), columns `record` (the training
step of a recording's record, of a training trace's step or the batch of a per-batch trace;
empty for the whole trace), `direction`, `cell`, `of`, `decay_per_step`, `steps_per_decade`,
`reach`, `trend`, `loss_step`, `units_unreached`, `verdict`. Empty fields: not defined.

Comparison CSV (`lstmviz compare A B --out F.csv`): a row per aligned timestep t; per direction
`{name}_a_h`, `{name}_b_h`, `{name}_log10_ratio_h` (and `_c` for LSTMs).
"""

from __future__ import annotations

import csv
import io

import numpy as np

HEADER = ("record", "direction", "cell", "of", "decay_per_step", "steps_per_decade", "reach",
          "trend", "loss_step", "units_unreached", "verdict")  # fmt: skip


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
            x.trend or "", _field(x.loss_step))  # fmt: skip


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
        for of in ("h", "c"):
            ratio = getattr(layer, f"log10_ratio_{of}")
            if ratio is not None:
                columns += [(f"{layer.name}_a_{of}", getattr(layer, f"a_{of}")),
                            (f"{layer.name}_b_{of}", getattr(layer, f"b_{of}")),
                            (f"{layer.name}_log10_ratio_{of}", ratio)]  # fmt: skip
    return columns
