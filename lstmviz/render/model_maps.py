"""The heatmaps of a model trace (see `lstmviz.render.layers` for the keys), each with a colour
bar on the View menu's (log) scale:

- `LayerHeatmap`: LSTM directions × timesteps of the total gradient norm
  (`norm_h_total_by_layer` [L, T]), rows named by `layer_names`;
- `SaliencyHeatmap`: ‖dL/d input_t‖ per sample × timestep (`saliency` [B, T]) under a row of
  their mean, the token id on hover;
- `LayerUnitsHeatmap`: mean |dL/dh_t,j| per unit of the direction chosen in its combo box.

Timesteps masked in every sample are blank; so are a sample's own masked steps in the saliency.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from lstmviz.render.heatmaps import HeatmapPanel
from lstmviz.render.layers import (
    layer_names,
    layer_rows,
    masked_steps,
    saliency_rows,
    token_at,
    units_of_layer,
)
from lstmviz.render.model_curves import LayerChoice
from lstmviz.render.summary import fmt

MAX_ROW_TICKS = 12  # rows labelled one by one up to this many; about 8 labels above


def masked_note(arrays, t: int) -> str:
    """ " (masked in every sample)" when step t is padding everywhere."""
    masked = masked_steps(arrays)
    return " (masked in every sample)" if masked is not None and masked[t] else ""


def direction_label(name: str) -> str:
    """A direction's row label: "bi/forward" -> "bi →", "bi/backward" -> "bi ←" (as the layer
    table writes them): a long name left the heatmap beside it a sliver."""
    for end, arrow in (("/forward", " →"), ("/backward", " ←")):
        if name.endswith(end):
            return name.removesuffix(end) + arrow
    return name


def label_direction_rows(panel: HeatmapPanel, total: int, normalise: bool) -> None:
    """A heatmap with a row per LSTM direction (`panel.names`): its colour bar's label and
    the directions' names on the left axis (when `total` rows are few enough to name)."""
    norm = " / row max" if normalise else ""
    panel.bar.setLabel("right", ("log₁₀ " if panel.log else "") + panel.value_label + norm)
    panel.plot.setLabel("left", "LSTM direction")
    panel.plot.getAxis("left").shorter = {"LSTM direction": ("direction",)}  # a short panel's
    ticks = [(r + 0.5, direction_label(name)) for r, name in enumerate(panel.names[:total])]
    panel.plot.getAxis("left").setTicks([ticks] if total <= MAX_ROW_TICKS else None)


class LayerHeatmap(HeatmapPanel):
    """The total gradient norm by LSTM direction (rows, in model order) and timestep."""

    def __init__(self):
        super().__init__(
            "Total gradient norm: layers × timesteps",
            "‖dL/dh_t‖ (norm over batch and units) of every LSTM direction, top to bottom in\n"
            "model order (the input side first), by input position t: at which depth and\n"
            "how far back the gradient vanishes. Steps masked in every sample are blank.",
            "‖dL/dh_t‖",
        )
        self.names: list[str] = []

    def matrix(self) -> tuple[np.ndarray, str] | None:
        rows = layer_rows(self.arrays)
        self.names = layer_names(self.arrays)
        return None if rows is None else (rows, "layer")

    def _label(self, total: int, units: bool, normalise: bool) -> None:
        label_direction_rows(self, total, normalise)

    def readout_at(self, x: float, y: float) -> str:
        t, r = self.cell_at(x, y)
        if not (0 <= r < self.data.shape[0] and 0 <= t < self.data.shape[1]):
            return ""
        name = self.names[r] if r < len(self.names) else f"layer {r + 1}"
        return f"{name}, t = {t}: {fmt(self.data[r, t])}{masked_note(self.arrays, t)}"


class SaliencyHeatmap(HeatmapPanel):
    """‖dL/d input_t‖ per sample (rows 1…B) under their mean (row "mean")."""

    def __init__(self):
        super().__init__(
            "Input saliency: samples × timesteps",
            "‖dL/d input_t‖: the norm of the gradient at the input of the first LSTM (for token\n"
            "ids, at their embedding vectors), per sample and step; the top row is the mean\n"
            "over the samples. Where it is bright, the loss depends on that input; where the\n"
            "gradient has vanished it is dark. Masked (padding) steps are blank.\n"
            "Hover for the token id.",
            "‖dL/d input_t‖",
        )
        self.separator = pg.InfiniteLine(1, angle=0, pen=pg.mkPen("#fff", width=2))
        self.separator.setZValue(10)
        self.plot.addItem(self.separator)
        self.samples = 0

    def matrix(self) -> tuple[np.ndarray, str] | None:
        rows = saliency_rows(self.arrays)
        self.samples = 0 if rows is None else len(rows) - 1
        return None if rows is None else (rows, "sample")

    def _label(self, total: int, units: bool, normalise: bool) -> None:
        norm = " / row max" if normalise else ""
        self.bar.setLabel("right", ("log₁₀ " if self.log else "") + self.value_label + norm)
        self.plot.setLabel("left", "sample")
        step = 1 if total <= MAX_ROW_TICKS else max(1, int(np.ceil((total - 1) / 8)))
        samples = list(range(step, total, step))
        if total - 1 not in samples and total > 1:
            samples.append(total - 1)
        # "mean" always labelled; the samples while the axis has room for them (pyqtgraph
        # draws a later level's labels only then), every other one first: all of them on one
        # level overlapped in a short panel
        ticks = [(r + 0.5, str(r)) for r in samples]
        self.plot.getAxis("left").setTicks([[(0.5, "mean")], ticks[1::2], ticks[0::2]])

    def readout_at(self, x: float, y: float) -> str:
        t, r = self.cell_at(x, y)
        if not (0 <= r < self.data.shape[0] and 0 <= t < self.data.shape[1]):
            return ""
        value = fmt(self.data[r, t])
        if r == 0:
            return f"mean over samples, t = {t}: {value}{masked_note(self.arrays, t)}"
        token = token_at(self.arrays, t, r - 1)
        token_text = "" if token is None else f", token {token}"
        mask = self.arrays.get("mask")
        masked = mask is not None and not bool(np.asarray(mask)[t, r - 1])
        return f"sample {r}, t = {t}{token_text}: {value}" + (" (masked)" if masked else "")


class LayerUnitsHeatmap(LayerChoice, HeatmapPanel):
    """mean |dL/dh_t,j| over the samples for every unit j of the chosen direction."""

    def __init__(self):
        super().__init__(
            "Per-unit gradient: units × timesteps",
            "|dL/dh_t,j| averaged over the samples whose step t counts, for every unit j of\n"
            "the LSTM direction chosen on the right. Rows that stay dark are units the\n"
            "gradient never reaches (dead or saturated).",
            "mean |dL/dh_t,j|",
        )
        self.add_layer_box()
        self.name = ""

    def matrix(self) -> tuple[np.ndarray, str] | None:
        k, self.name = self.chosen_layer()
        self.title.setText(f"<b>Per-unit gradient of {self.name or '…'}</b>")
        units = units_of_layer(self.arrays, k) if self.name else None
        return None if units is None else (units, "unit")

    def readout_at(self, x: float, y: float) -> str:
        text = super().readout_at(x, y)
        t = self.cell_at(x, y)[0]
        if not text or not 0 <= t < self.data.shape[1]:
            return text
        return f"{self.name}, {text}{masked_note(self.arrays, t)}"

