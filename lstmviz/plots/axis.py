"""`OpaqueLineAxis`, the axis of every panel: opaque grid lines drawn under the curves, and log
ticks whose labels never overlap and are never cut at the axis's ends (`log_ticks`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF
from PySide6.QtWidgets import QGraphicsTextItem

from lstmviz.plots.style import opaque

Levels = list[tuple[float | None, list[float]]]
Room = Callable[[np.ndarray], float]  # log10 values → px

# Minor ticks (m × 10^n) to label when there is room, densest first.
MINOR_LABELS = ((2, 3, 4, 5, 6, 7, 8, 9), (2, 3, 5), (2, 5), (3,), ())
DECADE_STRIDES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
NICE_STEPS = (1, 2, 5)  # evenly spaced labels of a narrow range: 1, 2 or 5 × 10^n apart
MAX_EVEN_LABELS = 10
EVEN_BELOW = 0.5  # a range of fewer decades than this looks linear: even labels if more fit
LABEL_ROOM = 1.6  # label centres on a vertical axis: at least this many font heights apart
MIN_TICK_GAP_PX = 2.0  # unlabelled ticks closer than this are left out
MAX_DIGITS = 6  # significant digits of a log axis's labels
TEXT_HEIGHT = 0.8  # pyqtgraph's tick label box: this much of the font's line height
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


class _Axis:
    """A log axis showing 10^lo..10^hi over `size` px: `room(values)` px between the centres
    of the labels at log `values`, `edge(values)` px between a centre and either end."""

    def __init__(self, lo: float, hi: float, size: float, room: Room, edge: Room):
        self.lo, self.hi, self.room, self.edge = lo, hi, room, edge
        self.per_decade = size / (hi - lo)

    def inside(self, values: np.ndarray) -> np.ndarray:
        """Those of the sorted log `values` whose labels stay inside the axis."""
        if not len(values):
            return values
        margin = self.edge(values) / self.per_decade
        return values[(values >= self.lo + margin) & (values <= self.hi - margin)]

    def fits(self, values: np.ndarray) -> bool:
        """Whether labels at the sorted log `values` keep their room apart."""
        return _gap_px(values, self.per_decade) >= self.room(values)

    def pair(self, grids: Sequence[np.ndarray]) -> np.ndarray:
        """The lowest and highest value of the first of `grids` (roundest first, each inside
        the axis) whose two labels have room; none if no grid has."""
        for values in grids:
            if len(values) >= 2 and self.fits(values[[0, -1]]):
                return values[[0, -1]]
        return np.zeros(0)

    def even_grids(self) -> list[np.ndarray]:
        """log10 of the multiples of 1, 2, 5 × 10^n inside the axis, one array a step, finest
        first, down to the step whose labels still differ in MAX_DIGITS digits."""
        with np.errstate(over="ignore", under="ignore"):
            a, b = (float(v) for v in np.power(10.0, [self.lo, self.hi]))
        if not (math.isfinite(b) and b > a and a > 0):  # beyond float64, or lost in rounding
            return []
        top = math.floor(math.log10(b - a))
        steps = [f * 10.0**e for e in range(top - 3, top + 2) for f in NICE_STEPS]
        steps = [step for step in steps if step >= b * 10.0 ** (1 - MAX_DIGITS)]  # labels differ
        grids = []
        for step in steps:
            values = np.arange(math.ceil(a / step), math.floor(b / step) + 1) * step
            values = values[values > 0]
            if len(values):
                grids.append(self.inside(np.log10(values)))
        return grids

    def even(self, grids: list[np.ndarray]) -> np.ndarray:
        """The densest of `grids` with 2..MAX_EVEN_LABELS labels that keep their room apart."""
        return next((v for v in grids if 2 <= len(v) <= MAX_EVEN_LABELS and self.fits(v)),
                    np.zeros(0))  # fmt: skip

    def middle(self, grids: list[np.ndarray]) -> np.ndarray:
        """One value: the roundest of `grids` inside the axis, the nearest the middle."""
        for values in reversed(grids):
            if len(values):
                return values[[np.argmin(np.abs(values - (self.lo + self.hi) / 2))]]
        return np.zeros(0)


def _no_edge(values: np.ndarray) -> float:
    return 0.0


def log_ticks(lo: float, hi: float, size: float, room: Room, edge: Room = _no_edge) -> Levels:
    """Tick levels for a log axis showing 10^lo..10^hi over `size` px, as pyqtgraph's
    `logTickValues` returns them (log10 values): [(spacing, labelled decades), (None, labelled
    minor ticks), (None, unlabelled ticks)]. Labels keep `room(values)` px apart (centre to
    centre) and `edge(values)` px from either end (pyqtgraph drops a label cut by an end).

    Decades are labelled (every 2nd, 5th, … when they are crowded), then the densest of
    m × 10^n (m in 2..9; 2, 3, 5; 2, 5; 3) that has room. A range of under EVEN_BELOW decades
    (or too narrow for two of those) is labelled instead at the most evenly spaced values
    (1, 2 or 5 × 10^n apart) that have room, when those are more. Where none of these give
    two labels, the axis still shows two if it has room: the lowest and highest of the
    roundest such values that are far enough apart (0.55 and 0.65, 10⁻²⁰ and 10⁰). The
    unlabelled level holds the other m × 10^n at least MIN_TICK_GAP_PX apart."""
    axis = _Axis(lo, hi, size, room, edge)
    per_decade = axis.per_decade
    first, last = math.floor(lo), math.ceil(hi)
    decades = np.arange(math.ceil(lo), math.floor(hi) + 1, dtype=np.float64)
    inner = axis.inside(decades)
    stride = next((k for k in DECADE_STRIDES if k * per_decade >= room(inner)), 10**4)
    minor = np.zeros(0)
    if stride > 1:
        inner = inner[np.mod(inner, stride) == 0]
    else:
        for factors in MINOR_LABELS:
            minor = axis.inside(_multiples(first, last, factors, lo, hi))
            if axis.fits(np.union1d(inner, minor)):
                break
    levels: Levels = [(float(stride), inner.tolist()), (None, minor.tolist())]
    shown = np.union1d(inner, minor)
    if len(shown) < 2 or hi - lo < EVEN_BELOW:
        grids = axis.even_grids()
        found = axis.even(grids)
        if len(found) < 2 and len(shown) < 2:  # the ends of the roundest values with room
            strides = [k for k in DECADE_STRIDES[::-1] if k < stride]
            logs = [axis.inside(decades[np.mod(decades, k) == 0]) for k in strides]
            logs += [axis.inside(np.union1d(decades, _multiples(first, last, f, lo, hi)))
                     for f in MINOR_LABELS[::-1]]  # fmt: skip
            found = next((v for v in (axis.pair(logs), axis.pair(grids[::-1])) if len(v)), found)
            if not len(found) and not len(shown):  # room for one label at most
                found = axis.middle([axis.inside(decades), *grids])
        if len(found) > len(shown):
            levels, shown = [(None, found.tolist()), (None, [])], found
    if stride > 1:  # decades alone, if they are apart enough
        rest = decades if per_decade >= MIN_TICK_GAP_PX else np.zeros(0)
    else:
        for factors in ((2, 3, 4, 5, 6, 7, 8, 9), (2, 5), ()):
            rest = np.union1d(decades, _multiples(first, last, factors, lo, hi))
            if _gap_px(rest, per_decade) >= MIN_TICK_GAP_PX:
                break
    gap = MIN_TICK_GAP_PX / per_decade  # unlabelled ticks on (or next to) a label: left out
    if len(shown) and len(rest):
        rest = rest[np.min(np.abs(rest[:, None] - shown[None, :]), axis=1) >= gap]
    return [*levels, (None, rest.tolist())]


class OpaqueLineAxis(pg.AxisItem):
    """An axis whose tick and grid lines are opaque, their colour blended with the background
    beforehand, and which sits under the view (z below the ViewBox's -100), so the curves are
    drawn over the grid. On the plain background the pixels are those of pyqtgraph's
    translucent lines; but Qt's raster engine strokes a translucent line far more slowly than
    an opaque one, and the grid lines were most of the norm panel's repaint
    (bench/bench_gui.py --only redraw).

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

    counts = False  # the axis counts (timesteps, steps, units): no ticks between integers
    span: tuple[float, float] | None = None  # the first and last numbers counted (rows)

    def tickValues(self, minVal, maxVal, size):  # noqa: N802,N803 (pyqtgraph's names)
        """pyqtgraph's ticks, on an axis counting the numbers of `span` none outside it (a
        heatmap of training steps from 1 labelled a row 0 that it does not have)."""
        levels = super().tickValues(minVal, maxVal, size)
        if self.span is None or self.logMode:
            return levels
        lo, hi = self.span
        return [(spacing, [v for v in values if lo <= v <= hi]) for spacing, values in levels]

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802,N803 (pyqtgraph's names)
        """pyqtgraph's tick levels, on an axis of counts only those a whole number apart (a
        short sequence had ticks at t = 0.5, 1.5)."""
        levels = super().tickSpacing(minVal, maxVal, size)
        if not self.counts or self.logMode:
            return levels
        return [(spacing, offset) for spacing, offset in levels if spacing >= 1] or [(1.0, 0.0)]

    def logTickValues(self, minVal, maxVal, size, stdTicks):  # noqa: N802,N803
        lo, hi = sorted((float(minVal), float(maxVal)))
        if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo and size > 0):
            return super().logTickValues(minVal, maxVal, size, stdTicks)
        # generateDrawSpecs places the labels over the axis's own length; `size`, the device
        # length of its line, is 2 px longer, and labels room apart there would come closer
        bounds = self.mapRectFromParent(self.geometry())
        length = bounds.height() if self.orientation in ("left", "right") else bounds.width()
        return log_ticks(lo, hi, length if length > 0 else size, self.label_room, self.label_edge)

    def label_room(self, values: np.ndarray) -> float:
        """Distance in px that the centres of labels at log `values` need along this axis:
        a vertical axis stacks one line of text per label, a horizontal one the widest label."""
        metrics = QFontMetricsF(self.style["tickFont"] or QFont())
        if self.orientation in ("left", "right"):
            return LABEL_ROOM * metrics.height()
        return self._widest(values, metrics) + metrics.height()

    def label_edge(self, values: np.ndarray) -> float:
        """Distance in px that the centre of a label at any of log `values` needs from either
        end of this axis: pyqtgraph leaves out a label that reaches beyond its bounding rect
        (the axis itself when a grid is drawn, else with `hideOverlappingLabels` px more),
        so a label right at an end would not be drawn. Half the label's box (TEXT_HEIGHT of a
        line high on a vertical axis), less that overhang, and a pixel for rounding."""
        metrics = QFontMetricsF(self.style["tickFont"] or QFont())
        if self.orientation in ("left", "right"):
            half = TEXT_HEIGHT * metrics.height() / 2
        else:
            half = self._widest(values, metrics) / 2
        return max(0.0, half - self._overhang()) + 1.0

    def _overhang(self) -> float:
        """How far beyond its ends this axis lets a label reach (`AxisItem.boundingRect`)."""
        if self.linkedView() is not None and self.grid is not False:
            return 0.0
        hide = self.style["hideOverlappingLabels"]
        if hide is True:
            return 0.0
        if hide is False:
            return 15.0
        try:
            return float(int(hide))
        except (TypeError, ValueError):
            return 0.0

    def _widest(self, values: np.ndarray, metrics: QFontMetricsF) -> float:
        strings = self.logTickStrings(list(values), self.autoSIPrefixScale * self.scale, None)
        return max((metrics.horizontalAdvance(s) for s in strings), default=0.0)

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
