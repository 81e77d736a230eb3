"""`Panel`, the base of every plot: a bold title, a hover readout, a pyqtgraph plot (or a
placeholder while it has nothing to show), drawn from a trace's arrays by `draw`."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QAction, QFont, QFontMetrics, QPainter
from PySide6.QtWidgets import (
    QGraphicsItem,
    QHBoxLayout,
    QLabel,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from lstmviz.analysis.report.summary import plain
from lstmviz.analysis.values import Arrays
from lstmviz.core.config import RunConfig
from lstmviz.plots.axis import OpaqueLineAxis

SIDES = ("left", "bottom")  # the sides with an axis


def plot_widget() -> pg.PlotWidget:
    """A plot with the panels' axes (`OpaqueLineAxis`); the bottom one counts (timesteps or
    training steps)."""
    axes = {side: OpaqueLineAxis(side) for side in SIDES}
    axes["bottom"].counts = True
    return pg.PlotWidget(axisItems=axes)


def set_symbol_and_data(curve: pg.PlotDataItem, symbol: str | None,
                        set_data: Callable[[], None]) -> None:  # fmt: skip
    """Give `curve` its `symbol` (None: none) and its new data (`set_data()`) in the order that
    draws no symbol where none will show: pyqtgraph makes a scatter spot for every point a
    curve holds while it has a symbol (slow for a long curve), when the data are set or the
    symbol is."""
    if symbol is None and curve.opts["symbol"] is not None:
        curve.setSymbol(None)
    set_data()
    if symbol is not None and curve.opts["symbol"] != symbol:
        curve.setSymbol(symbol)


def _colours() -> tuple[str, ...]:
    """The pyqtgraph options a part takes its colours from when it is made."""
    return tuple(str(pg.getConfigOption(name)) for name in ("background", "foreground"))


class Spares:
    """Parts of panels made ahead, one per event-loop turn (`PanelArea.prepare`), which the
    panels take when they are made: a heatmap panel made whole in one turn (plot and colour
    bar the most of it) stalls the window longer than it may. A part is taken only under
    the colours it was made with: an export (its own style) took a window's spare, and its
    plot kept that window's background."""

    def __init__(self) -> None:
        self.made: defaultdict[tuple[Callable, tuple[str, ...]], list] = defaultdict(list)

    def waiting(self, factory: Callable) -> list:
        """The parts `factory` made ahead under the current colours."""
        return self.made[(factory, _colours())]

    def make(self, factory: Callable):
        part = factory()
        self.waiting(factory).append(part)
        return part

    def take(self, factory: Callable):
        """A part made ahead by `factory` under the current colours, else a new one."""
        parts = self.waiting(factory)
        return parts.pop() if parts else factory()


SPARES = Spares()


EMPTY_TEXT = "Nothing to show yet: press Run (Ctrl+R) or open a trace (Ctrl+O)."
LIVE_TEXT = "Filled in as the run goes, or when it ends."  # a panel a live run has no data for


class TitleLabel(QLabel):
    """A panel's bold title (rich text, `<b>…</b>`), ending in "…" where the panel is narrower
    than it (clipped mid-letter, it ran under the controls beside it)."""

    def shown_text(self) -> str | None:
        """The elided plain text painted, or None when the whole title fits."""
        text = plain(self.text())
        font = QFont(self.font())
        font.setBold(True)
        shown = QFontMetrics(font).elidedText(text, Qt.ElideRight, self.contentsRect().width())
        return None if shown == text else shown

    def paintEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        shown = self.shown_text()
        if shown is None:
            super().paintEvent(event)
            return
        painter = QPainter(self)
        font = QFont(self.font())
        font.setBold(True)
        painter.setFont(font)
        painter.drawText(self.contentsRect(), int(Qt.AlignLeft | Qt.AlignVCenter), shown)
        painter.end()


class Panel(QWidget):
    """A bold title, a hover readout on the right, and a pyqtgraph plot below."""

    PARTS: tuple[Callable, ...] = (plot_widget,)  # what `SPARES` can make ahead for a panel

    def __init__(self, title: str, tip: str):
        super().__init__()
        self.title = TitleLabel(f"<b>{title}</b>", toolTip=tip)
        self.readout = QLabel(alignment=Qt.AlignRight | Qt.AlignVCenter)
        self.readout.setStyleSheet("color: #555; font-family: monospace;")
        # narrower than their text when the window is: a panel's width is the plot's to keep,
        # and the panels of a row side by side must fit a 1024-px window (clipped, not pushed)
        self.title.setMinimumWidth(60)
        self.readout.setMinimumWidth(0)
        self.plot = SPARES.take(plot_widget)
        self.plot.setToolTip(tip)
        self.plot.getPlotItem().getViewBox().setDefaultPadding(0.01)
        for side in SIDES:
            self.plot.getAxis(side).setZValue(-200)  # under the ViewBox: see OpaqueLineAxis
            self.plot.getAxis(side).enableAutoSIPrefix(False)
        self.arrays: Arrays = {}
        self.config: RunConfig | None = None
        self.rows_total: int | None = None
        self.log, self.normalise = True, False
        self._held: tuple[bool, float, float] | None = None  # held y range: (log, lo, hi)
        self.head = head = QHBoxLayout()  # title … readout; panels may add controls
        head.addWidget(self.title)
        head.addStretch(1)
        head.addWidget(self.readout)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(2)
        layout.addLayout(head)
        self.placeholder = QLabel(EMPTY_TEXT, alignment=Qt.AlignCenter)
        self.placeholder.setStyleSheet("color: #777; background: white; border: 1px solid #ddd;")
        # wrapped, the text does not hold the panel ~400 px wide (three heatmaps side by side
        # in the window, or in an exported figure, need less)
        self.placeholder.setWordWrap(True)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.placeholder)
        self.stack.addWidget(self.plot)
        layout.addWidget(self.stack, 1)
        self.plot.scene().sigMouseMoved.connect(self._hover)
        # Right-click → Export panel… writes what `lstmviz export` writes (the main window
        # connects it); it replaces pyqtgraph's own Export… entry.
        self.export_action = QAction("Export panel…", self)
        self.plot.scene().contextMenu = [self.export_action]

    def cache_axes(self) -> None:
        """Keep each axis (ticks, labels and its grid lines, which span the whole plot) as a
        pixmap redrawn only when the axis changes: otherwise every curve update repaints the
        grid (bench/bench_gui.py --only redraw). On
        screen only: exports render fresh panels, so their SVG stays vector."""
        for side in SIDES:
            self.plot.getAxis(side).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)

    def draw(self, arrays: Arrays, config: RunConfig | None = None, rows_total: int | None = None):
        """Show `arrays`; `rows_total` is the number of rows a live run will reach."""
        self.arrays, self.config, self.rows_total = arrays, config, rows_total
        self.redraw()
        if self.HOLD_Y:
            self.hold_y_range()
        # the auto range now, not when painting: a range that moves during a paint has Qt
        # paint the whole panel (curves, axes and grid) a second time
        self.plot.getPlotItem().getViewBox().prepareForPaint()
        self.stack.setCurrentWidget(self.plot if self.has_data() else self.placeholder)

    # Curve panels with a grid: during a live run the y range only grows, in steps with
    # headroom, instead of following the data on every update. The grid lines belong to the
    # left axis, which is repainted whenever its range changes (most updates of a training
    # run otherwise; bench/bench_gui.py --only latency).
    HOLD_Y = False
    HEADROOM = 0.25  # of the data's span (view units: decades on a log axis), each side

    def hold_y_range(self) -> None:
        view = self.plot.getPlotItem().getViewBox()
        if self.rows_total is None:  # a finished trace: fit the data
            if self._held is not None:
                self._held = None
                view.enableAutoRange(y=True)
            return
        bounds = view.childrenBounds()[1]
        if bounds is None or not np.all(np.isfinite(bounds)):
            return
        lo, hi = (float(v) for v in bounds)
        held = self._held if self._held is not None and self._held[0] == self.log else None
        if held is not None and held[1] <= lo and hi <= held[2]:
            return
        pad = max((hi - lo) * self.HEADROOM, 0.05 if self.log else abs(hi) * 0.05 or 0.05)
        lo = lo - pad if held is None or lo < held[1] else held[1]
        hi = hi + pad if held is None or hi > held[2] else held[2]
        self._held = (self.log, lo, hi)
        view.setYRange(lo, hi, padding=0)  # also turns the y auto range off

    def set_options(self, log: bool, normalise: bool) -> None:
        self.log, self.normalise = log, normalise
        self.redraw()
        if self.HOLD_Y:
            self.hold_y_range()

    def redraw(self) -> None:
        raise NotImplementedError

    def has_data(self) -> bool:
        """Whether the plot shows any data (else the placeholder is shown)."""
        raise NotImplementedError

    def readout_at(self, x: float, y: float) -> str:
        raise NotImplementedError

    def _hover(self, pos: QPointF) -> None:
        view = self.plot.getPlotItem().getViewBox()
        if not view.sceneBoundingRect().contains(pos):
            self.readout.clear()
            return
        point = view.mapSceneToView(pos)
        self.readout.setText(self.readout_at(point.x(), point.y()))


def panel_title(panel: Panel) -> str:
    """The panel's title as plain text."""
    return plain(panel.title.text())
