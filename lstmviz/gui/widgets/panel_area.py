"""The window's panels in their splitters, drawn one per event-loop turn."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from lstmviz.analysis.layout import PANEL_WIDTHS, RECORDING_PANELS, WINDOW_ROWS, panels_for
from lstmviz.analysis.records import TimeRange
from lstmviz.core.config import RunConfig
from lstmviz.plots.panels.curves import NormHistoryPanel
from lstmviz.plots.panels.heatmaps import RowsHeatmap, UnitsHeatmap
from lstmviz.plots.panels.model_curves import GatesPanel, Handovers, LayerChoice, LayerNormPanel
from lstmviz.plots.panels.model_maps import LayerHeatmap, LayerUnitsHeatmap, SaliencyHeatmap
from lstmviz.plots.panels.panel import EMPTY_TEXT, LIVE_TEXT, SPARES, Panel
from lstmviz.plots.panels.record_panels import (
    RecordChoice,
    RecordHeatmap,
    RecordLossPanel,
    RecordNormPanel,
)
from lstmviz.plots.panels.training import ConnectivityPanel, LossPanel

# Every panel is made on first use (`PanelArea.panel`) or, in idle turns, by `prepare`.
PANEL_CLASSES = {"norm": NormHistoryPanel, "loss": LossPanel, "rows": RowsHeatmap,
                 "units": UnitsHeatmap, "connectivity": ConnectivityPanel,
                 "layers": LayerNormPanel, "gates": GatesPanel, "layer_map": LayerHeatmap,
                 "saliency": SaliencyHeatmap, "layer_units": LayerUnitsHeatmap,
                 "record_norms": RecordNormPanel, "record_loss": RecordLossPanel,
                 "record_map": RecordHeatmap}  # fmt: skip
FIRST_SHOWN = {"norm", "rows", "units"}  # before any trace
LSTM_PREPARED = ("norm", "rows", "units", "loss", "connectivity")  # `prepare` makes these
# A panel's least width and height in the window, in lines of text (14-17 px at 96 dpi): three
# heatmaps side by side still fit a 1024-px window beside the dock, a recording's three rows
# and its bar a 1366×768 screen at 125 %.
MIN_PANEL_LINES = (10, 7)
# Heights of the rows when a recording's row is shown above a model trace's two (px, scaled).
RECORDING_ROW_HEIGHTS = (330, 250, 250)
# One staged call per this many ms: Qt paints what a call changed after its own 5 ms timer
# (QT_QPA_UPDATE_IDLE_TIME), so with 0 ms the calls that are quick (empty panels at a run's
# start) all ran first and their panels were painted together, in one event-loop turn
# (bench/bench_gui.py --only life).
STAGE_MS = 6


class PanelArea(QWidget):
    """The panels (`by_name`: "norm", "loss", "rows", "units", "connectivity", a model
    trace's "layers", "gates", "layer_map", "saliency", "layer_units", and a recording's
    "record_norms", "record_loss", "record_map"), laid out as `analysis.layout.WINDOW_ROWS`
    says; those `panels_for` names are shown, and a recording's while one is set
    (`set_recording`: its arrays, drawn in its panels, while the others draw a trace). The
    panels that show one LSTM direction of a model share its choice (`layer`, their combo
    boxes); those of a recording its record and timestep range (`set_record_view`).

    A panel is made when first needed (all of them at once would stall the window's start);
    `prepare` makes the usual ones one per event-loop turn.

    `draw` shows arrays in every panel, the first at once and the others one per event-loop
    turn (all at once they would stall the window: bench/bench_gui.py --only redraw), each
    panel's repaint in the turn after its draw; `drawn` fires when the last has repainted."""

    drawn = Signal()
    created = Signal(object)  # a panel just made
    range_moved = Signal(object)  # (t0, t1): the user dragged a recording's timestep range
    layer_chosen = Signal(int)  # the LSTM direction the choosing panels show (`set_layer`)

    def __init__(self) -> None:
        super().__init__()
        self.by_name: dict[str, Panel] = {}
        self.layer = 0  # the LSTM direction of a model trace the choosing panels show
        self.recording: dict[str, np.ndarray] | None = None  # a recording's arrays, shown
        self.record: int | None = None  # the record its panels show (None: the last)
        self.t_range: TimeRange = None  # its heatmap's timesteps (None: every t)
        self.hidden: set[str] = set()  # turned off in the View menu
        self.log, self.normalise = True, False
        self.chained = True  # hand-overs on one time axis (View → Chain hand-overs …)
        self.anchored, self.anchor = False, None  # the error of one step (View → Error of …)
        self.rows_splitters: list[QSplitter] = [QSplitter(Qt.Horizontal) for _ in WINDOW_ROWS]
        self.rows_splitters[0].hide()  # a recording's
        self.splitter = QSplitter(Qt.Vertical)
        for row in self.rows_splitters:
            self.splitter.addWidget(row)
        self.splitter.setSizes([0, 440, 330])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.splitter)
        self.shown: tuple[str, ...] = ()
        self.stages: list[Callable[[], None]] = []
        self.preparing = False  # `prepare` is making the panels
        # resized panels, and the plots just drawn, waiting for their turn to repaint
        self.frozen: list[QWidget] = []
        self.stage_timer = QTimer(self, singleShot=True, interval=STAGE_MS)
        self.stage_timer.timeout.connect(self.turn)

    def prepare(self, names: Iterable[str] = LSTM_PREPARED) -> None:
        """Make the panels called `names` that are not made yet, one per event-loop turn and
        their parts each in a turn before (the first three shown when nothing is; `drawn` at
        the end), unless panels are being drawn.
        A draw meanwhile makes what it needs at once."""
        if self.busy():
            return
        # each panel's parts made ahead (`plots.panels.panel.SPARES`), then the panel
        groups: list[list[Callable[[], object]]] = [
            [*(lambda f=part: SPARES.make(f) for part in PANEL_CLASSES[name].PARTS),
             lambda n=name: self.panel(n)]
            for name in names if name not in self.by_name
        ]  # fmt: skip
        groups.insert(3, [lambda: self.shown or self._show(FIRST_SHOWN)])
        steps = [step for group in groups for step in group]
        if "norm" in names:  # its per-pass, per-batch and earlier steps' curves, a few a turn
            steps += [lambda: self.panel("norm").make_row_curves(5) for _ in range(4)]
            steps += [lambda: self.panel("norm").make_history_curves(6) for _ in range(4)]
        steps.append(lambda: setattr(self, "preparing", False))
        self.stage(steps)
        self.preparing = bool(self.stages)

    norm = property(lambda self: self.panel("norm"))
    loss = property(lambda self: self.panel("loss"))  # shown in training runs
    rows = property(lambda self: self.panel("rows"))
    units = property(lambda self: self.panel("units"))
    connectivity = property(lambda self: self.panel("connectivity"))  # when a run has the map

    @property
    def panels(self) -> tuple[Panel, ...]:
        """The panels made so far (a model trace's are made when one is first shown)."""
        return tuple(self.by_name.values())

    def panel(self, name: str) -> Panel:
        """The panel called `name`, made and put in its place on first use (`created` tells
        the window)."""
        if name in self.by_name:
            return self.by_name[name]
        panel = PANEL_CLASSES[name]()
        panel.cache_axes()
        # the least a panel shown in the window gets (the window's minimum size follows): a
        # window shrunk to its minimum squeezed them to slivers of overlapping tick labels
        lines = panel.fontMetrics().lineSpacing()
        panel.setMinimumSize(MIN_PANEL_LINES[0] * lines, MIN_PANEL_LINES[1] * lines)
        panel.log, panel.normalise = self.log, self.normalise
        if isinstance(panel, Handovers):
            panel.chained = self.chained
        if isinstance(panel, LayerNormPanel):
            panel.anchored, panel.anchor = self.anchored, self.anchor
        if isinstance(panel, LayerChoice):
            panel.layer = self.layer
            panel.layer_box.activated.connect(self.set_layer)
        if isinstance(panel, RecordChoice):
            panel.record, panel.t_range = self.record, self.t_range
        if isinstance(panel, RecordNormPanel):
            panel.range_moved.connect(self.range_moved)
        row, names = next((r, n) for r, n in zip(self.rows_splitters, WINDOW_ROWS, strict=True)
                          if name in n)  # fmt: skip
        before = [n for n in names[: names.index(name)] if n in self.by_name]
        panel.hide()
        row.insertWidget(len(before), panel)
        self.by_name[name] = panel
        self.created.emit(panel)
        return panel

    def busy(self) -> bool:
        """Whether panels are left to draw or to repaint."""
        return bool(self.stages or self.frozen)

    def show_for(self, arrays: Mapping[str, np.ndarray], config: RunConfig | None, live: bool):
        """Show the panels `panels_for` names (the exported figure shows the same), and a
        recording's while one is set, less those turned off in the View menu."""
        shown = set(panels_for(arrays, config, live=live))
        if self.recording is not None:
            shown |= set(RECORDING_PANELS)
        self._show(shown - self.hidden)

    def _show(self, shown: set[str]) -> None:
        """Show the panels named in `shown`, hide the others and the rows left empty; a row
        whose panels changed gets widths in the proportions of `PANEL_WIDTHS` (the user's own
        are kept otherwise), and the rows heights of their own when a recording's row comes or
        goes."""
        if tuple(sorted(shown)) == self.shown:
            return
        before = [row.isVisibleTo(self) for row in self.rows_splitters]
        was = set(self.shown)
        self.shown = tuple(sorted(shown))
        for name in (n for names in WINDOW_ROWS for n in names if n in shown):  # in order:
            self.panel(name)  # the first made is the first drawn
        for name, panel in self.by_name.items():
            panel.setVisible(name in shown)
        for row, names in zip(self.rows_splitters, WINDOW_ROWS, strict=True):
            row.setVisible(any(n in shown for n in names))
            row.setSizes([int(360 * PANEL_WIDTHS.get(n, 1.0)) if n in shown else 0
                          for n in names if n in self.by_name])  # fmt: skip
        visible = [row.isVisibleTo(self) for row in self.rows_splitters]
        if visible[0] != before[0]:
            sizes = RECORDING_ROW_HEIGHTS if visible[0] else (0, 440, 330)
            self.splitter.setSizes(list(sizes))
        rows = [set(names) for names in WINDOW_ROWS]
        if visible == before:  # the panels of rows whose panels changed are resized
            rows = [names for names in rows if names & was != names & shown]
        self._freeze([panel for name, panel in self.by_name.items()
                      if name in shown and name in was and any(name in r for r in rows)])

    def _freeze(self, panels: list[Panel]) -> None:
        """Resized panels that show a plot repaint one per event-loop turn (`turn`), after the
        first: repainted together they stall one turn. Until its turn a panel shows
        what was there (Qt does not paint a widget whose updates are off)."""
        plots = [p for p in panels if p.isVisibleTo(self) and p.stack.currentWidget() is p.plot]
        for panel in plots[1:]:
            if panel not in self.frozen:
                panel.setUpdatesEnabled(False)
                self.frozen.append(panel)
        if self.frozen and not self.stage_timer.isActive():
            self.stage_timer.start()

    def set_hidden(self, name: str, hidden: bool, arrays, config, live: bool) -> None:
        (self.hidden.add if hidden else self.hidden.discard)(name)
        self.show_for(arrays, config, live)

    def draw(self, arrays: Mapping[str, np.ndarray], config: RunConfig | None,
             rows_total: int | None, live: bool, at_once: bool = True) -> None:  # fmt: skip
        """Draw `arrays` in every panel, and the recording set in its own (replacing the draws
        left from an earlier call); the first panel now, or in the next turn (not `at_once`)."""
        arrays = dict(arrays)
        self.show_for(arrays, config, live)
        waiting = LIVE_TEXT if live else EMPTY_TEXT  # what a panel without data says
        for panel in self.panels:
            if panel.placeholder.text() != waiting:
                panel.placeholder.setText(waiting)
        recording = self.recording
        self.stage((
            (lambda p=panel: self._paint_next(p, lambda: p.draw(recording)))
            if isinstance(panel, RecordChoice)
            else (lambda p=panel: self._paint_next(p, lambda: p.draw(arrays, config, rows_total)))
            for panel in self.panels
            if recording is not None or not isinstance(panel, RecordChoice)
        ), at_once)

    def _paint_next(self, panel: Panel, draw: Callable[[], None]) -> None:
        """`draw`, the panel's plot painted in the next turn (`turn`): Qt painted it right
        after the draw, in the same event-loop turn, and a draw that moves the range has the
        paint redo the axes and every curve: the two in one turn stalled it
        (bench/bench_gui.py --only life)."""
        view = panel.plot.viewport()  # hidden behind the placeholder until the first draw
        if not panel.isVisibleTo(self) or view in self.frozen:
            draw()
            return
        view.setUpdatesEnabled(False)
        draw()
        self.frozen.insert(0, view)

    def set_recording(self, arrays: Mapping[str, np.ndarray] | None) -> None:
        """Show a recording's arrays (`analysis.records`) in its panels from the next `draw`
        on (`draw_recording` draws them alone); None hides them (at once)."""
        self.recording = None if arrays is None else dict(arrays)
        if arrays is None:
            self._show(set(self.shown) - set(RECORDING_PANELS))

    def draw_recording(self) -> None:
        """Draw the recording set in its panels (after any draws still staged)."""
        if self.recording is None:
            return
        recording = self.recording
        self._show(set(self.shown) | (set(RECORDING_PANELS) - self.hidden))
        self.stages += [lambda p=panel: p.draw(recording) for panel in self.panels
                        if isinstance(panel, RecordChoice)]  # fmt: skip
        self.draw_stage()

    def set_record_view(self, record: int | None, t_range: TimeRange) -> None:
        """Show record `record` (None: the last) and the timestep range `t_range` (None: every
        t) in a recording's panels."""
        self.record, self.t_range = record, t_range
        choosing = [p for p in self.panels if isinstance(p, RecordChoice)]
        for panel in choosing:
            panel.record, panel.t_range = record, t_range
        self.stages += [lambda p=panel: p.set_view(record, t_range) for panel in choosing]
        self.draw_stage()

    def set_layer(self, k: int) -> None:
        """Show LSTM direction k in every panel that shows one (their combo boxes)."""
        self.layer = k
        choosing = [p for p in self.panels if isinstance(p, LayerChoice)]
        for panel in choosing:
            panel.layer = k
        # after any draws still staged (a new trace's), not instead of them
        self.stages += [lambda p=panel: p.set_layer(k) for panel in choosing]
        self.draw_stage()
        self.layer_chosen.emit(k)

    def set_options(self, log: bool, normalise: bool) -> None:
        """View → Log scale / Normalise per pass, in every panel."""
        self.log, self.normalise = log, normalise
        for panel in self.panels:  # a redraw that replaces the staged calls uses them too
            panel.log, panel.normalise = log, normalise
        self.stage(lambda p=panel: p.set_options(log, normalise) for panel in self.panels)

    def set_chained(self, chained: bool) -> None:
        """View → Chain hand-overs on one time axis, in the panels that draw hand-overs."""
        self.chained = chained
        chaining = [p for p in self.panels if isinstance(p, Handovers)]
        for panel in chaining:
            panel.chained = chained
        self.stages += [panel.redraw for panel in chaining if panel.arrays]
        self.draw_stage()

    def set_anchored(self, anchored: bool, anchor: int | None) -> None:
        """View → Error of one step t*, and the anchor shown (None: each direction's
        diagnosis's), in the norm curves of a model trace."""
        self.anchored, self.anchor = anchored, anchor
        curves = [p for p in self.panels if isinstance(p, LayerNormPanel)]
        for panel in curves:
            panel.anchored, panel.anchor = anchored, anchor
        self.stages += [panel.redraw for panel in curves if panel.arrays]
        self.draw_stage()

    def stage(self, calls: Iterable[Callable[[], None]], at_once: bool = True) -> None:
        self.stages, self.preparing = list(calls), False
        if at_once:
            self.draw_stage()
        else:
            self.stage_timer.start()

    def draw_stage(self) -> None:
        """Run the next staged call; `drawn` after the last (and the last frozen panel)."""
        if self.stages:
            self.stages.pop(0)()
        self._next_turn()

    def turn(self) -> None:
        """The stage timer's turn: a frozen panel repaints, or else the next staged call."""
        if self.frozen:
            self.frozen.pop(0).setUpdatesEnabled(True)
            self._next_turn()
        else:
            self.draw_stage()

    def _next_turn(self) -> None:
        if self.stages or self.frozen:
            self.stage_timer.start()
        else:
            self.drawn.emit()

    def visible_panels(self) -> list[Panel]:
        return [panel for panel in self.panels if not panel.isHidden()]
