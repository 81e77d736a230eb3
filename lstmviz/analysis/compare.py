"""Two runs compared: the log-ratio log10(‖B‖/‖A‖) of each direction's gradient norms per
timestep, both diagnoses, the configuration fields that differ. NumPy only.

Two traces, or two recordings (their last records' norms; their loss and reach over training
steps beside). Directions are matched by name; the others are listed (`only_in_a`,
`only_in_b`). Different lengths are aligned at the last step: the comparison covers the last
min(T_a, T_b) steps of each, and `notes` says so; each direction on its own (a graph's
directions keep their lengths), its arrays padded with NaN to the longest direction's aligned
steps (`T`; the JSON lists its own steps only). JSON contract (docs/diagnosis.md):

    {"layers": [{"name", "log10_ratio_h": [T], "log10_ratio_c": [T] (LSTM), "a": {…}, "b": {…}}],
     "only_in_a": […], "only_in_b": […], "config_diff": {field: [a, b]}}

with null where either norm is 0 or not finite; a direction whose diagnosis follows the
error of one step (docs/diagnosis.md) in A or B adds "log10_ratio_anchor_h": [T], the same of
‖∂L_t*/∂h_t‖ at each run's anchor t* (where both have one). Recordings add "records": {"a": …,
"b": …}, each {"step", "loss", "reach": {direction: [S]}, "steps_per_decade": {direction: [S]},
"anchor": {direction: [S]}} (the anchor t* of each record's diagnosis, null where none).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from lstmviz.analysis.diagnosis import (
    Diagnosis,
    DirectionDiagnosis,
    diagnose_directions,
    diagnose_recording,
    pre_html,
)
from lstmviz.analysis.directions import Direction, record_directions, trace_directions
from lstmviz.core.errors import InputError


@dataclass
class LayerComparison:
    """One direction in both runs: `a_h`, `b_h` (and `a_c`, `b_c` for LSTMs) the aligned norms
    [T], `log10_ratio_h` / `_c` [T] = log10(‖B‖/‖A‖) (NaN where either is 0 or not finite,
    and after the direction's own `steps` aligned steps), `a` and `b` the direction's
    diagnoses; `a_anchor_h`, `b_anchor_h`, `log10_ratio_anchor_h` [T] the same of the error of
    one step at each diagnosis's anchor, where both have one and either diagnosis used it."""

    name: str
    cell: str
    a_h: np.ndarray
    b_h: np.ndarray
    log10_ratio_h: np.ndarray
    a: DirectionDiagnosis
    b: DirectionDiagnosis
    a_c: np.ndarray | None = None
    b_c: np.ndarray | None = None
    log10_ratio_c: np.ndarray | None = None
    a_anchor_h: np.ndarray | None = None
    b_anchor_h: np.ndarray | None = None
    log10_ratio_anchor_h: np.ndarray | None = None
    steps: int = 0

    def changes(self) -> str:
        """One line: how the reach, steps per decade and trend changed from A to B."""
        parts = []
        for label, x, y in (("reach", self.a.h.reach, self.b.h.reach),
                            ("steps per decade", self.a.h.steps_per_decade,
                             self.b.h.steps_per_decade)):  # fmt: skip
            parts.append(f"{label} {_text(x)} → {_text(y)}" + (" steps" * (label == "reach")))
        if self.a.h.trend != self.b.h.trend:
            parts.append(f"{self.a.h.trend or '–'} → {self.b.h.trend or '–'}")
        anchors = (self.a.h.anchor, self.b.h.anchor)
        if anchors != (None, None):  # the error of one step was followed in A or B (or both)
            parts.append(f"from the error of step t={_text(anchors[0])}" if anchors[0] ==
                         anchors[1] else f"from the error of step t={_text(anchors[0])} (A), "
                         f"t={_text(anchors[1])} (B)")  # fmt: skip
        return f"{self.name}: " + ", ".join(parts)


@dataclass
class Comparison:
    """Runs A and B compared (`lstmviz.compare(a, b)`): `layers` (LayerComparison per direction
    both have), `only_in_a` / `only_in_b`, `config_diff` {field: (a, b)}, `T` (aligned steps),
    `diagnosis_a` / `diagnosis_b`, `notes`; recordings: `records_a` / `records_b` (step, loss,
    and per direction reach and steps per decade over training steps). `.plot()` draws the
    curves and the log-ratio heatmap; `.to_dict()` is the JSON contract."""

    T: int
    layers: list[LayerComparison]
    only_in_a: list[str]
    only_in_b: list[str]
    config_diff: dict[str, tuple]
    diagnosis_a: Diagnosis
    diagnosis_b: Diagnosis
    notes: list[str] = field(default_factory=list)
    records_a: dict | None = None
    records_b: dict | None = None
    names: tuple[str, str] = ("A", "B")

    def to_dict(self) -> dict:
        layers = []
        for layer in self.layers:
            own = slice(0, layer.steps or None)
            out = {"name": layer.name, "log10_ratio_h": _json(layer.log10_ratio_h[own])}
            if layer.log10_ratio_c is not None:
                out["log10_ratio_c"] = _json(layer.log10_ratio_c[own])
            if layer.log10_ratio_anchor_h is not None:
                out["log10_ratio_anchor_h"] = _json(layer.log10_ratio_anchor_h[own])
            layers.append(out | {"a": layer.a.to_dict(), "b": layer.b.to_dict()})
        out = {"layers": layers, "only_in_a": list(self.only_in_a),
               "only_in_b": list(self.only_in_b),
               "config_diff": {k: [_plain(a), _plain(b)]
                               for k, (a, b) in self.config_diff.items()}}  # fmt: skip
        if self.records_a is not None:
            out["records"] = {"a": _json_records(self.records_a),
                              "b": _json_records(self.records_b)}  # fmt: skip
        return out

    def ratio_matrix(self, of: str = "h") -> np.ndarray:
        """log10(‖B‖/‖A‖) [directions, T] (`of` "h" or "c"; NaN rows for directions without c)."""
        rows = [layer.log10_ratio_h if of == "h" else layer.log10_ratio_c for layer in self.layers]
        return np.array([np.full(self.T, np.nan) if r is None else r for r in rows]).reshape(
            len(rows), self.T)  # fmt: skip

    def table(self) -> str:
        lines = [f"{len(self.layers)} direction(s) compared over {self.T} steps"]
        lines += self.notes
        for layer in self.layers:
            ratio = layer.log10_ratio_h[np.isfinite(layer.log10_ratio_h)]
            span = (f"log10 ‖B‖/‖A‖ of dL/dh_t: {ratio.min():+.3g} … {ratio.max():+.3g}"
                    if ratio.size else "log10 ‖B‖/‖A‖: not defined")  # fmt: skip
            lines += [layer.changes(), f"  {span}"]
            if layer.log10_ratio_anchor_h is not None:
                ratio = layer.log10_ratio_anchor_h[np.isfinite(layer.log10_ratio_anchor_h)]
                lines.append(f"  log10 ‖B‖/‖A‖ of ∂L_t*/∂h_t: {ratio.min():+.3g} … "
                             f"{ratio.max():+.3g}" if ratio.size else
                             "  log10 ‖B‖/‖A‖ of ∂L_t*/∂h_t: not defined")  # fmt: skip
            lines += [f"  A: {layer.a.verdict}", f"  B: {layer.b.verdict}"]
        for label, names in (("only in A", self.only_in_a), ("only in B", self.only_in_b)):
            if names:
                lines.append(f"{label}: {', '.join(names)}")
        for key, (a, b) in self.config_diff.items():
            lines.append(f"config {key}: {a!r} → {b!r}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Comparison({self.names[0]!r} vs {self.names[1]!r})\n{self.table()}"

    def _repr_html_(self) -> str:
        return pre_html(repr(self))

    def plot(self, width: int = 1000, height: int = 700, dpi: float = 96):
        """The curves (A solid, B dashed) and the log-ratio heatmap as a notebook figure
        (`lstmviz.notebook.Figure`-like: PNG bytes, shown inline by Jupyter). Needs Qt."""
        from lstmviz.plots.export.compare_figure import compare_plot

        return compare_plot(self, width, height, dpi)


def compare(a, b, names: tuple[str, str] = ("A", "B")) -> Comparison:
    """Compare two GradientTraces, or two Recordings. InputError for a trace and a recording,
    or anything else."""
    kinds = (_kind(a), _kind(b))
    if kinds[0] != kinds[1]:
        raise InputError(f"cannot compare a {kinds[0]} with a {kinds[1]}: give two traces, two "
                         "recordings or two models")  # fmt: skip
    if kinds[0] == "trace":
        dirs_a, dirs_b = trace_directions(a), trace_directions(b)
        config_a, config_b = a.config, b.config
        rec_a = rec_b = None
    else:
        dirs_a, dirs_b = record_directions(a, len(a) - 1), record_directions(b, len(b) - 1)
        config_a = a.last.config if a.last is not None else None
        config_b = b.last.config if b.last is not None else None
        rec_a, rec_b = _records(a), _records(b)
    diag_a, diag_b = diagnose_directions(dirs_a), diagnose_directions(dirs_b)
    by_b = {d.name: (d, diag_b.layer(d.name)) for d in dirs_b}
    pairs = [(d, *by_b[d.name]) for d in dirs_a if d.name in by_b]
    lengths = {(d.T, other.T) for d, other, _ in pairs} or {(dirs_a[0].T, dirs_b[0].T)}
    T = max(min(pair) for pair in lengths)
    notes = []
    T_a, T_b = next(iter(lengths))
    if len(lengths) == 1 and T_a != T_b:
        notes.append(f"different lengths: A has {T_a} steps, B {T_b}; aligned at the last step "
                     f"(the last {T} of each)")  # fmt: skip
    elif len(lengths) > 1:
        notes += [f"{d.name}: A has {d.T} steps, B {other.T}; aligned at the last step (the "
                  f"last {min(d.T, other.T)} of each)"
                  for d, other, _ in pairs if d.T != other.T]  # fmt: skip
    layers = [_layer(d, other, diag_a.layer(d.name), other_diag, min(d.T, other.T), T)
              for d, other, other_diag in pairs]  # fmt: skip
    names_a, names_b = [d.name for d in dirs_a], [d.name for d in dirs_b]
    return Comparison(T, layers, [n for n in names_a if n not in names_b],
                      [n for n in names_b if n not in names_a], config_diff(config_a, config_b),
                      diag_a, diag_b, notes, rec_a, rec_b, names)  # fmt: skip


def log10_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log10(b / a) elementwise, NaN where either is 0 or not finite."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    ok = np.isfinite(a) & np.isfinite(b) & (a > 0) & (b > 0)
    out = np.full(a.shape, np.nan)
    out[ok] = np.log10(b[ok]) - np.log10(a[ok])
    return out


def config_diff(a, b) -> dict[str, tuple]:
    """The RunConfig fields whose values differ: {field: (a, b)} ({} when either is None)."""
    if a is None or b is None:
        return {}
    return {f.name: (getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
            if getattr(a, f.name) != getattr(b, f.name)}  # fmt: skip


def _layer(da: Direction, db: Direction, diag_a, diag_b, steps: int, T: int) -> LayerComparison:
    """Direction `da` of A and `db` of B over their last `steps` steps, padded to T."""
    a_h, b_h = _last(da.norm_h, steps, T), _last(db.norm_h, steps, T)
    out = LayerComparison(da.name, da.cell, a_h, b_h, log10_ratio(a_h, b_h), diag_a, diag_b,
                          steps=steps)  # fmt: skip
    if da.norm_c is not None and db.norm_c is not None:
        out.a_c, out.b_c = _last(da.norm_c, steps, T), _last(db.norm_c, steps, T)
        out.log10_ratio_c = log10_ratio(out.a_c, out.b_c)
    rows = _anchor_row(da, diag_a), _anchor_row(db, diag_b)
    if all(row is not None for row in rows) and (diag_a.anchors or diag_b.anchors):
        out.a_anchor_h, out.b_anchor_h = (_last(row, steps, T) for row in rows)
        out.log10_ratio_anchor_h = log10_ratio(out.a_anchor_h, out.b_anchor_h)
    return out


def _anchor_row(d: Direction, diagnosis: DirectionDiagnosis) -> np.ndarray | None:
    """‖∂L_t*/∂h_t‖ [T] of `d` at the anchor its diagnosis's h names (where it follows the
    error of one step), else at its first anchor; None without anchored norms."""
    if d.anchor_h is None or d.anchors is None or not len(d.anchors):
        return None
    at = [int(a) for a in d.anchors]
    return d.anchor_h[at.index(diagnosis.h.anchor) if diagnosis.h.anchor in at else 0]


def _last(curve: np.ndarray, steps: int, T: int) -> np.ndarray:
    """The last `steps` values of `curve` (float64), then NaN up to T."""
    out = np.full(T, np.nan)
    out[:steps] = np.asarray(curve, np.float64)[len(curve) - steps :]
    return out


def _kind(x) -> str:
    from lstmviz.io.recording import Recording
    from lstmviz.io.trace import GradientTrace

    if isinstance(x, GradientTrace):
        return "trace"
    if isinstance(x, Recording):
        return "recording"
    raise InputError(f"cannot compare a {type(x).__name__}: give two GradientTraces or two "
                     "Recordings (or their files)")  # fmt: skip


def _records(rec) -> dict:
    diagnosis = diagnose_recording(rec)
    series = diagnosis.series()
    return {"step": np.asarray(rec.arrays["step"]), "loss": np.asarray(rec.arrays["loss"]),
            "reach": {n: s["reach"] for n, s in series.items()},
            "steps_per_decade": {n: s["steps_per_decade"] for n, s in series.items()},
            "anchor": {n: s["anchor"] for n, s in series.items()}}  # fmt: skip


def _json(values) -> list:
    return [float(v) if math.isfinite(v) else None for v in np.asarray(values, np.float64)]


def _json_records(records: dict) -> dict:
    return {"step": [int(s) for s in records["step"]], "loss": _json(records["loss"]),
            "reach": {n: _json(v) for n, v in records["reach"].items()},
            "steps_per_decade": {n: _json(v)
                                 for n, v in records["steps_per_decade"].items()},
            "anchor": {n: [None if math.isnan(v) else int(v) for v in values]
                       for n, values in records["anchor"].items()}}  # fmt: skip


def _plain(value):
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def _text(value) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.3g}" if isinstance(value, float) else str(value)
