"""The window's panels in their splitters, drawn one per event-loop turn."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from lstmviz.config import RunConfig
from lstmviz.render.curves import NormHistoryPanel
from lstmviz.render.heatmaps import RowsHeatmap, UnitsHeatmap
from lstmviz.render.layout import PANEL_ROWS, panels_for
from lstmviz.render.panel import Panel
from lstmviz.render.training import ConnectivityPanel, LossPanel


class PanelArea(QWidget):
    """The panels (`by_name`: "norm", "loss", "rows", "units", "connectivity"), laid out as
    `render.layout.PANEL_ROWS` says. `draw` shows arrays in every panel, the first at once and
    the others one per event-loop turn (all at once, a new finished trace took 40-60 ms: see
    docs/performance.md), so each panel's draw and the repaint it causes stay apart; `drawn`
    fires when the last has drawn."""

    drawn = Signal()

    def __init__(self) -> None:
        super().__init__()
        self.norm = NormHistoryPanel()
        self.loss = LossPanel()  # shown in training runs
        self.rows = RowsHeatmap()
        self.units = UnitsHeatmap()
        self.connectivity = ConnectivityPanel()  # shown when a run computes the map
        self.by_name: dict[str, Panel] = {"norm": self.norm, "loss": self.loss, "rows": self.rows,
                                          "units": self.units,
                                          "connectivity": self.connectivity}  # fmt: skip
        self.panels = tuple(self.by_name.values())
        self.hidden: set[str] = set()  # turned off in the View menu
        for panel in self.panels:
            panel.cache_axes()
        rows = []
        for names in PANEL_ROWS:
            row = QSplitter(Qt.Horizontal)
            for name in names:
                row.addWidget(self.by_name[name])
            rows.append(row)
        rows[0].setSizes([640, 360])
        self.splitter = QSplitter(Qt.Vertical)
        for row in rows:
            self.splitter.addWidget(row)
        self.splitter.setSizes([440, 330])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.splitter)
        self.loss.hide()
        self.connectivity.hide()
        self.stages: list[Callable[[], None]] = []
        self.stage_timer = QTimer(self, singleShot=True, interval=0)
        self.stage_timer.timeout.connect(self.draw_stage)
        self.log, self.normalise = True, False

    def busy(self) -> bool:
        """Whether panels are left to draw."""
        return bool(self.stages)

    def show_for(self, arrays: Mapping[str, np.ndarray], config: RunConfig | None, live: bool):
        """Show the panels `panels_for` names (the exported figure shows the same), less those
        turned off in the View menu."""
        shown = set(panels_for(arrays, config, live=live)) - self.hidden
        for name, panel in self.by_name.items():
            panel.setVisible(name in shown)

    def set_hidden(self, name: str, hidden: bool, arrays, config, live: bool) -> None:
        (self.hidden.add if hidden else self.hidden.discard)(name)
        self.show_for(arrays, config, live)

    def draw(self, arrays: Mapping[str, np.ndarray], config: RunConfig | None,
             rows_total: int | None, live: bool) -> None:  # fmt: skip
        """Draw `arrays` in every panel (replacing the draws left from an earlier call)."""
        arrays = dict(arrays)
        self.show_for(arrays, config, live)
        self.stage(lambda p=panel: p.draw(arrays, config, rows_total) for panel in self.panels)

    def set_options(self, log: bool, normalise: bool) -> None:
        """View → Log scale / Normalise per pass, in every panel."""
        self.log, self.normalise = log, normalise
        for panel in self.panels:  # a redraw that replaces the staged calls uses them too
            panel.log, panel.normalise = log, normalise
        self.stage(lambda p=panel: p.set_options(log, normalise) for panel in self.panels)

    def stage(self, calls: Iterable[Callable[[], None]]) -> None:
        self.stages = list(calls)
        self.draw_stage()

    def draw_stage(self) -> None:
        """Run the next staged call; `drawn` after the last."""
        if self.stages:
            self.stages.pop(0)()
        if self.stages:
            self.stage_timer.start()
        else:
            self.drawn.emit()

    def visible_panels(self) -> list[Panel]:
        return [panel for panel in self.panels if not panel.isHidden()]
