"""The plots, built from a trace's arrays alone (no window needed, so export can reuse them).

Every panel has `draw(arrays, config, rows_total)` and redraws in place (setData / setImage on
items made once). Keys drawn are whatever the arrays hold, so new modes light up by themselves:
`norm_h_total`, `norm_h_direct`, `norm_c_total` [T]; `norm_h_total_by_pass` and
`norm_h_truncated_by_pass` [P, Tp]; `norm_h_total_by_batch` [N, T]; `norm_h_total_by_step`
[S, T]; `grad_h_total` [T, B, H].
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QPointF, QRectF, Qt
from PySide6.QtGui import QAction, QColor, QPen
from PySide6.QtWidgets import (
    QGraphicsItem,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from lstmviz.config import UNITS, RunConfig

Arrays = Mapping[str, np.ndarray]

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]  # fmt: skip
LSTM_KERNEL_TEXT = {"native": "native kernels", "while_loop": "tf.while_loop"}  # lstm_kernel
# Per-row curves in the norm panel; the rows heatmap shows every row. Passes sit side by side
# on the time axis; batches overlap, so they get one colour each (the palette's ten): more
# overlapping curves are unreadable, and each costs ~0.5 ms to paint at T=2000.
MAX_ROW_CURVES = {"pass": 20, "batch": len(PALETTE)}
# Curves with more points than this are drawn with 1-pixel pens: Qt strokes a wide antialiased
# pen on a long jagged path slowly (~0.2 s per 2000-point curve on the 2-core test machine,
# against ~1 ms at width 1; bench/bench_gui.py), and at that density the width is not seen.
THIN_ABOVE = 400
MAIN_CURVES = {  # key: (legend, pen)
    "norm_h_total": ("total ‖dL/dh_t‖", pg.mkPen("#1f3b73", width=2.5)),
    "norm_h_direct": ("direct ‖∂L/∂h_t‖", pg.mkPen("#d62728", width=1.5, style=Qt.DashLine)),
    "norm_c_total": ("cell ‖dL/dc_t‖", pg.mkPen("#2ca02c", width=1.5, style=Qt.DashDotLine)),
}
ROW_KEYS = {  # rows × timesteps source: row name
    "norm_h_total_by_pass": "pass",
    "norm_h_total_by_batch": "batch",
    "norm_h_total_by_step": "training step",
}


def stopped_early(arrays: Arrays) -> bool:
    """A trace of a run stopped before it was done (it holds the units of work done)."""
    return "units_requested" in arrays and str(arrays.get("stopped", "")) != "completed"


def fmt(value: float) -> str:
    return "—" if not np.isfinite(value) else f"{value:.3g}"


def rows_matrix(arrays: Arrays) -> tuple[np.ndarray, str] | None:
    """Total gradient norm as rows × timesteps, and what a row is. Taped runs have one
    sequence, so their rows are the batch samples (norm over units only)."""
    for key, name in ROW_KEYS.items():
        if key in arrays:
            return np.atleast_2d(np.asarray(arrays[key], np.float64)), name
    g = arrays.get("grad_h_total")
    if g is not None and np.ndim(g) == 3:
        return np.sqrt(np.sum(np.square(g, dtype=np.float64), axis=-1)).T, "batch sample"
    return None


def per_batch_rows(arrays: Arrays) -> Arrays:
    """Per-batch traces keep their norms as [N, T] (`norm_h_total` etc.): draw them as rows,
    one curve per batch, like the live `norm_h_total_by_batch` updates."""
    if np.ndim(arrays.get("norm_h_total")) != 2 or "norm_h_total_by_batch" in arrays:
        return arrays
    shown = {k: v for k, v in arrays.items() if k not in MAIN_CURVES}
    shown["norm_h_total_by_batch"] = arrays["norm_h_total"]
    return shown


def units_matrix(arrays: Arrays) -> np.ndarray | None:
    """mean over the batch of |dL/dh_t,j|, units × timesteps (leading axes averaged too)."""
    g = arrays.get("grad_h_total")
    if g is None or np.ndim(g) < 3:
        return None
    g = np.abs(np.asarray(g))  # |x| is exact in float32: no float64 copy of [T, B, H]
    g = g.reshape(-1, *g.shape[-3:]).mean(axis=(0, 2), dtype=np.float64)  # [T, H]
    return g.T


def pass_length(arrays: Arrays) -> int | None:
    if "norm_h_total_by_pass" not in arrays:
        return None
    if "pass_length" in arrays:
        return int(arrays["pass_length"])
    return int(np.shape(arrays["norm_h_total_by_pass"])[-1])


def _finite(y: np.ndarray) -> np.ndarray:
    """NaN where `y` is NaN or ±Inf: a gap in the line, never a spike off the plot."""
    return y if np.isfinite(y).all() else np.where(np.isfinite(y), y, np.nan)


def _same(a, b) -> bool:
    """Whether the data a curve holds (`a`, None if none) equals `b` (NaN equal to NaN)."""
    b = np.asarray(b)
    if a is None:
        return b.size == 0
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=b.dtype.kind == "f")


def display_values(data: np.ndarray, log: bool, normalise: bool, dtype=np.float64) -> np.ndarray:
    """Rows divided by their maximum (normalise) and/or log10 with non-positive values hidden.
    The heatmaps ask for float32 (what they colour; ~8× faster than float64 for 200 × 2000)."""
    data = np.array(data, dtype)
    if not np.isfinite(data).all():  # NaN/Inf are blank, never a colour or a line
        data[~np.isfinite(data)] = np.nan
    if normalise:
        with np.errstate(invalid="ignore", divide="ignore"):
            peak = np.nanmax(np.abs(data), axis=-1, keepdims=True, initial=0.0)
            data = np.where(peak > 0, data / np.where(peak > 0, peak, 1.0), data)
    if log:
        with np.errstate(invalid="ignore", divide="ignore"):
            data = np.log10(data, where=data > 0, out=np.full(data.shape, np.nan, data.dtype))
    return data


COLOR_MAP = "viridis"
# The colour map as 256 RGBA entries, one uint32 per colour: what pyqtgraph's ColorBarItem
# gives an image it colours (`getLookupTable(nPts=256)`).
_TABLE = pg.colormap.get(COLOR_MAP).getLookupTable(nPts=256, alpha=True).astype(np.uint8)
_TABLE32 = np.ascontiguousarray(_TABLE).view(np.uint32).ravel()


def colour(shown: np.ndarray, levels: tuple[float, float], out: np.ndarray | None = None):
    """RGBA (uint8, [..., 4]) of display values, the colours pyqtgraph gives a float image
    with `levels` and the colour map's 256-entry table: index ⌊(v − lo)·256/(hi − lo)⌋ clipped
    to 0..255; NaN fully transparent. The heatmaps upload this, so a redraw does not
    re-colour the whole image (pyqtgraph does, ~10 ms for 5000 × 100)."""
    lo, hi = levels
    scale = 256.0 / ((hi - lo) or 1.0)
    index = np.subtract(shown, lo, dtype=np.float32)
    index *= np.float32(scale)
    nan = np.isnan(index)
    np.clip(index, 0, 255, out=index)
    index[nan] = 0
    if out is None:
        out = np.empty((*np.shape(shown), 4), np.uint8)
    packed = out.view(np.uint32).reshape(np.shape(shown))
    np.take(_TABLE32, index.astype(np.uint8), out=packed)
    if nan.any():
        packed[nan] = 0
    return out


# A pre-coloured image is handed to Qt without a copy up to this many rows; a taller one (a
# training run of 100 000 steps) crashed Qt's painter here (segmentation fault painting a
# 100 000 × 20 zero-copy RGBA QImage; 30 000 rows painted), so it goes through pyqtgraph's
# conversion (a copy per update, as before).
ZERO_COPY_ROWS = 16384


def set_rgba(image: pg.ImageItem, rgba: np.ndarray) -> None:
    """Show a pre-coloured RGBA image (no levels, no lookup table)."""
    if len(rgba) <= ZERO_COPY_ROWS:
        image.setImage(rgba, autoLevels=False)
    else:
        image.setImage(rgba, autoLevels=False, levels=(0, 255))  # identity: a converted copy


def nonfinite_text(steps, what: str = "t") -> str:
    """ "NaN/Inf at t = 3, 4, 9 (3 steps)" (the first eight listed)."""
    steps = [int(v) for v in np.ravel(steps)]
    shown = ", ".join(str(v) for v in steps[:8]) + (", …" if len(steps) > 8 else "")
    return f"NaN/Inf at {what} = {shown} ({len(steps)} step{'s' if len(steps) != 1 else ''})"


class FullHeight(pg.GraphicsObject):
    """One item for any number of marks that span the plot's height over some x range,
    whatever the y range or log mode, and never stretch the auto range."""

    def x_extent(self) -> tuple[float, float] | None:
        """The marks' leftmost and rightmost x (None: nothing to draw)."""
        raise NotImplementedError

    def viewRangeChanged(self) -> None:  # noqa: N802 (pyqtgraph's name)
        self.prepareGeometryChange()
        super().viewRangeChanged()

    def _view(self) -> QRectF | None:
        view = self.viewRect()
        return None if view is None or self.x_extent() is None else view

    def boundingRect(self) -> QRectF:  # noqa: N802
        view = self._view()
        if view is None:
            return QRectF()
        a, b = self.x_extent()
        return QRectF(a, view.top(), b - a, view.height()).normalized()

    def dataBounds(self, axis, frac=1.0, orthoRange=None):  # noqa: N802,N803
        return None


class PassBoundaries(FullHeight):
    """Dotted lines between passes (P=400 as 399 InfiniteLines cost ~180 ms to draw)."""

    def __init__(self):
        super().__init__()
        self.positions = np.zeros(0)
        self.setZValue(-10)  # under the curves
        self.pen = pg.mkPen("#888", width=1, style=Qt.DotLine)
        self.pen.setCosmetic(True)

    def set_positions(self, positions) -> None:
        positions = np.asarray(positions, np.float64)
        if np.array_equal(positions, self.positions):
            return
        self.prepareGeometryChange()
        self.positions = positions
        self.update()

    def x_extent(self) -> tuple[float, float] | None:
        return (self.positions[0], self.positions[-1]) if self.positions.size else None

    def paint(self, painter, *args) -> None:
        view = self._view()
        if view is None:
            return
        painter.setPen(self.pen)
        shown = self.positions[(self.positions >= view.left()) & (self.positions <= view.right())]
        painter.drawLines([QLineF(x, view.top(), x, view.bottom()) for x in shown])


class NonFiniteMarks(FullHeight):
    """Red see-through bands over the steps where a trace holds NaN or Inf (a run of
    neighbouring steps is one band), at least a pixel wide (the outline's cosmetic pen)."""

    COLOR = (220, 0, 0)

    def __init__(self):
        super().__init__()
        self.steps = np.zeros(0, np.int64)
        self.spans: list[tuple[int, int]] = []
        self.setZValue(-20)  # under the curves
        self.pen = pg.mkPen(*self.COLOR, 200, width=1)
        self.pen.setCosmetic(True)
        self.brush = pg.mkBrush(*self.COLOR, 60)

    def set_steps(self, steps) -> None:
        steps = np.unique(np.asarray(steps if steps is not None else [], np.int64).ravel())
        if np.array_equal(steps, self.steps):
            return
        self.prepareGeometryChange()
        self.steps = steps
        breaks = np.flatnonzero(np.diff(steps) > 1)
        starts = np.r_[steps[:1], steps[breaks + 1]] if steps.size else []
        ends = np.r_[steps[breaks], steps[-1:]] if steps.size else []
        self.spans = [(int(a), int(b)) for a, b in zip(starts, ends, strict=True)]
        self.update()

    def x_extent(self) -> tuple[float, float] | None:
        return (self.spans[0][0] - 0.5, self.spans[-1][1] + 0.5) if self.spans else None

    def paint(self, painter, *args) -> None:
        view = self._view()
        if view is None:
            return
        painter.setPen(self.pen)
        painter.setBrush(self.brush)
        for a, b in self.spans:
            painter.drawRect(QRectF(a - 0.5, view.top(), b - a + 1.0, view.height()))


class OpaqueLineAxis(pg.AxisItem):
    """An axis whose tick and grid lines are opaque, their colour blended with the background
    beforehand, and which sits under the view (z below the ViewBox's -100), so the curves are
    drawn over the grid. On the plain background the pixels are those of pyqtgraph's
    translucent lines; but Qt's raster engine strokes a translucent line ~20× slower than an
    opaque one (~0.1 ms against ~6 µs for a line across the plot), and the ~50 grid lines were
    most of the norm panel's repaint (bench/bench_gui.py)."""

    def logTickValues(self, minVal, maxVal, size, stdTicks):
        """pyqtgraph's log ticks (decades, then 2..9 × 10^n), or, where fewer than two of those
        fall in a narrow range, ticks evenly spaced in value (else the axis had no labels)."""
        ticks = super().logTickValues(minVal, maxVal, size, stdTicks)
        if sum(len(values) for _, values in ticks) >= 2 or not np.isfinite([minVal, maxVal]).all():
            return ticks
        lo, hi = 10.0**minVal, 10.0**maxVal
        step = 10.0 ** np.floor(np.log10((hi - lo) / 3))
        step *= next((k for k in (5, 2) if (hi - lo) / (k * step) >= 3), 1)
        values = np.arange(np.ceil(lo / step), np.floor(hi / step) + 1) * step
        return [(None, list(np.log10(values[(values > 0) & (values >= lo) & (values <= hi)])))]

    def logTickStrings(self, values, scale, spacing):
        """pyqtgraph's one-digit labels, with more digits where those would repeat."""
        strings = super().logTickStrings(values, scale, spacing)
        numbers = 10.0 ** np.asarray(values, np.float64) * scale
        for digits in range(2, 6):
            if len(set(strings)) == len(strings):
                break
            strings = [f"{v:.{digits}g}" for v in numbers]
        return strings

    def generateDrawSpecs(self, p):
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


def opaque(pen: QPen, background: QColor) -> QPen:
    """pen with its translucent colour replaced by that colour composed over `background`:
    the same pixels on that background, but Qt strokes an opaque line ~20× faster (grid lines;
    long noisy curves: the loss, the faded history)."""
    color = pen.color()
    alpha = color.alphaF()
    if alpha >= 1.0:
        return pen
    pairs = zip(color.getRgbF()[:3], background.getRgbF()[:3], strict=True)
    rgb = (alpha * c + (1.0 - alpha) * b for c, b in pairs)
    opaque = QPen(pen)
    opaque.setColor(QColor.fromRgbF(*rgb))
    return opaque


class Panel(QWidget):
    """A bold title, a hover readout on the right, and a pyqtgraph plot below."""

    def __init__(self, title: str, tip: str):
        super().__init__()
        self.title = QLabel(f"<b>{title}</b>", toolTip=tip)
        self.readout = QLabel(alignment=Qt.AlignRight | Qt.AlignVCenter)
        self.readout.setStyleSheet("color: #555; font-family: monospace;")
        sides = ("left", "bottom")
        self.plot = pg.PlotWidget(axisItems={side: OpaqueLineAxis(side) for side in sides})
        self.plot.setToolTip(tip)
        self.plot.getPlotItem().getViewBox().setDefaultPadding(0.01)
        for side in sides:
            self.plot.getAxis(side).setZValue(-200)  # under the ViewBox: see OpaqueLineAxis
            self.plot.getAxis(side).enableAutoSIPrefix(False)
        self.arrays: Arrays = {}
        self.config: RunConfig | None = None
        self.rows_total: int | None = None
        self.log, self.normalise = True, False
        self._held: tuple[bool, float, float] | None = None  # held y range: (log, lo, hi)
        head = QHBoxLayout()
        head.addWidget(self.title)
        head.addStretch(1)
        head.addWidget(self.readout)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(2)
        layout.addLayout(head)
        self.placeholder = QLabel(
            "Nothing to show yet: press Run (Ctrl+R) or open a trace (Ctrl+O).",
            alignment=Qt.AlignCenter,
        )
        self.placeholder.setStyleSheet("color: #777; background: white; border: 1px solid #ddd;")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(self.plot)
        layout.addWidget(self.stack, 1)
        self.plot.scene().sigMouseMoved.connect(self._hover)
        # Right-click → Export panel… writes what `lstmviz export` writes (the main window
        # connects it); it replaces pyqtgraph's own Export… entry.
        self.export_action = QAction("Export panel…", self)
        self.plot.scene().contextMenu = [self.export_action]

    def cache_axes(self) -> None:
        """Keep each axis (ticks, labels and its grid lines, which span the whole plot) as a
        pixmap redrawn only when the axis changes: otherwise every curve update repaints the
        grid, ~10 ms per axis offscreen on the 2-core test machine (bench/bench_gui.py). On
        screen only: exports render fresh panels, so their SVG stays vector."""
        for side in ("left", "bottom"):
            self.plot.getAxis(side).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)

    def draw(self, arrays: Arrays, config: RunConfig | None = None, rows_total: int | None = None):
        """Show `arrays`; `rows_total` is the number of rows a live run will reach."""
        self.arrays, self.config, self.rows_total = per_batch_rows(arrays), config, rows_total
        self.redraw()
        if self.HOLD_Y:
            self.hold_y_range()
        # the auto range now, not when painting: a range that moves during a paint has Qt
        # paint the whole panel (curves, axes and grid) a second time
        self.plot.getPlotItem().getViewBox().prepareForPaint()
        self.stack.setCurrentWidget(self.plot if self.drawn() else self.placeholder)

    # Curve panels with a grid: during a live run the y range only grows, in steps with
    # headroom, instead of following the data on every update. The grid lines belong to the
    # left axis, which is repainted whenever its range changes (~8-15 ms offscreen for a log
    # axis on the 2-core test machine, ~2 of 3 updates in a training run; bench/bench_gui.py).
    HOLD_Y = False
    HEADROOM = 0.25  # of the data's span (view units: decades on a log axis), each side

    def hold_y_range(self) -> None:
        view = self.plot.getPlotItem().getViewBox()
        if self.rows_total is None:  # a finished trace: fit the data
            if self._held is not None:
                self._held = None
                view.enableAutoRange(y=True)
            return
        bounds = view.childrenBounds()[1]
        if bounds is None or not np.all(np.isfinite(bounds)):
            return
        lo, hi = (float(v) for v in bounds)
        held = self._held if self._held is not None and self._held[0] == self.log else None
        if held is not None and held[1] <= lo and hi <= held[2]:
            return
        pad = max((hi - lo) * self.HEADROOM, 0.05 if self.log else abs(hi) * 0.05 or 0.05)
        lo = lo - pad if held is None or lo < held[1] else held[1]
        hi = hi + pad if held is None or hi > held[2] else held[2]
        self._held = (self.log, lo, hi)
        view.setYRange(lo, hi, padding=0)  # also turns the y auto range off

    def set_options(self, log: bool, normalise: bool) -> None:
        self.log, self.normalise = log, normalise
        self.redraw()
        if self.HOLD_Y:
            self.hold_y_range()

    def redraw(self) -> None:
        raise NotImplementedError

    def drawn(self) -> bool:
        """Whether the plot shows any data (else the placeholder is shown)."""
        raise NotImplementedError

    def readout_at(self, x: float, y: float) -> str:
        raise NotImplementedError

    def _hover(self, pos: QPointF) -> None:
        view = self.plot.getPlotItem().getViewBox()
        if not view.sceneBoundingRect().contains(pos):
            self.readout.clear()
            return
        point = view.mapSceneToView(pos)
        self.readout.setText(self.readout_at(point.x(), point.y()))


class NormPanel(Panel):
    """Gradient norm over timesteps: total, direct and cell curves; one curve per pass (with
    the truncated one dashed) or per batch; pass boundaries as dotted lines."""

    HOLD_Y = True

    def __init__(self):
        super().__init__(
            "Gradient norm over timesteps",
            "L2 norm over batch and units of the gradient at each timestep.\n"
            "total dL/dh_t: through the recurrence (what BPTT calls δ_t);\n"
            "direct ∂L/∂h_t: only where h_t enters the loss itself;\n"
            "cell dL/dc_t: at the cell state. Log scale and normalising: View menu.",
        )
        item = self.plot.getPlotItem()
        item.setLabel("bottom", "timestep t")
        item.showGrid(x=True, y=True, alpha=0.25)
        # Below the x axis, in the plot's own layout (so exports keep it): over the view it
        # hid the tops of the curves.
        self.legend = pg.LegendItem(offset=None, labelTextSize="8pt", verSpacing=-6)
        item.layout.addItem(self.legend, 5, 1)
        self.curves = {
            key: pg.PlotDataItem(pen=pen, symbolSize=6, symbolPen=pen, connect="finite")
            for key, (_, pen) in MAIN_CURVES.items()
        }
        for curve in self.curves.values():
            item.addItem(curve)
        self.marks = NonFiniteMarks()  # the timesteps where the trace holds NaN/Inf
        item.addItem(self.marks)
        self.row_curves: list[tuple[pg.PlotDataItem, pg.PlotDataItem]] = []
        self.boundaries = PassBoundaries()
        item.addItem(self.boundaries)
        # What is on screen, so a redraw (30 a second in a live run) only changes what differs:
        # pyqtgraph recomputes every curve on setLogMode and rebuilds labels on legend changes.
        self.pens: dict[pg.PlotDataItem, pg.QtGui.QPen] = {}  # each curve's full-width pen
        self.shown_state: dict[str, object] = {}

    def _row_pair(self, index: int) -> tuple[pg.PlotDataItem, pg.PlotDataItem]:
        while len(self.row_curves) <= index:
            color = PALETTE[len(self.row_curves) % len(PALETTE)]
            pair = (
                pg.PlotDataItem(pen=pg.mkPen(color, width=1.5), connect="finite"),
                pg.PlotDataItem(
                    pen=pg.mkPen(color, width=1.5, style=Qt.DashLine), connect="finite"
                ),
            )
            for curve in pair:
                self.plot.addItem(curve)
            self.row_curves.append(pair)
        return self.row_curves[index]

    def _changed(self, name: str, value) -> bool:
        """Record `value` as shown for `name`; True if it differs from what was shown."""
        if self.shown_state.get(name, self) == value:
            return False
        self.shown_state[name] = value
        return True

    def _set_data(self, curve: pg.PlotDataItem, x, y) -> None:
        """setData, with a 1-pixel pen when the curve has more than THIN_ABOVE points."""
        base = self.pens.setdefault(curve, pg.mkPen(curve.opts["pen"]))
        long = len(y) > THIN_ABOVE
        if self._changed(f"thin {id(curve)}", long):
            pen = pg.mkPen(base)
            if long and base.widthF() > 1:
                pen.setWidthF(1.0)
            # antialiasing a long jagged 1-pixel line costs more than it shows
            curve.opts["antialias"] = not long
            curve.setPen(pen)
        elif _same(curve.xData, x) and _same(curve.yData, y):
            return  # a live update that did not change this curve: no re-render
        curve.setData(x, y)

    def redraw(self) -> None:
        a = self.arrays
        if self._changed("log", self.log):
            self.plot.setLogMode(y=self.log)
        label = "gradient norm" + (" / row max" if self.normalise else "")
        label += " (log scale)" if self.log else ""
        if self._changed("label", label):
            self.plot.setLabel("left", label)
        per_pass = pass_length(a)
        rows = rows_matrix(a) if any(k in a for k in ROW_KEYS) else None
        legend: list[tuple[pg.PlotDataItem, str]] = []
        for key, curve in self.curves.items():
            show = key in a and not (key == "norm_h_total" and per_pass)
            y = np.asarray(a[key], np.float64) if show else np.zeros(0)
            self._set_data(curve, np.arange(len(y)), self._positive(y) if self.log else _finite(y))
            symbol = "o" if 0 < np.count_nonzero(np.isfinite(y) & (y != 0)) <= 3 else None
            if curve.opts["symbol"] != symbol:
                curve.setSymbol(symbol)
            if show:
                legend.append((curve, MAIN_CURVES[key][0]))
        count = 0
        if rows is not None and rows[1] in ("pass", "batch"):
            data, name = rows
            truncated = a.get("norm_h_truncated_by_pass")
            count = min(len(data), MAX_ROW_CURVES[name])
            for r in range(count):
                full, cut = self._row_pair(r)
                x = np.arange(data.shape[1]) + (r * per_pass if per_pass else 0)
                self._set_data(full, x, self._show(data[r]))
                has_cut = truncated is not None and r < len(truncated)
                self._set_data(
                    cut, x if has_cut else [], self._show(truncated[r]) if has_cut else []
                )
                if r < 6:
                    legend.append((full, f"{name} {r + 1}" + (" full" if has_cut else "")))
            if truncated is not None and len(truncated):
                legend.append((self.row_curves[0][1], "truncated (stateful), dashed"))
        if self._changed("legend", [(id(item), text) for item, text in legend]):
            self.legend.clear()
            for item, text in legend:
                self.legend.addItem(item, text)
            self.legend.setColumnCount(max(1, min(len(legend), 4)))
        for full, cut in self.row_curves[count:]:
            if full.xData is not None and len(full.xData):
                full.setData([], [])
            if cut.xData is not None and len(cut.xData):
                cut.setData([], [])
        self.marks.set_steps(a.get("nonfinite_steps"))
        total = max(self.rows_total or 0, len(rows[0]) if rows else 0)
        self.boundaries.set_positions(np.arange(1, total) * per_pass - 0.5 if per_pass else [])

    def drawn(self) -> bool:
        items = [*self.curves.values(), *(full for full, _ in self.row_curves)]
        return any(item.yData is not None and len(item.yData) for item in items)

    def _show(self, y: np.ndarray) -> np.ndarray:
        y = display_values(y, log=False, normalise=self.normalise)  # NaN/Inf: NaN
        return self._positive(y) if self.log else y

    @staticmethod
    def _positive(y: np.ndarray) -> np.ndarray:
        """Log axes cannot show zeros: hide them (NaN breaks the line there), and Inf."""
        return np.where((y > 0) & np.isfinite(y), y, np.nan)

    def readout_at(self, x: float, y: float) -> str:
        t = int(round(x))
        a, parts = self.arrays, [f"t = {t}"]
        per_pass = pass_length(a)
        if per_pass:
            p, s = divmod(t, per_pass)
            full = a["norm_h_total_by_pass"]
            if not 0 <= p < len(full):
                return ""
            parts = [f"pass {p + 1}, t = {s}", f"full {fmt(full[p, s])}"]
            cut = a.get("norm_h_truncated_by_pass")
            if cut is not None and p < len(cut):
                parts.append(f"truncated {fmt(cut[p, s])}")
        for key, label in (("norm_h_total", "total"), ("norm_h_direct", "direct"),
                           ("norm_c_total", "cell")):  # fmt: skip
            if key in a and 0 <= t < len(a[key]) and not (per_pass and key == "norm_h_total"):
                parts.append(f"{label} {fmt(a[key][t])}")
        return " · ".join(parts) if len(parts) > 1 else ""


class HeatmapPanel(Panel):
    """An image of rows × timesteps with a colour bar; rows not computed yet stay blank."""

    def __init__(self, title: str, tip: str, value_label: str):
        super().__init__(title, tip)
        self.value_label = value_label
        self.plot.setLabel("bottom", "timestep t")
        self.plot.invertY(True)
        # The image is pre-coloured RGBA (`colour`): the colour bar only shows the map and
        # the levels, it is not linked to the image (which would colour it on every update).
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.bar = pg.ColorBarItem(
            colorMap=COLOR_MAP, values=(0.0, 1.0), interactive=False, width=14
        )
        self.bar.setImageItem([], insert_in=self.plot.getPlotItem())
        self.bar.axis.setWidth(None)  # fit the tick labels (pyqtgraph fixes 45 px: overlaps)
        self.data = np.zeros((0, 0))
        self.row_name = "row"
        self._key: tuple | None = None  # what the image buffer was built for
        self._filled = 0  # rows of the buffer filled so far
        self._last_row: np.ndarray | None = None
        self.shown = np.zeros((0, 0), np.float32)  # display values (log etc.), NaN blank
        self.rgba = np.zeros((0, 0, 4), np.uint8)  # `_shown` coloured at `levels`: on screen
        self.levels: tuple[float, float] | None = None
        self._range = (np.inf, -np.inf)  # finite min/max of the displayed values

    def matrix(self) -> tuple[np.ndarray, str] | None:
        raise NotImplementedError

    def source(self) -> tuple[np.ndarray, str] | None:
        """The matrix as it is stored (no float64 copy); `matrix()` unless a panel can do
        better. Live updates only convert and colour the rows that are new."""
        return self.matrix()

    def redraw(self) -> None:
        found = self.source()
        if found is None:
            if self.data.size or self._key is not None:
                self.data = np.zeros((0, 0))
                self.image.clear()
                self._key = None
            return
        raw, name = found
        raw = np.atleast_2d(raw) if np.ndim(raw) < 2 else raw
        rows, width = raw.shape
        units = name == "unit"
        live_total = self.rows_total if self.rows_total and not units else 0
        total = max(live_total, rows)
        normalise = self.normalise and not units
        key = (name, width, total, self.log, normalise, id(self.config), self.rows_total is None)
        # A live run appends rows: convert, log and colour only the new ones (the buffer is
        # sized for every row the run will reach, rows not computed yet stay blank: NaN).
        # Anything else (a finished trace, other options) starts over.
        incremental = (
            self.rows_total is not None
            and key == self._key
            and self._filled <= rows
            and (self._filled == 0 or np.array_equal(raw[self._filled - 1], self._last_row))
        )
        if not incremental:
            self._key, self._filled = key, 0
            self.row_name = name
            self.data = np.full((total, width), np.nan)
            self.shown = np.full((total, width), np.nan, np.float32)
            self.rgba = np.zeros((total, width, 4), np.uint8)  # transparent
            self._range = (np.inf, -np.inf)
            self.levels = None
            self._label(total, units, normalise)
        new = slice(self._filled, rows)
        block = np.asarray(raw[new], np.float64)
        self.data[new] = block
        shown = display_values(block, self.log, normalise, np.float32)
        self.shown[new] = shown
        finite = shown[np.isfinite(shown)]
        if finite.size:
            lo, hi = self._range
            self._range = (min(lo, float(finite.min())), max(hi, float(finite.max())))
        self._filled = rows
        self._last_row = np.array(raw[rows - 1]) if rows else None
        lo, hi = self._range if np.isfinite(self._range[0]) else (0.0, 1.0)
        levels = (lo, hi if hi > lo else lo + 1.0)
        if levels != self.levels:  # every row's colour moves: re-colour the rows so far
            self.levels = levels
            colour(self.shown[:rows], levels, out=self.rgba[:rows])
            self.bar.setLevels(levels)
        else:
            colour(self.shown[new], levels, out=self.rgba[new])
        set_rgba(self.image, self.rgba)
        if not incremental:
            self.image.setRect(QRectF(0, 0, width, total))

    def show_image(self, shown: np.ndarray, levels: tuple[float, float]) -> None:
        """Show display values `shown` (a whole matrix, NaN blank) coloured at `levels`."""
        self.shown, self.levels = np.asarray(shown, np.float32), levels
        self.rgba = colour(self.shown, levels)
        set_rgba(self.image, self.rgba)
        self.image.setRect(QRectF(0, 0, shown.shape[1], shown.shape[0]))
        self.bar.setLevels(levels)

    def _label(self, total: int, units: bool, normalise: bool) -> None:
        norm = " / row max" if normalise else ""
        self.bar.setLabel("right", ("log₁₀ " if self.log else "") + self.value_label + norm)
        self.plot.setLabel("left", self.row_name + (" (from 0)" if units else ""))
        few = not units and total <= 20  # label rows 1..N at their centres
        ticks = [[(r + 0.5, str(r + 1)) for r in range(total)]] if few else None
        self.plot.getAxis("left").setTicks(ticks)

    def drawn(self) -> bool:
        return self.data.size > 0

    def readout_at(self, x: float, y: float) -> str:
        t, r = int(np.floor(x)), int(np.floor(y))
        if not (0 <= r < self.data.shape[0] and 0 <= t < self.data.shape[1]):
            return ""
        return f"{self.row_name} {r if self.row_name == 'unit' else r + 1}, t = {t}: " + fmt(
            self.data[r, t]
        )


class RowsHeatmap(HeatmapPanel):
    def __init__(self):
        super().__init__(
            "Total gradient norm: rows × timesteps",
            "‖dL/dh_t‖ for each pass (multi-pass), batch (per-batch weights) or training step;\n"
            "in a taped run each row is one sequence of the batch (norm over units).\n"
            "Rows fill in while the run goes.",
            "‖dL/dh_t‖",
        )

    def matrix(self) -> tuple[np.ndarray, str] | None:
        return rows_matrix(self.arrays)

    def source(self) -> tuple[np.ndarray, str] | None:
        for key, name in ROW_KEYS.items():
            if key in self.arrays:
                return np.asarray(self.arrays[key]), name
        return self.matrix()


class UnitsHeatmap(HeatmapPanel):
    def __init__(self):
        super().__init__(
            "Per-unit gradient: units × timesteps",
            "|dL/dh_t,j| averaged over the batch, for every hidden unit j.\n"
            "Rows that stay dark are units the gradient never reaches (dead or saturated).",
            "mean |dL/dh_t,j|",
        )

    def matrix(self) -> tuple[np.ndarray, str] | None:
        units = units_matrix(self.arrays)
        return None if units is None else (units, "unit")


def _has_norm(key: str, arrays: Arrays) -> bool:
    """Whether `key` is a state or a gradient whose per-step norm the trace holds."""
    return key in ("h", "c") or (key.startswith("grad_") and "norm_" + key[5:] in arrays)


def summary_text(mode: str, arrays: Arrays, config: RunConfig | None, seconds: float | None) -> str:
    """One line: mode, sizes, loss, multi-pass check, kernel, time, non-finite values."""
    parts = [f"<b>{mode}</b>"]
    if config is not None:
        steps = f"T={config.steps}"
        if config.mode == "multipass":
            steps = f"P={config.passes} × T={config.steps}"
        elif config.mode == "batchwise":
            steps += f" N={config.batches}"
        parts.append(f"{steps} B={config.batch} I={config.input_dim} H={config.hidden}")
    loss = arrays.get("loss_by_step", arrays.get("loss"))
    if loss is not None and np.size(loss):
        parts.append(f"loss {fmt(float(np.ravel(loss)[-1]))}")
    if "max_abs_diff_full_vs_reference" in arrays:
        diff = float(arrays["max_abs_diff_full_vs_reference"])
        scale = float(np.max(np.abs(arrays["grad_h_total"]))) if "grad_h_total" in arrays else 1
        mark = "✓" if diff <= 1e-4 * max(scale, 1e-2) else "✗"
        parts.append(f"full = one-pass reference {mark} (max |Δ| {diff:.1e})")
    if stopped_early(arrays):
        done, requested = int(arrays["units_done"]), int(arrays["units_requested"])
        parts.append(f"stopped early: {done} of {requested} {UNITS.get(mode, 'units')} kept")
    kernel = str(arrays.get("lstm_kernel", "while_loop"))  # traces before it was recorded
    kernel = LSTM_KERNEL_TEXT.get(kernel, html.escape(kernel))
    backend = arrays.get("rnn_backend")
    if backend is not None:
        kernel = f"rnn_backend <b>{backend}</b>" + ("" if backend == "cudnn" else f" ({kernel})")
    parts.append(kernel)
    if "generator" in arrays:
        parts.append(f"generator {arrays['generator']}")
    if "grad_generator_norm" in arrays:
        gen = np.ravel(np.asarray(arrays["grad_generator_norm"], np.float64))
        parts.append(f"‖∂L/∂θ_generator‖ mean {fmt(float(gen.mean()))}")
    for key, name in (("weights_source", "weights"), ("inputs_source", "inputs")):
        if key in arrays:
            source = str(arrays[key])
            path, _, rest = source.partition(": ")
            detail = rest.split(";")[0]
            parts.append(f"{name}: {html.escape(Path(path).name)} ({html.escape(detail)})")
    parts.append("loaded from file" if seconds is None else f"{seconds:.2f} s")
    # An engine's trace lists the steps where a state or a gradient with a norm is NaN or Inf
    # (`nonfinite_steps`); only the other float arrays need a look (scanning the big [T, B, H]
    # ones again took ~40 ms for a multi-pass trace of 8000 steps).
    checked = "nonfinite_steps" in arrays
    bad = {k: int(np.size(v) - np.isfinite(v).sum()) for k, v in arrays.items()
           if np.asarray(v).dtype.kind == "f"
           and not (checked and _has_norm(k, arrays))}  # fmt: skip
    bad = {k: n for k, n in bad.items() if n}
    steps = np.ravel(arrays.get("nonfinite_steps", []))
    loss_steps = np.ravel(arrays.get("nonfinite_loss_steps", []))
    if steps.size or loss_steps.size:
        found = []
        if steps.size:
            found.append(nonfinite_text(steps))
        if loss_steps.size:
            found.append(nonfinite_text(loss_steps, "training step"))
        by_batch = arrays.get("nonfinite_by_batch")
        if by_batch is not None and np.ndim(by_batch) == 2:
            batches = np.flatnonzero(np.asarray(by_batch).any(axis=1)) + 1
            listed = ", ".join(str(b) for b in batches[:8]) + (", …" if batches.size > 8 else "")
            found.append(f"in batch{'es' if batches.size != 1 else ''} {listed}")
        if str(arrays.get("stopped", "")) == "non-finite":
            found.append("training stopped there")
        parts.append(f"<span style='color:#c00'>⚠ {'; '.join(found)}</span>")
    elif bad:
        listed = ", ".join(f"{n} in {k}" for k, n in list(bad.items())[:3])
        parts.append(f"<span style='color:#c00'>⚠ non-finite values: {listed}</span>")
    else:
        parts.append("no NaN/Inf ✓")
    return " · ".join(parts)


def summary_tip(arrays: Arrays) -> str:
    """The summary's tooltip: where the weights and inputs came from, which kernel ran."""
    lines = [str(arrays[key]) for key in ("weights_source", "inputs_source") if key in arrays]
    if "rnn_backend" in arrays:
        lines.append(
            "rnn_backend: which kernel ran the LSTM: cudnn (tf.raw_ops.CudnnRNNV3, on a GPU) or\n"
            "while_loop (the taped engine's cell). cuDNN takes one weight set per batch:\n"
            "per-sample weights (one set per sequence) cannot run on it."
        )
    if "grad_generator_norm" in arrays:
        lines.append(
            "‖∂L/∂θ_generator‖: global norm of the hypernetwork's variable gradients, per batch: "
            + ", ".join(fmt(float(v)) for v in np.ravel(arrays["grad_generator_norm"])[:20])
        )
    return "\n\n".join(lines)


class SummaryPanel(QWidget):
    """The summary line and the Verify button with its result."""

    def __init__(self):
        super().__init__()
        self.text = QLabel("No run yet: set the parameters on the left and press Run (Ctrl+R).")
        self.text.setTextFormat(Qt.RichText)
        self.text.setWordWrap(True)  # long summaries wrap instead of widening the window
        self.text.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.verify_button = QPushButton("Verify")
        self.verify_button.setToolTip(
            "Check a few random entries of dL/dh_t (and the largest one) by central finite\n"
            "differences of the loss in float64, and show the worst error."
        )
        self.verify_button.setEnabled(False)
        self.verify_result = QLabel()
        self.verify_result.setTextFormat(Qt.RichText)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.verify_result)
        layout.addWidget(self.verify_button)

    def draw(self, mode: str, arrays: Arrays, config: RunConfig | None, seconds: float | None):
        self.text.setText(summary_text(mode, arrays, config, seconds))
        self.text.setToolTip(summary_tip(arrays))
        self.verify_result.clear()
