"""The gradient-norm panel: `NormPanel` draws the per-timestep norms (`norm_h_total`,
`norm_h_direct`, `norm_c_total` [T]), one curve per pass (`norm_h_total_by_pass` [P, Tp], the
truncated `norm_h_truncated_by_pass` dashed) or per batch (`norm_h_total_by_batch` [N, T]);
`NormHistoryPanel` adds, in training runs, earlier steps' rows of `norm_h_total_by_step`
[S, T] drawn faded under the latest step's curve."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import shiboken6
from PySide6.QtCore import QEvent, QObject, Qt

from lstmviz.analysis.report.summary import fmt
from lstmviz.analysis.values import (
    display_values,
    finite,
    pass_length,
    positive,
    rows_matrix,
)
from lstmviz.core import schema
from lstmviz.plots.panels.marks import NonFiniteMarks, PassBoundaries
from lstmviz.plots.panels.panel import Panel, set_symbol_and_data
from lstmviz.plots.style import PALETTE

# Per-row curves in the norm panel; the rows heatmap shows every row. Passes sit side by side
# on the time axis; batches overlap, so they get one colour each (the palette's ten): more
# overlapping curves are unreadable, and each adds to the paint (bench/bench_gui.py --only redraw).
MAX_ROW_CURVES = {"pass": 20, "batch": len(PALETTE)}
# Curves with more points than this are drawn with 1-pixel pens: Qt strokes a wide antialiased
# pen on a long jagged path far more slowly than a 1-pixel one (bench/bench_gui.py --only
# redraw), and at that density the width is not seen.
THIN_ABOVE = 400
# On screen, curves with more points than this are drawn without antialiasing: a wider
# antialiased pen costs several times as much to stroke (dashed the most), and at that density
# the steps of an aliased line hardly show. Exports antialias all.
SMOOTH_UP_TO = 200


def thin(points: int, dashed: bool) -> bool:
    """Whether a curve of `points` points gets a 1-pixel pen: above THIN_ABOVE, or dashed and
    aliased (above SMOOTH_UP_TO). Qt strokes the dashes of a wider aliased pen as a path, many
    times slower than at 1 px (bench/bench_gui.py --only life)."""
    return points > (SMOOTH_UP_TO if dashed else THIN_ABOVE)


def points_alone(y: np.ndarray, most: int = 64) -> bool:
    """Whether the drawable values of y (finite, non-zero: a log axis drops zeros) are so few
    (≤ 3) or so scattered (none next to another, ≤ `most`) that a line would not show them:
    the direct gradient of a loss on each pass's last step is one value a pass."""
    seen = np.isfinite(y) & (y != 0)
    count = int(np.count_nonzero(seen))
    if not 0 < count <= most:
        return False
    return count <= 3 or not np.any(seen[1:] & seen[:-1])


MAIN_CURVES = {  # key: (legend, pen)
    "norm_h_total": ("total ‖dL/dh_t‖", pg.mkPen("#1f3b73", width=2.5)),
    "norm_h_direct": ("direct ‖∂L/∂h_t‖", pg.mkPen("#d62728", width=1.5, style=Qt.DashLine)),
    "norm_c_total": ("cell ‖dL/dc_t‖", pg.mkPen("#2ca02c", width=1.5, style=Qt.DashDotLine)),
}

# Where colours mean passes or batches, the direct and cell curves are grey (their dashes say
# which is which): in colour they looked like pass 3 and pass 4.
BESIDE_ROWS = {"norm_h_direct": "#444444", "norm_c_total": "#8c8c8c"}
LEGEND_COLUMNS = 4  # at most; fewer when the plot is too narrow for them (`fit_legend`)
LEGEND_GAP_PX = 12  # between legend columns
# A legend that would leave the curves less than this (a short panel in a small window) is
# folded away until the panel is taller: the curves matter more, hovering still names them.
MIN_VIEW_PX = 70
MAX_HISTORY_CURVES = 24  # earlier training steps drawn faded (evenly spaced over the run)
HISTORY_COLOR = (31, 59, 115)  # the total curve's colour


def legend_below(plot: pg.PlotWidget) -> pg.LegendItem:
    """A legend below the x axis, in the plot's own layout (so exports keep it): over the view
    it hid the tops of the curves. Fitted (`fit_legend`) whenever the plot is resized or its
    left axis's width changes; call `fit_legend` too when its items change."""
    legend = pg.LegendItem(offset=None, labelTextSize="8pt", verSpacing=-6)
    plot.getPlotItem().layout.addItem(legend, 5, 1)
    legend.fitter = _LegendFitter(legend, plot)
    return legend


def set_legend(legend: pg.LegendItem, rows: list[tuple[pg.GraphicsObject, str]]) -> None:
    """Give `legend` these rows (item, text), in order, changing its rows in place and adding
    or removing only the difference: each new row makes two graphics widgets, so replacing
    a whole legend at a run's end would stall one event-loop turn. Call `fit_legend` after."""
    for (sample, label), (item, text) in zip(legend.items, rows, strict=False):
        if sample.item is not item:
            sample.item = item
            sample.update()
        if label.text != text:
            label.setText(text)
    for sample, label in legend.items[len(rows):]:
        legend._removeItemFromLayout(sample, label)  # by row: an item may sit in another now
    del legend.items[len(rows):]
    for item, text in rows[len(legend.items):]:
        legend.addItem(item, text)
    legend.updateSize()


class _LegendFitter(QObject):
    """Calls `fit_legend` on the plot's resizes and its left axis's width changes."""

    def __init__(self, legend: pg.LegendItem, plot: pg.PlotWidget):
        super().__init__(plot)
        self.legend, self.plot = legend, plot
        plot.installEventFilter(self)
        plot.getPlotItem().getAxis("left").geometryChanged.connect(self.fit)

    def fit(self) -> None:
        fit_legend(self.legend, self.plot)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.Resize:
            self.fit()
        return False


def fit_legend(legend: pg.LegendItem, plot: pg.PlotWidget) -> None:
    """As many legend columns as the plot's width holds (up to LEGEND_COLUMNS): a legend wider
    than the plot widens the plot item past its view (clipped on screen, and scaled down with
    the whole plot in an export); none when it would leave the curves less than MIN_VIEW_PX
    or one column is wider than the plot.
    Call it when the items, the plot's size or its left axis's width (tick labels) change."""
    items = legend.items
    if not items or not shiboken6.isValid(plot):  # an axis change as a deleted plot's scene goes
        return
    # natural widths (a label's own width is its column's once laid out)
    widths = [s.boundingRect().width() + t.item.boundingRect().width() for s, t in items]
    room = plot.width() - plot.getAxis("left").width()
    for columns in range(min(len(items), LEGEND_COLUMNS), 0, -1):
        # filled row by row: column c holds items c, c + columns, …
        needed = sum(max(widths[c::columns]) + LEGEND_GAP_PX for c in range(columns))
        if needed <= room:
            break
    legend.setColumnCount(columns)
    wide = needed > room  # one column is wider than the plot: its labels would be cut
    rows = -(-len(items) // columns)
    spacing = legend.layout.verticalSpacing()
    row_height = max(t.item.boundingRect().height() for _, t in items) + spacing
    room = plot.height() - plot.getAxis("bottom").height() - rows * row_height
    folded = room < MIN_VIEW_PX or wide
    if legend.isVisible() == folded:
        legend.setVisible(not folded)
        unbounded = 16777215
        legend.setMaximumHeight(0 if folded else unbounded)  # hidden, it still took its room
        legend.setMaximumWidth(0 if folded else unbounded)
    # A wider legend had stretched the plot past the widget (a QGraphicsWidget grows to its
    # minimum, and the view sets its size only when the widget is resized): fit it back.
    # Only then: a plot item held wider by its own minimum would be laid out again on every
    # call (a relayout of the whole plot, at every live update of a training run).
    item, room = plot.getPlotItem(), plot.range
    if item.geometry().width() > room.width() + 0.5 and item.minimumWidth() <= room.width():
        item.setGeometry(room)


class Curve(pg.PlotDataItem):
    """A PlotDataItem hidden while it holds no data: the norm panel keeps up to 67 curves made
    ahead (per pass or batch, earlier training steps), most of them empty. Shown, each is asked
    for its bounds at every auto range (twice a draw) and re-sets its data at every change of
    the y range (pyqtgraph's dynamic range limit), a cost in every draw for the empty ones
    alone. Hidden items are skipped by the first; the second is skipped here
    while empty (`setData` re-sets everything when data come)."""

    holds = True  # whether it holds data; until __init__'s own setData, so that hides it

    def setData(self, *args, **kwargs) -> None:  # noqa: N802 (pyqtgraph's name)
        held = self.holds
        super().setData(*args, **kwargs)
        self.holds = self.xData is not None and len(self.xData) > 0
        if self.holds != held:  # else as it was (a click on its legend sample hides it)
            self.setVisible(self.holds)

    def viewRangeChanged(self, *args, **kwargs) -> None:  # noqa: N802
        if self.holds:
            super().viewRangeChanged(*args, **kwargs)


def _same(a, b) -> bool:
    """Whether the data a curve holds (`a`, None if none) equals `b` (NaN equal to NaN)."""
    b = np.asarray(b)
    if a is None:
        return b.size == 0
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=b.dtype.kind == "f")


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
        self.legend = legend_below(self.plot)
        self.curves = {
            # symbol None: given a symbol size or pen alone, pyqtgraph draws "o" at every point
            key: Curve(pen=pen, symbol=None, symbolSize=6, symbolPen=pen, connect="finite")
            for key, (_, pen) in MAIN_CURVES.items()
        }
        for curve in self.curves.values():
            item.addItem(curve)
        self.marks = NonFiniteMarks()  # the timesteps where the trace holds NaN/Inf
        item.addItem(self.marks)
        self.row_curves: list[tuple[pg.PlotDataItem, pg.PlotDataItem]] = []
        self.boundaries = PassBoundaries()
        item.addItem(self.boundaries)
        # a legend row with no line: the batches past MAX_ROW_CURVES (not in the plot)
        self.note = pg.PlotDataItem(pen=None)
        # What is on screen, so a redraw (30 a second in a live run) only changes what differs:
        # pyqtgraph recomputes every curve on setLogMode and rebuilds labels on legend changes.
        self.pens: dict[pg.PlotDataItem, pg.QtGui.QPen] = {}  # each curve's full-width pen
        self.shown_state: dict[str, object] = {}

    def _row_pair(self, index: int) -> tuple[pg.PlotDataItem, pg.PlotDataItem]:
        while len(self.row_curves) <= index:
            color = PALETTE[len(self.row_curves) % len(PALETTE)]
            pair = (
                Curve(pen=pg.mkPen(color, width=1.5), connect="finite"),
                Curve(pen=pg.mkPen(color, width=1.5, style=Qt.DashLine), connect="finite"),
            )
            for curve in pair:
                self.plot.addItem(curve)
            self.row_curves.append(pair)
        return self.row_curves[index]

    def make_row_curves(self, count: int) -> None:
        """Make up to `count` more of the per-row curve pairs ahead of the draws that need
        them (the window's idle turns): all 20 made in the first draw of a multi-pass run
        would stall it."""
        wanted = min(len(self.row_curves) + count, max(MAX_ROW_CURVES.values()))
        if wanted > len(self.row_curves):
            self._row_pair(wanted - 1)

    def _changed(self, name: str, value) -> bool:
        """Record `value` as shown for `name`; True if it differs from what was shown."""
        if self.shown_state.get(name, self) == value:
            return False
        self.shown_state[name] = value
        return True

    def _set_data(self, curve: pg.PlotDataItem, x, y) -> None:
        """setData, with a 1-pixel pen where `thin` says, and not antialiased with more than
        SMOOTH_UP_TO points."""
        base = self.pens.setdefault(curve, pg.mkPen(curve.opts["pen"]))
        narrow = thin(len(y), base.style() != Qt.SolidLine)
        smooth = len(y) <= SMOOTH_UP_TO
        if self._changed(f"pen {id(curve)}", (narrow, smooth)):
            pen = pg.mkPen(base)
            if narrow and base.widthF() > 1:
                pen.setWidthF(1.0)
            curve.opts["antialias"] = smooth
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
        rows = rows_matrix(a) if schema.heatmap_rows(a) else None
        legend: list[tuple[pg.PlotDataItem, str]] = []
        beside_rows = rows is not None and rows[1] in ("pass", "batch")
        for key, curve in self.curves.items():
            if key in BESIDE_ROWS and self._changed(f"grey {key}", beside_rows):
                pen = pg.mkPen(MAIN_CURVES[key][1])
                if beside_rows:
                    pen.setColor(pg.mkColor(BESIDE_ROWS[key]))
                self.pens[curve] = pen
                self.shown_state.pop(f"pen {id(curve)}", None)  # `_set_data` sets it
            show = key in a and not (key == "norm_h_total" and per_pass)
            y = np.asarray(a[key], np.float64) if show else np.zeros(0)
            if self.normalise and y.size:  # as the rows are: each pass's part by its maximum
                whole = per_pass and y.size % per_pass == 0
                y = display_values(y.reshape(-1, per_pass) if whole else y, False, True).ravel()
            shown = positive(y) if self.log else finite(y)
            set_symbol_and_data(curve, "o" if points_alone(y) else None,
                                lambda c=curve, v=shown: self._set_data(c, np.arange(len(v)), v))
            if show:
                legend.append((curve, MAIN_CURVES[key][0]))
        main, legend = legend, []  # the rows' entries first, in order, then these
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
                # passes sit side by side (where a curve is tells which pass it is): the
                # first few name the colours; batches overlap, so every one is named
                if name == "batch" or r < 6:
                    legend.append((full, f"{name} {r + 1}" + (" full" if has_cut else "")))
            if truncated is not None and len(truncated):
                legend.append((self.row_curves[0][1], "truncated (stateful), dashed"))
            if name == "batch" and len(data) > count:
                more = f"{count + 1}–{len(data)}" if len(data) > count + 1 else f"{len(data)}"
                legend.append((self.note, f"batch{'es' * (len(data) > count + 1)} {more}: "
                                          "rows heatmap only"))  # fmt: skip
        legend += main
        if self._changed("legend", [(id(item), text) for item, text in legend]):
            set_legend(self.legend, legend)
            self.fit_legend()
        for full, cut in self.row_curves[count:]:
            if full.xData is not None and len(full.xData):
                full.setData([], [])
            if cut.xData is not None and len(cut.xData):
                cut.setData([], [])
        self.marks.set_steps(a.get("nonfinite_steps"))
        total = max(self.rows_total or 0, len(rows[0]) if rows else 0)
        self.boundaries.set_positions(np.arange(1, total) * per_pass - 0.5 if per_pass else [])

    def fit_legend(self) -> None:
        fit_legend(self.legend, self.plot)

    def has_data(self) -> bool:
        items = [*self.curves.values(), *(full for full, _ in self.row_curves)]
        return any(item.yData is not None and len(item.yData) for item in items)

    def _show(self, y: np.ndarray) -> np.ndarray:
        y = display_values(y, log=False, normalise=self.normalise)  # NaN/Inf: NaN
        return positive(y) if self.log else y

    def readout_at(self, x: float, y: float) -> str:
        t = int(round(x))
        a, parts = self.arrays, [f"t = {t}"]
        per_pass = pass_length(a)
        rows = rows_matrix(a) if not per_pass and schema.heatmap_rows(a) else None
        if rows is not None and rows[1] == "batch":
            data = rows[0][: MAX_ROW_CURVES["batch"]]
            if not 0 <= t < data.shape[1]:
                return ""
            # the curve drawn nearest the pointer, in the view's units (log10 on a log axis,
            # each row divided by its maximum when normalised), as `_show` draws it
            shown = display_values(data, self.log, self.normalise)[:, t]
            if not np.isfinite(shown).any():
                return ""
            r = int(np.nanargmin(np.abs(shown - y)))
            parts = [f"batch {r + 1}, t = {t}", f"total {fmt(data[r, t])}"]
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


class NormHistoryPanel(NormPanel):
    """NormPanel; in training runs the latest step's curve is drawn over the faded history of
    earlier steps (older: lighter)."""

    def __init__(self):
        super().__init__()
        self.history: list[pg.PlotDataItem] = []  # made so far
        self.history_steps: list[int] = []  # the earlier steps shown, oldest first
        self.history_shown: list[pg.PlotDataItem] = []  # the curve of each
        self._history_drawn: list[tuple] = []  # per curve: (run, step, alpha) drawn

    def _history_curve(self, index: int) -> pg.PlotDataItem:
        while len(self.history) <= index:
            curve = Curve(antialias=False)
            curve.setZValue(-10)
            self.plot.addItem(curve)
            self.history.append(curve)
            self._history_drawn.append(())
        return self.history[index]

    def make_history_curves(self, count: int) -> None:
        """Make up to `count` more of the faded curves ahead of the live draws that need them
        (the window's idle turns), not during a training run's live draws, which they would
        lengthen."""
        wanted = min(len(self.history) + count, MAX_HISTORY_CURVES)
        if wanted > len(self.history):
            self._history_curve(wanted - 1)

    @staticmethod
    def history_choice(steps: int, limit: int = MAX_HISTORY_CURVES) -> np.ndarray:
        """Earlier steps to draw: every `stride`-th, the stride a power of two so that at most
        `limit` are drawn. As a run grows the chosen steps stay put (new ones are
        appended; when the stride doubles every other one goes), so a live update redraws
        only the curves whose step changed."""
        if steps <= 0:
            return np.zeros(0, int)
        stride = 1
        while -(-steps // stride) > limit:
            stride *= 2
        return np.arange(0, steps, stride)

    def redraw(self) -> None:
        super().redraw()
        rows = self.arrays.get("norm_h_total_by_step")
        steps = 0 if rows is None else len(rows) - 1  # the last row is the latest curve
        self.history_steps = [int(s) for s in self.history_choice(steps)]
        count = len(self.history_steps)
        run = (id(self.config), self.log, self.normalise)
        # a live run's curves keep their steps: when the stride doubles, half the steps stay
        # and only the curves of the others are re-set (re-setting all would stall a draw)
        live = self.rows_total is not None
        holding = {drawn[1]: i for i, drawn in enumerate(self._history_drawn)
                   if live and drawn[:1] == (run,)}  # fmt: skip
        kept = {holding[s] for s in self.history_steps if s in holding}
        free = iter(i for i in range(MAX_HISTORY_CURVES) if i not in kept)
        self.history_shown = []
        for rank, s in enumerate(self.history_steps):
            i = holding[s] if s in holding else next(free)
            curve = self._history_curve(i)
            alpha = int(25 + 110 * rank / max(count - 1, 1))  # older: lighter
            drawn = self._history_drawn[i]
            if drawn[:1] != (run,) or drawn[2:] != (alpha,):
                # the line's pen only: PlotDataItem.setPen would re-set its data too (for
                # every curve whenever the count, and so every fading, changes)
                curve.opts["pen"] = pen = pg.mkPen(*HISTORY_COLOR, alpha, width=1)
                curve.curve.setPen(pen)
            if drawn[:2] != (run, s) or not live:
                y = np.asarray(rows[s], np.float64)
                curve.setData(np.arange(len(y)), self._show(y))
            self._history_drawn[i] = (run, s, alpha)
            self.history_shown.append(curve)
        for i, curve in enumerate(self.history):
            if self._history_drawn[i] and curve not in self.history_shown:
                curve.setData([], [])
                self._history_drawn[i] = ()
        # one legend row for the faded curves; its sample draws the middle one's pen
        item = self.history_shown[count // 2] if count else None
        text = f"earlier steps (faded, older lighter; {count} shown)"
        row = next(((s, t) for s, t in self.legend.items if s.item in self.history), None)
        if row is None and item is not None:
            self.legend.addItem(item, text)
            self.fit_legend()
        elif row is not None and item is None:
            self.legend.removeItem(row[0].item)
            self.fit_legend()
        elif row is not None and (row[0].item, row[1].text) != (item, text):
            row[0].item = item  # in place: re-adding the row rebuilds the legend's layout
            row[0].update()
            row[1].setText(text)

    def has_data(self) -> bool:
        return super().has_data() or any(c.holds for c in self.history)
