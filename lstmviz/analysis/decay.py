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
    or "connectivity lag profile"), `note` why a value is missing."""

    decay_per_step: float | None = None
    steps_per_decade: float | None = None
    reach: int | None = None
    trend: str | None = None
    loss_step: int | None = None
    span: int = 0
    exceeds_at: int | None = None
    source: str = "norms"
    note: str = ""

    def to_dict(self) -> dict:
        return {"decay_per_step": self.decay_per_step, "steps_per_decade": self.steps_per_decade,
                "reach": self.reach, "trend": self.trend}  # fmt: skip


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
