"""The window's panels in their splitters, drawn one per event-loop turn."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from lstmviz.config import RunConfig
from lstmviz.render.curves import NormHistoryPanel
from lstmviz.render.heatmaps import RowsHeatmap, UnitsHeatmap
from lstmviz.render.layout import PANEL_ROWS, PANEL_WIDTHS, panels_for
from lstmviz.render.model_curves import GatesPanel, LayerChoice, LayerNormPanel
from lstmviz.render.model_maps import LayerHeatmap, LayerUnitsHeatmap, SaliencyHeatmap
from lstmviz.render.panel import Panel
from lstmviz.render.training import ConnectivityPanel, LossPanel

# Panels made on first use, by name (render.layout.MODEL_PANELS).
LAZY_PANELS = {"layers": LayerNormPanel, "gates": GatesPanel, "layer_map": LayerHeatmap,
               "saliency": SaliencyHeatmap, "layer_units": LayerUnitsHeatmap}  # fmt: skip


class PanelArea(QWidget):
    """The panels (`by_name`: "norm", "loss", "rows", "units", "connectivity", and a model
    trace's "layers", "gates", "layer_map", "saliency", "layer_units"), laid out as
    `render.layout.PANEL_ROWS` says; those `panels_for` names are shown. The panels that show
    one LSTM direction of a model share its choice (`layer`, their combo boxes).

    `draw` shows arrays in every panel, the first at once and the others one per event-loop
    turn (all at once, a new finished trace took 40-60 ms: see docs/performance.md), so each
    panel's draw and the repaint it causes stay apart; `drawn` fires when the last has drawn."""

    drawn = Signal()
    created = Signal(object)  # a panel made on first use (a model trace's)

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
        self.layer = 0  # the LSTM direction of a model trace the choosing panels show
        self.hidden: set[str] = set()  # turned off in the View menu
        self.log, self.normalise = True, False
        for panel in self.panels:
            panel.cache_axes()
        self.rows_splitters: list[QSplitter] = []
        for names in PANEL_ROWS:
            row = QSplitter(Qt.Horizontal)
            for name in names:
                if name in self.by_name:
                    row.addWidget(self.by_name[name])
            self.rows_splitters.append(row)
        self.splitter = QSplitter(Qt.Vertical)
        for row in self.rows_splitters:
            self.splitter.addWidget(row)
        self.splitter.setSizes([440, 330])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.splitter)
        self.shown: tuple[str, ...] = ()
        self._show({"norm", "rows", "units"})
        self.stages: list[Callable[[], None]] = []
        self.stage_timer = QTimer(self, singleShot=True, interval=0)
        self.stage_timer.timeout.connect(self.draw_stage)

    @property
    def panels(self) -> tuple[Panel, ...]:
        """The panels made so far (a model trace's are made when one is first shown)."""
        return tuple(self.by_name.values())

    def panel(self, name: str) -> Panel:
        """The panel called `name`, made and put in its place on first use: building the five
        model panels took 0.15 s of the window's start (`created` tells the window)."""
        if name in self.by_name:
            return self.by_name[name]
        panel = LAZY_PANELS[name]()
        panel.cache_axes()
        panel.log, panel.normalise = self.log, self.normalise
        if isinstance(panel, LayerChoice):
            panel.layer = self.layer
            panel.layer_box.activated.connect(self.set_layer)
        row, names = next((r, n) for r, n in zip(self.rows_splitters, PANEL_ROWS, strict=True)
                          if name in n)  # fmt: skip
        before = [n for n in names[: names.index(name)] if n in self.by_name]
        panel.hide()
        row.insertWidget(len(before), panel)
        self.by_name[name] = panel
        self.created.emit(panel)
        return panel

    def busy(self) -> bool:
        """Whether panels are left to draw."""
        return bool(self.stages)

    def show_for(self, arrays: Mapping[str, np.ndarray], config: RunConfig | None, live: bool):
        """Show the panels `panels_for` names (the exported figure shows the same), less those
        turned off in the View menu."""
        self._show(set(panels_for(arrays, config, live=live)) - self.hidden)

    def _show(self, shown: set[str]) -> None:
        """Show the panels named in `shown`, hide the others; a row whose panels changed gets
        widths in the proportions of `PANEL_WIDTHS` (the user's own are kept otherwise)."""
        if tuple(sorted(shown)) == self.shown:
            return
        self.shown = tuple(sorted(shown))
        for name in shown:
            self.panel(name)
        for name, panel in self.by_name.items():
            panel.setVisible(name in shown)
        for row, names in zip(self.rows_splitters, PANEL_ROWS, strict=True):
            row.setSizes([int(360 * PANEL_WIDTHS.get(n, 1.0)) if n in shown else 0
                          for n in names if n in self.by_name])  # fmt: skip

    def set_hidden(self, name: str, hidden: bool, arrays, config, live: bool) -> None:
        (self.hidden.add if hidden else self.hidden.discard)(name)
        self.show_for(arrays, config, live)

    def draw(self, arrays: Mapping[str, np.ndarray], config: RunConfig | None,
             rows_total: int | None, live: bool) -> None:  # fmt: skip
        """Draw `arrays` in every panel (replacing the draws left from an earlier call)."""
        arrays = dict(arrays)
        self.show_for(arrays, config, live)
        self.stage(lambda p=panel: p.draw(arrays, config, rows_total) for panel in self.panels)

    def set_layer(self, k: int) -> None:
        """Show LSTM direction k in every panel that shows one (their combo boxes)."""
        self.layer = k
        choosing = [p for p in self.panels if isinstance(p, LayerChoice)]
        for panel in choosing:
            panel.layer = k
        # after any draws still staged (a new trace's), not instead of them
        self.stages += [lambda p=panel: p.set_layer(k) for panel in choosing]
        self.draw_stage()

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
