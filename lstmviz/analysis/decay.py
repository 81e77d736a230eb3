"""How one gradient-norm curve falls (or grows) going back from where the loss enters.

A curve is a per-timestep norm [T] (‖dL/dh_t‖ or ‖dL/dc_t‖, indexed by input position t) of
one recurrent direction. Going *back* means against the direction's processing order: towards
t = 0 for a forward direction, towards t = T-1 for a backward one (`reverse=True`).

Definitions (docs/diagnosis.md has them with their sources):
- the loss enters where the direct partial ∂L/∂h_t is non-zero (`loss_steps`); the fit covers the
  span from the last of them back to (not including) the one before, n = 0, 1, … steps back;
- decay per step r = exp(slope) of the least-squares line through (n, ln norm_n) over the span's
  positive finite norms; steps per decade s = ln 10 / |ln r|;
- reach: 1 + the farthest n of the span whose norm is ≥ 10⁻³ of the span's peak (the number of
  steps from the loss step to the farthest one still reached); the span's length (T for a loss
  on the last step) when it never falls that far;
- trend: `not reached` when every norm of the span past the loss step is zero; `stable` when the
  fitted change over the whole span is under one decade (|log10 r| · (span − 1) < 1, i.e. s
  exceeds the span); else `vanishing` (r < 1) or `exploding` (r > 1, with the first step back
  where the norm exceeds 10³ × its value at the loss).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

REACH_FLOOR = 1e-3  # reach: steps whose norm stays at least this fraction of the peak
EXPLODES = 1e3  # exploding: where the norm first exceeds this multiple of its value at the loss
DIRECT_FLOOR = 1e-7  # a direct partial below this fraction of its largest is no loss injection
TRENDS = ("vanishing", "exploding", "stable", "not reached")


@dataclass
class Decay:
    """One curve's decay. `decay_per_step`, `steps_per_decade`, `reach`, `trend` are the JSON
    contract's (None where not defined); the others explain them: `loss_step` the input position
    where the span starts, `span` its length in steps, `exceeds_at` the input position where an
    exploding norm first exceeds 10³ × its value at the loss, `source` what was fitted ("norms"
    or "connectivity lag profile"), `note` why a value is missing. A span that crosses a
    hand-over (`chain_span`): `steps` names each of its steps, n = 0, 1, …, as (direction,
    input position); `loss_step` is then an input position of the direction `steps[0]` names,
    `exceeds_at` counts steps back (`step_at` names it). `anchor`: the step whose loss alone
    was followed back (the error of one step), None when the span starts at the loss."""

    decay_per_step: float | None = None
    steps_per_decade: float | None = None
    reach: int | None = None
    trend: str | None = None
    loss_step: int | None = None
    span: int = 0
    exceeds_at: int | None = None
    source: str = "norms"
    note: str = ""
    steps: list[tuple[str, int]] | None = None
    anchor: int | None = None

    def step_at(self, n: int) -> tuple[str, int] | None:
        """(direction, input position) of the span's step n steps back, for a span across a
        hand-over; None for others."""
        return self.steps[n] if self.steps is not None and 0 <= n < len(self.steps) else None

    def to_dict(self) -> dict:
        return {"decay_per_step": self.decay_per_step, "steps_per_decade": self.steps_per_decade,
                "reach": self.reach, "trend": self.trend, "anchor": self.anchor}  # fmt: skip


def loss_steps(direct: np.ndarray | None, T: int) -> np.ndarray:
    """The input positions where the loss enters: where the direct partial ‖∂L/∂h_t‖ [T] is
    above DIRECT_FLOOR of its largest finite value. Without a direct curve (or an all-zero
    one): [T-1], the last step."""
    if direct is None:
        return np.array([T - 1])
    direct = np.where(np.isfinite(direct), np.asarray(direct, np.float64), 0.0)
    peak = direct.max(initial=0.0)
    if peak <= 0:
        return np.array([T - 1])
    return np.flatnonzero(direct > DIRECT_FLOOR * peak)


def runs_backward(name: str, total: np.ndarray, steps: np.ndarray) -> bool:
    """Whether a direction processes the sequence from t = T-1 down to 0: its name's last part
    is `backward`, or its gradient is non-zero after the last loss step and zero before the
    first (a forward direction's gradient is zero after its last loss step: nothing there
    depends on it)."""
    if str(name).rsplit("/", 1)[-1] == "backward":
        return True
    total = np.where(np.isfinite(total), np.abs(np.asarray(total, np.float64)), 0.0)
    after, before = total[steps.max() + 1 :].sum(), total[: steps.min()].sum()
    return bool(after > 0 and before == 0)


def span_of(steps: np.ndarray, T: int, reverse: bool) -> np.ndarray:
    """The input positions of the fitted span, n = 0, 1, … steps back from the last loss step
    (in processing order) to the one after the loss step before it (or the sequence's start)."""
    order = np.sort(T - 1 - steps if reverse else steps)  # processing positions
    last = int(order[-1])
    previous = int(order[-2]) if len(order) > 1 else -1
    back = np.arange(last, previous, -1)  # processing positions, n = 0, 1, …
    return T - 1 - back if reverse else back


def curve_decay(norm: np.ndarray, positions: np.ndarray, T: int) -> Decay:
    """The decay of `norm` [T] over the span `positions` (input positions, n = 0, 1, … steps
    back from the loss; `span_of`). A span of one step cannot be fitted: the loss enters at
    every step."""
    values = np.asarray(norm, np.float64)[positions]
    decay = profile_decay(values, full=int(positions.size) if positions.size else T)
    decay.loss_step = int(positions[0])
    if decay.exceeds_at is not None:
        decay.exceeds_at = int(positions[decay.exceeds_at])
    if positions.size < 2:
        decay.note = "the loss enters at every step: the decay cannot be separated from it"
    return decay


def anchored_decay(curves: np.ndarray, anchors: np.ndarray, T: int, reverse: bool) -> Decay:
    """The decay of the error of one step (docs/diagnosis.md): per anchor t* its curve [T]
    (‖∂L_t*/∂h_t‖ of row a of `curves` [A, T]) fitted from t* back to the sequence's start
    (a backward direction: forward to its end); the decay of the anchor whose decay per step
    is the median of those defined (the lower one of two), with `anchor` set."""
    found = []
    for curve, anchor in zip(curves, anchors, strict=True):
        anchor = int(anchor)
        positions = np.arange(anchor, T) if reverse else np.arange(anchor, -1, -1)
        decay = curve_decay(curve, positions, T)
        decay.anchor = anchor
        if positions.size < 2:
            decay.note = "the anchor is the direction's first step: nothing to follow back"
        found.append(decay)
    fitted = sorted((d for d in found if d.decay_per_step is not None),
                    key=lambda d: d.decay_per_step)  # fmt: skip
    return fitted[(len(fitted) - 1) // 2] if fitted else found[0]


def profile_decay(values: np.ndarray, full: int) -> Decay:
    """The decay of `values` [n] (n = 0, 1, … steps back from the loss). `full`: the reach when
    the norm never falls below the floor (the span's length, T for a whole sequence).
    `exceeds_at` is returned in steps back."""
    values = np.asarray(values, np.float64)
    decay = Decay(span=int(values.size))
    finite = np.isfinite(values)
    if values.size < 2 or not finite.any():
        return decay
    peak = values[finite].max()
    if peak <= 0:
        decay.note = "the gradient is zero over the whole span"
        return decay
    beyond = values[1:][finite[1:]]
    if beyond.size and (beyond <= 0).all():
        decay.trend, decay.reach = "not reached", 1
        return decay
    n = np.arange(values.size)
    kept = finite & (values > 0)
    if kept.sum() < 2:
        decay.note = "fewer than two finite non-zero norms to fit"
        return decay
    slope = float(np.polyfit(n[kept], np.log(values[kept]), 1)[0])
    decay.decay_per_step = math.exp(min(slope, 700.0))  # float64's range: e^709
    decay.steps_per_decade = math.log(10) / abs(slope) if slope else None
    reached = np.flatnonzero(finite & (values >= REACH_FLOOR * peak))
    farthest = int(reached.max())
    decay.reach = full if farthest == values.size - 1 else farthest + 1
    if abs(slope) / math.log(10) * (values.size - 1) < 1:
        decay.trend = "stable"
    elif slope < 0:
        decay.trend = "vanishing"
    else:
        decay.trend = "exploding"
    if decay.trend == "exploding" and values[0] > 0:
        over = np.flatnonzero(finite & (values > EXPLODES * values[0]))
        decay.exceeds_at = int(over[0]) if over.size else None
    return decay


def lag_profile(connectivity: np.ndarray) -> np.ndarray:
    """The connectivity map's lag profile [T]: p_d = the geometric mean over the loss steps
    t ≥ d (those with C[t, t] > 0) of C[t, t-d] / C[t, t], C[t, s] = ‖∂L_t/∂h_s‖: how much of
    each loss's own gradient is left d steps back, each loss divided by its own size so that
    large and small losses weigh alike. Zero entries count as the smallest positive ratio at
    that lag would not: p_d is the geometric mean of the positive ratios, 0 where none is."""
    C = np.asarray(connectivity, np.float64)
    T = C.shape[0]
    diagonal = np.diag(C)
    losses = np.flatnonzero(np.isfinite(diagonal) & (diagonal > 0))
    profile = np.zeros(T)
    for d in range(T):
        rows = losses[losses >= d]
        ratios = C[rows, rows - d] / diagonal[rows]
        positive = ratios[np.isfinite(ratios) & (ratios > 0)]
        profile[d] = math.exp(np.log(positive).mean()) if positive.size else 0.0
    return profile


def connectivity_decay(connectivity: np.ndarray) -> Decay:
    """The decay of the connectivity map's lag profile (`lag_profile`): how ‖∂L_t/∂h_{t-d}‖
    falls with the lag d, each loss step's own injection separated from the others."""
    profile = lag_profile(connectivity)
    decay = profile_decay(profile, full=profile.size)
    decay.source = "connectivity lag profile"  # exceeds_at: a lag, not an input position
    return decay


@dataclass
class Segment:
    """One direction of a chain in its processing order: `name`, `total` and `direct` [T_k]
    (direct None: the loss enters at its last step), `cell` [T_k] (None: no cell state),
    `reverse` (its input positions run T_k-1 → 0)."""

    name: str
    total: np.ndarray
    direct: np.ndarray | None
    cell: np.ndarray | None
    reverse: bool = False

    def ordered(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, np.float64)
        return values[::-1] if self.reverse else values

    def position(self, q: int) -> int:
        """The input position of processing step q."""
        return len(self.total) - 1 - q if self.reverse else q


def chain_span(segments: list[Segment]) -> tuple[np.ndarray, list[tuple[int, int]]] | str:
    """The span of the first segment's diagnosis across its hand-overs (docs/diagnosis.md):
    the segments joined in processing order (the first's steps, then those whose initial
    state its final state is, …); the loss enters where a direct partial exceeds DIRECT_FLOOR
    of the chain's largest (a segment without a direct curve: at its last step). The span runs
    from the first loss step after the first segment's end back to, not including, the first
    segment's last loss step (or its start). Returns the span's chain positions (n = 0, 1, …
    steps back) and (segment, input position) of each chain position; or, where the rule
    does not apply, why (a string)."""
    direct = []
    for seg in segments:
        if seg.direct is None:
            part = np.zeros(len(seg.total))
            part[-1] = np.inf  # its last step: a loss step whatever the others' size
        else:
            part = seg.ordered(seg.direct)
        direct.append(np.where(np.isnan(part), 0.0, np.abs(part)))
    joined = np.concatenate(direct)
    finite = joined[np.isfinite(joined)]
    peak = finite.max(initial=0.0)
    entered = np.flatnonzero(joined > DIRECT_FLOOR * peak) if peak > 0 else np.flatnonzero(
        np.isinf(joined))  # fmt: skip
    own = len(segments[0].total)
    after, before = entered[entered >= own], entered[entered < own]
    if not after.size:
        return "no loss enters after the hand-over"
    last_before = int(before.max()) if before.size else -1
    if last_before == own - 1:
        return "its own loss enters at its last step: the decay cannot be separated from it"
    where = [(i, seg.position(q)) for i, seg in enumerate(segments) for q in range(len(seg.total))]
    return np.arange(int(after.min()), last_before, -1), where


def chain_decay(segments: list[Segment], of: str = "total") -> Decay | str:
    """The decay of the segments' `of` curve ("total" or "cell") over `chain_span`, with
    `steps` naming each step of the span; or why the rule does not apply."""
    found = chain_span(segments)
    if isinstance(found, str):
        return found
    span, where = found
    curves = [getattr(seg, of) for seg in segments]
    if any(c is None for c in curves):
        return f"a direction of the chain has no {of} curve"
    joined = np.concatenate([seg.ordered(c) for seg, c in zip(segments, curves, strict=True)])
    decay = profile_decay(joined[span], full=int(span.size))
    decay.steps = [(segments[where[p][0]].name, where[p][1]) for p in span]
    decay.loss_step = decay.steps[0][1]
    return decay
