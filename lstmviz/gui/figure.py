"""A trace's panels rendered offscreen: PNG and SVG through pyqtgraph's exporters, a one-page PDF
report through QPdfWriter. `lstmviz.export` is the entry point; this module needs Qt.

The panels are the GUI's own classes (`lstmviz.gui.panels`), drawn from the trace's arrays alone
in widgets that are never shown on screen, laid out like the window: the gradient-norm panel on
top, the heatmaps below it. Sizes are in logical pixels (1/96 inch) scaled by `dpi / 96`, so a
higher DPI gives the same picture with more pixels (text and lines keep their proportions).
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import html
import importlib
import math
import os
import re
import sys
from collections.abc import Iterator, Sequence
from xml.sax.saxutils import escape

import numpy as np
import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401  (registers ImageExporter and SVGExporter)
from PySide6.QtCore import (
    QBuffer,
    QEvent,
    QIODevice,
    QMarginsF,
    QPoint,
    QRectF,
    Qt,
    qInstallMessageHandler,
)
from PySide6.QtGui import (
    QColor,
    QFont,
    QImage,
    QPageLayout,
    QPageSize,
    QPainter,
    QPdfWriter,
    QTextDocument,
)
from PySide6.QtWidgets import QApplication

import lstmviz
from lstmviz.gui.panels import (
    NormPanel,
    Panel,
    RowsHeatmap,
    UnitsHeatmap,
    fmt,
    pass_length,
    summary_text,
)
from lstmviz.gui.params import MODE_TEXT
from lstmviz.trace import GradientTrace

LOGICAL_DPI = 96
PANELS: dict[str, type[Panel]] = {"norm": NormPanel, "rows": RowsHeatmap, "units": UnitsHeatmap}
STYLE = {"antialias": True, "background": "w", "foreground": "#222"}  # as the GUI (gui/app.py)
HEADER_PX = 46  # title and summary line above the panels
TITLE_PX, SUBTITLE_PX, PANEL_TITLE_PX = 16, 11, 12
GAP_PX = 8
MIN_SVG_IMAGE_PX = 1024  # heatmaps are upscaled (nearest) so no SVG viewer blurs their cells


def has_display() -> bool:
    if sys.platform != "linux" and not sys.platform.startswith("freebsd"):
        return True  # macOS and Windows always have a window system
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


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
def gui_style() -> Iterator[None]:
    """pyqtgraph's options as the GUI sets them, restored afterwards (the axes read the
    foreground colour when they paint, so rendering happens inside)."""
    saved = {key: pg.getConfigOption(key) for key in STYLE}
    pg.setConfigOptions(**STYLE)
    try:
        yield
    finally:
        pg.setConfigOptions(**saved)


def plot_arrays(arrays) -> dict[str, np.ndarray]:
    """The arrays as the panels expect them. A finished per-batch trace keeps its norms as
    [N, T] under the plain keys (live updates use `norm_h_total_by_batch`): draw them as one
    curve per batch."""
    a = dict(arrays)
    if np.ndim(a.get("norm_h_total")) == 2:
        a.setdefault("norm_h_total_by_batch", a["norm_h_total"])
        for key in ("norm_h_total", "norm_h_direct", "norm_c_total"):
            if np.ndim(a.get(key)) == 2:
                del a[key]
    return a


def panel_title(panel: Panel) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", panel.title.text()))


def plain(text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", text))


def _font(px: float, bold: bool = False) -> QFont:
    font = QFont()
    font.setPixelSize(max(1, round(px)))
    font.setBold(bold)
    return font


def _svg_module():
    # `pyqtgraph.exporters.SVGExporter` is the class; the module holds the helper to patch.
    return importlib.import_module("pyqtgraph.exporters.SVGExporter")


@contextlib.contextmanager
def _svg_closed_path_fix() -> Iterator[None]:
    """pyqtgraph 0.14's SVG exporter cannot parse the closing "Z" that Qt 6.12 writes at the end
    of a path (pyqtgraph issue #3495; the ViewBox's clip rectangle has one): hide it from the
    parser and put it back."""
    module = _svg_module()
    original = module.correctCoordinates

    def correct(node, defs, item, options):
        closed = [p for p in node.getElementsByTagName("path") if "Z" in p.getAttribute("d")]
        for path in closed:
            d = re.sub(r"(^|\s)Z(?=\s|$)", r"\1Z0,0", path.getAttribute("d").strip())
            path.setAttribute("d", d)
        original(node, defs, item, options)
        for path in closed:
            path.setAttribute("d", re.sub(r"Z[^\sA-Za-z]*", "Z", path.getAttribute("d")))

    module.correctCoordinates = correct
    try:
        yield
    finally:
        module.correctCoordinates = original


def _upscale_png(match: re.Match) -> str:
    data = base64.b64decode(match.group(1))
    image = QImage.fromData(data, "PNG")
    side = max(image.width(), image.height())
    if image.isNull() or side >= MIN_SVG_IMAGE_PX:
        return match.group(0)
    k = math.ceil(MIN_SVG_IMAGE_PX / side)
    while k > 1 and image.width() * image.height() * k * k > 4_000_000:
        k -= 1
    if k <= 1:
        return match.group(0)
    big = image.scaled(
        image.width() * k, image.height() * k, Qt.IgnoreAspectRatio, Qt.FastTransformation
    )
    buffer = QBuffer()
    buffer.open(QIODevice.WriteOnly)
    big.save(buffer, "PNG")
    encoded = base64.b64encode(bytes(buffer.data())).decode("ascii")
    return f'xlink:href="data:image/png;base64,{encoded}"'


class Figure:
    """The panels of one trace, drawn offscreen. Use as a context manager (it deletes the
    widgets on exit) or call `close()`."""

    def __init__(
        self,
        trace: GradientTrace,
        panels: Sequence[str | type[Panel]] | None = None,
        log: bool = True,
        normalise: bool = False,
        source: str | None = None,
    ):
        self.app = ensure_app()
        self.trace = trace
        self.source = source
        self.arrays = plot_arrays(trace.arrays)
        self.panels: list[Panel] = []
        with gui_style():
            for entry in panels or list(PANELS):
                cls = PANELS[entry] if isinstance(entry, str) else entry
                panel = cls()
                panel.setAttribute(Qt.WA_DontShowOnScreen)
                panel.set_options(log, normalise)
                panel.draw(self.arrays, trace.config)
                if panel.drawn():
                    self.panels.append(panel)
                else:
                    panel.deleteLater()
        if not self.panels:
            self.close()
            raise ValueError("nothing to plot: the trace has no gradient norms")
        self.cells: list[tuple[Panel, QRectF]] = []  # panel, plot rectangle (logical px)
        self.titles: list[tuple[str, QRectF]] = []

    def __enter__(self) -> Figure:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for panel in self.panels:
            panel.close()
            panel.deleteLater()
        self.panels = []
        QApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)

    # ---- text --------------------------------------------------------------------------------

    def title(self) -> str:
        mode = MODE_TEXT.get(self.trace.mode, self.trace.mode)
        name = f" · {os.path.basename(self.source)}" if self.source else ""
        return f"lstmviz · {mode}{name}"

    def summary_html(self) -> str:
        text = summary_text(
            MODE_TEXT.get(self.trace.mode, self.trace.mode), self.trace.arrays, self.trace.config, 0
        )
        return re.sub(r" · [0-9.]+ s(?= · )", "", text)  # a saved trace has no run time

    # ---- layout ------------------------------------------------------------------------------

    def layout(self, width: float, height: float, top: float = HEADER_PX) -> None:
        """Size the panels for a figure of `width` × `height` logical px with the panels from
        `top` down: the first panel across the full width, the others side by side below."""
        width, height = int(round(width)), int(round(height))
        first, rest = self.panels[0], self.panels[1:]
        area = height - top
        top_h = area if not rest else int(area * 0.56)
        boxes = [(first, QRectF(0, top, width, top_h))]
        if rest:
            w = width / len(rest)
            boxes += [
                (p, QRectF(round(i * w), top + top_h, round((i + 1) * w) - round(i * w),
                           area - top_h))
                for i, p in enumerate(rest)
            ]  # fmt: skip
        for panel, box in boxes:
            panel.resize(int(box.width()), int(box.height()))
            panel.show()
        self.app.processEvents()
        for panel, _ in boxes:  # a first paint sizes the axes to their tick labels
            panel.grab()
        for _ in range(2):  # the layouts that follow, then the view boxes' ranges
            self.app.processEvents()
        self.cells, self.titles = [], []
        for panel, box in boxes:
            view = panel.plot.getPlotItem().getViewBox()
            view.enableAutoRange()
            view.updateAutoRange()
            offset = panel.plot.mapTo(panel, QPoint(0, 0))
            plot = QRectF(
                box.x() + offset.x(), box.y() + offset.y(), panel.plot.width(), panel.plot.height()
            )
            self.cells.append((panel, plot))
            self.titles.append(
                (panel_title(panel), QRectF(box.x() + 6, box.y(), box.width() - 12, offset.y()))
            )
        self.app.processEvents()

    def _paint_text(self, painter: QPainter, width: float) -> None:
        painter.setPen(QColor("#111"))
        painter.setFont(_font(TITLE_PX, bold=True))
        painter.drawText(QRectF(6, 2, width - 12, 22), Qt.AlignLeft | Qt.AlignVCenter, self.title())
        painter.setPen(QColor("#444"))
        painter.setFont(_font(SUBTITLE_PX))
        painter.drawText(
            QRectF(6, 24, width - 12, 18),
            Qt.AlignLeft | Qt.AlignVCenter,
            plain(self.summary_html()),
        )
        painter.setPen(QColor("#111"))
        painter.setFont(_font(PANEL_TITLE_PX, bold=True))
        for text, box in self.titles:
            painter.drawText(box, Qt.AlignLeft | Qt.AlignVCenter, text)

    # ---- PNG ---------------------------------------------------------------------------------

    def image(self, width: int, height: int, dpi: float) -> QImage:
        """The figure as a `width` × `height` px image, DPI recorded in the file."""
        scale = dpi / LOGICAL_DPI
        self.layout(width / scale, height / scale)
        image = QImage(width, height, QImage.Format_ARGB32)
        image.fill(QColor("white"))
        dots_per_metre = round(dpi / 0.0254)
        image.setDotsPerMeterX(dots_per_metre)
        image.setDotsPerMeterY(dots_per_metre)
        with gui_style():
            plots = []
            for panel, box in self.cells:
                exporter = pg.exporters.ImageExporter(panel.plot.getPlotItem())
                exporter.parameters()["width"] = max(1, round(box.width() * scale))
                plots.append((exporter.export(toBytes=True), box))
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

    def svg(self, width: int, height: int, dpi: float) -> bytes:
        """The figure as SVG: vector curves and text, heatmaps as embedded PNG images. Its
        physical size is `width` × `height` px at `dpi`, as the PNG."""
        scale = dpi / LOGICAL_DPI
        w, h = round(width / scale), round(height / scale)
        self.layout(w, h)
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
        parts.append(
            f'<text x="6" y="18" {font} font-size="{TITLE_PX}" font-weight="bold" '
            f'fill="#111111">{escape(self.title())}</text>\n'
            f'<text x="6" y="37" {font} font-size="{SUBTITLE_PX}" fill="#444444">'
            f"{escape(plain(self.summary_html()))}</text>\n"
        )
        for text, box in self.titles:
            y = box.y() + box.height() / 2 + PANEL_TITLE_PX * 0.35
            parts.append(
                f'<text x="{box.x():.1f}" y="{y:.1f}" {font} font-size="{PANEL_TITLE_PX}" '
                f'font-weight="bold" fill="#111111">{escape(text)}</text>\n'
            )
        with gui_style(), _svg_closed_path_fix():
            for index, (panel, box) in enumerate(self.cells, start=1):
                exporter = pg.exporters.SVGExporter(panel.plot.getPlotItem())
                inner = exporter.export(toBytes=True).decode("utf-8")
                parts.append(self._nested(inner, f"panel{index}_", box))
        parts.append("</svg>\n")
        return "".join(parts).encode("utf-8")

    @staticmethod
    def _nested(inner: str, prefix: str, box: QRectF) -> str:
        """pyqtgraph's SVG document of one plot as a group at `box`, clipped to it, its ids
        made unique and its images upscaled. (A group, not a nested <svg>, which SVG Tiny
        viewers such as Qt's skip.)"""
        w, h = f"{box.width():.0f}", f"{box.height():.0f}"
        inner = re.sub(r"<\?xml[^>]*\?>\s*", "", inner)
        inner = re.sub(r"<title>.*?</title>\s*|<desc>.*?</desc>\s*", "", inner, flags=re.S)
        inner = re.sub(r"<style>.*?</style>\s*", "", inner, flags=re.S)
        inner = re.sub(r'(\bid="|url\(#|href="#)', rf"\1{prefix}", inner)
        inner = re.sub(r'xlink:href="data:image/png;base64,([^"]+)"', _upscale_png, inner)
        inner = inner.replace('<rect width="100%" height="100%"', f'<rect width="{w}" height="{h}"')
        head = (
            f'<defs><clipPath id="{prefix}box"><rect width="{w}" height="{h}"/></clipPath></defs>'
            f'<g id="{prefix}plot" transform="translate({box.x():.0f},{box.y():.0f})" '
            f'clip-path="url(#{prefix}box)">'
        )
        inner = re.sub(r"<svg\b[^>]*>", lambda _: head, inner, count=1)
        return re.sub(r"</svg>\s*$", "</g>\n", inner)

    # ---- PDF ---------------------------------------------------------------------------------

    def pdf(self, path: str) -> None:
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
        self.layout(w, h - text_h - GAP_PX)
        painter = QPainter()
        if not painter.begin(writer):
            raise OSError(f"{path}: cannot start a PDF there")
        try:
            painter.setRenderHints(QPainter.Antialiasing | QPainter.TextAntialiasing)
            painter.scale(scale, scale)
            with gui_style():
                for panel, box in self.cells:
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
            self._paint_text(painter, w)
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
        skip = {
            "passes": config.mode != "multipass",
            "batches": config.mode != "batchwise",
            "generator": config.mode != "batchwise",
            "task": config.mode != "train",
            "train_steps": config.mode != "train",
        }
        items = [
            (k, v)
            for k, v in vars(config).items()
            if v is not None and not skip.get(k) and not (isinstance(v, bool) and not v)
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
            f"<table cellspacing='0'>{rows}</table></td>"
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
                f" at step {len(losses)} ({config.task} task)"
            )
        norm = a.get("norm_h_total")
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
        if "max_abs_diff_full_vs_reference" in a:
            lines.append(
                "full multi-pass gradient vs one pass over the joined sequence: max |Δ| "
                f"{float(a['max_abs_diff_full_vs_reference']):.1e}"
            )
        bad = np.ravel(a.get("nonfinite_steps", np.zeros(0)))
        if bad.size:
            shown = ", ".join(str(int(t)) for t in bad[:10]) + (" …" if bad.size > 10 else "")
            lines.append(
                f"<span style='color:#c00'>⚠ NaN or Inf at {bad.size} timestep(s): t = {shown}"
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
