"""Which panels show a trace, and where: one decision for the window and the exported figure.

No Qt here (`lstmviz.export` checks panel names with it before any rendering).
"""

from __future__ import annotations

from lstmviz.config import RunConfig
from lstmviz.render.values import Arrays

PANEL_NAMES = ("norm", "loss", "rows", "units", "connectivity")
# The arrangement, top row first: the gradient norm with the training loss on its right, then
# the heatmaps side by side.
PANEL_ROWS = (("norm", "loss"), ("rows", "units", "connectivity"))
# Widths within a row relative to 1.0 (the window's top splitter starts at 640 : 360 px).
PANEL_WIDTHS = {"norm": 640 / 360}


def panels_for(arrays: Arrays, config: RunConfig | None = None, live: bool = False) -> list[str]:
    """The names of the panels that show `arrays`, in `PANEL_NAMES` order: the gradient norm
    and both heatmaps always; the loss when there is `loss_by_step`, the connectivity map when
    there is `connectivity`. `live`: a run of `config` whose results are still arriving, which
    gets the loss panel when it trains and the map when it computes one (taped and training
    runs with `config.connectivity`) before their first values arrive."""
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
    return [name for name in PANEL_NAMES if wanted.get(name, True)]
