"""A trace's panels rendered offscreen: PNG and SVG through pyqtgraph's exporters, a one-page PDF
report through QPdfWriter. `lstmviz.plots.export.writer` is the entry point; this module needs Qt.

The panels are the window's own (`lstmviz.plots`), drawn from the trace's arrays alone in
widgets that are never shown on screen; which panels and where is decided as for the window
(`lstmviz.analysis.layout`): the gradient norm on top with the training loss on its right, the
heatmaps side by side below. Sizes are in logical pixels (1/96 inch) scaled by `dpi / 96`, so a
higher DPI gives the same picture with more pixels (text and lines keep their proportions).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import sys
from collections.abc import Iterator, Sequence
from xml.sax.saxutils import escape

import numpy as np
import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401  (registers ImageExporter and SVGExporter)
from PySide6.QtCore import QEvent, QMarginsF, QPoint, QRectF, Qt, qInstallMessageHandler
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QImage,
    QPageLayout,
    QPageSize,
    QPainter,
    QPdfWriter,
    QTextDocument,
)
from PySide6.QtWidgets import QApplication, QGraphicsItem

import lstmviz
from lstmviz.analysis.diagnosis import diagnosis_lines
from lstmviz.analysis.layout import (
    LOGICAL_DPI,
    PANEL_NAMES,
    PANEL_WIDTHS,
    figure_rows,
    minimum_size,
    panels_for,
)
from lstmviz.analysis.report.model_report import model_lines, model_table_html
from lstmviz.analysis.report.summary import WARNING_STYLE, fmt, plain, summary_text, trained_on
from lstmviz.analysis.values import pass_length
from lstmviz.core import display, modes
from lstmviz.core.view import DEFAULT_VIEW, ViewOptions
from lstmviz.io.trace import GradientTrace
from lstmviz.plots.export.fitting import fit_axis_labels, folded_legend, plain_head, scaled_pens
from lstmviz.plots.export.svg import as_group, closed_path_fix
from lstmviz.plots.panels.curves import NormHistoryPanel
from lstmviz.plots.panels.heatmaps import RowsHeatmap, UnitsHeatmap
from lstmviz.plots.panels.model_curves import GatesPanel, LayerChoice, LayerNormPanel
from lstmviz.plots.panels.model_maps import LayerHeatmap, LayerUnitsHeatmap, SaliencyHeatmap
from lstmviz.plots.panels.panel import Panel, panel_title
from lstmviz.plots.panels.record_panels import RecordHeatmap, RecordLossPanel, RecordNormPanel
from lstmviz.plots.panels.training import ConnectivityPanel, LossPanel
from lstmviz.plots.style import STYLE

PANELS: dict[str, type[Panel]] = {  # the window's panels, by name (PANEL_NAMES)
    "norm": NormHistoryPanel,
    "loss": LossPanel,
    "rows": RowsHeatmap,
    "units": UnitsHeatmap,
    "connectivity": ConnectivityPanel,
    "layers": LayerNormPanel,
    "gates": GatesPanel,
    "layer_map": LayerHeatmap,
    "saliency": SaliencyHeatmap,
    "layer_units": LayerUnitsHeatmap,
    "record_norms": RecordNormPanel,
    "record_loss": RecordLossPanel,
    "record_map": RecordHeatmap,
}
HEADER_PX = 46  # title and a one-line summary above the panels; each wrapped line adds LINE_PX
TITLE_PX, SUBTITLE_PX, PANEL_TITLE_PX = 16, 11, 12
LINE_PX, MAX_SUMMARY_LINES = 15, 3
GAP_PX = 8
# `Figure.fit` tries up to FIT_ATTEMPTS layouts, each GROWTH times larger than the last while a
# legend is folded away, or an axis label is shortened (this up to MAX_LABEL_GROWTH in all)
FIT_ATTEMPTS, GROWTH, MAX_LABEL_GROWTH = 6, 1.2, 1.5
TOP_ROW_SHARE = 0.56  # of the height below the header, when there are two rows of panels


def has_display() -> bool:
    """Whether Qt can open a window here: a display server that answers and the X11 plugin
    loads (`lstmviz.core.display`), or a system that always has one (macOS, Windows)."""
    return display.window_problem() is None


def _quiet_messages(kind, context, message: str) -> None:
    """Qt's messages on stderr, less the offscreen plugin's note about size hints (it comes
    with every hidden widget that is shown and means nothing for an export)."""
    if "propagateSizeHints" not in message:
        sys.stderr.write(message + "\n")


def ensure_app() -> QApplication:
    """The running QApplication, or a new one (offscreen when there is no display)."""
    app = QApplication.instance()
    if app is None:
        if not has_display():
            os.environ["QT_QPA_PLATFORM"] = "offscreen"
        qInstallMessageHandler(_quiet_messages)
        app = QApplication(sys.argv[:1] or ["lstmviz"])
    return app


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


@contextlib.contextmanager
def gui_style() -> Iterator[None]:
    """pyqtgraph's options as the GUI sets them, restored afterwards (the axes read the
    foreground colour when they paint, so rendering happens inside)."""
    saved = {key: pg.getConfigOption(key) for key in STYLE}
    pg.setConfigOptions(**STYLE)
    try:
        yield
    finally:
        pg.setConfigOptions(**saved)


def _font(px: float, bold: bool = False) -> QFont:
    font = QFont()
    font.setPixelSize(max(1, round(px)))
    font.setBold(bold)
    return font


def panel_name(entry: str | type[Panel]) -> str:
    """The name (PANEL_NAMES) of a panel given by name or by class (a subclass of one of
    `PANELS`, or a class one of them derives from, such as NormPanel)."""
    if isinstance(entry, str):
        if entry not in PANELS:
            raise ValueError(f"unknown panel {entry!r} (choose from {', '.join(PANEL_NAMES)})")
        return entry
    for name, cls in PANELS.items():  # the class itself before its relatives
        if entry is cls:
            return name
    for name, cls in PANELS.items():
        if isinstance(entry, type) and (issubclass(entry, cls) or issubclass(cls, entry)):
            return name
    raise ValueError(f"unknown panel {entry!r} (choose from {', '.join(PANEL_NAMES)})")


class Figure:
    """The panels of one trace, drawn offscreen. Use as a context manager (it deletes the
    widgets on exit) or call `close()`.

    `panels`: names from PANEL_NAMES or panel classes; by default the panels the window shows
    for the trace (`panels_for`). Panels with nothing to draw are left out. `view`: log
    scale, normalised curves, and `layer`, the LSTM direction (index into `layer_names`) that a
    model trace's gates and per-unit panels show (default: the first)."""

    def __init__(
        self,
        trace: GradientTrace,
        panels: Sequence[str | type[Panel]] | None = None,
        view: ViewOptions = DEFAULT_VIEW,
        source: str | None = None,
    ):
        self.app = ensure_app()
        self.trace = trace
        self.source = source
        if panels is None:
            panels = self.default_panels()
        chosen = {panel_name(entry): entry for entry in panels}  # the last of a name wins
        self.named: list[tuple[str, Panel]] = []  # in PANEL_NAMES order
        with gui_style():
            for name in (n for n in PANEL_NAMES if n in chosen):
                entry = chosen[name]
                panel = (PANELS[entry] if isinstance(entry, str) else entry)()
                panel.setAttribute(Qt.WA_DontShowOnScreen)
                if isinstance(panel, LayerChoice):
                    panel.layer = view.layer
                if isinstance(panel, LayerNormPanel):
                    panel.anchored, panel.anchor = view.anchored, view.anchor
                panel.set_options(view.log, view.normalise)
                self.draw_panel(name, panel)
                if panel.drawn():
                    self.named.append((name, panel))
                else:
                    panel.deleteLater()
        if not self.named:
            self.close()
            raise ValueError("nothing to plot: the trace has no gradient norms")
        self.cells: list[tuple[Panel, QRectF]] = []  # panel, plot rectangle (logical px)
        self.titles: list[tuple[str, QRectF]] = []
        self.lines: list[str] = []  # the summary as the header shows it
        self.full_labels: dict = {}  # id(axis) -> (axis, its label before `fit_axis_labels`)
        self.shortened = 0  # axis labels shortened to fit by the last `layout`

    def default_panels(self) -> list[str]:
        """The panels the window shows for the trace (`panels_for`)."""
        return panels_for(self.trace.arrays, self.trace.config)

    def draw_panel(self, name: str, panel: Panel) -> None:
        """Draw the panel called `name` (set up with the figure's options)."""
        panel.draw(self.trace.arrays, self.trace.config)

    @property
    def panels(self) -> list[Panel]:
        return [panel for _, panel in self.named]

    @property
    def names(self) -> list[str]:
        """The names of the panels drawn, in PANEL_NAMES order."""
        return [name for name, _ in self.named]

    def __enter__(self) -> Figure:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for panel in self.panels:
            panel.close()
            panel.deleteLater()
        self.named = []
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)

    # ---- text --------------------------------------------------------------------------------

    def title(self) -> str:
        mode = modes.label(self.trace.mode)
        name = f" · {os.path.basename(self.source)}" if self.source else ""
        return f"lstmviz · {mode}{name}"

    def summary_html(self) -> str:
        text = summary_text(
            self.trace.mode, self.trace.arrays, self.trace.config, 0
        )
        return re.sub(" · [0-9.]+\u00a0s(?= · )", "", text)  # a saved trace has no run time

    # ---- layout ------------------------------------------------------------------------------

    def header_lines(self, width: float) -> list[str]:
        """The summary line in lines of at most `width` logical px, broken at its " · "
        separators (a part too long for a line alone, or a last line past
        MAX_SUMMARY_LINES, ends in "…"), as the header shows it."""
        metrics = QFontMetricsF(_font(SUBTITLE_PX))
        room = max(width - 12, 1.0)
        lines: list[str] = []
        for part in plain(self.summary_html()).split(" · "):
            joined = f"{lines[-1]} · {part}" if lines else part
            if lines and metrics.horizontalAdvance(joined) <= room:
                lines[-1] = joined
            else:
                lines.append(part)
        if len(lines) > MAX_SUMMARY_LINES:
            lines = lines[: MAX_SUMMARY_LINES - 1] + [" · ".join(lines[MAX_SUMMARY_LINES - 1 :])]
        return [metrics.elidedText(line, Qt.ElideRight, room) for line in lines]

    def header_height(self, width: float) -> float:
        return HEADER_PX + LINE_PX * (len(self.header_lines(width)) - 1)

    def boxes(self, width: float, height: float, top: float = HEADER_PX) -> list[tuple]:
        """(panel, box) for a figure of `width` × `height` logical px with the panels from
        `top` down, arranged as in the window (`figure_rows`): the gradient norm with the loss
        on its right (PANEL_WIDTHS), the heatmaps side by side below; a single row takes the
        whole height, two rows share it TOP_ROW_SHARE to the rest, more share it evenly."""
        named = dict(self.named)
        rows = [[(n, named[n]) for n in row] for row in figure_rows(list(named))]
        area = int(height - top)
        if len(rows) == 2:
            heights = [int(area * TOP_ROW_SHARE)]
            heights.append(area - heights[0])
        else:
            heights = [int(area / len(rows))] * len(rows)
            heights[-1] = area - sum(heights[:-1])
        boxes, y = [], top
        for row, row_h in zip(rows, heights, strict=True):
            weights = np.cumsum([0.0] + [PANEL_WIDTHS.get(name, 1.0) for name, _ in row])
            edges = np.round(weights / weights[-1] * width).astype(int)
            boxes += [
                (panel, QRectF(int(a), y, int(b - a), row_h))
                for (_, panel), a, b in zip(row, edges[:-1], edges[1:], strict=True)
            ]
            y += row_h
        return boxes

    def fit(self, width: float, height: float) -> float:
        """Lay the figure out (`layout`) for `width` × `height` logical px, or, when its panels
        need more room (`minimum_size`; the plots' own least widths: their axes' tick labels;
        the room a legend needs below its curves; some for long axis labels), for that size
        times the factor returned (≥ 1), so that every plot fills its box exactly: the caller
        scales the drawing down by it."""
        need_w, need_h = minimum_size(self.names, self.header_height(width))
        factor = first = max(1.0, need_w / width, need_h / height)
        for attempt in range(FIT_ATTEMPTS):
            self.layout(width * factor, height * factor)
            over = max(
                max(rect.width() / box.width(), rect.height() / box.height())
                for rect, box in ((p.plot.getPlotItem().sceneBoundingRect(), b)
                                  for p, b in self.cells)
            )  # fmt: skip
            if any(folded_legend(panel) for panel in self.panels) or (
                self.shortened and factor * GROWTH <= first * MAX_LABEL_GROWTH
            ):
                over = max(over, GROWTH)
            if over <= 1.005 or attempt == FIT_ATTEMPTS - 1:
                break
            factor *= over
        return factor

    def layout(self, width: float, height: float, top: float | None = None) -> None:
        """Size and draw the panels for a figure of `width` × `height` logical px (`boxes`),
        below the header (by default as high as the summary's lines need); `cells` and
        `titles` then say where each plot and its title go."""
        width, height = int(round(width)), int(round(height))
        self.lines = self.header_lines(width)
        top = self.header_height(width) if top is None else top
        boxes = self.boxes(width, height, top)
        for panel, box in boxes:  # fixed: a box narrower than a panel's titles still holds it
            plain_head(panel)
            panel.setFixedSize(int(box.width()), int(box.height()))
            panel.show()
        self.app.processEvents()
        for panel, _ in boxes:  # a first paint sizes the axes to their tick labels
            panel.grab()
        for _ in range(2):  # the layouts that follow, then the view boxes' ranges
            self.app.processEvents()
        self.cells, self.titles = [], []
        metrics = QFontMetricsF(_font(PANEL_TITLE_PX, bold=True))
        offsets = [panel.plot.mapTo(panel, QPoint(0, 0)) for panel, _ in boxes]
        band = {}  # the title row's height, one per row of panels (by its top): titles align
        for (_, box), offset in zip(boxes, offsets, strict=True):
            band[box.y()] = min(band.get(box.y(), offset.y()), offset.y())
        for (panel, box), offset in zip(boxes, offsets, strict=True):
            view = panel.plot.getPlotItem().getViewBox()
            view.enableAutoRange()
            view.updateAutoRange()
            plot = QRectF(
                box.x() + offset.x(), box.y() + offset.y(), panel.plot.width(), panel.plot.height()
            )
            self.cells.append((panel, plot))
            title = metrics.elidedText(panel_title(panel), Qt.ElideRight, box.width() - 12)
            self.titles.append(
                (title, QRectF(box.x() + 6, box.y(), box.width() - 12, band[box.y()]))
            )
        self.app.processEvents()
        # once the ranges, hence the axes' tick labels, are final
        self.shortened = sum(fit_axis_labels(panel, self.full_labels) for panel, _ in boxes)

    def _paint_text(self, painter: QPainter, width: float) -> None:
        painter.setPen(QColor("#111"))
        title = _font(TITLE_PX, bold=True)
        painter.setFont(title)
        text = QFontMetricsF(title).elidedText(self.title(), Qt.ElideRight, width - 12)
        painter.drawText(QRectF(6, 2, width - 12, 22), Qt.AlignLeft | Qt.AlignVCenter, text)
        painter.setPen(QColor("#444"))
        painter.setFont(_font(SUBTITLE_PX))
        for k, line in enumerate(self.lines):
            box = QRectF(6, 24 + LINE_PX * k, width - 12, 18)
            painter.drawText(box, Qt.AlignLeft | Qt.AlignVCenter, line)
        painter.setPen(QColor("#111"))
        painter.setFont(_font(PANEL_TITLE_PX, bold=True))
        for text, box in self.titles:
            painter.drawText(box, Qt.AlignLeft | Qt.AlignVCenter, text)

    # ---- PNG ---------------------------------------------------------------------------------

    def image(self, width: int, height: int, dpi: float, step=None) -> QImage:
        """The figure as a `width` × `height` px image, DPI recorded in the file. `step`:
        called with the fraction of the plots drawn after each (the SVG's and PDF's too)."""
        scale = dpi / LOGICAL_DPI
        scale /= self.fit(width / scale, height / scale)
        image = QImage(width, height, QImage.Format_ARGB32)
        image.fill(QColor("white"))
        dots_per_metre = round(dpi / 0.0254)
        image.setDotsPerMeterX(dots_per_metre)
        image.setDotsPerMeterY(dots_per_metre)
        with gui_style(), scaled_legends(self.panels), scaled_pens(self.panels, scale):
            plots = []
            for panel, box in self.cells:
                exporter = pg.exporters.ImageExporter(panel.plot.getPlotItem())
                exporter.parameters()["width"] = max(1, round(box.width() * scale))
                plots.append((exporter.export(toBytes=True), box))
                if step is not None:
                    step(len(plots) / len(self.cells))
        painter = QPainter(image)
        try:
            painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
            painter.scale(scale, scale)
            for plot, box in plots:
                painter.drawImage(box, plot)
            self._paint_text(painter, width / scale)
        finally:
            painter.end()
        return image

    # ---- SVG ---------------------------------------------------------------------------------

    def svg(self, width: int, height: int, dpi: float, step=None) -> bytes:
        """The figure as SVG: vector curves and text, heatmaps as embedded PNG images. Its
        physical size is `width` × `height` px at `dpi`, as the PNG."""
        scale = dpi / LOGICAL_DPI
        w, h = width / scale, height / scale
        factor = self.fit(w, h)
        w, h = round(w * factor), round(h * factor)
        parts = [
            '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
            '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
            f'version="1.1" width="{width / dpi:.3f}in" height="{height / dpi:.3f}in" '
            f'viewBox="0 0 {w} {h}">\n'
            f"<title>{escape(self.title())}</title>\n"
            "<style>image { image-rendering: pixelated; }</style>\n"
            '<rect width="100%" height="100%" fill="#ffffff"/>\n'
        ]
        font = 'font-family="DejaVu Sans, Arial, Helvetica, sans-serif"'
        title = QFontMetricsF(_font(TITLE_PX, bold=True)).elidedText(
            self.title(), Qt.ElideRight, w - 12
        )
        parts.append(
            f'<text x="6" y="18" {font} font-size="{TITLE_PX}" font-weight="bold" '
            f'fill="#111111">{escape(title)}</text>\n'
        )
        parts += [f'<text x="6" y="{37 + LINE_PX * k}" {font} font-size="{SUBTITLE_PX}" '
                  f'fill="#444444">{escape(line)}</text>\n'
                  for k, line in enumerate(self.lines)]  # fmt: skip
        for text, box in self.titles:
            y = box.y() + box.height() / 2 + PANEL_TITLE_PX * 0.35
            parts.append(
                f'<text x="{box.x():.1f}" y="{y:.1f}" {font} font-size="{PANEL_TITLE_PX}" '
                f'font-weight="bold" fill="#111111">{escape(text)}</text>\n'
            )
        with gui_style(), closed_path_fix():
            for index, (panel, box) in enumerate(self.cells, start=1):
                exporter = pg.exporters.SVGExporter(panel.plot.getPlotItem())
                inner = exporter.export(toBytes=True).decode("utf-8")
                parts.append(as_group(inner, f"panel{index}_", box))
                if step is not None:
                    step(index / len(self.cells))
        parts.append("</svg>\n")
        return "".join(parts).encode("utf-8")

    # ---- PDF ---------------------------------------------------------------------------------

    def pdf(self, path: str, step=None) -> None:
        """A one-page A4 landscape report: title, the panels (vector), the run's configuration
        and summary."""
        writer = QPdfWriter(path)
        writer.setTitle(self.title())
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
        report = self.report_document(w)
        text_h = report.size().height()
        factor = self.fit(w, h - text_h - GAP_PX)
        painter = QPainter()
        if not painter.begin(writer):
            raise OSError(f"{path}: cannot start a PDF there")
        try:
            painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
            painter.scale(scale, scale)
            painter.save()
            painter.scale(1 / factor, 1 / factor)
            with gui_style(), scaled_legends(self.panels), scaled_pens(self.panels, scale / factor):
                for index, (panel, box) in enumerate(self.cells, start=1):
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
                        step(index / len(self.cells))
            self._paint_text(painter, w * factor)
            painter.restore()
            painter.translate(0, h - text_h)
            report.drawContents(painter)
        finally:
            painter.end()

    def report_document(self, width: float) -> QTextDocument:
        doc = QTextDocument()
        doc.setDefaultFont(_font(10))
        doc.setDocumentMargin(2)
        doc.setHtml(self.report_html())
        doc.setTextWidth(width)
        return doc

    def report_html(self) -> str:
        config = self.trace.config
        mode = modes.get(config.mode)  # the fields the run reads (not epochs in multi-pass)
        items = [
            (k, v)
            for k, v in vars(config).items()
            if v is not None and mode.uses(k) and not (isinstance(v, bool) and not v)
        ]
        half = (len(items) + 1) // 2
        cell = (
            "<td style='padding-right:10px'><tt>{}</tt></td><td style='padding-right:18px'>{}</td>"
        )
        rows = "".join(
            "<tr>"
            + "".join(cell.format(escape(k), escape(str(v))) for k, v in items[r::half][:2])
            + "</tr>"
            for r in range(half)
        )
        summary = "".join(f"<li>{line}</li>" for line in self.summary_lines())
        return (
            "<table width='100%' cellspacing='0'><tr>"
            "<td width='46%' valign='top'><b>Run configuration</b>"
            f"<table cellspacing='0'>{rows}</table>{model_table_html(self.trace.arrays)}</td>"
            f"<td valign='top'><b>Summary</b><ul style='margin-left:0px'>{summary}</ul></td>"
            "</tr></table>"
        )

    def summary_lines(self) -> list[str]:
        a, config = self.trace.arrays, self.trace.config
        lines = [self.summary_html()]
        for key, name in (("loss_by_pass", "pass"), ("loss_by_batch", "batch")):
            if key in a and np.size(a[key]):
                values = ", ".join(fmt(float(v)) for v in np.ravel(a[key])[:8])
                lines.append(f"loss per {name}: {values}" + (" …" if np.size(a[key]) > 8 else ""))
        if "loss_by_step" in a and np.size(a["loss_by_step"]):
            losses = np.ravel(a["loss_by_step"])
            lines.append(
                f"training loss: {fmt(float(losses[0]))} at step 1 → {fmt(float(losses[-1]))}"
                f" at step {len(losses)} ({trained_on(config)})"
            )
        # a per-batch-weights trace has rows [N, T] instead of one curve [T]
        norm = a.get("norm_h_total", a.get("norm_h_total_by_batch"))
        if norm is not None and np.size(norm):
            flat = np.asarray(norm, np.float64)
            finite = np.where(np.isfinite(flat), flat, -np.inf)
            peak = np.unravel_index(int(np.argmax(finite)), flat.shape)
            where = f"t={peak[-1]}" + (f" (batch {peak[0] + 1})" if flat.ndim == 2 else "")
            lines.append(f"largest ‖dL/dh_t‖: {fmt(float(flat[peak]))} at {where}")
            per_pass = pass_length(a)
            if flat.ndim == 1 and len(flat) > 1:
                lines.append(
                    f"‖dL/dh_t‖ at t=0: {fmt(float(flat[0]))}, at t={len(flat) - 1}: "
                    f"{fmt(float(flat[-1]))}" + (f" ({len(flat) // per_pass} passes of "
                                                  f"{per_pass})" if per_pass else "")
                )  # fmt: skip
        lines += model_lines(a) + [escape(x) for x in diagnosis_lines(self.trace.diagnosis)]
        if "max_abs_diff_full_vs_reference" in a:
            lines.append(
                "full multi-pass gradient vs one pass over the joined sequence: max |Δ| "
                f"{float(a['max_abs_diff_full_vs_reference']):.1e}"
            )
        bad = np.ravel(a.get("nonfinite_steps", np.zeros(0)))
        if bad.size:
            shown = ", ".join(str(int(t)) for t in bad[:10]) + (" …" if bad.size > 10 else "")
            lines.append(
                f"<span style='{WARNING_STYLE}'>⚠ NaN or Inf at {bad.size} timestep(s): t = {shown}"
                "</span>"
            )
        else:
            lines.append("non-finite steps: none ✓")
        stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
        source = f"{escape(self.source)} · " if self.source else ""
        lines.append(
            f"<span style='color:#666'>{source}exported {stamp} by lstmviz "
            f"{lstmviz.__version__}</span>"
        )
        return lines
