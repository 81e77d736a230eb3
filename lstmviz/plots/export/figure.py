"""A trace's panels drawn offscreen (`Figure`): which panels, laid out how, and the text of its
header and of the PDF report; each format draws it in its module (`png`, `svg`, `pdf`: the
`image`, `svg` and `pdf` methods). `lstmviz.plots.export.writer` is the entry point.

The panels are the window's own (`lstmviz.plots`), drawn from the trace's arrays alone in
widgets that are never shown on screen; which panels and where is decided as for the window
(`lstmviz.analysis.layout`): the gradient norm on top with the training loss on its right, the
heatmaps side by side below. Sizes are in logical pixels (1/96 inch) scaled by `dpi / 96`, so a
higher DPI gives the same picture with more pixels (text and lines keep their proportions).
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Sequence
from xml.sax.saxutils import escape

import numpy as np
from PySide6.QtCore import QEvent, QPoint, QRectF, Qt
from PySide6.QtGui import QFontMetricsF, QImage
from PySide6.QtWidgets import QApplication

import lstmviz
from lstmviz.analysis.diagnosis import diagnosis_lines
from lstmviz.analysis.layout import PANEL_NAMES, PANEL_WIDTHS, figure_rows, minimum_size, panels_for
from lstmviz.analysis.report.model_report import model_lines, model_table_html
from lstmviz.analysis.report.summary import WARNING_STYLE, fmt, plain, summary_text, trained_on
from lstmviz.analysis.values import pass_length
from lstmviz.core import modes
from lstmviz.core.view import DEFAULT_VIEW, ViewOptions
from lstmviz.io.trace import GradientTrace
from lstmviz.plots.export import pdf, png, svg
from lstmviz.plots.export.app import ensure_app, gui_style
from lstmviz.plots.export.fitting import fit_axis_labels, folded_legend, plain_head
from lstmviz.plots.export.header import (
    HEADER_PX,
    LINE_PX,
    MAX_SUMMARY_LINES,
    PANEL_TITLE_PX,
    SUBTITLE_PX,
    font,
)
from lstmviz.plots.panels.curves import NormHistoryPanel
from lstmviz.plots.panels.heatmaps import RowsHeatmap, UnitsHeatmap
from lstmviz.plots.panels.model_curves import GatesPanel, LayerChoice, LayerNormPanel
from lstmviz.plots.panels.model_maps import LayerHeatmap, LayerUnitsHeatmap, SaliencyHeatmap
from lstmviz.plots.panels.panel import Panel, panel_title
from lstmviz.plots.panels.record_panels import RecordHeatmap, RecordLossPanel, RecordNormPanel
from lstmviz.plots.panels.training import ConnectivityPanel, LossPanel

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
# `Figure.fit` tries up to FIT_ATTEMPTS layouts, each GROWTH times larger than the last while a
# legend is folded away, or an axis label is shortened (this up to MAX_LABEL_GROWTH in all)
FIT_ATTEMPTS, GROWTH, MAX_LABEL_GROWTH = 6, 1.2, 1.5
TOP_ROW_SHARE = 0.56  # of the height below the header, when there are two rows of panels


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
                if panel.has_data():
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
        metrics = QFontMetricsF(font(SUBTITLE_PX))
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
        metrics = QFontMetricsF(font(PANEL_TITLE_PX, bold=True))
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

    # ---- the formats -------------------------------------------------------------------------

    def image(self, width: int, height: int, dpi: float, step=None) -> QImage:
        """The figure as a `width` × `height` px image, DPI recorded in the file (`png.image`).
        `step`: called with the fraction of the plots drawn after each (the SVG's and PDF's
        too)."""
        return png.image(self, width, height, dpi, step)

    def svg(self, width: int, height: int, dpi: float, step=None) -> bytes:
        """The figure as SVG (`svg.svg`): vector curves and text, heatmaps as embedded PNG
        images. Its physical size is `width` × `height` px at `dpi`, as the PNG."""
        return svg.svg(self, width, height, dpi, step)

    def pdf(self, path: str, step=None) -> None:
        """A one-page A4 landscape report (`pdf.write`): title, the panels (vector), the run's
        configuration and summary (`report_html`)."""
        pdf.write(self, path, step)

    # ---- the PDF report's text -----------------------------------------------------------------

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
