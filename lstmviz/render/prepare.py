"""What the panels and the summary line reduce from a finished trace's big arrays, computed
ahead by the same functions they call, so that the window's first draw of the trace finds the
results kept with the arrays (`values.kept`). NumPy only, no Qt."""

from __future__ import annotations

from lstmviz.render import layers, summary, values
from lstmviz.render.values import Arrays


def warm(arrays: Arrays) -> None:
    """Compute them now, in the calling thread (the window's worker thread, before it hands
    the trace over: NumPy releases the GIL in the reductions): the rows and units heatmaps'
    matrices, each LSTM direction's per-unit means, the summary's reference check and NaN/Inf
    counts."""
    values.rows_matrix(arrays)
    values.units_matrix(arrays)
    for k in range(layers.layer_count(arrays)):
        layers.units_of_layer(arrays, k)
    summary.reference_part(arrays)
    summary.nonfinite_part(arrays)
