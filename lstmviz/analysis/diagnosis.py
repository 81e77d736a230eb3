"""The diagnosis of a trace or a recording: per direction, how far back the gradient reaches,
whether it vanishes or explodes, and one verdict line. NumPy only.

`diagnose(trace)` -> Diagnosis (also `trace.diagnosis`); `diagnose_recording(rec)` ->
RecordingDiagnosis (also `recording.diagnosis`), one Diagnosis per record from its norm rows.
`to_dict()` gives the JSON contract (docs/diagnosis.md):

    {"T": T, "layers": [{"name", "cell", "h": D, "c": D (LSTM only), "units_unreached",
     "gates_saturated": {gate: fraction}, "anchors": [t*, …], "verdict"}]}
    D = {"decay_per_step", "steps_per_decade", "reach", "trend", "anchor": t* or null}

A direction of a graph whose length differs from T adds "steps": T_k; one whose final state is
another's initial state (an encoder handing over to its decoder) is followed across the
hand-over and adds "across": {"chain": [names], "span", "loss_at": [name, t],
"reached": [name, t]} (`chain_diagnosis`).

A recording: {"T": T, "records": [{"step", "epoch", "loss", "layers": [...]}]}.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field

import numpy as np

from lstmviz.analysis.decay import (
    Decay,
    Segment,
    anchored_decay,
    chain_decay,
    connectivity_decay,
    curve_decay,
    loss_steps,
    runs_backward,
    span_of,
)
from lstmviz.analysis.directions import Direction, record_directions, trace_directions
from lstmviz.core.schema import GATE_SATURATION_DIAGNOSIS

SATURATED = GATE_SATURATION_DIAGNOSIS  # a sigmoid gate below this or above 1 - this (tanh:
# |g| > 1 - this); model mode records the same fraction (`layer{k}_gates_saturated_diagnosis`)
UNREACHED = 1e-6  # a unit is unreached below this fraction of the largest per-unit gradient
FARTHEST = 0.1  # ... measured over this farthest fraction of the span


@dataclass
class DirectionDiagnosis:
    """One direction's diagnosis. Contract fields: `name`, `cell`, `h`, `c` (Decay; c None
    for a cell without one), `units_unreached` (fraction, None without per-unit gradients),
    `gates_saturated` {gate: fraction}, `verdict`. Details: `reverse` (processes t = T-1 → 0),
    `forget_timescale` [H] −1/ln f̄_j per unit (steps; model traces without
    `layer{k}_gates_unit_mean`: one value, averaged over the units), `measured_timescale`
    [H] −1/ln r_j of each unit's mean |dL/dc_t,j|, `own_timescale` [S] a modern layer's own
    per channel (docs/modern-recurrence.md), `snr` [T] the gradient's signal-to-noise
    ratio across the batch per step, `nonfinite_step` the first input position whose norm is
    NaN or Inf, `rows` [(label, Decay)] per batch or training step, `notes`; `steps` T_k,
    `chain` the directions its diagnosis follows across hand-overs (itself first; [] when it
    is diagnosed alone), `fed_by` the direction whose final state is its initial state,
    `handover` lines on its hand-overs (`details` shows them), `anchors` the steps whose loss
    alone its h and c follow back where the loss enters at every step (the error of one step;
    [] otherwise)."""

    name: str
    cell: str
    h: Decay
    c: Decay | None
    units_unreached: float | None
    gates_saturated: dict[str, float]
    verdict: str = ""
    reverse: bool = False
    forget_timescale: np.ndarray | None = None
    measured_timescale: np.ndarray | None = None
    own_timescale: np.ndarray | None = None
    snr: np.ndarray | None = None
    nonfinite_step: int | None = None
    rows: list[tuple[int, Decay]] = field(default_factory=list)
    row_kind: str = ""
    notes: list[str] = field(default_factory=list)
    steps: int = 0
    chain: list[str] = field(default_factory=list)
    fed_by: str = ""
    handover: list[str] = field(default_factory=list)
    anchors: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        out = {"name": self.name, "cell": self.cell, "h": self.h.to_dict()}
        if self.cell == "lstm":
            out["c"] = None if self.c is None else self.c.to_dict()
        out |= {"units_unreached": _json_float(self.units_unreached),
                "gates_saturated": {g: _json_float(f) for g, f in self.gates_saturated.items()},
                "anchors": list(self.anchors), "verdict": self.verdict}  # fmt: skip
        if self.chain and self.h.steps is not None:
            reached = self.h.step_at(self.h.reach - 1) if self.h.reach else None
            out["across"] = {"chain": list(self.chain), "span": self.h.span,
                             "loss_at": list(self.h.step_at(0)),
                             "reached": None if reached is None else list(reached)}  # fmt: skip
        return out


@dataclass
class Diagnosis:
    """A trace's diagnosis: `T`, `layers` (a DirectionDiagnosis per direction), `nonfinite`
    (first input position and direction whose norm is NaN or Inf, or None)."""

    T: int
    layers: list[DirectionDiagnosis]
    nonfinite: tuple[int, str] | None = None

    def to_dict(self) -> dict:
        layers = [d.to_dict() | ({"steps": d.steps} if d.steps and d.steps != self.T else {})
                  for d in self.layers]  # fmt: skip
        return {"T": self.T, "layers": layers}

    def layer(self, name: str) -> DirectionDiagnosis:
        for d in self.layers:
            if d.name == name:
                return d
        raise KeyError(f"no direction {name!r} (directions: {[d.name for d in self.layers]})")

    def table(self) -> str:
        """A text table: a row per direction (cell, decay, steps/decade, reach, trend of
        ‖dL/dh_t‖, then of ‖dL/dc_t‖) and each verdict."""
        head = ("direction", "cell", "of", "decay/step", "steps/decade", "reach", "trend")
        rows = []
        for d in self.layers:
            for label, decay in (("h", d.h), ("c", d.c)):
                if decay is not None:
                    rows.append((d.name if label == "h" else "", d.cell if label == "h" else "",
                                 label, _num(decay.decay_per_step, ".4g"),
                                 _num(decay.steps_per_decade, ".3g"),
                                 reach_text(d, decay, self.T), decay.trend or "–"))  # fmt: skip
        widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                 for r in [head, *rows]]  # fmt: skip
        lines.insert(1, "  ".join("-" * w for w in widths))
        for d in self.layers:
            lines.append(f"{d.name}: {d.verdict}")
            lines += [f"  {line}" for line in details(d)]
        if self.nonfinite is not None:
            lines.append(f"first non-finite gradient norm: t={self.nonfinite[0]} in "
                         f"{self.nonfinite[1]}")  # fmt: skip
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Diagnosis(T={self.T})\n{self.table()}"

    def _repr_html_(self) -> str:
        return pre_html(repr(self))


@dataclass
class RecordingDiagnosis:
    """A recording's diagnosis: one Diagnosis per record (`records`), with its `step`,
    `epoch` and `loss` [S]."""

    T: int
    records: list[Diagnosis]
    step: np.ndarray
    epoch: np.ndarray
    loss: np.ndarray

    def to_dict(self) -> dict:
        return {"T": self.T, "records": [
            {"step": int(s), "epoch": int(e), "loss": _json_float(loss)} | d.to_dict()
            for s, e, loss, d in zip(self.step, self.epoch, self.loss, self.records,
                                     strict=True)]}  # fmt: skip

    def series(self) -> dict[str, dict[str, np.ndarray]]:
        """Per direction: `steps_per_decade` and `reach` of ‖dL/dh_t‖ over the records [S]
        (NaN where not defined), with `step` [S] and `anchor` [S] (the step t* whose error
        alone was followed back; NaN where the loss's own span was fitted)."""
        return series_of([(int(s), d) for s, d in zip(self.step, self.records, strict=True)])

    def table(self) -> str:
        """Steps per decade and reach of ‖dL/dh_t‖ per direction, a row per record."""
        lines = []
        for name, cols in self.series().items():
            anchored = bool(np.isfinite(cols["anchor"]).any())  # a column of t* where used
            lines.append(f"{name}: step, steps/decade, reach (of {self.T})"
                         + ", anchor t* (the error of one step)" * anchored)  # fmt: skip
            rows = zip(cols["step"], cols["steps_per_decade"], cols["reach"], cols["anchor"],
                       strict=True)  # fmt: skip
            lines += [f"  {int(s):>7}  {_num(x, '.3g'):>10}  {_num(r, '.0f'):>5}"
                      + f"  {_num(a, '.0f'):>5}" * anchored for s, x, r, a in rows]
        return "\n".join(lines)

    def __repr__(self) -> str:
        last = f"\nlast record:\n{self.records[-1].table()}" if self.records else ""
        return f"RecordingDiagnosis(T={self.T}, {len(self.records)} records)\n{self.table()}{last}"

    def _repr_html_(self) -> str:
        return pre_html(repr(self))


def pre_html(text: str) -> str:
    """What Jupyter shows of a diagnosis or a comparison: its text, monospaced."""
    return f"<pre>{html.escape(text)}</pre>"


def series_of(points: list[tuple[int, Diagnosis]]) -> dict[str, dict[str, np.ndarray]]:
    """{direction: {"step", "steps_per_decade", "reach", "anchor"} [S]} from (step, Diagnosis)
    pairs (`anchor` NaN where no error of one step was followed)."""
    out: dict[str, dict[str, list]] = {}
    for step, diagnosis in points:
        for d in diagnosis.layers:
            cols = out.setdefault(d.name, {"step": [], "steps_per_decade": [], "reach": [],
                                           "anchor": []})  # fmt: skip
            cols["step"].append(step)
            cols["steps_per_decade"].append(_nan(d.h.steps_per_decade))
            cols["reach"].append(_nan(d.h.reach))
            cols["anchor"].append(_nan(d.h.anchor))
    return {name: {k: np.asarray(v, np.float64) for k, v in cols.items()}
            for name, cols in out.items()}  # fmt: skip


def row_series(diagnosis: Diagnosis) -> dict[str, dict[str, np.ndarray]]:
    """The per-row (training step, batch) steps per decade and reach of each direction that
    has rows, like `RecordingDiagnosis.series`."""
    return {d.name: {"step": np.array([label for label, _ in d.rows], np.float64),
                     "steps_per_decade": np.array([_nan(x.steps_per_decade) for _, x in d.rows]),
                     "reach": np.array([_nan(x.reach) for _, x in d.rows])}
            for d in diagnosis.layers if d.rows}  # fmt: skip


def diagnose(trace, full: bool = True) -> Diagnosis:
    """The diagnosis of a GradientTrace (any mode). `full=False`: from the norm curves only
    (no units unreached, gate saturation, forget-gate timescales nor SNR; quick for any size)."""
    return diagnose_directions(trace_directions(trace, full))


def diagnose_recording(recording) -> RecordingDiagnosis:
    """Each record's diagnosis, from its norm rows (no per-unit gradients nor gates: a
    recording holds only norms)."""
    records = [diagnose_directions(record_directions(recording, s))
               for s in range(len(recording))]  # fmt: skip
    T = int(np.shape(recording.arrays["norm_h_total_by_layer"])[-1])
    a = recording.arrays
    return RecordingDiagnosis(T, records, np.asarray(a["step"]), np.asarray(a["epoch"]),
                              np.asarray(a["loss"]))  # fmt: skip


def diagnose_directions(directions: list[Direction]) -> Diagnosis:
    layers = [diagnose_direction(d) for d in directions]
    for d, out in zip(directions, layers, strict=True):
        chain_diagnosis(d, directions, out)
    T = max((d.T for d in directions), default=0)
    bad = [(d.nonfinite_step, d.name) for d in layers if d.nonfinite_step is not None]
    return Diagnosis(T, layers, min(bad) if bad else None)


def diagnose_direction(d: Direction) -> DirectionDiagnosis:
    T = d.T
    steps = loss_steps(d.norm_direct, T)
    reverse = runs_backward(d.name, d.norm_h, steps)
    span = span_of(steps, T, reverse)
    h = curve_decay(d.norm_h, span, T)
    c = curve_decay(d.norm_c, span, T) if d.norm_c is not None else None
    anchored = span.size < 2 and d.anchor_h is not None and len(d.anchors)
    if anchored:  # the loss enters at every step: the error of one step, followed back
        h = anchored_decay(d.anchor_h, d.anchors, T, reverse)
        c = anchored_decay(d.anchor_c, d.anchors, T, reverse) if (
            d.anchor_c is not None and c is not None) else c  # fmt: skip
    elif span.size < 2 and d.connectivity is not None:
        h = connectivity_decay(d.connectivity)
    out = DirectionDiagnosis(d.name, d.cell, h, c, None, {}, reverse=reverse,
                             notes=list(d.notes), row_kind=d.row_kind, steps=T)  # fmt: skip
    if anchored:
        out.anchors = [int(a) for a in d.anchors]
    if d.grad_h is not None and span.size >= 2:
        out.units_unreached = units_unreached(np.asarray(d.grad_h)[span])
    if d.grad_h is not None:
        out.snr = snr(d.grad_h)
    if d.gates is not None:
        out.gates_saturated = saturation(d.gates)
        if "f" in d.gates:
            out.forget_timescale = timescale(d.gates["f"].mean(axis=(0, 1)))
    elif d.gates_saturated is not None:
        out.gates_saturated = dict(d.gates_saturated)
    if out.forget_timescale is None and d.forget_unit_mean is not None:
        out.forget_timescale = timescale(d.forget_unit_mean)
    if out.forget_timescale is None and d.forget_mean is not None:
        out.forget_timescale = timescale(np.array([np.nanmean(d.forget_mean)]))
    out.own_timescale = d.own_timescale
    if d.grad_c is not None and span.size >= 2:
        out.measured_timescale = unit_timescales(np.asarray(d.grad_c)[span])
    curves = [d.norm_h] + ([d.norm_c] if d.norm_c is not None else [])
    bad = np.flatnonzero(~np.isfinite(np.stack(curves)).all(axis=0))
    out.nonfinite_step = int(bad[0]) if bad.size else None
    if d.rows is not None:
        out.rows = [(int(label), curve_decay(row, span, T))
                    for label, row in zip(d.row_labels, d.rows, strict=True)]  # fmt: skip
    out.verdict = verdict(out, T)
    return out


def chain_diagnosis(d: Direction, directions: list[Direction], out: DirectionDiagnosis) -> None:
    """Follow `d` across its hand-overs (docs/diagnosis.md, "Across a hand-over"): when its
    final state is another direction's initial state, its ‖dL/dh_t‖ and ‖dL/dc_t‖ are fitted
    over the chain's span (`decay.chain_span`: from that direction's first loss step back,
    across the hand-over, through d's steps), and the per-unit measures over d's own steps of
    it; `out` is updated in place. A direction whose initial state another's final state is
    gets a note. A direction with several such targets follows the first (in model order)."""
    by_index = {e.index: e for e in directions}
    source = by_index.get(d.initial_from) if d.initial_from >= 0 else None
    if source is not None:
        out.fed_by = source.name
        out.handover.append(f"initial state: {source.name}'s final state (a hand-over); "
                            f"{source.name}'s diagnosis follows this direction's loss back "
                            "across it")  # fmt: skip
    path, current = [d], d
    while True:
        targets = [e for e in directions if e.initial_from == current.index and e not in path]
        if not targets:
            break
        if len(targets) > 1:
            out.handover.append(f"{current.name}'s final state also starts "
                             f"{', '.join(e.name for e in targets[1:])}: followed into "
                             f"{targets[0].name} only")  # fmt: skip
        current = targets[0]
        path.append(current)
    if len(path) < 2:
        return
    segments = [Segment(e.name, e.norm_h, e.norm_direct, e.norm_c,
                        str(e.name).rsplit("/", 1)[-1] == "backward") for e in path]  # fmt: skip
    h = chain_decay(segments, "total")
    if isinstance(h, str):
        out.handover.append(f"not followed across the hand-over into {path[1].name}: {h}")
        return
    out.h, out.chain = h, [e.name for e in path]
    out.handover.append(f"followed across the hand-over: {' → '.join(out.chain)}")
    if d.norm_c is not None:
        c = chain_decay(segments, "cell")
        out.c = c if isinstance(c, Decay) else out.c
    own = np.array([t for name, t in h.steps if name == d.name], np.int64)
    out.units_unreached = out.measured_timescale = None
    if d.grad_h is not None and own.size >= 2:
        out.units_unreached = units_unreached(np.asarray(d.grad_h)[own])
    if d.grad_c is not None and own.size >= 2:
        out.measured_timescale = unit_timescales(np.asarray(d.grad_c)[own])
    out.verdict = verdict(out, d.T)


def reach_text(d: DirectionDiagnosis, x: Decay, T: int) -> str:
    """ "reach/steps": of the span across a hand-over or from the error of one step (from its
    anchor to the sequence's end it reads back to), else of the direction's own steps (T when
    not known)."""
    if x.reach is None:
        return "–"
    spanned = x.steps is not None or x.anchor is not None
    return f"{x.reach}/{x.span if spanned else d.steps or T}"


def reach_point(d: DirectionDiagnosis) -> tuple[str, int] | None:
    """(direction, input position) of the farthest step ‖dL/dh_t‖ reaches, `reach` steps back
    from the loss step (in the direction its span crossed into, for a chain); None where the
    reach is not defined or comes from a connectivity map."""
    x = d.h
    if x.reach is None or x.loss_step is None or x.source != "norms":
        return None
    if x.steps is not None:
        return x.step_at(x.reach - 1)
    return d.name, x.loss_step + (x.reach - 1) * (1 if d.reverse else -1)


def units_unreached(g: np.ndarray) -> float | None:
    """The fraction of units j whose mean |dL/dh_t,j| over the farthest tenth of the span
    (steps back, at least one) is below UNREACHED × the largest mean_b |dL/dh_t,j| of the
    span. `g` [n, B, H] in steps back from the loss (n = 0 first)."""
    m = np.abs(np.asarray(g, np.float64)).mean(axis=1)  # [n, H]
    finite = np.where(np.isfinite(m), m, 0.0)
    largest = finite.max(initial=0.0)
    if largest <= 0:
        return None
    far = max(1, math.ceil(FARTHEST * len(m)))
    return float((finite[-far:].mean(axis=0) < UNREACHED * largest).mean())


def snr(g: np.ndarray) -> np.ndarray:
    """The gradient's signal-to-noise ratio per step across the batch, [T, B, H] -> [T]:
    ‖mean_b g_t‖² / mean_b ‖g_{t,b} − mean_b g_t‖² (NaN where the spread is 0)."""
    g = np.asarray(g, np.float64)
    mean = g.mean(axis=1)
    signal = (mean**2).sum(axis=-1)
    noise = ((g - mean[:, None]) ** 2).sum(axis=-1).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(noise > 0, signal / noise, np.nan)


def saturation(gates: dict[str, np.ndarray]) -> dict[str, float]:
    """The fraction of (t, b, j) with a sigmoid gate below SATURATED or above 1 − SATURATED
    (the candidate g, a tanh: |g| > 1 − SATURATED), per gate."""
    out = {}
    for name, a in gates.items():
        a = np.asarray(a)
        sigmoid = (a < SATURATED) | (a > 1 - SATURATED)
        tails = np.abs(a) > 1 - SATURATED if name == "g" else sigmoid
        out[name] = float(tails.mean())
    return out


def timescale(f: np.ndarray) -> np.ndarray:
    """−1/ln f (steps) elementwise: the memory a constant forget gate f keeps (c_t ∝ f^t falls
    by e every −1/ln f steps); inf where f ≥ 1, 0 where f ≤ 0."""
    f = np.asarray(f, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(f >= 1, np.inf, np.where(f <= 0, 0.0, -1 / np.log(np.clip(f, 1e-300, 1))))


def unit_timescales(g: np.ndarray) -> np.ndarray:
    """Each unit's measured timescale −1/ln r_j, r_j the fitted decay per step of
    mean_b |dL/dc_t,j| over the span ([n, B, H] in steps back), NaN where it cannot be fitted."""
    m = np.abs(np.asarray(g, np.float64)).mean(axis=1)  # [n, H]
    n = np.arange(len(m))
    out = np.full(m.shape[1], np.nan)
    for j in range(m.shape[1]):
        kept = np.isfinite(m[:, j]) & (m[:, j] > 0)
        if kept.sum() >= 2:
            slope = np.polyfit(n[kept], np.log(m[kept, j]), 1)[0]
            out[j] = np.inf if slope >= 0 else -1 / slope
    return out


def diagnosis_lines(diagnosis) -> list[str]:
    """Plain-text lines for a report: each direction's verdict; a recording's also how its
    steps per decade and reach moved from the first record to the last."""
    if isinstance(diagnosis, RecordingDiagnosis):
        if not diagnosis.records:
            return []
        lines = []
        for name, cols in diagnosis.series().items():
            steps, anchors = cols["step"], np.unique(cols["anchor"][np.isfinite(cols["anchor"])])
            # the error of one step: the anchor followed, when one anchor served every record
            anchor = f" from the error of step t={int(anchors[0])}" if len(anchors) == 1 else ""
            lines.append(f"diagnosis · {name}: steps per decade "
                         f"{_num(cols['steps_per_decade'][0], '.3g')} → "
                         f"{_num(cols['steps_per_decade'][-1], '.3g')}, reach "
                         f"{_num(cols['reach'][0], '.0f')} → {_num(cols['reach'][-1], '.0f')} "
                         f"of {diagnosis.T} steps{anchor} (training steps {int(steps[0])}–"
                         f"{int(steps[-1])})")  # fmt: skip
        return lines + diagnosis_lines(diagnosis.records[-1])
    return [f"diagnosis · {d.name}: {d.verdict}" for d in diagnosis.layers]


def details(d: DirectionDiagnosis) -> list[str]:
    """The lines under a direction's verdict in the table: units unreached, gate saturation,
    the forget gate's timescale beside the measured one, the gradient's SNR."""
    lines = list(d.handover)
    if d.units_unreached is not None:
        lines.append(f"units unreached: {d.units_unreached:.0%}")
    if d.gates_saturated:
        lines.append("gates saturated: " + ", ".join(
            f"{g} {f:.1%}" for g, f in d.gates_saturated.items()))  # fmt: skip
    if d.forget_timescale is not None:
        words = f"forget-gate timescale −1/ln f̄: median {_median(d.forget_timescale)} steps"
        if d.measured_timescale is not None:
            words += f"; measured from dL/dc_t: median {_median(d.measured_timescale)} steps"
        lines.append(words)
    if d.own_timescale is not None:
        lines.append(f"the layer's own timescale −1/ln(mean decay): median "
                     f"{_median(d.own_timescale)} steps, longest "
                     f"{_num(float(np.nanmax(d.own_timescale)), '.3g')}")  # fmt: skip
    if d.snr is not None and np.isfinite(d.snr).any():
        lines.append(f"gradient SNR across the batch: median {np.nanmedian(d.snr):.3g}")
    return lines


def _median(values: np.ndarray) -> str:
    values = np.asarray(values, np.float64)
    values = values[~np.isnan(values)]
    return _num(float(np.median(values)), ".3g") if values.size else "–"


def verdict(d: DirectionDiagnosis, T: int) -> str:
    """One line: the trend of ‖dL/dh_t‖ with its numbers, the cell state's when its trend
    differs, the first non-finite step."""
    line = _words(d.h, T, "dL/dh_t")
    if d.c is not None and d.c.trend != d.h.trend and d.c.trend is not None:
        line += f"; cell state {_words(d.c, T, 'dL/dc_t')}"
    if d.nonfinite_step is not None:
        line = f"non-finite from t={d.nonfinite_step}; {line}"
    return line


def _at(step: tuple[str, int] | None) -> str:
    return "–" if step is None else f"{step[0]} t={step[1]}"


def _words(x: Decay, T: int, what: str) -> str:
    if x.trend is None:
        return x.note or "no gradient to measure"
    if x.trend == "not reached":
        loss = _at(x.step_at(0)) if x.steps is not None else f"t={x.loss_step}"
        return f"not reached: {what} is zero before the loss step ({loss})"
    lag = " (lag profile of the connectivity map)" if x.source != "norms" else ""
    if x.anchor is not None:  # the error of one step: the span runs from it to an end
        lag = f" from the error of step t={x.anchor}"
        T = x.span
    reach = f"reaches back {x.reach} of {T} steps{lag}"
    if x.steps is not None:
        reach = (f"reaches back {x.reach} of {x.span} steps from {_at(x.step_at(0))} across "
                 f"the hand-over, to {_at(x.step_at(x.reach - 1))}")  # fmt: skip
    if x.trend == "stable":
        return f"stable: changes less than 10× over {x.span} steps, {reach}"
    every = _num(x.steps_per_decade, ".3g")
    if x.trend == "vanishing":
        return f"vanishing: falls 10× every {every} steps, {reach}"
    where = ""
    if x.exceeds_at is not None:
        at = f"at t={x.exceeds_at}" if x.source == "norms" else f"{x.exceeds_at} steps back"
        at = f"at {_at(x.step_at(x.exceeds_at))}" if x.steps is not None else at
        where = f", exceeds 1000× its value at the loss {at}"
    return f"exploding: grows 10× every {every} steps{where}, {reach}"


def _num(value, spec: str) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return format(value, spec)


def _nan(value) -> float:
    return np.nan if value is None else float(value)


def _json_float(value) -> float | None:
    """`value` as a JSON number: None for None, NaN and ±inf (JSON has neither)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
