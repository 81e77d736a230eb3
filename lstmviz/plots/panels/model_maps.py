"""The heatmaps of a model trace (see `lstmviz.analysis.layers` for the keys), each with a colour
bar on the View menu's (log) scale:

- `LayerHeatmap`: recurrent directions × timesteps of the total gradient norm
  (`norm_h_total_by_layer` [L, T]), rows named by `layer_names`; hand-overs chained on one time
  axis as the norm curves have them (`model_curves.Handovers`), a line at each;
- `SaliencyHeatmap`: ‖dL/d input_t‖ per sample × timestep (`saliency` [B, T]) under a row of
  their mean, the token id on hover; a model of several inputs: a block of rows per input
  (`saliency_{name}`), each with its mean row, separated by a line;
- `LayerUnitsHeatmap`: mean |dL/dh_t,j| per unit of the direction chosen in its combo box.

Timesteps masked in every sample are blank; so are a sample's own masked steps in the saliency.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

from lstmviz.analysis.layers import (
    chain_rows,
    layer_names,
    layer_rows,
    masked_steps,
    row_labels,
    saliency_blocks,
    token_at,
    units_of_layer,
)
from lstmviz.analysis.report.summary import fmt
from lstmviz.plots.panels.heatmaps import HeatmapPanel
from lstmviz.plots.panels.model_curves import Handovers, LayerChoice, chain_axis_label

MAX_ROW_TICKS = 12  # saliency rows labelled one by one up to this many; about 8 labels above
# The directions' row labels take at most this share of the panel's width in their full form
# ("bidirectional_1 →"); beyond it, short forms ("bi_1 →"): the heatmap kept a sliver.
ROW_LABEL_SHARE = 0.25
ROW_LABEL_LINES = 1.0  # line heights between two labelled rows' centres (a box is 0.8 high)


def masked_note(arrays, t: int) -> str:
    """ " (masked in every sample)" when step t is padding everywhere."""
    masked = masked_steps(arrays)
    inside = masked is not None and 0 <= t < len(masked)
    return " (masked in every sample)" if inside and masked[t] else ""


def label_stride(row_px: float, line_px: float) -> int:
    """Label every k-th row of `row_px` pixels so that labels `line_px` high never overlap;
    1 while the size is not known yet (0)."""
    if row_px <= 0 or line_px <= 0:
        return 1
    return max(1, math.ceil(ROW_LABEL_LINES * line_px / row_px - 1e-9))


class DirectionRows:
    """For a `HeatmapPanel` with a row per recurrent direction (`names`, row r spanning r…r+1): its
    colour bar's and left axis's labels, and the directions' names as row labels that fit the
    panel: short forms when the full ones would take more than ROW_LABEL_SHARE of its width,
    and when rows are lower than a line of text, every k-th row named, the others a tick
    without a label (hover names every row)."""

    names: list[str]
    _row_total = 0
    _row_ticks: list | None = None  # the left axis's, as last set

    def watch_rows(self) -> None:
        """Fit the row labels again whenever the view's size or its range changes."""
        view = self.plot.getViewBox()
        view.sigResized.connect(self.fit_row_labels)
        view.sigYRangeChanged.connect(self.fit_row_labels)

    def label_direction_rows(self, total: int, normalise: bool) -> None:
        self.label_bar(normalise)
        self.plot.setLabel("left", "recurrent direction")
        self.plot.getAxis("left").shorter = {"recurrent direction": ("direction",)}  # short panel
        self._row_total = total
        self.fit_row_labels()

    def fit_row_labels(self, *_) -> None:
        axis, view = self.plot.getAxis("left"), self.plot.getViewBox()
        metrics = QFontMetricsF(axis.style["tickFont"] or QFont())
        names = self.names[: self._row_total]
        full = row_labels(names, short=False)
        widest = max((metrics.horizontalAdvance(label) for label in full), default=0.0)
        labels = row_labels(names, short=widest > ROW_LABEL_SHARE * self.plot.width())
        lo, hi = view.viewRange()[1]
        row_px = view.height() / (hi - lo) if hi > lo else 0.0
        stride = label_stride(row_px, metrics.height())
        ticks = [[(r + 0.5, label if r % stride == 0 else "") for r, label in enumerate(labels)]]
        if ticks != self._row_ticks:
            self._row_ticks = ticks
            axis.setTicks(ticks if labels else None)


class LayerHeatmap(Handovers, DirectionRows, HeatmapPanel):
    """The total gradient norm by recurrent direction (rows, in model order) and timestep;
    hand-overs chained (`Handovers`): the rows on the chain time axis."""

    def __init__(self):
        super().__init__(
            "Total gradient norm: layers × timesteps",
            "‖dL/dh_t‖ (norm over batch and units) of every recurrent direction, top to bottom in\n"
            "model order (the input side first), by input position t: at which depth and\n"
            "how far back the gradient vanishes. Steps masked in every sample are blank, so\n"
            "are the steps a shorter direction does not have. An encoder handing its state to\n"
            "a decoder: its steps, the hand-over (dashed line), then the decoder's.",
            "‖dL/dh_t‖",
        )
        self.names: list[str] = []
        self.watch_rows()

    def matrix(self) -> tuple[np.ndarray, str] | None:
        rows = layer_rows(self.arrays)
        self.names = layer_names(self.arrays)
        self.mark_handovers(self.arrays, label=False)
        self.plot.setLabel("bottom", "timestep t" if self.offsets is None
                           else chain_axis_label(self.arrays))  # fmt: skip
        if rows is not None and self.offsets is not None:
            rows = chain_rows(rows, self.arrays)
        return None if rows is None else (rows, "layer")

    def _label(self, total: int, normalise: bool) -> None:
        self.label_direction_rows(total, normalise)

    def readout_at(self, x: float, y: float) -> str:
        t, r = self.cell_at(x, y)
        if not (0 <= r < self.data.shape[0] and 0 <= t < self.data.shape[1]):
            return ""
        name = self.names[r] if r < len(self.names) else f"layer {r + 1}"
        own = self.own_step(r, t, self.arrays)
        if own is None:
            return f"{name}: no step here"
        where = f"step {t} (t = {own})" if self.offsets is not None else f"t = {t}"
        return f"{name}, {where}: {fmt(self.data[r, t])}{masked_note(self.arrays, own)}"


class SaliencyHeatmap(HeatmapPanel):
    """‖dL/d input_t‖ per sample (rows 1…B, labelled 0…B-1: sample b is the data's x[b])
    under their mean (row 0, "mean"); a model of several inputs: such a block per input
    (`blocks`: name, first row, steps), its rows labelled "name mean", samples below."""

    def __init__(self):
        super().__init__(
            "Input saliency: samples × timesteps",
            "‖dL/d input_t‖: the norm of the gradient at the input of the first LSTM (for token\n"
            "ids, at their embedding vectors), per sample (numbered from 0: sample b is x[b])\n"
            "and step; the top row is their mean. Where it is bright, the loss depends on that\n"
            "input; where the gradient has vanished it is dark. Masked (padding) steps are blank.\n"
            "A model of several inputs: a block of rows per input (its name on its mean row),\n"
            "each over its own steps. Hover for the token id.",
            "‖dL/d input_t‖",
        )
        self.separators: list[pg.InfiniteLine] = []
        self.separator = self._line(1, 2)  # under the (first) mean row
        self.samples = 0
        self.blocks: list[tuple[str, int, int]] = []

    def _line(self, y: float, width: float) -> pg.InfiniteLine:
        line = pg.InfiniteLine(y, angle=0, pen=pg.mkPen("#fff", width=width))
        line.setZValue(10)
        self.plot.addItem(line)
        return line

    def matrix(self) -> tuple[np.ndarray, str] | None:
        found = saliency_blocks(self.arrays)
        self.blocks = [] if found is None else found[1]
        for line in self.separators:
            self.plot.removeItem(line)
        # below each block's mean row, and a wider line between blocks
        self.separators = [self._line(first + 1, 2) for _, first, _ in self.blocks[1:]]
        self.separators += [self._line(first, 4) for _, first, _ in self.blocks[1:]]
        self.samples = 0 if found is None else len(found[0]) - len(self.blocks)
        return None if found is None else (found[0], "sample")

    def _block_at(self, r: int) -> tuple[str, int, int] | None:
        """The block (name, first row, steps) that row r is in."""
        inside = [b for b in self.blocks if b[1] <= r]
        return inside[-1] if inside else None

    def _label(self, total: int, normalise: bool) -> None:
        self.label_bar(normalise)
        self.plot.setLabel("left", "sample (from 0)")  # as the units heatmap says
        ends = [first for _, first, _ in self.blocks[1:]] + [total]
        means, levels = [], ([], [])
        for (name, first, _), end in zip(self.blocks, ends, strict=True):
            means.append((first + 0.5, f"{name} mean" if name else "mean"))
            count = end - first - 1  # row first + 1 + b is sample b, numbered as in x[b]
            rows = end - first
            step = 1 if rows <= MAX_ROW_TICKS else max(1, int(np.ceil(count / 8)))
            # every step-th sample; sample 0 only when all are labelled ("mean" is beside it)
            samples = list(range(step if step > 1 else 0, count, step))
            if count and count - 1 not in samples:
                samples.append(count - 1)
            ticks = [(first + b + 1.5, str(b)) for b in samples]
            levels[0].extend(ticks[1::2])
            levels[1].extend(ticks[0::2])
        # "mean" always labelled; the samples while the axis has room for them (pyqtgraph
        # draws a later level's labels only then), every other one first: all of them on one
        # level overlapped in a short panel
        self.plot.getAxis("left").setTicks([means, *levels])

    def readout_at(self, x: float, y: float) -> str:
        t, r = self.cell_at(x, y)
        block = self._block_at(r)
        if block is None or not (r < self.data.shape[0] and 0 <= t < self.data.shape[1]):
            return ""
        name, first, steps = block
        what = f"input {name}, " if name else ""
        if t >= steps:
            return f"{what}no step t = {t}"
        value = fmt(self.data[r, t])
        if r == first:
            return f"{what}mean over samples, t = {t}: {value}" + (
                masked_note(self.arrays, t) if not name else "")  # fmt: skip
        sample = r - first - 1
        token = token_at(self.arrays, t, sample, name)
        token_text = "" if token is None else f", token {token}"
        mask = self.arrays.get("mask")
        masked = (not name and mask is not None and t < np.shape(mask)[0]
                  and not bool(np.asarray(mask)[t, sample]))  # fmt: skip
        masked_text = " (masked)" if masked else ""
        return f"{what}sample {sample}, t = {t}{token_text}: {value}{masked_text}"


class LayerUnitsHeatmap(LayerChoice, HeatmapPanel):
    """mean |dL/dh_t,j| over the samples for every unit j of the chosen direction."""

    def __init__(self):
        super().__init__(
            "Per-unit gradient: units × timesteps",
            "|dL/dh_t,j| averaged over the samples whose step t counts, for every unit j of\n"
            "the direction chosen on the right. Rows that stay dark are units the\n"
            "gradient never reaches (dead or saturated).",
            "mean |dL/dh_t,j|",
        )
        self.add_layer_box()
        self.name = ""

    def matrix(self) -> tuple[np.ndarray, str] | None:
        k, self.name = self.chosen_layer()
        self.title.setText(f"<b>Per-unit gradient of {self.name or '…'}</b>")
        units = units_of_layer(self.arrays, k) if self.name else None
        return None if units is None else (units, "unit")  # [H_k, T_k]: its own steps

    def readout_at(self, x: float, y: float) -> str:
        text = super().readout_at(x, y)
        t = self.cell_at(x, y)[0]
        if not text or not 0 <= t < self.data.shape[1]:
            return text
        return f"{self.name}, {text}{masked_note(self.arrays, t)}"
