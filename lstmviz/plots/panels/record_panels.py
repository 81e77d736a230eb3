"""The panels of a recording (`lstmviz.analysis.records` for the keys), each showing one record
(its `record`, None: the last) and the timestep range `t_range` (None: every t):

- `RecordNormPanel`: ‖dL/dh_t‖ of every LSTM direction over t at the record chosen, over the
  same curves of earlier records drawn faded (as a training run's history), the timestep range
  shaded (drag it to move it: `range_moved`);
- `RecordLossPanel`: the loss on the recorded data per record against the training step, and
  the training loss Keras reported; the chosen record marked;
- `RecordHeatmap`: LSTM directions × records of the total gradient norm over the range.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontMetrics

from lstmviz.analysis.layers import layer_groups, layer_names
from lstmviz.analysis.records import (
    MAX_STEP_TICKS,
    TimeRange,
    chosen_record,
    clip_range,
    has_train_loss,
    range_text,
    record_count,
    record_rows,
    record_text,
    step_ticks,
    steps_of,
    trained_by,
    window_norms,
)
from lstmviz.analysis.report.summary import fmt
from lstmviz.analysis.values import positive
from lstmviz.plots.panels.curves import SMOOTH_UP_TO, NormHistoryPanel, thin
from lstmviz.plots.panels.heatmaps import HeatmapPanel
from lstmviz.plots.panels.model_curves import DirectionCurves, LegendPanel, line_pen
from lstmviz.plots.panels.model_maps import DirectionRows
from lstmviz.plots.panels.panel import set_symbol_and_data
from lstmviz.plots.style import PALETTE

# Earlier records drawn faded, for all directions together (as many as a training run's
# history, which has one curve per step): each direction gets its share, at least a few.
MAX_FADED = 24
MIN_FADED_PER_DIRECTION = 4
RANGE_BRUSH = (255, 170, 0, 45)
TICK_GAP_PX = 14  # between two training-step labels
MARK_PEN = pg.mkPen("#e377c2", width=1.5, style=Qt.DashLine)


def faded_pen(layer: int, alpha: int) -> pg.QtGui.QPen:
    """A 1-pixel pen in the colour of layer `layer`, `alpha` opaque (0–255)."""
    color = pg.mkColor(PALETTE[layer % len(PALETTE)])
    color.setAlpha(alpha)
    return pg.mkPen(color, width=1)


def faded_text(drawn: int, earlier: int) -> str:
    """The faded curves' legend entry: `drawn` of the `earlier` records before the one shown
    (short: the legend fits two columns in the window). "6 earlier records" over 11 read as
    if the recording had only 6 before this one."""
    if drawn >= earlier:
        return f"{drawn} earlier record{'s' * (drawn != 1)} (faded)"
    return f"{drawn} of {earlier} earlier records (faded)"


class RecordChoice:
    """For panels that show one record and a timestep range (the window keeps the panels'
    choices together, as it does an LSTM direction's)."""

    record: int | None = None
    t_range: TimeRange = None

    def set_view(self, record: int | None, t_range: TimeRange) -> None:
        """Show record `record` (None: the last) over `t_range` (None: every t): a redraw."""
        self.record, self.t_range = record, t_range
        if self.arrays:
            self.draw(self.arrays, self.config, self.rows_total)

    def shown_record(self) -> int:
        return chosen_record(self.arrays, self.record)


class RecordNormPanel(RecordChoice, DirectionCurves):
    """‖dL/dh_t‖ per direction at one record over the faded curves of earlier records."""

    range_moved = Signal(object)  # (t0, t1): the user dragged the shaded range

    def __init__(self):
        super().__init__(
            "Gradient norm by layer, record by record",
            "Total ‖dL/dh_t‖ (norm over samples and units) of every recurrent direction over\n"
            "t, at the record chosen with the slider (bold: a colour per layer, a Bidirectional's\n"
            "backward half dashed), over the same curves at earlier records (faded: the older,\n"
            "the lighter). Curves that sink record after record show the gradient vanishing as\n"
            "training goes. The shaded band is the timestep range of the heatmap; drag it.\n"
            "Log scale: View menu.",
        )
        self.curves: list[pg.PlotDataItem] = []
        self.faded: list[pg.PlotDataItem] = []
        self.faded_records: list[int] = []
        self._log: bool | None = None
        self.region = pg.LinearRegionItem(brush=pg.mkBrush(*RANGE_BRUSH), movable=True)
        self.region.setZValue(-20)
        self.region.hide()
        self.plot.addItem(self.region)
        self.region.sigRegionChangeFinished.connect(self._region_moved)
        self._setting_region = False
        self._pens: dict[int, tuple] = {}  # per curve (id): what its pen was made from

    @staticmethod
    def _item(items: list[pg.PlotDataItem], k: int, plot, z: float) -> pg.PlotDataItem:
        while len(items) <= k:
            curve = pg.PlotDataItem(connect="finite")
            curve.setZValue(z)
            plot.addItem(curve)
            items.append(curve)
        return items[k]

    def _show(self, rows: np.ndarray) -> np.ndarray:
        """A record's rows [L, T] as drawn: each divided by its maximum (normalise), NaN where
        a log axis cannot show them."""
        if self.normalise and rows.size:
            with np.errstate(invalid="ignore", divide="ignore"):
                peak = np.nanmax(np.where(np.isfinite(rows), rows, np.nan), axis=1, initial=0.0)
            rows = rows / np.where(peak > 0, peak, 1.0)[:, None]
        return positive(rows) if self.log else rows

    def _pen(self, curve: pg.PlotDataItem, key: tuple, make) -> None:
        """Give `curve` the pen `make()` when `key` (what it is made from) changed: setPen
        re-sets a curve's data too."""
        if self._pens.get(id(curve)) != key:
            self._pens[id(curve)] = key
            curve.setPen(make())

    @staticmethod
    def _set(curve: pg.PlotDataItem, x: np.ndarray, y: np.ndarray) -> None:
        """setData unless the curve already holds these values (following a recording redraws
        every record's curves, most of them unchanged)."""
        old = curve.yData
        if old is not None and old.shape == y.shape and np.array_equal(old, y, equal_nan=True):
            return
        curve.setData(x, y)

    def redraw(self) -> None:
        if self._log != self.log:
            self._log = self.log
            self.plot.setLogMode(y=self.log)
            self.plot.setLabel("left", "‖dL/dh_t‖" + (" (log scale)" if self.log else ""))
        s = self.shown_record()
        if s < 0:
            self.rows, self.names = np.zeros((0, 0)), []
        else:
            self.rows = record_rows(self.arrays, s)
            self.names = layer_names(self.arrays)[: len(self.rows)]
        when = record_text(self.arrays, s) if s >= 0 else "…"
        self.title.setText(f"<b>Gradient norm by layer at {when}</b>")
        steps = self.rows.shape[1] if self.rows.ndim == 2 else 0
        x = np.arange(steps)
        groups = layer_groups(self.names)
        legend = []
        shown = self._show(self.rows)
        for k, (layer, backward) in enumerate(groups):
            curve = self._item(self.curves, k, self.plot, 0)
            curve.opts["antialias"] = steps <= SMOOTH_UP_TO
            color = PALETTE[layer % len(PALETTE)]
            self._pen(curve, (color, thin(steps, backward), backward),
                      lambda c=color, b=backward: line_pen(c, steps, dashed=b))  # fmt: skip
            self._set(curve, x, shown[k])
            legend.append((curve, self.names[k]))
        for curve in self.curves[len(groups):]:
            curve.setData([], [])
        used = self._draw_faded(max(s, 0), groups, x)
        sample = self.faded[used // 2] if used else None
        faded = [((sample, faded_text(len(self.faded_records), s)),
                  (sample, "earlier (faded)"))] if used else []  # fmt: skip
        self.set_legend(*self.layer_legends(legend, *faded))
        self._place_region(steps)

    def _draw_faded(self, s: int, groups: list[tuple[int, bool]], x: np.ndarray) -> int:
        """Records before `s` (evenly spaced, as a training run's history), each direction
        in its colour, the older the lighter. Returns the number of curves drawn."""
        per_direction = max(MIN_FADED_PER_DIRECTION, MAX_FADED // max(len(groups), 1))
        chosen = NormHistoryPanel.history_choice(s, per_direction)
        self.faded_records = [int(r) for r in chosen]
        used = 0
        for i, r in enumerate(self.faded_records):
            rows = self._show(record_rows(self.arrays, r))
            alpha = int(25 + 110 * i / max(len(chosen) - 1, 1))
            for k, (layer, _) in enumerate(groups):
                curve = self._item(self.faded, used, self.plot, -10)
                curve.opts["antialias"] = False
                self._pen(curve, (layer, alpha), lambda c=layer, a=alpha: faded_pen(c, a))
                self._set(curve, x, rows[k])
                used += 1
        for curve in self.faded[used:]:
            if curve.yData is not None and len(curve.yData):
                curve.setData([], [])
        return used

    def _place_region(self, steps: int) -> None:
        if self.t_range is None or steps == 0:
            self.region.hide()
            return
        lo, hi = clip_range(self.t_range, steps)
        self._setting_region = True
        try:
            self.region.setBounds((-0.5, steps - 0.5))
            self.region.setRegion((lo - 0.5, hi + 0.5))
        finally:
            self._setting_region = False
        self.region.show()

    def _region_moved(self) -> None:
        if self._setting_region:
            return
        lo, hi = self.region.getRegion()
        self.range_moved.emit((int(round(lo + 0.5)), int(round(hi - 0.5))))


class RecordLossPanel(RecordChoice, LegendPanel):
    """The loss per record against the training step, the chosen record marked."""

    def __init__(self):
        super().__init__(
            "Loss per record",
            "The loss of the model on the recorded samples at each record (bold), and the\n"
            "training loss Keras reported at that batch (thin: its running mean over the\n"
            "epoch), against the training step. The dashed line marks the record chosen with\n"
            "the slider. Log scale: View menu.",
        )
        item = self.plot.getPlotItem()
        item.setLabel("bottom", "training step")
        self.loss = pg.PlotDataItem(pen=pg.mkPen("#d62728", width=2), symbol=None, symbolSize=5,
                                    symbolBrush="#d62728", symbolPen=None)  # fmt: skip
        self.train = pg.PlotDataItem(pen=pg.mkPen("#1f77b4", width=1.2))
        item.addItem(self.train)
        item.addItem(self.loss)
        self.mark = pg.InfiniteLine(angle=90, pen=MARK_PEN, movable=False)
        self.mark.hide()
        item.addItem(self.mark)
        self.steps = np.zeros(0)
        self.values = np.zeros(0)
        self.train_values = np.zeros(0)
        self._log: bool | None = None

    def redraw(self) -> None:
        a = self.arrays
        if self._log != self.log:
            self._log = self.log
            self.plot.setLogMode(y=self.log)
            self.plot.setLabel("left", "loss" + (" (log scale)" if self.log else ""))
        count = record_count(a)
        self.steps = np.asarray(a["step"], np.float64) if count else np.zeros(0)
        self.values = np.asarray(a["loss"], np.float64) if count else np.zeros(0)
        train = has_train_loss(a)
        self.train_values = np.asarray(a["train_loss"], np.float64) if train else np.zeros(0)
        loss, trained = (positive(y) if self.log else np.where(np.isfinite(y), y, np.nan)
                         for y in (self.values, self.train_values))  # fmt: skip
        steps = self.steps[: len(loss)]
        set_symbol_and_data(self.loss, "o" if count <= 60 else None,
                            lambda: self.loss.setData(steps, loss, connect="finite"))
        self.train.setData(self.steps[: len(trained)], trained, connect="finite")
        if (self.train.opts["symbol"] is None) != (count > 1):  # one point: no line to see
            self.train.setSymbol("s" if count == 1 else None)
            self.train.setSymbolSize(5)
            self.train.setSymbolBrush("#1f77b4")
        # short labels (the axis says "loss"): the legend fits the panel's narrow width
        legend = [(self.loss, "recorded data")]
        trainer = f"training ({trained_by(a)})"  # the loss fit or the training loop reported
        self.set_legend(legend + [(self.train, trainer)] if train else legend)
        s = self.shown_record()
        if s >= 0:
            self.mark.setValue(self.steps[s])
            self.mark.show()
        else:
            self.mark.hide()

    def has_data(self) -> bool:
        return self.values.size > 0

    def readout_at(self, x: float, y: float) -> str:
        if not self.steps.size:
            return ""
        r = int(np.argmin(np.abs(self.steps - x)))
        text = f"{record_text(self.arrays, r)} · loss {fmt(self.values[r])}"
        if self.train_values.size:
            text += f" · training loss {fmt(self.train_values[r])}"
        return text


class RecordHeatmap(RecordChoice, DirectionRows, HeatmapPanel):
    """The total gradient norm over the timestep range: LSTM directions × records."""

    x0 = 0.0  # record r spans r…r+1, labelled at its centre by its training step

    def __init__(self):
        super().__init__(
            "Layers × training step",
            "The total gradient norm ‖dL/dh‖ over the timestep range chosen above the panels\n"
            "(all t, or a window): "
            "sqrt(Σ_t ‖dL/dh_t‖²) for every recurrent direction (rows, in model order) at\n"
            "every record (columns, by training step). A row that darkens as training goes is a\n"
            "direction whose gradient vanishes; a window over the first steps shows how much\n"
            "of the loss's gradient still reaches the start of the sequence.",
            "‖dL/dh‖",
        )
        self.plot.setLabel("bottom", "training step")
        self.names: list[str] = []
        self.mark = pg.InfiniteLine(angle=90, pen=pg.mkPen("#fff", width=1.5), movable=False)
        self.mark.setZValue(10)
        self.mark.hide()
        self.plot.addItem(self.mark)
        self._ticks: list | None = None  # the bottom axis's, as last set
        self.plot.getViewBox().sigResized.connect(self._step_ticks)
        self.watch_rows()

    def matrix(self) -> tuple[np.ndarray, str] | None:
        self.names = layer_names(self.arrays)
        steps = steps_of(self.arrays)
        self.title.setText(f"<b>Layers × training step ({range_text(self.t_range, steps)})</b>")
        norms = window_norms(self.arrays, self.t_range)
        return None if norms is None else (norms, "layer")

    def redraw(self) -> None:
        super().redraw()
        s = self.shown_record()
        if self.data.size and s >= 0:
            self.mark.setValue(s + 0.5)
            self.mark.show()
        else:
            self.mark.hide()

    def _label(self, total: int, normalise: bool) -> None:
        self.label_direction_rows(total, normalise)
        self._step_ticks()

    def _step_ticks(self, *_) -> None:
        """Label as many records by their training step as the axis has room for."""
        steps = np.ravel(self.arrays.get("step", [])) if self.arrays else np.zeros(0)
        axis = self.plot.getAxis("bottom")
        widest = QFontMetrics(axis.style["tickFont"] or axis.font()).horizontalAdvance(
            str(int(steps.max())) if steps.size else "0"
        )
        room = self.plot.getViewBox().width()
        count = int(room // (widest + TICK_GAP_PX)) if room > 0 else MAX_STEP_TICKS
        ticks = [step_ticks(steps, max(1, min(count, MAX_STEP_TICKS)))]
        if ticks != self._ticks:
            self._ticks = ticks
            axis.setTicks(ticks)

    def readout_at(self, x: float, y: float) -> str:
        r, layer = self.cell_at(x, y)
        if not (0 <= layer < self.data.shape[0] and 0 <= r < self.data.shape[1]):
            return ""
        name = self.names[layer] if layer < len(self.names) else f"layer {layer + 1}"
        where = range_text(self.t_range, steps_of(self.arrays))
        return f"{name}, {record_text(self.arrays, r)}, {where}: {fmt(self.data[layer, r])}"
