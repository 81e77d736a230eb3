"""The window's diagnosis and comparison: a Diagnosis dock (a row per direction: cell, decay
per step, steps per decade, reach, trend, verdict, the anchor step followed; for a recording
also steps per decade and reach per direction over training steps), the reach marked on the
norm curves, the error of one step shown on them (View → Error of one step t*, the dock's
check box and its choice of anchor; `ViewOptions.anchored`, `.anchor`), and File →
Compare with… (a window with both runs' curves, the log-ratio heatmap, one cursor for both,
and both diagnoses with the change).

Everything here is NumPy (`lstmviz.analysis`) computed in the window's process: a trace whose
gradients are large is diagnosed from its norm curves alone (FULL_LIMIT). The widgets
(`gui.widgets.diagnosis_plots`, pyqtgraph) are imported when first shown.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from lstmviz.analysis.diagnosis import details, reach_point, reach_text
from lstmviz.analysis.layers import anchor_count, anchor_labels, chain_offsets
from lstmviz.core import modes
from lstmviz.core.errors import LstmvizError
from lstmviz.gui.state.shown import Shown

FULL_LIMIT = 4_000_000  # gradient values above which the window diagnoses from the norms only
DOCK_HEIGHT = 170  # px: the Diagnosis dock's first height


# The anchor column ("from t*") is the last by index (the verdict keeps its own) and is shown
# before the verdict, which stretches to the table's width.
COLUMNS = ("direction", "cell", "decay/step", "steps/decade", "reach", "trend", "verdict",
           "from t*")  # fmt: skip
ANCHOR_COLUMN = COLUMNS.index("from t*")
ANCHORED_TIP = (
    "Draw each direction's error of one step beside its full gradient on the norm curves\n"
    "(dotted, in its colour; a diamond at the farthest step it reaches): ‖∂L_t*/∂h_t‖, the\n"
    "loss of the anchor step t* alone followed back through every path. Where the loss\n"
    "enters at every step (a tagger, the lower layers of a stack) the diagnosis reads this\n"
    "curve, not the full one (docs/diagnosis.md, \"The error of one step\"). Ctrl+T."
)
ANCHOR_TIP = ("Which anchor step's error the curves show: the one each direction's diagnosis\n"
              "follows (the median of its anchors' decays), or one of the trace's anchors")
DIAGNOSED = "as diagnosed (median)"  # the anchor chooser's first entry (`ViewOptions.anchor` None)


def _text(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


class DiagnosisPanel(QWidget):
    """A table, a row per direction (of ‖dL/dh_t‖; the cell state's in the tooltip), and for a
    recording two plots over training steps: steps per decade and reach per direction."""

    def __init__(self) -> None:
        super().__init__()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().moveSection(ANCHOR_COLUMN, COLUMNS.index("verdict"))
        # the error of one step on the norm curves, and which anchor (a trace with anchors)
        self.anchored_box = QCheckBox("Error of one step t*", toolTip=ANCHORED_TIP)
        self.anchor_box = QComboBox(toolTip=ANCHOR_TIP, sizeAdjustPolicy=QComboBox.AdjustToContents)
        self.controls = QWidget()
        row = QHBoxLayout(self.controls)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.anchored_box)
        row.addWidget(self.anchor_box)
        row.addStretch(1)
        self.controls.hide()
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.history = QWidget()
        QHBoxLayout(self.history).setContentsMargins(0, 0, 0, 0)
        self.plots: dict = {}  # made on first use (`diagnosis_panels.history_plots`)
        self.history.hide()
        left = QVBoxLayout()
        left.setSpacing(2)
        left.addWidget(self.controls)
        left.addWidget(self.table, 1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(left, 3)
        layout.addWidget(self.history, 2)

    def show_diagnosis(self, diagnosis) -> None:
        """A row per direction of `diagnosis` (a Diagnosis)."""
        self.table.setRowCount(len(diagnosis.layers))
        for r, d in enumerate(diagnosis.layers):
            x = d.h
            reach = reach_text(d, x, diagnosis.T)
            values = (d.name, d.cell, _text(x.decay_per_step, ".4g"),
                      _text(x.steps_per_decade, ".3g"), reach, x.trend or "–",
                      d.verdict, anchor_text(d))  # fmt: skip
            tip = "\n".join(details(d))
            if d.anchors:
                tip = (f"the loss enters at every step: the error of step t={x.anchor} alone, "
                       f"followed back (anchors {', '.join(map(str, d.anchors))})\n{tip}")
            if d.c is not None:
                tip = (f"cell state ‖dL/dc_t‖: decay {_text(d.c.decay_per_step, '.4g')}, "
                       f"{_text(d.c.steps_per_decade, '.3g')} steps/decade, reach "
                       f"{_text(d.c.reach, 'd')}, {d.c.trend or '–'}\n{tip}")  # fmt: skip
            for c, value in enumerate(values):
                item = QTableWidgetItem(value)
                item.setToolTip(tip)
                self.table.setItem(r, c, item)
        self.table.setColumnHidden(ANCHOR_COLUMN, not any(d.anchors for d in diagnosis.layers))
        self.table.resizeColumnsToContents()

    def show_anchors(self, arrays, anchored: bool, anchor: int | None) -> None:
        """The check box and the anchor chooser for a trace's `arrays` (shown when it has
        anchored norms; the chooser when it has two anchors or more), set to `anchored` and
        `anchor` (None: the diagnosis's), without signals."""
        labels = anchor_labels(arrays)
        self.controls.setVisible(bool(labels))
        for widget in (self.anchored_box, self.anchor_box):
            widget.blockSignals(True)
        try:
            self.anchored_box.setChecked(anchored)
            self.anchor_box.clear()
            self.anchor_box.addItem(DIAGNOSED, None)
            for a, label in enumerate(labels):
                self.anchor_box.addItem(label, a)
            self.anchor_box.setCurrentIndex(0 if anchor is None else anchor + 1)
        finally:
            for widget in (self.anchored_box, self.anchor_box):
                widget.blockSignals(False)
        self.anchor_box.setVisible(len(labels) > 1)

    def show_history(self, series: dict | None) -> None:
        """Steps per decade and reach [S] per direction over the training steps, or hide."""
        if series and not self.plots:
            from lstmviz.gui.widgets.diagnosis_plots import history_plots

            self.plots = history_plots(self.history.layout())
        self.history.setVisible(bool(series))
        if self.plots:
            from lstmviz.gui.widgets.diagnosis_plots import draw_history

            draw_history(self.plots, series)


def anchor_text(d) -> str:
    """The dock's "from t*" cell: the anchor step whose error alone the diagnosis followed
    ("t=8", "t=8 (median of 4)"), "–" where it fitted the loss's own span."""
    if not d.anchors or d.h.anchor is None:
        return "–"
    return f"t={d.h.anchor}" + (f" (median of {len(d.anchors)})" if len(d.anchors) > 1 else "")


class DiagnosisView(QObject):
    """The Diagnosis dock of `window` (made here, under the panels from the start: appearing
    later it would take the panels' height in the middle of a run), the reach marked on the
    window's norm panels, and File → Compare with…, of what `shown` holds. Problems go to the
    status line (`message`) or, through the window's `show_error`, to a dialog."""

    def __init__(self, window: QMainWindow, shown: Shown, message: QLabel) -> None:
        super().__init__(window)
        self.window, self.shown, self.message = window, shown, message
        self.compare_windows: list = []
        self.reach_lines: list = []
        self.diagnosis = None  # the last shown, whose reach `mark_reach` marks
        self.dock = QDockWidget("Diagnosis", window, objectName="diagnosis")
        self.dock.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetClosable)
        self.panel = DiagnosisPanel()
        self.dock.setWidget(self.panel)
        self.panel.anchored_box.toggled.connect(self.set_anchored)
        self.panel.anchor_box.activated.connect(
            lambda i: self.show_anchored(True, self.panel.anchor_box.itemData(i)))
        # the Parameters dock keeps the whole left side: under it the strip would cut its
        # height (a scroll bar, narrower fields)
        window.setCorner(Qt.BottomLeftCorner, Qt.LeftDockWidgetArea)
        window.addDockWidget(Qt.BottomDockWidgetArea, self.dock)
        # a strip under the panels: they keep most of the height
        window.resizeDocks([self.dock], [DOCK_HEIGHT], Qt.Vertical)

    def show_diagnosis(self, trace):
        """Diagnose `trace` (from its norms alone when its gradients are large) and show it:
        the dock's rows, and the reach marked on the norm curves. Returns the Diagnosis."""
        from lstmviz.analysis.diagnosis import diagnose

        view = self.shown.view
        if view.anchor is not None and view.anchor >= anchor_count(trace.arrays):
            self.show_anchored(view.anchored, None)  # an anchor of another trace
        self.panel.show_anchors(trace.arrays, self.shown.view.anchored, self.shown.view.anchor)
        try:
            size = sum(np.size(v) for k, v in trace.arrays.items() if "grad_" in k)
            diagnosis = diagnose(trace, full=size <= FULL_LIMIT)
        except (LstmvizError, ValueError, KeyError, IndexError) as exc:
            self.message.setText(f"no diagnosis: {exc}")
            return None
        panel = self.panel
        panel.show_diagnosis(diagnosis)
        recording = self.shown.recording
        panel.show_history(recording.diagnosis.series() if recording is not None else
                           _rows_series(diagnosis))  # fmt: skip
        self.mark_reach(diagnosis)
        return diagnosis

    def anchored_toggled(self) -> None:
        """View → Error of one step t* (its check state)."""
        self.set_anchored(self.window.anchored_action.isChecked())

    def set_anchored(self, anchored: bool) -> None:
        """Show the error of one step on the norm curves, or not (the anchor as it is)."""
        self.show_anchored(anchored, self.shown.view.anchor)

    def show_anchored(self, anchored: bool, anchor: int | None) -> None:
        """Show the error of one step on the norm curves (`anchored`) of the anchor `anchor`
        (an index into the trace's anchors; None: the one each direction's diagnosis
        follows): in what is shown (`ViewOptions`), the View menu's item, the dock's controls
        and the panels."""
        self.shown.view = self.shown.view.but(anchored=bool(anchored), anchor=anchor)
        action = getattr(self.window, "anchored_action", None)
        if action is not None and action.isChecked() != bool(anchored):
            action.setChecked(bool(anchored))
        trace = self.shown.trace
        self.panel.show_anchors(trace.arrays if trace is not None else {}, bool(anchored),
                                anchor)  # fmt: skip
        area = self.window.made_area
        if area is not None:
            area.set_anchored(bool(anchored), anchor)

    def mark_reach(self, diagnosis=None) -> None:
        """A dotted vertical line per direction on the norm curves at the farthest step its
        ‖dL/dh_t‖ reaches (`reach` steps back from the loss step; across a hand-over, in the
        direction it reached, on the chain time axis when the panel chains hand-overs).
        `diagnosis`: the last shown when None."""
        import pyqtgraph as pg

        from lstmviz.plots.style import PALETTE

        self.diagnosis = diagnosis = diagnosis if diagnosis is not None else self.diagnosis
        for line in self.reach_lines:
            if line.scene() is not None:
                line.scene().removeItem(line)
        self.reach_lines = []
        area = self.window.made_area
        if area is None or diagnosis is None or self.shown.trace is None:
            return
        whole_model = modes.find(self.shown.trace.mode).whole_model
        names = ("layers",) if len(diagnosis.layers) > 1 or whole_model else ("norm",)
        index = {d.name: k for k, d in enumerate(diagnosis.layers)}
        for name in names:
            panel = area.by_name.get(name)
            if panel is None:
                continue
            # the chain time axis of a panel that chains hand-overs (as its redraw will)
            chained = getattr(panel, "chained", False)
            offsets = chain_offsets(self.shown.trace.arrays) if chained else None
            drawn: dict[int, int] = {}  # t -> lines there so far: their labels one under another
            for n, d in enumerate(diagnosis.layers):
                point = reach_point(d)
                if point is None:
                    continue
                t = point[1] + (int(offsets[index[point[0]]]) if offsets is not None else 0)
                below = drawn[t] = drawn.get(t, -1) + 1
                line = pg.InfiniteLine(t, angle=90, label=f"reach {d.name}",
                                       pen=pg.mkPen(PALETTE[n % len(PALETTE)], width=1,
                                                    style=Qt.DashDotLine),
                                       labelOpts={"position": max(0.9 - 0.08 * below, 0.1),
                                                  "color": "#333"})  # fmt: skip
                panel.plot.addItem(line, ignoreBounds=True)
                self.reach_lines.append(line)

    def compare_with_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Compare with…", "",
                                              "Traces and recordings (*.npz *.lvz)")  # fmt: skip
        if path:
            self.compare_with(path)

    def compare_with(self, path: str, first: str | None = None) -> bool:
        """Compare A with the trace or recording at `path` (B) in a window of its own; A is
        the file `first`, else what the window shows (the recording, else the trace). A model
        file: compare on the command line (`lstmviz compare A B --inputs DATA`), which runs
        it. False (after an error dialog) when they cannot be compared."""
        from lstmviz.analysis.compare import compare
        from lstmviz.gui.widgets.diagnosis_plots import CompareWindow

        try:
            if first is not None:
                current, name = _read(first), first.rsplit("/", 1)[-1]
            else:
                current = self.shown.current()
                name = self.shown.file_name() or "shown"
                if current is None:
                    raise LstmvizError("nothing to compare: open or run a trace (or a "
                                       "recording) first")  # fmt: skip
            comparison = compare(current, _read(path), (name, path.rsplit("/", 1)[-1]))
        except LstmvizError as exc:
            self.window.show_error("Cannot compare", str(exc))
            return False
        window = CompareWindow(comparison, self.window)
        self.compare_windows.append(window)
        window.show()
        return True


def _read(path: str):
    """The trace or recording at `path` (LstmvizError for anything else)."""
    from lstmviz.io import files
    from lstmviz.io.recording import load_recording
    from lstmviz.io.trace import GradientTrace

    kind = files.kind(path)
    if kind not in ("trace", "recording"):
        raise LstmvizError(f"{path}: the window compares traces and recordings; for models: "
                           "lstmviz compare A B --inputs DATA")  # fmt: skip
    return GradientTrace.load(path) if kind == "trace" else load_recording(path)


def _rows_series(diagnosis) -> dict | None:
    """A training trace's steps per decade and reach over its steps (None for other traces)."""
    from lstmviz.analysis.diagnosis import row_series

    series = row_series(diagnosis)
    rows = [d for d in diagnosis.layers if d.rows]
    return series if rows and rows[0].row_kind == "step" else None
