"""Fitting a figure's panels to their boxes (`lstmviz.plots.export.figure`): the title row without
its controls, axis labels no longer than their room, whether a legend was folded away, and
curves and legends that scale with the drawing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QGraphicsItem

from lstmviz.plots.panels.curves import THIN_ABOVE
from lstmviz.plots.panels.panel import Panel


def plain_head(panel: Panel) -> None:
    """Hide the controls in the panel's title row (a model panel's layer box): the figure
    paints the title alone, and a taller control put that panel's title and plot lower than
    its neighbours'."""
    for k in range(panel.head.count()):
        widget = panel.head.itemAt(k).widget()
        if widget is not None and widget is not panel.title:
            widget.hide()


def _label_room(axis: pg.AxisItem, clip: QRectF) -> float:
    """The length a label centred on `axis` may have and stay inside `clip` (scene px)."""
    rect = axis.sceneBoundingRect()
    if axis.orientation in ("left", "right"):
        return 2 * min(rect.center().y() - clip.top(), clip.bottom() - rect.center().y())
    return 2 * min(rect.center().x() - clip.left(), clip.right() - rect.center().x())


def fit_axis_labels(panel: Panel, full: dict) -> int:
    """Shorten (with "…") each axis label of the panel's plot that is longer than its plot
    item leaves it room for (it is drawn centred on its axis, and the export cuts it at the
    plot's edges). `full`: the axes' whole labels by id, kept across layouts. Returns how many
    labels were shortened."""
    item = panel.plot.getPlotItem()
    clip, shortened = item.sceneBoundingRect(), 0
    for axis in (i for i in item.scene().items() if isinstance(i, pg.AxisItem)):
        if axis.label is None or not (axis.isVisible() and axis.label.isVisible()):
            continue
        text = full.setdefault(id(axis), (axis, axis.labelText))[1]
        # less a pixel: the label is placed at whole pixels
        room = _label_room(axis, clip) - 1 + 2 * axis.label.document().documentMargin()

        def fits(shown: str, axis=axis, room=room) -> bool:
            axis.setLabel(shown, units=axis.labelUnits or None)
            return axis.label.boundingRect().width() <= room

        if not fits(text):
            shortened += 1
            lo, hi = 0, len(text)  # text[:lo] + "…" fits ("…" alone is the last resort)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fits(text[:mid].rstrip() + "…") else (lo, mid)
            fits(text[:lo].rstrip() + "…")
        axis.resizeEvent()  # the label is placed by its width
    return shortened


def folded_legend(panel: Panel) -> bool:
    """Whether the panel's legend is hidden for want of room (`curves.fit_legend`)."""
    return any(isinstance(item, pg.LegendItem) and item.items and not item.isVisible()
               for item in panel.plot.scene().items())  # fmt: skip


@contextlib.contextmanager
def scaled_pens(panels: Sequence[Panel], scale: float) -> Iterator[None]:
    """The curves' lines `scale` times as wide while the panels are drawn `scale` times their
    size (the PNG at a DPI above 96, a plot shrunk into the PDF): pyqtgraph's pens are cosmetic
    (a curve's own units are its data's), as wide in device pixels whatever the painter's
    scale, and at 288 dpi a curve came out a third as thick as at 96. Curves of more than
    THIN_ABOVE points, which the window draws 1 px wide, keep 1 device pixel: Qt strokes a
    wider pen along a long jagged path very slowly (an export of many long curves would take
    minutes). (Symbols scale already: the exporters pass their scale.)"""
    saved = []
    for panel in panels if abs(scale - 1.0) > 0.01 else ():
        for item in panel.plot.scene().items():  # a data item's pen: its legend's too
            own = isinstance(item, pg.PlotDataItem) or (
                isinstance(item, pg.PlotCurveItem)
                and not isinstance(item.parentItem(), pg.PlotDataItem)
            )
            pen = item.opts.get("pen") if own else None
            points = 0 if not own or item.yData is None else len(item.yData)
            if isinstance(pen, QPen) and pen.isCosmetic() and points <= THIN_ABOVE:
                scaled = QPen(pen)
                scaled.setWidthF(max(pen.widthF(), 1.0) * scale)  # 0: a hairline, 1 px
                saved.append((item, pen))
                item.setPen(scaled)
    try:
        yield
    finally:
        for item, pen in saved:
            item.setPen(pen)


@contextlib.contextmanager
def scaled_legends(panels: Sequence[Panel]) -> Iterator[None]:
    """Legends scale with the rest of the plot while the panels are drawn scaled (the PNG at
    a DPI above 96, a plot shrunk into the PDF): pyqtgraph draws a legend at one device
    pixel per unit whatever the painter's scale (ItemIgnoresTransformations), which on a
    screen at 96 dpi is the same and in an export at 288 dpi a third of its size."""
    flag = QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations
    items = [item for panel in panels for item in panel.plot.scene().items()
             if item.flags() & flag]  # fmt: skip
    for item in items:
        item.setFlag(flag, False)
    try:
        yield
    finally:
        for item in items:
            item.setFlag(flag, True)
