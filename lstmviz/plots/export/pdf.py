"""PDF: a figure (`lstmviz.plots.export.figure.Figure`) as a one-page A4 landscape report
through QPdfWriter (`write`): its title, the panels (vector), and below them the figure's
`report_html` (the run's configuration and summary); `complete` checks the file written."""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401  (registers ImageExporter)
from PySide6.QtCore import QMarginsF
from PySide6.QtGui import QColor, QPageLayout, QPageSize, QPainter, QPdfWriter, QTextDocument

import lstmviz
from lstmviz.analysis.layout import LOGICAL_DPI
from lstmviz.plots.export.app import gui_style
from lstmviz.plots.export.fitting import scaled_legends, scaled_pens
from lstmviz.plots.export.header import font, paint_text

GAP_PX = 8  # between the panels and the report's text


def write(figure, path: str, step=None) -> None:
    """Write `figure`'s report to `path`. `step`: called with the fraction of the plots drawn
    after each."""
    writer = QPdfWriter(path)
    writer.setTitle(figure.title())
    writer.setCreator(f"lstmviz {lstmviz.__version__}")
    writer.setResolution(LOGICAL_DPI)  # 1 unit = 1 logical px (vector output regardless)
    writer.setPageLayout(
        QPageLayout(
            QPageSize(QPageSize.A4),
            QPageLayout.Landscape,
            QMarginsF(12, 12, 12, 12),
            QPageLayout.Millimeter,
        )
    )
    scale = writer.resolution() / LOGICAL_DPI
    page = writer.pageLayout().paintRectPixels(writer.resolution())
    w, h = page.width() / scale, page.height() / scale
    report = report_document(figure, w)
    text_h = report.size().height()
    factor = figure.fit(w, h - text_h - GAP_PX)
    painter = QPainter()
    if not painter.begin(writer):
        raise OSError(f"{path}: cannot start a PDF there")
    try:
        painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
        painter.scale(scale, scale)
        painter.save()
        painter.scale(1 / factor, 1 / factor)
        with gui_style(), scaled_legends(figure.panels), scaled_pens(figure.panels, scale / factor):
            for index, (panel, box) in enumerate(figure.cells, start=1):
                item = panel.plot.getPlotItem()
                exporter = pg.exporters.ImageExporter(item)
                exporter.setExportMode(
                    True,
                    {"antialias": True, "background": QColor("white"), "painter": painter,
                     "resolutionScale": 1.0},
                )  # fmt: skip
                try:
                    painter.save()
                    painter.setClipRect(box)
                    item.scene().render(painter, box, item.sceneBoundingRect())
                    painter.restore()
                finally:
                    exporter.setExportMode(False)
                if step is not None:
                    step(index / len(figure.cells))
        paint_text(figure, painter, w * factor)
        painter.restore()
        painter.translate(0, h - text_h)
        report.drawContents(painter)
    finally:
        painter.end()


def report_document(figure, width: float) -> QTextDocument:
    """The report's text below the panels (`figure.report_html()`), `width` logical px wide."""
    doc = QTextDocument()
    doc.setDefaultFont(font(10))
    doc.setDocumentMargin(2)
    doc.setHtml(figure.report_html())
    doc.setTextWidth(width)
    return doc


def complete(path: Path) -> bool:
    """Whether the PDF at `path` has its header and its end: Qt's PDF writer says nothing
    when a write fails, and a full disk leaves the first blocks of the file only."""
    data = path.read_bytes()
    return data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
