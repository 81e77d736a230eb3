"""Two runs compared, drawn offscreen (and in the window's comparison view): each direction's
‖dL/dh_t‖ with A solid and B dashed in the direction's colour, and the log-ratio heatmap
log10(‖B‖/‖A‖), directions × timesteps, on a diverging colour map centred on 0 (CET-D1: blue
where B is smaller, red where it is larger, white where they are equal; grey where the ratio
is not defined). PNG, SVG and PDF through the offscreen figure (`lstmviz.plots.export.figure`).
`comparison` is always an `lstmviz.analysis.compare.Comparison` (not imported here: its
`plot()` imports this module).
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt

from lstmviz.core.view import DEFAULT_VIEW, ViewOptions
from lstmviz.io.atomic import atomic_path
from lstmviz.plots.export.app import ensure_app, gui_style
from lstmviz.plots.export.figure import Figure
from lstmviz.plots.export.header import HEADER_PX
from lstmviz.plots.panels.panel import Panel
from lstmviz.plots.style import PALETTE

DIVERGING = "CET-D1"
NO_VALUE = (217, 217, 217, 255)  # a ratio that is not defined (a norm 0 or not finite)
CURVES_SHARE = 0.55  # of the panels' height: the curves on top, the heatmap below


class CompareCurvesPanel(Panel):
    """‖dL/dh_t‖ of every direction in both runs over t: A solid, B dashed."""

    def __init__(self, comparison):
        super().__init__("‖dL/dh_t‖: A solid, B dashed",
                         "each direction's total gradient norm in run A (solid) and run B "
                         "(dashed), aligned at the last step")  # fmt: skip
        self.comparison = comparison
        self.legend = self.plot.addLegend(offset=(-10, 10))
        self.plot.setLabel("bottom", "t (aligned at the last step)")
        self.plot.setLabel("left", "‖dL/dh_t‖")

    def redraw(self) -> None:
        item = self.plot.getPlotItem()
        item.clear()
        item.setLogMode(y=self.log)
        t = np.arange(self.comparison.T)
        a_name, b_name = self.comparison.names
        for n, layer in enumerate(self.comparison.layers):
            colour = PALETTE[n % len(PALETTE)]
            for values, style, run in ((layer.a_h, Qt.SolidLine, a_name),
                                       (layer.b_h, Qt.DashLine, b_name)):  # fmt: skip
                shown = np.where(np.isfinite(values) & (values > 0), values, np.nan) if self.log \
                    else values  # fmt: skip
                self.plot.plot(t, shown, pen=pg.mkPen(colour, width=2, style=style),
                               name=f"{layer.name} · {run}", connect="finite")  # fmt: skip

    def has_data(self) -> bool:
        return bool(self.comparison.layers)

    def readout_at(self, x: float, y: float) -> str:
        t = int(round(x))
        if not self.comparison.layers or not 0 <= t < self.comparison.T:
            return ""
        layer = self.comparison.layers[0]
        return f"t={t}  A {layer.a_h[t]:.3g}  B {layer.b_h[t]:.3g}"


class RatioHeatmapPanel(Panel):
    """log10(‖B‖/‖A‖) of dL/dh_t, a row per direction, on a diverging map centred on 0."""

    def __init__(self, comparison):
        super().__init__("log₁₀(‖B‖/‖A‖) of dL/dh_t",
                         "rows: directions; columns: timesteps; red where B's gradient is "
                         "larger, blue where it is smaller, grey where not defined")  # fmt: skip
        self.comparison = comparison
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.plot.setLabel("bottom", "t (aligned at the last step)")
        names = [layer.name for layer in comparison.layers]
        self.plot.getAxis("left").setTicks([[(k + 0.5, n) for k, n in enumerate(names)]])
        self.plot.getPlotItem().invertY(True)
        self.bar = pg.ColorBarItem(colorMap=pg.colormap.get(DIVERGING), interactive=False,
                                   width=14, label="log₁₀ B/A")  # fmt: skip
        self.plot.getPlotItem().layout.addItem(self.bar, 2, 5)

    def levels(self) -> float:
        """Half the colour range: the largest |log-ratio| (at least 0.1: equal runs stay white)."""
        matrix = self.comparison.ratio_matrix()
        finite = np.abs(matrix[np.isfinite(matrix)])
        return max(float(finite.max()) if finite.size else 0.0, 0.1)

    def redraw(self) -> None:
        matrix = self.comparison.ratio_matrix()
        half = self.levels()
        table = pg.colormap.get(DIVERGING).getLookupTable(nPts=256, alpha=True).astype(np.uint8)
        index = np.clip(((np.nan_to_num(matrix) + half) / (2 * half) * 255).round(), 0, 255)
        rgba = table[index.astype(np.int64)]
        rgba[~np.isfinite(matrix)] = NO_VALUE
        self.image.setImage(rgba, autoLevels=False)
        self.image.setRect(QRectF(0, 0, matrix.shape[1], matrix.shape[0]))
        self.bar.setLevels((-half, half))

    def has_data(self) -> bool:
        return bool(self.comparison.layers)

    def readout_at(self, x: float, y: float) -> str:
        t, row = int(x), int(y)
        matrix = self.comparison.ratio_matrix()
        if not (0 <= row < matrix.shape[0] and 0 <= t < matrix.shape[1]):
            return ""
        return f"{self.comparison.layers[row].name} t={t}: {matrix[row, t]:+.3g}"


class CompareFigure(Figure):
    """The comparison's two panels with a header (the changes per direction) and, in the
    PDF, both diagnoses and the configuration fields that differ."""

    def __init__(self, comparison, view: ViewOptions = DEFAULT_VIEW):
        """`view.log`: the curves on log axes (the ratio heatmap is a log ratio already)."""
        self.app = ensure_app()
        self.comparison = comparison
        self.source = None
        self.named = []
        with gui_style():
            for name, kind in (("compare_curves", CompareCurvesPanel),
                               ("compare_ratio", RatioHeatmapPanel)):  # fmt: skip
                panel = kind(comparison)
                panel.setAttribute(Qt.WA_DontShowOnScreen)
                panel.set_options(view.log, view.normalise)
                panel.draw({}, None)
                self.named.append((name, panel))
        if not comparison.layers:
            self.close()
            raise ValueError("nothing to plot: the runs have no direction in common")
        self.cells, self.titles, self.lines = [], [], []
        self.full_labels, self.shortened = {}, 0

    def title(self) -> str:
        a, b = self.comparison.names
        return f"lstmviz · compare {a} (A) with {b} (B)"

    def summary_html(self) -> str:
        parts = [html.escape(layer.changes()) for layer in self.comparison.layers]
        return " · ".join(parts + [html.escape(n) for n in self.comparison.notes])

    def boxes(self, width: float, height: float, top: float = HEADER_PX) -> list[tuple]:
        area = int(height - top)
        first = int(area * CURVES_SHARE)
        (_, curves), (_, ratio) = self.named
        return [(curves, QRectF(0, top, int(width), first)),
                (ratio, QRectF(0, top + first, int(width), area - first))]  # fmt: skip

    def fit(self, width: float, height: float) -> float:
        self.layout(width, height)
        return 1.0

    def report_html(self) -> str:
        c = self.comparison
        rows = "".join(
            f"<tr><td><b>{html.escape(layer.name)}</b></td><td>A: {html.escape(layer.a.verdict)}"
            f"<br>B: {html.escape(layer.b.verdict)}</td></tr>" for layer in c.layers)  # fmt: skip
        diff = "".join(f"<li><tt>{html.escape(k)}</tt>: {html.escape(repr(a))} → "
                       f"{html.escape(repr(b))}</li>"
                       for k, (a, b) in c.config_diff.items())  # fmt: skip
        only = [f"only in {w}: {', '.join(n)}" for w, n in (("A", c.only_in_a), ("B", c.only_in_b))
                if n]  # fmt: skip
        notes = "".join(f"<li>{html.escape(line)}</li>" for line in [*c.notes, *only])
        return (f"<b>Diagnoses</b><table cellspacing='4'>{rows}</table>"
                f"<b>Configuration fields that differ</b><ul>{diff or '<li>none</li>'}</ul>"
                f"<ul>{notes}</ul>")  # fmt: skip


def write_comparison(comparison, path: str | Path, width: int = 1200,
                     height: int = 800, dpi: float = 96) -> Path:  # fmt: skip
    """Write the comparison's figure to `path` (.png, .svg or .pdf) atomically."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    with CompareFigure(comparison) as figure, atomic_path(path, suffix=path.suffix) as tmp:
        if fmt == "png":
            figure.image(width, height, dpi).save(str(tmp), "PNG")
        elif fmt == "svg":
            tmp.write_bytes(figure.svg(width, height, dpi))
        elif fmt == "pdf":
            figure.pdf(str(tmp))
        else:
            raise ValueError(f"{path}: a comparison is written as .png, .svg or .pdf")
    return path


def compare_plot(comparison, width: int, height: int, dpi: float):
    """The comparison as a notebook figure (`lstmviz.notebook.Figure`: PNG, shown inline)."""
    import tempfile

    from lstmviz.notebook import Figure as NotebookFigure

    with tempfile.TemporaryDirectory(prefix="lstmviz-compare-") as folder:
        path = write_comparison(comparison, Path(folder) / "compare.png", width, height, dpi)
        return NotebookFigure(path.read_bytes())
