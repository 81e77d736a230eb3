"""The row labels of the directions heatmaps (layers × timesteps, a recording's layers ×
training steps): names too long for the panel are shortened, and when the plain short forms
("encoder_b…") would say the same for two layers, the names are cut in the middle just enough
to tell them apart, so that the heatmap keeps its width instead of shrinking to a sliver
beside the full names."""

from __future__ import annotations

import numpy as np

from lstmviz.analysis.layers import direction_label, row_labels
from tests.helpers.recordings import model_trace

LONG = ["encoder_bidirectional_first_block/forward", "encoder_bidirectional_first_block/backward",
        "encoder_bidirectional_second_block/forward",
        "encoder_bidirectional_second_block/backward",
        "decoder_lstm_with_a_really_long_name", "decoder_lstm_with_a_really_long_tail"]  # fmt: skip


def test_short_labels_that_would_collide_are_cut_in_the_middle_until_they_differ():
    full = [direction_label(name) for name in LONG]
    short = row_labels(LONG, short=True)
    assert len(set(short)) == len(LONG)
    for label, whole in zip(short, full, strict=True):
        assert len(label) < 0.6 * len(whole), (label, whole)
        head, _, tail = label.partition("…")
        assert whole.startswith(head) and whole.endswith(tail), (label, whole)
    assert row_labels(LONG, short=False) == full


def test_the_layer_heatmap_keeps_its_width_beside_long_colliding_names(qapp):
    from lstmviz.plots.export.figure import Figure

    trace = model_trace(2)
    trace.arrays["layer_names"] = np.array(["encoder_bidirectional_first_block",
                                            "encoder_bidirectional_second_block"])  # fmt: skip
    with Figure(trace, ["layers", "layer_map", "layer_units"]) as figure:
        figure.image(1600, 1000, 144)
        panel = dict(figure.named)["layer_map"]
        view = panel.plot.getViewBox()
        assert view.width() > 0.4 * panel.width(), (view.width(), panel.width())
