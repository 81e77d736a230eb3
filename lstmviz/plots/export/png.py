"""PNG: a figure (`lstmviz.plots.export.figure.Figure`) drawn as an image of a size in px with
its DPI recorded (`image`), and encoded in memory (`encoded`), for the caller to write as
every other format: a full disk is then an OSError naming the file, not a bare False from Qt
and libpng's own line on stderr."""

from __future__ import annotations

import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401  (registers ImageExporter)
from PySide6.QtCore import QBuffer, QIODevice
from PySide6.QtGui import QColor, QImage, QPainter

from lstmviz.analysis.layout import LOGICAL_DPI
from lstmviz.plots.export.app import gui_style
from lstmviz.plots.export.fitting import scaled_legends, scaled_pens
from lstmviz.plots.export.header import paint_text


def image(figure, width: int, height: int, dpi: float, step=None) -> QImage:
    """`figure` as a `width` × `height` px image, DPI recorded in the file. `step`: called with
    the fraction of the plots drawn after each."""
    scale = dpi / LOGICAL_DPI
    scale /= figure.fit(width / scale, height / scale)
    picture = QImage(width, height, QImage.Format_ARGB32)
    picture.fill(QColor("white"))
    dots_per_metre = round(dpi / 0.0254)
    picture.setDotsPerMeterX(dots_per_metre)
    picture.setDotsPerMeterY(dots_per_metre)
    with gui_style(), scaled_legends(figure.panels), scaled_pens(figure.panels, scale):
        plots = []
        for panel, box in figure.cells:
            exporter = pg.exporters.ImageExporter(panel.plot.getPlotItem())
            exporter.parameters()["width"] = max(1, round(box.width() * scale))
            plots.append((exporter.export(toBytes=True), box))
            if step is not None:
                step(len(plots) / len(figure.cells))
    painter = QPainter(picture)
    try:
        painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
        painter.scale(scale, scale)
        for plot, box in plots:
            painter.drawImage(box, plot)
        paint_text(figure, painter, width / scale)
    finally:
        painter.end()
    return picture


def encoded(picture: QImage) -> bytes | None:
    """`picture` encoded as PNG; None when Qt could not encode it."""
    buffer = QBuffer()
    buffer.open(QIODevice.WriteOnly)
    if not picture.save(buffer, "PNG"):
        return None
    return bytes(buffer.data())
