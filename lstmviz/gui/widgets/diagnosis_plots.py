"""The pyqtgraph widgets of the window's diagnosis and comparison (`gui.parts.diagnosis_view` shows
them; imported when first needed): the Diagnosis dock's plots over training steps and the
comparison window.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QSplitter, QVBoxLayout, QWidget

from lstmviz.plots.style import PALETTE


def history_plots(row) -> dict:
    """The Diagnosis dock's two plots over training steps (steps per decade, reach), added to
    the layout `row`: {key: PlotWidget}."""
    plots = {}
    for key, label in (("steps_per_decade", "steps per decade"), ("reach", "reach (steps)")):
        plot = pg.PlotWidget()
        plot.setLabel("bottom", "training step")
        plot.setLabel("left", label)
        plot.addLegend(offset=(-10, 10))
        if key == "steps_per_decade":  # near r = 1 it soars: a log axis keeps the rest legible
            plot.setLogMode(y=True)
        plots[key] = plot
        row.addWidget(plot)
    return plots


def draw_history(plots: dict, series: dict | None) -> None:
    """Steps per decade and reach [S] per direction over the training steps."""
    for key, plot in plots.items():
        plot.clear()
        for n, (name, cols) in enumerate((series or {}).items()):
            kept = np.isfinite(cols[key])  # not defined at a record: a gap
            plot.plot(cols["step"][kept], cols[key][kept], name=name, symbol="o",
                      pen=pg.mkPen(PALETTE[n % len(PALETTE)], width=2),
                      symbolSize=4)  # fmt: skip


class CompareWindow(QWidget):
    """Two runs compared: the curves (A solid, B dashed), the log-ratio heatmap, one cursor
    for both, and the text: the change per direction, both verdicts, the configuration
    fields that differ."""

    def __init__(self, comparison, parent=None) -> None:
        from lstmviz.plots.export.compare_figure import CompareCurvesPanel, RatioHeatmapPanel

        super().__init__(parent, Qt.Window)
        self.comparison = comparison
        a, b = comparison.names
        self.setWindowTitle(f"Compare {a} (A) with {b} (B) — lstmviz")
        self.curves, self.ratio = CompareCurvesPanel(comparison), RatioHeatmapPanel(comparison)
        self.cursors = []
        for panel in (self.curves, self.ratio):
            panel.draw({}, None)
            line = pg.InfiniteLine(angle=90, pen=pg.mkPen("#555", style=Qt.DotLine))
            panel.plot.addItem(line, ignoreBounds=True)
            self.cursors.append(line)
            panel.plot.scene().sigMouseMoved.connect(
                lambda pos, p=panel: self.move_cursor(p, pos))  # fmt: skip
        self.text = QPlainTextEdit(comparison.table(), readOnly=True)
        splitter = QSplitter(Qt.Vertical)
        for widget in (self.curves, self.ratio):
            splitter.addWidget(widget)
        self.records = None
        if comparison.records_a is not None:  # recordings: loss and reach over training
            self.records = records_plots(comparison)
            splitter.addWidget(self.records)
        splitter.addWidget(self.text)
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)
        self.resize(1000, 800)

    def move_cursor(self, panel, pos) -> None:
        """Put the cursor of both panels at the timestep under the mouse in `panel`."""
        view = panel.plot.getPlotItem().getViewBox()
        if view.sceneBoundingRect().contains(pos):
            self.set_cursor(view.mapSceneToView(pos).x())

    def set_cursor(self, t: float) -> None:
        for line in self.cursors:
            line.setValue(t)


def records_plots(comparison) -> QWidget:
    """Two recordings over their training steps: the loss on the recorded data, and the reach
    of each direction, A solid and B dashed."""
    box = QWidget()
    row = QHBoxLayout(box)
    row.setContentsMargins(0, 0, 0, 0)
    a_name, b_name = comparison.names
    runs = ((comparison.records_a, Qt.SolidLine, a_name), (comparison.records_b, Qt.DashLine,
                                                            b_name))  # fmt: skip
    for key, label in (("loss", "loss"), ("reach", "reach (steps)")):
        plot = pg.PlotWidget()
        plot.setLabel("bottom", "training step")
        plot.setLabel("left", label)
        plot.addLegend(offset=(-10, 10))
        for records, style, run in runs:
            curves = {"": records["loss"]} if key == "loss" else records["reach"]
            for n, (name, values) in enumerate(curves.items()):
                values = np.asarray(values, np.float64)
                kept = np.isfinite(values)
                plot.plot(np.asarray(records["step"])[kept], values[kept],
                          pen=pg.mkPen(PALETTE[n % len(PALETTE)], width=2, style=style),
                          name=f"{name} · {run}" if name else run)  # fmt: skip
        row.addWidget(plot)
    return box

