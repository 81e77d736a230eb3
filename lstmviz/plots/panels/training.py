"""Panels of training runs and the connectivity map:

- `LossPanel`: `loss_by_step` [S] against the training step, with a running mean;
- `ConnectivityPanel`: `connectivity` [T, T], C[t, s] = ‖∂L_t/∂h_s‖, as a heatmap; for a model
  trace of two anchors or more, the direction chosen in its combo box: C[t*, s] =
  ‖∂L_t*/∂h_s‖ (`anchor_norm_h_by_layer` [L, A, T], a row per anchor t*), a diamond on each
  row at the farthest step it reaches.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from lstmviz.analysis.layers import anchor_count, anchored_rows, blank_masked
from lstmviz.analysis.report.summary import fmt
from lstmviz.analysis.values import display_values, running_mean
from lstmviz.plots.panels.curves import fit_legend, legend_below
from lstmviz.plots.panels.heatmaps import HeatmapPanel
from lstmviz.plots.panels.marks import NonFiniteMarks
from lstmviz.plots.panels.model_curves import REACH_SYMBOL, LayerChoice
from lstmviz.plots.panels.panel import Panel, set_symbol_and_data
from lstmviz.plots.style import opaque

CONNECTIVITY_TIP = (
    "C[t, s] = ‖∂L_t/∂h_s‖: L_t is the part of the loss at step t (row), h_s the hidden state\n"
    "at an earlier or the same step s (column); norm over batch and units.\n"
    "In plain words: row t says how strongly the error made at step t reaches back to each\n"
    "earlier state. A bright diagonal with a quick fade to the left means the network only\n"
    "looks back a few steps (vanishing gradients); a bright band far left of the diagonal\n"
    "means step t still depends on a state long before it, i.e. a long memory.\n"
    "Above the diagonal it is zero (blank: the future cannot influence the past); the diagonal\n"
    "is the direct gradient ‖∂L_t/∂h_t‖. With last_mse only the last row is filled.\n"
    "Tick 'Connectivity' in the parameters (taped and training runs) to compute it.\n"
    "A model trace of several anchors (model mode's Anchors): for the direction chosen on\n"
    "the right, a row per anchor step t*, C[t*, s] = ‖∂L_t*/∂h_s‖, the error of step t* alone\n"
    "followed back through every path; a diamond marks the farthest step s each reaches\n"
    "(10⁻³ of its peak, docs/diagnosis.md)."
)


class LossPanel(Panel):
    """The training loss at every step (thin) and its running mean (bold)."""

    HOLD_Y = True

    def __init__(self):
        super().__init__(
            "Training loss",
            "The task loss at every training step (thin line; each step draws a fresh batch)\n"
            "and its running mean over about a twentieth of the run (at least 5 steps; bold).\n"
            "Log scale: View menu.",
        )
        item = self.plot.getPlotItem()
        item.setLabel("bottom", "training step")
        item.showGrid(x=True, y=True, alpha=0.25)
        self.legend = legend_below(self.plot)  # over the plot, it covered the loss when small
        background = self.plot.backgroundBrush().color()
        self.curve = pg.PlotDataItem(pen=opaque(pg.mkPen(120, 150, 200, 200), background))
        self.mean = pg.PlotDataItem(pen=pg.mkPen("#d62728", width=2), symbol=None, symbolSize=7,
                                    symbolBrush="#d62728", symbolPen=None)  # fmt: skip
        item.addItem(self.curve)
        item.addItem(self.mean)
        self.legend.addItem(self.curve, "loss per step")
        self.legend.addItem(self.mean, "running mean")
        fit_legend(self.legend, self.plot)
        self.marks = NonFiniteMarks()  # training steps whose loss or dL/dh was NaN/Inf
        item.addItem(self.marks)
        self.loss = np.zeros(0)
        self._log_shown: bool | None = None

    def redraw(self) -> None:
        loss = self.arrays.get("loss_by_step")
        self.loss = np.zeros(0) if loss is None else np.asarray(loss, np.float64).ravel()
        if self._log_shown != self.log:  # either repaints the axis: only on a change
            self._log_shown = self.log
            self.plot.setLogMode(y=self.log)
            self.plot.setLabel("left", "loss" + (" (log scale)" if self.log else ""))
        x = np.arange(1, len(self.loss) + 1)  # training steps count from 1, as everywhere
        ok = np.isfinite(self.loss)
        shown = np.where(ok & (self.loss > 0) if self.log else ok, self.loss, np.nan)
        self.curve.setData(x, shown, connect="finite")
        bad = self.arrays.get("nonfinite_loss_steps")  # step indices, from 0
        self.marks.set_steps(None if bad is None else np.asarray(bad) + 1)
        total = max(self.rows_total or 0, len(self.loss))
        window = max(total // 20, min(5, total))  # a short run's mean still smooths
        mean = running_mean(np.where(ok, self.loss, np.nan), window)
        if ok.any():  # a mean lies within the loss's range; off by rounding around a constant
            # loss it would give the axis a range of ~10⁻¹⁵, too narrow for any label
            mean = np.clip(mean, self.loss[ok].min(), self.loss[ok].max())
        shown = np.where(mean > 0, mean, np.nan) if self.log else mean
        one = len(self.loss) == 1  # one step draws no line: a dot instead
        set_symbol_and_data(self.mean, "o" if one else None, lambda: self.mean.setData(x, shown))
        if self.rows_total:  # a live run: the x axis spans the whole run from the start
            self.plot.setXRange(1, max(self.rows_total, 2), padding=0.02)
        else:
            self.plot.enableAutoRange(x=True)

    def has_data(self) -> bool:
        return self.loss.size > 0

    def readout_at(self, x: float, y: float) -> str:
        s = int(round(x))
        if not 1 <= s <= len(self.loss):
            return ""
        return f"step {s}: loss {fmt(self.loss[s - 1])}"


class ConnectivityPanel(LayerChoice, HeatmapPanel):
    """C[t, s] = ‖∂L_t/∂h_s‖ as an image: loss step t down, hidden-state step s across. A model
    trace: the anchored rows of one direction (`anchors` [A] its t*, row a; `reach` [A] the
    step each reaches, −1 where not defined)."""

    y0 = -0.5  # both axes are timesteps: cell (t, s) centred on them

    def __init__(self):
        super().__init__("Connectivity map ‖∂L_t/∂h_s‖", CONNECTIVITY_TIP, "‖∂L_t/∂h_s‖")
        self.plot.setLabel("bottom", "hidden state h_s, step s")
        self.plot.setAspectLocked(False)
        self.add_layer_box()
        self.name = ""
        self.anchors: np.ndarray | None = None  # a model trace's: the t* of each row
        self.reach = np.zeros(0, np.int64)
        self.reach_marks = pg.ScatterPlotItem(
            pen=REACH_SYMBOL["symbolPen"], brush="#fff", symbol="d", size=REACH_SYMBOL["symbolSize"]
        )
        self.reach_marks.setZValue(10)
        self.plot.addItem(self.reach_marks)

    def matrix(self) -> tuple[np.ndarray, str] | None:
        self.anchors, self.reach = None, np.zeros(0, np.int64)
        c = self.arrays.get("connectivity")
        if c is not None and np.ndim(c) == 2:
            return np.asarray(c, np.float64), "loss step t"
        if anchor_count(self.arrays) < 2:  # one row is the curve (View → Error of one step)
            return None
        k, self.name = self.chosen_layer()
        found = anchored_rows(self.arrays, k)
        if found is None:
            return None
        rows, self.anchors, self.reach = found
        return blank_masked(rows, self.arrays), "anchor step t*"

    def redraw(self) -> None:
        found = self.matrix()
        model = self.anchors is not None
        self.title.setText("<b>Connectivity map ‖∂L_t/∂h_s‖</b>" if not model else
                           f"<b>Connectivity of {self.name}</b>")  # fmt: skip
        self.reach_marks.setData([], [])
        if found is None:
            self.data = np.zeros((0, 0))
            self.image.clear()
            return
        self.data, self.row_name = found
        # Zeros (above the diagonal, rows without a loss term) are blank on the log scale.
        shown = display_values(self.data, self.log, self.normalise)
        if not self.log and not model:
            shown = np.where(np.tril(np.ones_like(shown)) > 0, shown, np.nan)
        finite = shown[np.isfinite(shown)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if self.log and finite.size:  # the faintest few orders of magnitude are noise
            lo = max(lo, hi - 8.0)
        hi = hi if hi > lo else lo + 1.0
        self.show_image(shown, (lo, hi))
        self.label_bar(self.normalise)
        axis = self.plot.getAxis("left")
        axis.counts, axis.span = True, (0, len(self.data) - 1)  # timesteps, as across
        if not model:
            self.plot.setLabel("left", "loss term L_t, step t")
            axis.setTicks(None)
            return
        # a row per anchor (row a centred on a), labelled with its t*; at most about 20 labels
        self.plot.setLabel("left", "error of step t*")
        every = max(1, int(np.ceil(len(self.anchors) / 20)))
        axis.setTicks([[(a, str(int(t))) for a, t in enumerate(self.anchors)
                        if a % every == 0], []])  # fmt: skip
        kept = np.flatnonzero(self.reach >= 0)
        self.reach_marks.setData(self.reach[kept].astype(np.float64), kept.astype(np.float64))

    def readout_at(self, x: float, y: float) -> str:
        s, t = self.cell_at(x, y)
        if not (0 <= t < self.data.shape[0] and 0 <= s < self.data.shape[1]):
            return ""
        if self.anchors is not None:
            reach = f" (reaches s = {self.reach[t]})" if self.reach[t] >= 0 else ""
            return (f"{self.name}, t* = {self.anchors[t]}, s = {s}: ‖∂L_t*/∂h_s‖ = "
                    f"{fmt(self.data[t, s])}{reach}")  # fmt: skip
        return f"t = {t}, s = {s}: ‖∂L_t/∂h_s‖ = {fmt(self.data[t, s])}"
