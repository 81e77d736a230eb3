"""`OpaqueLineAxis`, the axis of every panel: opaque grid lines drawn under the curves, and log
ticks whose labels never overlap (`log_ticks`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF
from PySide6.QtWidgets import QGraphicsTextItem

from lstmviz.render.style import opaque

Levels = list[tuple[float | None, list[float]]]

# Minor ticks (m × 10^n) to label when there is room, densest first.
MINOR_LABELS = ((2, 3, 4, 5, 6, 7, 8, 9), (2, 3, 5), (2, 5), (3,), ())
DECADE_STRIDES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
NICE_STEPS = (1, 2, 5)  # evenly spaced labels of a narrow range: 1, 2 or 5 × 10^n apart
MAX_EVEN_LABELS = 10
LABEL_ROOM = 1.6  # label centres on a vertical axis: at least this many font heights apart
MIN_TICK_GAP_PX = 2.0  # unlabelled ticks closer than this are left out
MAX_DIGITS = 6  # significant digits of a log axis's labels
# On a log scale `log_ticks` decides which ticks are labelled: its third level never is, and
# pyqtgraph's own crowding limits (which dropped minor labels that had room) are off.
LOG_TEXT = {"maxTextLevel": 1, "textFillLimits": []}


def _gap_px(values: np.ndarray, per_decade: float) -> float:
    """The smallest distance in px between neighbouring log values (inf for fewer than two)."""
    return float(np.min(np.diff(values)) * per_decade) if len(values) > 1 else math.inf


def _multiples(first: int, last: int, factors: Sequence[int], lo: float, hi: float) -> np.ndarray:
    """log10(m × 10^n) for m in `factors`, n in first..last, inside [lo, hi]."""
    logs = np.log10(np.asarray(factors, np.float64))
    values = (np.arange(first, last + 1)[:, None] + logs[None, :]).ravel()
    return np.sort(values[(values >= lo) & (values <= hi)])


def _even_values(lo: float, hi: float, per_decade: float, room: Callable) -> np.ndarray:
    """log10 of values evenly spaced in value (1, 2 or 5 × 10^n apart) in a range too narrow
    for any m × 10^n to be labelled twice: the most that keep `room` apart; else one value,
    the roundest whose label fits inside the axis (half its room from either end)."""
    with np.errstate(over="ignore", under="ignore"):
        a, b = (float(v) for v in np.power(10.0, [lo, hi]))
    if not (math.isfinite(b) and b > a):  # beyond float64 (or a range lost in rounding)
        return np.zeros(0)
    top = math.floor(math.log10(b - a))
    steps = [f * 10.0**e for e in range(top - 2, top + 2) for f in NICE_STEPS]
    steps = [step for step in steps if step >= b * 10.0 ** (1 - MAX_DIGITS)]  # labels differ
    grids = []
    for step in steps:
        values = np.arange(math.ceil(a / step), math.floor(b / step) + 1) * step
        values = np.log10(values[values > 0])
        grids.append(values[(values >= lo) & (values <= hi)])
    for values in grids:
        if 2 <= len(values) <= MAX_EVEN_LABELS and _gap_px(values, per_decade) >= room(values):
            return values
    for values in reversed(grids):  # coarser steps: rounder values
        margin = room(values) / 2 / per_decade
        inside = values[(values >= lo + margin) & (values <= hi - margin)]
        if len(inside):
            return inside[[np.argmin(np.abs(inside - (lo + hi) / 2))]]
    return np.zeros(0)


def log_ticks(lo: float, hi: float, size: float, room: Callable[[np.ndarray], float]) -> Levels:
    """Tick levels for a log axis showing 10^lo..10^hi over `size` px, as pyqtgraph's
    `logTickValues` returns them (log10 values): [(spacing, labelled decades), (None, labelled
    minor ticks), (None, unlabelled ticks)]. Decades are labelled (every 2nd, 5th, … when they
    are crowded), then the densest of m × 10^n (m in 2..9; 2, 3, 5; 2, 5; 3) whose labels keep
    `room(values)` px apart; a range narrow enough to hold fewer than two of those is labelled
    at evenly spaced values instead. The unlabelled level holds the other m × 10^n that are at
    least MIN_TICK_GAP_PX apart."""
    per_decade = size / (hi - lo)
    first, last = math.floor(lo), math.ceil(hi)
    decades = np.arange(math.ceil(lo), math.floor(hi) + 1, dtype=np.float64)
    stride = next((k for k in DECADE_STRIDES if k * per_decade >= room(decades)), 10**4)
    if stride > 1:
        labelled = decades[np.mod(decades, stride) == 0]
        rest = decades[np.mod(decades, stride) != 0] if per_decade >= MIN_TICK_GAP_PX else []
        return [(float(stride), labelled.tolist()), (None, []), (None, list(rest))]
    minor = np.zeros(0)
    for factors in MINOR_LABELS:
        minor = _multiples(first, last, factors, lo, hi)
        shown = np.union1d(decades, minor)
        if _gap_px(shown, per_decade) >= room(shown):
            break
    levels: Levels = [(1.0, decades.tolist()), (None, minor.tolist())]
    shown = np.union1d(decades, minor)
    if len(shown) < 2:  # a narrow range; one m × 10^n stays if no two even values fit
        even = _even_values(lo, hi, per_decade, room)
        if len(even) >= 2 or len(shown) == 0:
            levels, shown = [(None, even.tolist()), (None, [])], even
    for factors in ((2, 3, 4, 5, 6, 7, 8, 9), (2, 5), ()):
        rest = np.union1d(decades, _multiples(first, last, factors, lo, hi))
        if _gap_px(rest, per_decade) >= MIN_TICK_GAP_PX:
            break
    gap = MIN_TICK_GAP_PX / per_decade  # unlabelled ticks on (or next to) a label: left out
    if len(shown):
        rest = rest[np.min(np.abs(rest[:, None] - shown[None, :]), axis=1) >= gap]
    return [*levels, (None, rest.tolist())]


class OpaqueLineAxis(pg.AxisItem):
    """An axis whose tick and grid lines are opaque, their colour blended with the background
    beforehand, and which sits under the view (z below the ViewBox's -100), so the curves are
    drawn over the grid. On the plain background the pixels are those of pyqtgraph's
    translucent lines; but Qt's raster engine strokes a translucent line ~20× slower than an
    opaque one (~0.1 ms against ~6 µs for a line across the plot), and the ~50 grid lines were
    most of the norm panel's repaint (bench/bench_gui.py).

    On a log scale the ticks come from `log_ticks`: decades labelled, minor ticks labelled only
    where their labels have room, never overlapping."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._linear_text = {key: self.style[key] for key in LOG_TEXT}

    # A vertical axis's label longer than the axis is tall (a short panel) is cut at both
    # ends; it shows instead the longest of its shorter forms that fits (the shortest when none
    # does): those given in `shorter` for its text, then "‖dL/dh_t‖ (log scale)" →
    # "‖dL/dh_t‖ (log)", then the text without its parenthesis ("‖dL/dh_t‖").
    _label_html: str | None = None  # the label as shown
    _label_widths: dict[str, float] | None = None  # label HTML → its length in px
    shorter: dict[str, tuple[str, ...]] = {}  # a label text → its shorter forms, longest first

    def labelString(self) -> str:  # noqa: N802 (pyqtgraph's name)
        full = super().labelString()
        text = self.labelText or ""
        if self.orientation not in ("left", "right") or self.labelUnits:
            return full
        room = self.size().height()
        if self._label_width(full) <= room:
            return full
        forms = list(self.shorter.get(text, ()))
        if text.endswith(" (log scale)"):
            forms.append(text.removesuffix(" scale)") + ")")
        if " (" in text:
            forms.append(text.split(" (")[0])
        shown = full
        for form in forms:
            shown = full.replace(f"{text} ", form + " ", 1)
            if self._label_width(shown) <= room:
                break
        return shown

    def _label_width(self, html: str) -> float:
        if self._label_widths is None:
            self._label_widths = {}
        if html not in self._label_widths:
            probe = QGraphicsTextItem()
            probe.setFont(self.label.font())
            probe.setHtml(html)
            self._label_widths[html] = probe.boundingRect().width()
        return self._label_widths[html]

    def _updateLabel(self):  # noqa: N802 (pyqtgraph's name)
        self._label_html = self.labelString()
        super()._updateLabel()

    def resizeEvent(self, ev=None):  # noqa: N802 (pyqtgraph's name)
        if self.label is not None and self.orientation in ("left", "right"):
            html = self.labelString()
            if html != self._label_html:
                self._label_html = html
                self.label.setHtml(html)
        super().resizeEvent(ev)

    def setLogMode(self, *args, **kwargs):  # noqa: N802 (pyqtgraph's name)
        super().setLogMode(*args, **kwargs)
        self.style.update(LOG_TEXT if self.logMode else self._linear_text)

    def logTickValues(self, minVal, maxVal, size, stdTicks):  # noqa: N802,N803
        lo, hi = sorted((float(minVal), float(maxVal)))
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo and size > 0):
            return super().logTickValues(minVal, maxVal, size, stdTicks)
        return log_ticks(lo, hi, size, self.label_room)

    def label_room(self, values: np.ndarray) -> float:
        """Distance in px that the centres of labels at log `values` need along this axis:
        a vertical axis stacks one line of text per label, a horizontal one the widest label."""
        metrics = QFontMetricsF(self.style["tickFont"] or QFont())
        if self.orientation in ("left", "right"):
            return LABEL_ROOM * metrics.height()
        strings = self.logTickStrings(list(values), self.autoSIPrefixScale * self.scale, None)
        widest = max((metrics.horizontalAdvance(s) for s in strings), default=0.0)
        return widest + metrics.height()

    def logTickStrings(self, values, scale, spacing):  # noqa: N802
        """pyqtgraph's one-digit labels (10⁻⁵, 2·10⁻⁵, 0.002), or, where one digit does not
        say the value (1.005, 0.55) or two labels would read the same, as many digits as that
        takes (up to MAX_DIGITS)."""
        numbers = 10.0 ** np.asarray(values, np.float64) * scale
        for digits in range(1, MAX_DIGITS + 1):
            strings = [f"{v:.{digits}g}" for v in numbers]
            exact = np.allclose([float(s) for s in strings], numbers, rtol=1e-9, atol=0)
            if exact and len(set(strings)) == len(strings):
                break
        return super().logTickStrings(values, scale, spacing) if digits == 1 else strings

    def generateDrawSpecs(self, p):  # noqa: N802
        specs = super().generateDrawSpecs(p)
        if specs is None:
            return None
        axis, ticks, texts = specs
        return axis, [(opaque(pen, self._background()), a, b) for pen, a, b in ticks], texts

    def _background(self) -> QColor:
        """The plot widget's own background (the global option may differ when this paints:
        the export's first paint happens outside its style, and the grid came out black)."""
        views = self.scene().views() if self.scene() is not None else []
        brush = views[0].backgroundBrush() if views else None
        if brush is not None and brush.style() != Qt.NoBrush:
            return brush.color()
        return pg.mkColor(pg.getConfigOption("background"))
