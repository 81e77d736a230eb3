"""Panels for training runs and the connectivity map, built like `panels.py`'s (arrays only).

- `LossPanel`: `loss_by_step` [S] against the training step, with a running mean;
- `NormHistoryPanel`: the gradient-norm panel, plus (training runs) earlier steps' rows of
  `norm_h_total_by_step` [S, T] drawn faded under the latest step's curve;
- `ConnectivityPanel`: `connectivity` [T, T], C[t, s] = ‖∂L_t/∂h_s‖, as a heatmap.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from lstmviz.gui.panels import (
    HeatmapPanel,
    NonFiniteMarks,
    NormPanel,
    Panel,
    display_values,
    fmt,
    opaque,
)

MAX_HISTORY_CURVES = 24  # earlier training steps drawn faded (evenly spaced over the run)
HISTORY_COLOR = (31, 59, 115)  # the total curve's colour

CONNECTIVITY_TIP = (
    "C[t, s] = ‖∂L_t/∂h_s‖: L_t is the part of the loss at step t (row), h_s the hidden state\n"
    "at an earlier or the same step s (column); norm over batch and units.\n"
    "In plain words: row t says how strongly the error made at step t reaches back to each\n"
    "earlier state. A bright diagonal with a quick fade to the left means the network only\n"
    "looks back a few steps (vanishing gradients); a bright band far left of the diagonal\n"
    "means step t still depends on a state long before it, i.e. a long memory.\n"
    "Above the diagonal it is zero (blank: the future cannot influence the past); the diagonal\n"
    "is the direct gradient ‖∂L_t/∂h_t‖. With last_mse only the last row is filled.\n"
    "Tick 'Connectivity' in the parameters (taped and training runs) to compute it."
)


def running_mean(y: np.ndarray, window: int) -> np.ndarray:
    """Mean of the last `window` values at every position (fewer at the start)."""
    y = np.asarray(y, np.float64)
    if y.size == 0:
        return y
    sums = np.cumsum(np.insert(y, 0, 0.0))
    ends = np.arange(1, y.size + 1)
    starts = np.maximum(ends - window, 0)
    return (sums[ends] - sums[starts]) / (ends - starts)


class LossPanel(Panel):
    """The training loss at every step (thin) and its running mean (bold)."""

    HOLD_Y = True

    def __init__(self):
        super().__init__(
            "Training loss",
            "The task loss at every training step (thin line; each step draws a fresh batch)\n"
            "and its running mean over about a twentieth of the run (bold).\n"
            "Log scale: View menu.",
        )
        item = self.plot.getPlotItem()
        item.setLabel("bottom", "training step")
        item.showGrid(x=True, y=True, alpha=0.25)
        self.legend = item.addLegend(
            offset=(-10, 10), labelTextSize="8pt", brush=pg.mkBrush(255, 255, 255, 190)
        )
        background = self.plot.backgroundBrush().color()
        self.curve = pg.PlotDataItem(pen=opaque(pg.mkPen(120, 150, 200, 200), background))
        self.mean = pg.PlotDataItem(pen=pg.mkPen("#d62728", width=2))
        item.addItem(self.curve)
        item.addItem(self.mean)
        self.legend.addItem(self.curve, "loss per step")
        self.legend.addItem(self.mean, "running mean")
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
        x = np.arange(len(self.loss))
        ok = np.isfinite(self.loss)
        shown = np.where(ok & (self.loss > 0) if self.log else ok, self.loss, np.nan)
        self.curve.setData(x, shown, connect="finite")
        self.marks.set_steps(self.arrays.get("nonfinite_loss_steps"))
        total = max(self.rows_total or 0, len(self.loss))
        mean = running_mean(np.where(ok, self.loss, np.nan), max(total // 20, 1))
        self.mean.setData(x, np.where(mean > 0, mean, np.nan) if self.log else mean)
        if self.rows_total:  # a live run: the x axis spans the whole run from the start
            self.plot.setXRange(0, max(self.rows_total - 1, 1), padding=0.02)
        else:
            self.plot.enableAutoRange(x=True)

    def drawn(self) -> bool:
        return self.loss.size > 0

    def readout_at(self, x: float, y: float) -> str:
        s = int(round(x))
        if not 0 <= s < len(self.loss):
            return ""
        return f"step {s}: loss {fmt(self.loss[s])}"


class NormHistoryPanel(NormPanel):
    """NormPanel; in training runs the latest step's curve is drawn over the faded history of
    earlier steps (older: lighter)."""

    def __init__(self):
        super().__init__()
        self.history: list[pg.PlotDataItem] = []
        self.history_steps: list[int] = []
        self._history_shown: list[tuple] = []  # per curve: (run, step, alpha) drawn

    def _history_curve(self, index: int) -> pg.PlotDataItem:
        while len(self.history) <= index:
            curve = pg.PlotDataItem(antialias=False)
            curve.setZValue(-10)
            self.plot.addItem(curve)
            self.history.append(curve)
            self._history_shown.append(())
        return self.history[index]

    @staticmethod
    def history_choice(steps: int) -> np.ndarray:
        """Earlier steps to draw: every `stride`-th, the stride a power of two so that at most
        MAX_HISTORY_CURVES are drawn. As a run grows the chosen steps stay put (new ones are
        appended; when the stride doubles every other one goes), so a live update redraws
        only the curves whose step changed."""
        if steps <= 0:
            return np.zeros(0, int)
        stride = 1
        while -(-steps // stride) > MAX_HISTORY_CURVES:
            stride *= 2
        return np.arange(0, steps, stride)

    def redraw(self) -> None:
        super().redraw()
        rows = self.arrays.get("norm_h_total_by_step")
        steps = 0 if rows is None else len(rows) - 1  # the last row is the latest curve
        self.history_steps = [int(s) for s in self.history_choice(steps)]
        count = len(self.history_steps)
        run = (id(self.config), self.log, self.normalise)
        for i, s in enumerate(self.history_steps):
            curve = self._history_curve(i)
            alpha = int(25 + 110 * i / max(count - 1, 1))  # older: lighter
            drawn = self._history_shown[i]
            if drawn[:1] != (run,) or drawn[2:] != (alpha,):
                # the line's pen only: PlotDataItem.setPen would re-set its data too (~0.2 ms
                # a curve, all of them whenever the count, and so every fading, changes)
                curve.opts["pen"] = pen = pg.mkPen(*HISTORY_COLOR, alpha, width=1)
                curve.curve.setPen(pen)
            if drawn[:2] != (run, s) or self.rows_total is None:
                y = np.asarray(rows[s], np.float64)
                curve.setData(np.arange(len(y)), self._show(y))
            self._history_shown[i] = (run, s, alpha)
        for i, curve in enumerate(self.history[count:], start=count):
            if self._history_shown[i]:
                curve.setData([], [])
                self._history_shown[i] = ()
        # one legend row for the faded curves; its sample draws the middle one's pen
        item = self.history[count // 2] if count else None
        text = f"earlier steps (faded, older lighter; {count} shown)"
        row = next(((s, t) for s, t in self.legend.items if s.item in self.history), None)
        if row is None and item is not None:
            self.legend.addItem(item, text)
        elif row is not None and item is None:
            self.legend.removeItem(row[0].item)
        elif row is not None and (row[0].item, row[1].text) != (item, text):
            row[0].item = item  # in place: re-adding the row rebuilds the legend's layout
            row[0].update()
            row[1].setText(text)

    def drawn(self) -> bool:
        return super().drawn() or any(len(c.yData or []) for c in self.history)


class ConnectivityPanel(HeatmapPanel):
    """C[t, s] = ‖∂L_t/∂h_s‖ as an image: loss step t down, hidden-state step s across."""

    def __init__(self):
        super().__init__("Connectivity map ‖∂L_t/∂h_s‖", CONNECTIVITY_TIP, "‖∂L_t/∂h_s‖")
        self.plot.setLabel("bottom", "hidden state h_s, step s")
        self.plot.setAspectLocked(False)

    def matrix(self) -> tuple[np.ndarray, str] | None:
        c = self.arrays.get("connectivity")
        if c is None or np.ndim(c) != 2:
            return None
        return np.asarray(c, np.float64), "loss step t"

    def redraw(self) -> None:
        found = self.matrix()
        if found is None:
            self.data = np.zeros((0, 0))
            self.image.clear()
            return
        self.data, self.row_name = found
        # Zeros (above the diagonal, rows without a loss term) are blank on the log scale.
        shown = display_values(self.data, self.log, self.normalise)
        if not self.log:
            shown = np.where(np.tril(np.ones_like(shown)) > 0, shown, np.nan)
        finite = shown[np.isfinite(shown)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if self.log and finite.size:  # the faintest few orders of magnitude are noise
            lo = max(lo, hi - 8.0)
        hi = hi if hi > lo else lo + 1.0
        self.show_image(shown, (lo, hi))
        norm = " / row max" if self.normalise else ""
        self.bar.setLabel("right", ("log₁₀ " if self.log else "") + self.value_label + norm)
        self.plot.setLabel("left", "loss term L_t, step t")
        self.plot.getAxis("left").setTicks(None)

    def readout_at(self, x: float, y: float) -> str:
        s, t = int(np.floor(x)), int(np.floor(y))
        if not (0 <= t < self.data.shape[0] and 0 <= s < self.data.shape[1]):
            return ""
        return f"t = {t}, s = {s}: ‖∂L_t/∂h_s‖ = {fmt(self.data[t, s])}"
