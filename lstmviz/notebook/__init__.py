"""Plots in a notebook: `lstmviz.plot(trace)` draws the panels the app shows for a trace or a
recording, as the PNG export draws them, and Jupyter shows the result inline.

    trace = lstmviz.taped_gradients(x, w, loss="last_mse", target=y)
    lstmviz.plot(trace)                                  # the last expression of a cell: inline
    lstmviz.plot(trace, panels=["norm"], width=800, height=400)
    lstmviz.plot("run.lvz", record=3)                    # a recording (a file or a Recording)

Qt is imported on the first plot only (offscreen where there is no display); TensorFlow never.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Sequence
from pathlib import Path

from lstmviz.core.config import in_python_terms
from lstmviz.core.errors import LstmvizError
from lstmviz.core.view import ViewOptions

WIDTH, HEIGHT, DPI = 1200, 750, 96  # a notebook's column; Jupyter shows PNGs at their pixel size


class Figure:
    """A plot as PNG bytes (`png`), `width` × `height` px. Jupyter displays it inline
    (`_repr_png_`); `save(path)` writes it as a `.png` file."""

    def __init__(self, png: bytes):
        self.png = png
        self.width, self.height = struct.unpack(">II", png[16:24])  # the IHDR chunk

    def _repr_png_(self) -> bytes:
        return self.png

    def __repr__(self) -> str:
        return f"<lstmviz Figure {self.width}×{self.height} px PNG>"

    def save(self, path: str | os.PathLike) -> Path:
        """Write the PNG to `path` (which must end in `.png`); returns the path."""
        from lstmviz.io import files
        from lstmviz.io.atomic import atomic_write

        path = files.check_output(path, "Figure.save", (".png",), "PNG files")
        with atomic_write(path) as handle:
            handle.write(self.png)
        return path


def plot(
    trace,
    panels: Sequence[str] | None = None,
    width: int = WIDTH,
    height: int = HEIGHT,
    dpi: float = DPI,
    log: bool = True,
    normalise: bool = False,
    layer: int = 0,
    record: int | None = None,
    t_range: tuple[int, int] | None = None,
    view: ViewOptions | None = None,
) -> Figure:
    """The panels of `trace` (a GradientTrace, a Recording, or a path to a trace `.npz` or a
    recording `.lvz`) as a Figure. The arguments are `lstmviz.plots.export.writer.export`'s:
    `panels` names from `lstmviz.plots.export.writer.PANEL_NAMES` (default: those the app shows for
    the trace), `log` and `normalise` as View → Log scale / Normalise per pass, `layer` the LSTM
    direction of a model trace, `record` and `t_range` a recording's record and timestep range;
    `view` a `lstmviz.ViewOptions` holding those five (the keywords given besides it override its
    fields). Raises LstmvizError (ExportError, TraceError, RecordingError) naming what is wrong."""
    from lstmviz.plots.export.writer import check_layer, export, load_subject

    view = ViewOptions.given(view, log=log, normalise=normalise, layer=layer, record=record,
                             t_range=t_range)  # fmt: skip

    # `export` draws the first direction for a layer the trace lacks (the window's choice
    # may outlive the trace it was made for); asked for here, it is an error
    try:
        check_layer(load_subject(trace, full=False)[0], view.layer)
    except LstmvizError as exc:
        raise in_python_terms(exc) from None
    with tempfile.TemporaryDirectory(prefix="lstmviz-plot-") as folder:
        path = Path(folder) / "plot.png"
        try:
            export(trace, png=path, width=width, height=height, dpi=dpi, panels=panels, view=view)
        except LstmvizError as exc:
            raise in_python_terms(exc) from None
        return Figure(path.read_bytes())
