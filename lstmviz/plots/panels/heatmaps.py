"""Heatmaps of rows × timesteps with a colour bar: `HeatmapPanel` (pre-coloured RGBA images,
filled row by row in live runs), `RowsHeatmap` (the total gradient norm per pass, batch,
training step or batch sample) and `UnitsHeatmap` (mean |dL/dh_t,j| per hidden unit)."""

from __future__ import annotations

import re

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF

from lstmviz.analysis.report.summary import fmt
from lstmviz.analysis.values import (
    display_values,
    finite_range,
    rows_matrix,
    rows_shown,
    units_matrix,
)
from lstmviz.plots.axis import OpaqueLineAxis
from lstmviz.plots.panels.panel import SPARES, Panel
from lstmviz.plots.style import COLOR_MAP, colour, finished_image, levels_of

# A pre-coloured image is handed to Qt without a copy up to this many rows and columns; a
# zero-copy RGBA QImage 32768 or more pixels tall (a training run of 100 000 steps) or wide (a
# sequence of 40 000 steps) crashes Qt's painter (segmentation fault), so a bigger one goes
# through pyqtgraph's conversion (a copy per update), which paints at 1 × 10 000 000.
ZERO_COPY_SIZE = 16384


def set_rgba(image: pg.ImageItem, rgba: np.ndarray) -> None:
    """Show a pre-coloured RGBA image [rows, columns, 4] (no levels, no lookup table)."""
    if max(rgba.shape[:2]) <= ZERO_COPY_SIZE:
        image.setImage(rgba, autoLevels=False)
    else:
        image.setImage(rgba, autoLevels=False, levels=(0, 255))  # identity: a converted copy


def colour_bar() -> pg.ColorBarItem:
    """A colour bar whose axis is an `OpaqueLineAxis`: its label, longer than a short panel's
    bar, shows a shorter form (`bar_label_forms`) instead of being cut at both ends."""
    bar = pg.ColorBarItem(colorMap=COLOR_MAP, values=(0.0, 1.0), interactive=False, width=14)
    axis = OpaqueLineAxis("right")
    bar.setAxisItems({"right": axis})  # as ColorBarItem sets up its own:
    axis.setStyle(showValues=True)
    axis.unlinkFromView()
    axis.setRange(*bar.values)
    bar.axis = axis
    return bar


def bar_label_forms(value_label: str) -> dict[str, tuple[str, ...]]:
    """`OpaqueLineAxis.shorter` for a colour bar showing `value_label` ("mean |dL/dh_t,j|"):
    each label the panels give it ("log₁₀ " before it on a log scale, " / row max" after it
    when normalised) → its shorter forms, longest first: without " / row max", then the value
    without "mean ", then without its subscripts ("log₁₀ |dL/dh|"; "‖dL/dx‖" for the input)."""
    bare = value_label.removeprefix("mean ")
    plain = re.sub(r"_[^‖|/ ]+", "", bare)
    values = dict.fromkeys(v for v in (bare, plain, plain.replace("d input", "dx"))
                           if v != value_label)  # fmt: skip
    forms = {}
    for prefix in ("log₁₀ ", ""):
        for norm in ("", " / row max"):
            shorter = [prefix + value_label] if norm else []
            forms[prefix + value_label + norm] = (*shorter, *(prefix + v for v in values))
    return forms


# Under the image: a cell with no value (masked or padded steps, rows not computed yet, zero
# or NaN on a log scale) shows this grey, apart from the white around the plot.
NO_VALUE = "#d9d9d9"


class HeatmapPanel(Panel):
    """An image of rows × timesteps with a colour bar; cells without a value (rows not computed
    yet, masked steps, zeros on a log scale) are grey (NO_VALUE)."""

    PARTS = (*Panel.PARTS, colour_bar)
    # Where column 0 and row 0 begin: a timestep's column is centred on its t, where the
    # curves put its point (and the axis's tick t at its centre); rows span r…r+1 unless
    # `_label` centres them on their numbers (units and samples from 0, passes or steps from 1).
    x0 = -0.5
    y0 = 0.0

    def __init__(self, title: str, tip: str, value_label: str):
        super().__init__(title, tip)
        self.value_label = value_label
        self.plot.setLabel("bottom", "timestep t")
        self.plot.invertY(True)
        # The image is pre-coloured RGBA (`colour`): the colour bar only shows the map and
        # the levels, it is not linked to the image (which would colour it on every update).
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.plot.getPlotItem().getViewBox().setBackgroundColor(NO_VALUE)
        self.bar = SPARES.take(colour_bar)
        self.bar.setImageItem([], insert_in=self.plot.getPlotItem())
        self.bar.axis.shorter = bar_label_forms(value_label)
        self.bar.axis.setWidth(None)  # fit the tick labels (pyqtgraph fixes 45 px: overlaps)
        self.bar.axis.enableAutoSIPrefix(False)  # 0.002, not 2 and "(x0.001)" in the label
        self.data = np.zeros((0, 0))
        self.row_name = "row"
        self._key: tuple | None = None  # what the image buffer was built for
        self._filled = 0  # rows of the buffer filled so far
        self._last_row: np.ndarray | None = None
        self.shown = np.zeros((0, 0), np.float32)  # display values (log etc.), NaN blank
        self.rgba = np.zeros((0, 0, 4), np.uint8)  # `_shown` coloured at `levels`: on screen
        self.levels: tuple[float, float] | None = None
        self._range = (np.inf, -np.inf)  # finite min/max of the displayed values

    def matrix(self) -> tuple[np.ndarray, str] | None:
        raise NotImplementedError

    def source(self) -> tuple[np.ndarray, str] | None:
        """The matrix as it is stored (no float64 copy); `matrix()` unless a panel can do
        better. Live updates only convert and colour the rows that are new."""
        return self.matrix()

    def redraw(self) -> None:
        found = self.source()
        if found is None:
            if self.data.size or self._key is not None:
                self.data = np.zeros((0, 0))
                self.image.clear()
                self._key = None
            return
        raw, name = found
        raw = np.atleast_2d(raw) if np.ndim(raw) < 2 else raw
        rows, width = raw.shape
        units = name == "unit"
        live_total = self.rows_total if self.rows_total and not units else 0
        total = max(live_total, rows)
        normalise = self.normalise and not units
        key = (name, width, total, self.log, normalise, id(self.config), self.rows_total is None)
        if self.rows_total is None:  # a finished trace: its whole image, likely made already
            self._key, self._filled, self.row_name = key, rows, name
            self._label(total, normalise)
            self.data = raw
            self.shown, self._range, levels, self.rgba = finished_image(raw, self.log, normalise)
            if levels != self.levels:
                self.levels = levels
                self.bar.setLevels(levels)
            set_rgba(self.image, self.rgba)
            self.image.setRect(self.cells_rect(width, total))
            return
        # A live run appends rows: convert, log and colour only the new ones (the buffer is
        # sized for every row the run will reach, rows not computed yet stay blank: NaN).
        # Anything else (other options, a new run) starts over.
        incremental = (
            key == self._key
            and self._filled <= rows
            and (self._filled == 0 or np.array_equal(raw[self._filled - 1], self._last_row))
        )
        if not incremental:
            self._key, self._filled = key, 0
            self.row_name = name
            self.data = np.full((total, width), np.nan)
            self.shown = np.full((total, width), np.nan, np.float32)
            self.rgba = np.zeros((total, width, 4), np.uint8)  # transparent
            self._range = (np.inf, -np.inf)
            self.levels = None
            self._label(total, normalise)
        new = slice(self._filled, rows)
        block = np.asarray(raw[new], np.float64)
        self.data[new] = block
        shown = display_values(block, self.log, normalise, np.float32)
        self.shown[new] = shown
        (lo, hi), (new_lo, new_hi) = self._range, finite_range(shown)
        self._range = (min(lo, new_lo), max(hi, new_hi))
        self._filled = rows
        self._last_row = np.array(raw[rows - 1]) if rows else None
        levels = levels_of(*self._range)
        if levels != self.levels:  # every row's colour moves: re-colour the rows so far
            self.levels = levels
            colour(self.shown[:rows], levels, out=self.rgba[:rows])
            self.bar.setLevels(levels)
        else:
            colour(self.shown[new], levels, out=self.rgba[new])
        set_rgba(self.image, self.rgba)
        if not incremental:
            self.image.setRect(self.cells_rect(width, total))

    def show_image(self, shown: np.ndarray, levels: tuple[float, float]) -> None:
        """Show display values `shown` (a whole matrix, NaN blank) coloured at `levels`."""
        self.shown, self.levels = np.asarray(shown, np.float32), levels
        self.rgba = colour(self.shown, levels)
        set_rgba(self.image, self.rgba)
        self.image.setRect(self.cells_rect(shown.shape[1], shown.shape[0]))
        self.bar.setLevels(levels)

    def label_bar(self, normalise: bool) -> None:
        """The colour bar's label: the value, "log₁₀ " before it on a log scale, " / row max"
        after it when normalised (the forms `bar_label_forms` shortens)."""
        norm = " / row max" if normalise else ""
        self.bar.setLabel("right", ("log₁₀ " if self.log else "") + self.value_label + norm)

    def _label(self, total: int, normalise: bool) -> None:
        self.label_bar(normalise)
        first = self.first_row
        self.plot.setLabel("left", self.row_name + (" (from 0)" if first == 0 else ""))
        self.y0 = first - 0.5  # row r centred on its number, r or r + 1
        self.plot.getAxis("left").counts = True  # rows are numbered: no ticks between
        self.plot.getAxis("left").span = (first, first + total - 1)  # nor beyond the rows
        # Up to 20 rows every row labelled (rows first, 5, 10, … as major ticks, the others
        # minor: pyqtgraph draws the minor labels only while the axis has room for them), more
        # the axis's own ticks.
        ticks = None
        if total <= 20:
            numbers = range(first, total + first)
            major = {r for r in numbers if r == first or r % 5 == 0 or total <= 5}
            ticks = [[(r, str(r)) for r in numbers if (r in major) is level]
                     for level in (True, False)]  # fmt: skip
        self.plot.getAxis("left").setTicks(ticks)

    @property
    def first_row(self) -> int:
        """The number of the first row: units and batch samples from 0 (unit j, sample b of
        x[b]), passes, batches and training steps from 1."""
        return 0 if self.row_name in ("unit", "batch sample") else 1

    def cells_rect(self, columns: int, rows: int) -> QRectF:
        """Where an image of `rows` × `columns` cells goes in the plot's coordinates."""
        return QRectF(self.x0, self.y0, columns, rows)

    def cell_at(self, x: float, y: float) -> tuple[int, int]:
        """(column, row) of the cell under the plot coordinates (x, y); either may be out of
        the image."""
        return int(np.floor(x - self.x0)), int(np.floor(y - self.y0))

    def has_data(self) -> bool:
        return self.data.size > 0

    def readout_at(self, x: float, y: float) -> str:
        t, r = self.cell_at(x, y)
        if not (0 <= r < self.data.shape[0] and 0 <= t < self.data.shape[1]):
            return ""
        return f"{self.row_name} {r + self.first_row}, t = {t}: " + fmt(
            self.data[r, t]
        )


class RowsHeatmap(HeatmapPanel):
    def __init__(self):
        super().__init__(
            "Total gradient norm: rows × timesteps",
            "‖dL/dh_t‖ for each pass (multi-pass), batch (per-batch weights) or training step;\n"
            "in a taped run each row is one sequence of the batch (norm over units).\n"
            "Rows fill in while the run goes.",
            "‖dL/dh_t‖",
        )

    def matrix(self) -> tuple[np.ndarray, str] | None:
        return rows_matrix(self.arrays)

    def source(self) -> tuple[np.ndarray, str] | None:
        return rows_shown(self.arrays)


class UnitsHeatmap(HeatmapPanel):
    def __init__(self):
        super().__init__(
            "Per-unit gradient: units × timesteps",
            "|dL/dh_t,j| averaged over the batch, for every hidden unit j.\n"
            "Rows that stay dark are units the gradient never reaches (dead or saturated).",
            "mean |dL/dh_t,j|",
        )

    def matrix(self) -> tuple[np.ndarray, str] | None:
        units = units_matrix(self.arrays)
        return None if units is None else (units, "unit")
