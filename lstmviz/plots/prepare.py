"""What the panels and the summary line reduce from a finished trace's big arrays, and the
heatmaps' images, computed ahead by the same functions they call, so that the window's first
draw of the trace finds the results kept with the arrays (`values.kept`). NumPy only: no Qt
object is made."""

from __future__ import annotations

from lstmviz.analysis import layers, values
from lstmviz.analysis.report import summary
from lstmviz.analysis.values import Arrays


def warm(arrays: Arrays, log: bool = True, normalise: bool = False) -> None:
    """Compute them now, in the calling thread (the window's worker thread, before it hands
    the trace over: NumPy releases the GIL in the reductions): the rows and units heatmaps'
    matrices and images (for the View menu's `log` and `normalise`, which the units heatmap
    does not apply), each LSTM direction's per-unit means, the summary's reference check and
    NaN/Inf counts."""
    from lstmviz.plots import style  # pyqtgraph's colour map: not before the window's first paint

    rows = values.rows_shown(arrays)
    if rows is not None:
        style.finished_image(rows[0], log, normalise)
    units = values.units_matrix(arrays)
    if units is not None:
        style.finished_image(units, log, False)  # as `HeatmapPanel.redraw`: units never normalised
    for k in range(layers.layer_count(arrays)):
        layers.units_of_layer(arrays, k)
    summary.reference_part(arrays)
    summary.nonfinite_part(arrays)
