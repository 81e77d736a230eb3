"""Which panels show a trace, and where: one decision for the window and the exported figure.

No Qt here (`lstmviz.plots.export.writer` checks panel names with it before any rendering).
"""

from __future__ import annotations

from lstmviz.analysis.layers import anchor_count, is_model
from lstmviz.analysis.values import Arrays
from lstmviz.core import modes
from lstmviz.core.config import RunConfig

# The panels of one-LSTM traces, then those of model traces (`analysis.layers`), then those of a
# recording of a training run (`analysis.records`).
LOGICAL_DPI = 96  # a figure's sizes are laid out at 96 dpi and scaled by dpi / 96
LSTM_PANELS = ("norm", "loss", "rows", "units", "connectivity")
MODEL_PANELS = ("layers", "gates", "layer_map", "saliency", "layer_units")
RECORDING_PANELS = ("record_norms", "record_loss", "record_map")
PANEL_NAMES = LSTM_PANELS + MODEL_PANELS + RECORDING_PANELS
# The arrangement, top row first: the gradient norm with the training loss on its right, then
# the heatmaps side by side. A model trace: the norm by layer with the gates on its right, then
# its three heatmaps. A row shows only the panels `panels_for` names.
PANEL_ROWS = (
    ("norm", "loss", "layers", "gates"),
    ("rows", "units", "connectivity", "layer_map", "saliency", "layer_units"),
)
# A recording's panels in one row above the model panels of its last record (in the window,
# and in a figure of both); a figure of the recording's panels alone has two rows: the curves
# with the loss on their right, the heatmap below them, as wide as the figure.
RECORDING_ROW = RECORDING_PANELS
WINDOW_ROWS = (RECORDING_ROW, *PANEL_ROWS)
RECORDING_ROWS = (("record_norms", "record_loss"), ("record_map",))
# Widths within a row relative to 1.0 (the window's top splitter starts at 640 : 360 px).
PANEL_WIDTHS = {"norm": 640 / 360, "layers": 640 / 360, "record_norms": 640 / 360,
                "record_map": 1.3}  # fmt: skip
# The least room a panel of a figure needs, in logical px (1/96 inch): a heatmap's axis, tick
# labels and colour bar take ~130 px of its width, a curve panel's x axis and legend ~90 px of
# its height. A figure smaller than its panels need is drawn larger and scaled down to the size
# asked for (`minimum_size`): smaller text, but nothing squeezed, cut or overlapping.
MIN_PANEL_PX, MIN_ROW_PX = 220, 170


def minimum_size(names: list[str], header: float) -> tuple[float, float]:
    """(width, height) in logical px that a figure of the panels `names` (`figure_rows`) needs
    below a header `header` px high: the narrowest panel of every row MIN_PANEL_PX wide, every
    row MIN_ROW_PX high."""
    rows = figure_rows(names)
    widths = [[PANEL_WIDTHS.get(name, 1.0) for name in row] for row in rows]
    width = max(MIN_PANEL_PX * sum(row) / min(row) for row in widths)
    return width, header + MIN_ROW_PX * len(rows)


def figure_rows(names: list[str]) -> list[list[str]]:
    """The panels `names` in rows, top first, as a figure arranges them (empty rows left out):
    those of a recording alone in `RECORDING_ROWS`, any others as the window does."""
    rows = RECORDING_ROWS if set(names) <= set(RECORDING_PANELS) else WINDOW_ROWS
    return [found for row in rows if (found := [n for n in row if n in names])]


def panels_for(arrays: Arrays, config: RunConfig | None = None, live: bool = False) -> list[str]:
    """The names of the panels that show `arrays`, in `PANEL_NAMES` order.

    A model trace (or a live run of mode "model"): the model panels, and the connectivity map
    when it follows two anchors or more (`anchors_by_layer` [L, A]). Otherwise the gradient
    norm and both heatmaps always; the loss when there is `loss_by_step`, the connectivity map
    when there is `connectivity`. `live`: a run of `config` whose results are still arriving,
    which gets the loss panel when it trains and the map when it computes one (taped and
    training runs with `config.connectivity`) before their first values arrive."""
    if is_model(arrays, config.mode if config is not None else None):
        if anchor_count(arrays) < 2:
            return list(MODEL_PANELS)
        return [name for name in PANEL_NAMES if name in {*MODEL_PANELS, "connectivity"}]
    running = config if live else None
    wanted = {
        "loss": "loss_by_step" in arrays
        or (running is not None and modes.find(running.mode).trains),
        "connectivity": "connectivity" in arrays
        or (
            running is not None
            and bool(running.connectivity)
            and modes.find(running.mode).uses("connectivity")
        ),
    }
    return [name for name in LSTM_PANELS if wanted.get(name, True)]
