"""Which panels show a trace, and where: one decision for the window and the exported figure.

No Qt here (`lstmviz.export` checks panel names with it before any rendering).
"""

from __future__ import annotations

from lstmviz.config import RunConfig
from lstmviz.render.layers import is_model
from lstmviz.render.values import Arrays

# The panels of one-LSTM traces, then those of model traces (`render.layers`).
LSTM_PANELS = ("norm", "loss", "rows", "units", "connectivity")
MODEL_PANELS = ("layers", "gates", "layer_map", "saliency", "layer_units")
PANEL_NAMES = LSTM_PANELS + MODEL_PANELS
# The arrangement, top row first: the gradient norm with the training loss on its right, then
# the heatmaps side by side. A model trace: the norm by layer with the gates on its right, then
# its three heatmaps. A row shows only the panels `panels_for` names.
PANEL_ROWS = (
    ("norm", "loss", "layers", "gates"),
    ("rows", "units", "connectivity", "layer_map", "saliency", "layer_units"),
)
# Widths within a row relative to 1.0 (the window's top splitter starts at 640 : 360 px).
PANEL_WIDTHS = {"norm": 640 / 360, "layers": 640 / 360}


def panels_for(arrays: Arrays, config: RunConfig | None = None, live: bool = False) -> list[str]:
    """The names of the panels that show `arrays`, in `PANEL_NAMES` order.

    A model trace (or a live run of mode "model"): the model panels. Otherwise the gradient
    norm and both heatmaps always; the loss when there is `loss_by_step`, the connectivity map
    when there is `connectivity`. `live`: a run of `config` whose results are still arriving,
    which gets the loss panel when it trains and the map when it computes one (taped and
    training runs with `config.connectivity`) before their first values arrive."""
    if is_model(arrays, config.mode if config is not None else None):
        return list(MODEL_PANELS)
    running = config if live else None
    wanted = {
        "loss": "loss_by_step" in arrays or (running is not None and running.mode == "train"),
        "connectivity": "connectivity" in arrays
        or (
            running is not None
            and bool(running.connectivity)
            and running.mode in ("taped", "train")
        ),
    }
    return [name for name in LSTM_PANELS if wanted.get(name, True)]
