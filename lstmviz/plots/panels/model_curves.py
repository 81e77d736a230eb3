"""The curve panels of a model trace (see `lstmviz.analysis.layers` for the keys):

- `LayerNormPanel`: ‖dL/dh_t‖ of every recurrent direction over t (`norm_h_total_by_layer` [L, T]),
  one colour per layer, backward directions dashed, the legend naming `layer_names`; a chain of
  hand-overs (`layer{k}_initial_from`: an encoder's final state its decoder's initial state) on
  one time axis, the source's steps and then its own, a labelled line at each hand-over
  (`chained`, View → Chain hand-overs on one time axis); with `anchored` (View → Error of one
  step t*) also each direction's ‖∂L_t*/∂h_t‖ (`anchor_norm_h_by_layer` [L, A, T], the anchor
  `anchor` or the diagnosis's) dotted in its colour (a backward direction dash-dot-dotted), a
  diamond at the farthest step it reaches;
- `GatesPanel`: for the direction chosen in its combo box, the mean activation of its cell's
  gates over t (LSTM i, f, g, o; GRU z, r, h̃; SimpleRNN h; solid) and the fraction of
  (sample, unit) saturated (dashed).

Both leave a gap at timesteps masked in every sample.
"""

from __future__ import annotations

import warnings

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QComboBox

from lstmviz.analysis.layers import (
    CELL_TEXT,
    GATES,
    anchored_curves,
    cell_of,
    chain_names,
    chain_offsets,
    chain_rows,
    direction_steps,
    gate_names_of,
    gates_of_layer,
    handovers,
    layer_groups,
    layer_label,
    layer_names,
    layer_rows,
)
from lstmviz.analysis.report.summary import fmt
from lstmviz.analysis.values import positive
from lstmviz.plots.panels.curves import SMOOTH_UP_TO, fit_legend, legend_below, thin
from lstmviz.plots.panels.marks import NonFiniteMarks
from lstmviz.plots.panels.panel import Panel
from lstmviz.plots.style import PALETTE

GATE_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")  # i, f, g, o
# The gates panel's y label, the longest first that its height has room for.
GATE_AXIS_LABELS = ("activation / fraction", "act. / fraction", "0 … 1")
HANDOVER_PEN = {"color": "#444", "width": 1.5, "style": Qt.DashLine}
ANCHORED_TEXT = ("error of one step t* (dotted)", "t* (dotted)")  # its legend entry: long, short
REACH_SYMBOL = {"symbol": "d", "symbolSize": 11, "symbolPen": pg.mkPen("#222", width=1)}
GATE_TEXT = {"i": "input i", "f": "forget f", "g": "candidate g", "o": "output o",
             "z": "update z", "r": "reset r", "h~": "candidate h̃", "h": "h = act(·)"}  # fmt: skip


def line_pen(color, points: int, dashed: bool = False, width: float = 2.0):
    """A curve's pen: 1 px for long curves (Qt strokes wide pens on long jagged paths slowly,
    see `curves.thin`), dashed for a backward direction or a saturated fraction."""
    pen = pg.mkPen(color, width=1.0 if thin(points, dashed) else width)
    if dashed:
        pen.setStyle(Qt.DashLine)
    return pen


def decimate(plot: pg.PlotItem) -> None:
    """Have `plot` paint its curves with about two points per horizontal pixel: pyqtgraph's
    "peak" downsampling (each pixel column's least and greatest value, so no spike is lost)
    of the part in view, for the curves it holds and those added later. A long trace's curves
    (T = 20,000 on a panel 1,000 px wide) painted every point stalled the window
    (bench/bench_gui.py --only redraw --long-model 20000); their data (`yData`, the readout)
    stay whole."""
    plot.setDownsampling(auto=True, mode="peak")
    plot.setClipToView(True)


def one_sample_a_pixel(curve: pg.PlotDataItem) -> pg.PlotDataItem:
    """`curve`, downsampled (in a `decimate`d plot) to one bin a pixel (pyqtgraph's default
    is five)."""
    curve.opts["autoDownsampleFactor"] = 1.0
    return curve


class LayerBox(QComboBox):
    """The direction a panel shows, in its header; refilled only when the names change."""

    def __init__(self, tip: str):
        super().__init__(toolTip=tip, sizeAdjustPolicy=QComboBox.AdjustToContents)
        self.names: list[str] = []

    def fill(self, names: list[str], current: int) -> None:
        self.blockSignals(True)
        try:
            if names != self.names:
                self.names = list(names)
                self.clear()
                self.addItems(self.names)
            self.setCurrentIndex(current if self.names else -1)
        finally:
            self.blockSignals(False)
        self.setVisible(len(self.names) > 1)


Entries = list[tuple[pg.PlotDataItem, str]]  # a legend: (curve, text) per entry


def _entries_key(entries: Entries) -> list[tuple[int, str]]:
    return [(id(item), text) for item, text in entries]


class LegendPanel(Panel):
    """A panel with a legend below its plot that takes as many columns as the width allows;
    given shorter forms of the legend too, it shows the first that fits the plot."""

    def __init__(self, title: str, tip: str):
        super().__init__(title, tip)
        item = self.plot.getPlotItem()
        item.showGrid(x=True, y=True, alpha=0.25)
        item.setLabel("bottom", "timestep t")
        self.legend = legend_below(self.plot)
        # the colour of the style the panel is made in (an export's), also for the entries
        # of a form shown later, on a resize outside that style (pyqtgraph's grey otherwise)
        self.legend.setLabelTextColor(pg.getConfigOption("foreground"))
        self.legend_shown: list[tuple[int, str]] = []
        self.legend_forms: list[Entries] = []
        # form index → the plot's room (w, h beside its axes) in which that form did not fit:
        # it is not tried again in a room no larger (no rebuild of its entries per redraw)
        self.legend_failed: dict[int, tuple[int, int]] = {}
        self.marks = NonFiniteMarks()
        item.addItem(self.marks)
        self.plot.installEventFilter(self)  # a resize: the form that fits may differ

    def set_legend(self, entries: Entries, *shorter: Entries) -> None:
        """Show the legend `entries`, else the first of its `shorter` forms that fits."""
        forms = [entries, *shorter]
        if [_entries_key(f) for f in forms] != [_entries_key(f) for f in self.legend_forms]:
            self.legend_failed = {}
        self.legend_forms = forms
        self.fit_legend_form()

    def fit_legend_form(self) -> None:
        plot = self.plot
        room = (plot.width() - plot.getAxis("left").width(),
                plot.height() - plot.getAxis("bottom").height())  # fmt: skip
        last = len(self.legend_forms) - 1
        for k, entries in enumerate(self.legend_forms):
            failed = self.legend_failed.get(k)
            if k < last and failed is not None and room[0] <= failed[0] and room[1] <= failed[1]:
                continue  # it did not fit in as much room
            self._show_entries(entries)
            if self.legend.isVisible():  # `fit_legend` folds a legend without room
                return
            self.legend_failed[k] = room

    def _show_entries(self, entries: Entries) -> None:
        key = _entries_key(entries)
        if key != self.legend_shown:
            self.legend_shown = key
            self.legend.clear()
            for item, text in entries:
                self.legend.addItem(item, text)
        fit_legend(self.legend, self.plot)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if (watched is self.plot and event.type() == QEvent.Type.Resize
                and len(self.legend_forms) > 1):  # fmt: skip
            self.fit_legend_form()
        return False


def chain_axis_label(arrays) -> str:
    """The time axis's label when hand-overs are chained on it: "step: enc t, then dec t" for
    one chain of two, else "step along each chain (its sources' steps first)"."""
    chains = chain_names(arrays)
    if len(chains) == 1 and chains[0].count(" → ") == 1:
        return "step: " + ", then ".join(f"{name} t" for name in chains[0].split(" → "))
    return "step along each chain (its sources' steps first)"


class Handovers:
    """For a panel over timesteps (`plot`) of a trace whose directions hand their final state
    on (`analysis.layers.handovers`): the chain time axis (`offsets` [L], None when nothing is
    chained or `chained` is off), a labelled vertical line at each hand-over, and which
    direction and own step a chain position is."""

    chained = True
    offsets: np.ndarray | None = None

    def mark_handovers(self, arrays, label: bool = True) -> None:
        """`offsets` of `arrays`, and a line at each hand-over (none when not chained): dashed
        dark grey and labelled near the bottom, right of the line (a decoder near the loss
        draws high there); else (on a heatmap) white."""
        for line in getattr(self, "handover_lines", []):
            self.plot.removeItem(line)
        self.handover_lines: list[pg.InfiniteLine] = []
        self.offsets = chain_offsets(arrays) if self.chained else None
        if self.offsets is None:
            return
        names = layer_names(arrays)
        for k, source, x in handovers(arrays):
            text = f"hand-over {names[source]} → {names[k]}" if label else None
            pen = HANDOVER_PEN | ({} if label else {"color": "#fff", "width": 2})
            line = pg.InfiniteLine(x, angle=90, pen=pg.mkPen(**pen), movable=False, label=text,
                                   labelOpts={"position": 0.08, "color": "#333",
                                              "anchors": [(0, 0.5), (0, 0.5)]})  # fmt: skip
            line.setToolTip(f"{names[k]}'s initial state is {names[source]}'s final state:\n"
                            f"{names[source]}'s steps on the left, {names[k]}'s on the right")
            line.setZValue(5)
            self.plot.addItem(line, ignoreBounds=True)
            self.handover_lines.append(line)

    def own_step(self, k: int, x: int, arrays) -> int | None:
        """Direction k's own step at chain position x (x itself when not chained), None
        outside its steps."""
        t = x - (int(self.offsets[k]) if self.offsets is not None else 0)
        steps = direction_steps(arrays, k)
        return t if 0 <= t < (steps if steps is not None else t + 1) else None


class DirectionCurves(LegendPanel):
    """A legend panel with a curve per recurrent direction over t: `names` [L] and the values
    drawn, `rows` [L, T]; the hover read-out gives every direction's value at t."""

    def __init__(self, title: str, tip: str):
        super().__init__(title, tip)
        self.names: list[str] = []
        self.rows = np.zeros((0, 0))
        self.backward_sample = pg.PlotDataItem(pen=line_pen("#555", 0, dashed=True, width=1.5))

    def layer_legends(self, entries: Entries, *later: tuple[Entries, Entries]) -> list[Entries]:
        """`entries` (one per direction, `names` order) and, when a layer has two directions,
        shorter legends (a deep model's nine directions folded the legend away in a short
        panel): an entry per layer in its colour, then "backward (dashed)"; the same with
        short names ("bi_2") and "backward"; the short layer names alone. `later`: entries after
        those, (long, short)."""
        groups = layer_groups(self.names)
        legends = [entries + [long for long, _ in later]]
        if not any(backward for _, backward in groups):
            return legends
        first = {}
        for (curve, name), (layer, _) in zip(entries, groups, strict=False):
            first.setdefault(layer, (curve, name))
        for short, backward in ((False, "backward (dashed)"), (True, "backward")):
            legends.append([*((curve, layer_label(name, short)) for curve, name in first.values()),
                            (self.backward_sample, backward),
                            *(pair[short] for pair in later)])  # fmt: skip
        # last, in the least room: the layers' colours alone (the hover names every curve)
        legends.append([(curve, layer_label(name, True)) for curve, name in first.values()])
        return legends

    def has_data(self) -> bool:
        return bool(self.names) and self.rows.size > 0

    def readout_at(self, x: float, y: float) -> str:
        t = int(round(x))
        if not self.names or not 0 <= t < self.rows.shape[1]:
            return ""
        offsets = getattr(self, "offsets", None)
        if offsets is not None:  # chained: each direction at its own step, those there
            values = " · ".join(f"{n} t={t - int(offsets[k])} {fmt(self.rows[k, t])}"
                                for k, n in enumerate(self.names)
                                if np.isfinite(self.rows[k, t]))  # fmt: skip
            return f"step {t} · {values}"
        values = " · ".join(f"{n} {fmt(v)}" for n, v in zip(self.names, self.rows[:, t],
                                                            strict=False))  # fmt: skip
        return f"t = {t} · {values}"


class LayerNormPanel(Handovers, DirectionCurves):
    """‖dL/dh_t‖ per recurrent direction over timesteps: where, by depth, the gradient dies.
    Hand-overs chained (`Handovers`): `rows` [L, W] on the chain time axis."""

    def __init__(self):
        super().__init__(
            "Gradient norm by layer over timesteps",
            "Total ‖dL/dh_t‖ (norm over batch and units) of every recurrent direction of the\n"
            "model (LSTM, GRU, SimpleRNN), by input position t: one colour per layer, the\n"
            "backward direction of a Bidirectional dashed. Curves that fall towards small t\n"
            "(or, for a backward direction, large t) show the gradient vanishing on its way\n"
            "back through time;\n"
            "a layer whose curve sits far below the others shows it vanishing with depth.\n"
            "An encoder handing its final state to a decoder: one time axis, the encoder's\n"
            "steps, the hand-over (dashed line), then the decoder's: follow the gradient from\n"
            "the decoder back into the encoder (View → Chain hand-overs on one time axis).\n"
            "View → Error of one step t* (Ctrl+T): also the loss of one anchor step t* alone\n"
            "followed back (dotted; a diamond at the farthest step it reaches), what the\n"
            "diagnosis reads where the loss enters at every step.\n"
            "Steps masked in every sample are left out. Log scale: View menu.",
        )
        self.curves: list[pg.PlotDataItem] = []
        self._log: bool | None = None
        decimate(self.plot.getPlotItem())
        # the error of one step (View → Error of one step t*): a dotted curve per direction
        # and a diamond at the farthest step each reaches; `anchored_rows` [L, W] as drawn
        self.anchored, self.anchor = False, None
        self.anchored_lines: list[pg.PlotDataItem] = []
        self.anchored_rows = np.zeros((0, 0))
        self.anchors = np.zeros(0, np.int64)  # [L] the t* of each row shown
        self.reach_marks = pg.PlotDataItem(pen=None, **REACH_SYMBOL)
        self.reach_marks.setZValue(10)
        self.plot.addItem(self.reach_marks)
        self.anchored_sample = pg.PlotDataItem(pen=pg.mkPen("#555", width=1.5,
                                                          style=Qt.DotLine))  # fmt: skip

    def _curve(self, k: int, curves: list[pg.PlotDataItem] | None = None) -> pg.PlotDataItem:
        curves = self.curves if curves is None else curves
        while len(curves) <= k:
            curve = one_sample_a_pixel(pg.PlotDataItem(connect="finite"))
            self.plot.addItem(curve)
            curves.append(curve)
        return curves[k]

    def redraw(self) -> None:
        if self._log != self.log:
            self._log = self.log
            self.plot.setLogMode(y=self.log)
            self.plot.setLabel("left", "‖dL/dh_t‖" + (" (log scale)" if self.log else ""))
        rows = layer_rows(self.arrays)
        self.rows = np.zeros((0, 0)) if rows is None else rows
        self.names = layer_names(self.arrays)[: len(self.rows)]
        if self.normalise and self.rows.size:
            self.rows = self._normalised(self.rows)
        self.mark_handovers(self.arrays)
        if self.offsets is not None:
            self.rows = chain_rows(self.rows, self.arrays)
        self.plot.setLabel("bottom", "timestep t" if self.offsets is None
                           else chain_axis_label(self.arrays))  # fmt: skip
        legend = []
        steps = self.rows.shape[1] if self.rows.ndim == 2 else 0
        for k, (layer, backward) in enumerate(layer_groups(self.names)):
            curve = self._curve(k)
            pen = line_pen(PALETTE[layer % len(PALETTE)], steps, dashed=backward)
            curve.opts["antialias"] = steps <= SMOOTH_UP_TO
            curve.setPen(pen)
            # a direction's own steps only: its NaN padding (a graph's shorter direction, or
            # the steps before its chain offset) is no part of its curve
            first = int(self.offsets[k]) if self.offsets is not None else 0
            own = direction_steps(self.arrays, k) or steps
            x = np.arange(first, min(first + own, steps))
            y = self.rows[k, x]
            curve.setData(x, positive(y) if self.log else y)
            legend.append((curve, self.names[k]))
        for curve in self.curves[len(self.names):]:
            curve.setData([], [])
        later = [(tuple((self.anchored_sample, text) for text in ANCHORED_TEXT))]
        shown = self.draw_anchored(steps)
        self.set_legend(*self.layer_legends(legend, *(later if shown else ())))
        self.marks.set_steps(self.arrays.get("nonfinite_steps"))

    def _normalised(self, rows: np.ndarray) -> np.ndarray:
        """`rows` [L, T] each divided by its largest finite value (View → Normalise)."""
        with warnings.catch_warnings():  # a row without a finite value stays NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            peak = np.nanmax(np.where(np.isfinite(rows), rows, np.nan), axis=1)
        return rows / np.where(peak > 0, peak, 1.0)[:, None]

    def draw_anchored(self, width: int) -> bool:
        """The error of one step when `anchored` and the trace has it: each direction's row
        of `analysis.layers.anchored_curves` (anchor `anchor`) dotted in its colour over its
        own steps (on the chain time axis when chained; `width` the axis's steps), and a
        diamond on it at its reach (a backward direction dash-dot-dotted, as its full curve is
        dashed). Whether any is drawn."""
        found = anchored_curves(self.arrays, self.anchor) if self.anchored else None
        rows, self.anchors, reach = found if found is not None else (
            np.zeros((0, 0)), np.zeros(0, np.int64), np.zeros(0, np.int64))  # fmt: skip
        rows = rows[: len(self.names)]
        if self.normalise and rows.size:
            rows = self._normalised(rows)
        if self.offsets is not None and rows.size:
            rows = chain_rows(rows, self.arrays)
        self.anchored_rows = rows
        points: list[tuple[int, float, str]] = []
        for k, (layer, backward) in enumerate(layer_groups(self.names) if rows.size else ()):
            curve, color = self._curve(k, self.anchored_lines), PALETTE[layer % len(PALETTE)]
            pen = line_pen(color, width, width=1.8)
            pen.setStyle(Qt.DashDotDotLine if backward else Qt.DotLine)
            curve.opts["antialias"] = width <= SMOOTH_UP_TO
            curve.setPen(pen)
            first = int(self.offsets[k]) if self.offsets is not None else 0
            own = direction_steps(self.arrays, k) or width
            x = np.arange(first, min(first + own, rows.shape[1]))
            y = rows[k, x]
            curve.setData(x, positive(y) if self.log else y)
            at = first + int(reach[k])
            if reach[k] >= 0 and at < rows.shape[1] and np.isfinite(rows[k, at]) and (
                    rows[k, at] > 0 or not self.log):  # fmt: skip
                points.append((at, float(rows[k, at]), color))
        for curve in self.anchored_lines[len(rows) :]:
            curve.setData([], [])
        if points:
            x, y, colors = zip(*points, strict=True)
            self.reach_marks.setData(np.array(x), np.array(y), symbolBrush=list(colors))
        else:
            self.reach_marks.setData([], [])
        return bool(rows.size)

    def readout_at(self, x: float, y: float) -> str:
        text = super().readout_at(x, y)
        t, rows = int(round(x)), self.anchored_rows
        if not text or not rows.size or not 0 <= t < rows.shape[1]:
            return text
        values = " · ".join(f"{n} {fmt(rows[k, t])}" for k, n in enumerate(self.names)
                            if k < len(rows) and np.isfinite(rows[k, t]))  # fmt: skip
        return f"{text} · error of t*: {values}" if values else text


class LayerChoice:
    """For panels that show one recurrent direction, chosen in a combo box in their header
    (`layer_box`; the window keeps the panels' choices together)."""

    layer = 0

    def add_layer_box(self) -> None:
        self.layer_box = LayerBox("Which recurrent direction this panel shows")
        self.layer_box.setMaximumWidth(160)  # a long name elides: the title keeps some room
        self.head.addWidget(self.layer_box)
        self.layer_box.hide()

    def set_layer(self, k: int) -> None:
        """Show direction k (a redraw)."""
        self.layer = k
        if self.arrays:
            self.draw(self.arrays, self.config, self.rows_total)

    def chosen_layer(self) -> tuple[int, str]:
        """(k, name) of the direction shown (the first when the choice is out of range), and
        the combo box filled with the trace's directions."""
        names = layer_names(self.arrays)
        k = self.layer if 0 <= self.layer < len(names) else 0
        self.layer_box.fill(names, k)
        return k, names[k] if names else ""


class GatesPanel(LayerChoice, LegendPanel):
    """Mean gate activations of one direction over t, and the saturated fraction of each."""

    def __init__(self):
        super().__init__(
            "Gates",
            "For the direction chosen on the right: the mean over samples and units of each\n"
            "gate's activation at every step (solid) and the fraction of (sample, unit) where\n"
            "it is saturated (dashed). LSTM: input i, forget f, output o, candidate g; GRU:\n"
            "update z, reset r, candidate h̃; SimpleRNN: its output h. Saturated: a sigmoid\n"
            "below 0.01 or above 0.99, |tanh| above 0.99, any other activation where its\n"
            "slope is below 1% of its steepest (hard_sigmoid's and relu's flat parts).\n"
            "A forget gate stuck near 0 cuts the gradient through the cell at every step;\n"
            "saturated gates pass almost no gradient to their inputs.",
        )
        self.add_layer_box()
        item = self.plot.getPlotItem()
        decimate(item)
        axis = item.getAxis("left")
        axis.shorter = {GATE_AXIS_LABELS[0]: GATE_AXIS_LABELS[1:]}  # a short panel's
        item.setLabel("left", GATE_AXIS_LABELS[0])
        self.means: list[pg.PlotDataItem] = []
        self.saturated: list[pg.PlotDataItem] = []
        for _ in GATES:  # the most gates a cell has (an LSTM's four)
            for group in (self.means, self.saturated):
                curve = one_sample_a_pixel(pg.PlotDataItem(connect="finite"))
                item.addItem(curve)
                group.append(curve)
        self.style = pg.PlotDataItem(pen=pg.mkPen("#555", width=1.5, style=Qt.DashLine))
        self.data: tuple[np.ndarray, np.ndarray] | None = None
        self.name = ""
        self.gates: tuple[str, ...] = GATES

    def redraw(self) -> None:
        k, self.name = self.chosen_layer()
        self.data = gates_of_layer(self.arrays, k) if self.name else None
        self.gates = gate_names_of(self.arrays, k)[: len(GATE_COLORS)]
        cell = CELL_TEXT.get(cell_of(self.arrays, k), "")
        self.title.setText(f"<b>Gates of {self.name or '…'}</b>" + (
            f" ({cell})" if self.name and cell != "LSTM" else ""))  # fmt: skip
        legend = []
        mean, saturated = self.data if self.data is not None else (np.zeros((4, 0)),) * 2
        steps = mean.shape[1]
        x = np.arange(steps)
        for g, color in enumerate(GATE_COLORS):
            shown = g < min(len(self.gates), mean.shape[0])
            for group, values, dashed in ((self.means, mean, False),
                                          (self.saturated, saturated, True)):  # fmt: skip
                curve = group[g]
                curve.opts["antialias"] = steps <= SMOOTH_UP_TO
                curve.setPen(line_pen(color, steps, dashed, width=1.8))
                if shown:
                    curve.setData(x, values[g])
                else:  # a cell with fewer gates
                    curve.setData([], [])
            if shown:
                gate = self.gates[g]
                legend.append((self.means[g], GATE_TEXT.get(gate, gate)))
        legend.append((self.style, "saturated fraction (dashed)"))
        self.set_legend(legend)
        self.marks.set_steps(self.arrays.get("nonfinite_steps"))

    def has_data(self) -> bool:
        return self.data is not None and self.data[0].size > 0

    def readout_at(self, x: float, y: float) -> str:
        t = int(round(x))
        if self.data is None or not 0 <= t < self.data[0].shape[1]:
            return ""
        mean, saturated = self.data
        parts = [f"{self.gates[g]} {fmt(mean[g, t])} ({fmt(100 * saturated[g, t])}% sat.)"
                 for g in range(min(len(self.gates), mean.shape[0]))]  # fmt: skip
        return f"{self.name}, t = {t} · " + " · ".join(parts)
