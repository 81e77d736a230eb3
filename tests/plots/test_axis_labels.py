"""Axis labels on real panels: log axes that label decades and minor ticks with room and never
overlap, a linear axis left to pyqtgraph, and a vertical axis label that shortens its
parenthesis when the plot is short. (`tests.plots.test_axis_ticks` checks `log_ticks` itself.)"""

import numpy as np
import pytest

from tests.helpers.axis_labels import axis_labels, check_labels, label_value, shown_norm_panel


@pytest.mark.parametrize("height", [520, 330, 200])
def test_log_axis_labels_decades_and_only_minor_ticks_with_room(qtbot, height):
    """The demo's norms (2e-4 .. 1e-2): labelled at 0.001 and 0.01, never overlapping; minor
    labels (2, 3, 5 × 10^n) only on a panel tall enough, never all of 2..9."""
    y = np.geomspace(2e-4, 1.2e-2, 60)
    panel = shown_norm_panel(qtbot, y, height)
    labels = axis_labels(panel)
    texts = [text for _, text in labels]
    assert {"0.001", "0.01"} <= set(texts), texts
    assert not {"0.009", "0.008", "0.007"} & set(texts), texts
    check_labels(panel, labels)
    if height >= 500:
        assert {"0.002", "0.005"} <= set(texts), texts  # room for minor labels
    # the minor ticks stay as (unlabelled) grid lines
    levels = panel.plot.getAxis("left").tickValues(*panel.plot.getAxis("left").range, height)
    assert sum(len(values) for _, values in levels) > len(texts)


def test_log_axis_labels_minor_ticks_over_six_decades(qtbot):
    """A training run's norms span decades: with ~50 px a decade the 3 × 10^n labels fit, and
    are drawn (pyqtgraph's own crowding limits would drop them)."""
    panel = shown_norm_panel(qtbot, np.geomspace(1e-6, 1.0, 30), 420)
    labels = axis_labels(panel)
    values = [label_value(text) for _, text in labels]
    decades = [v for v in values if np.isclose(np.log10(v), np.round(np.log10(v)))]
    assert len(decades) >= 6 and len(values) >= 2 * len(decades) - 1, values
    check_labels(panel, labels)


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0.52, 0.58, None),  # no m × 10^n inside: evenly spaced labels
        (1.004, 1.009, None),
        (1e-30, 1.0, "1e-20"),  # 30 decades: every few labelled
        (0.03, 0.4, "0.1"),
    ],
)
def test_log_axis_narrow_and_wide_ranges_are_labelled_without_overlap(qtbot, low, high, expected):
    """Panels of 420, 240 and 160 px: axes of about 320, 140 and 60 px; the last has room
    for two labels at most."""
    for height in (420, 240, 160):
        panel = shown_norm_panel(qtbot, np.geomspace(low, high, 40), height)
        labels = axis_labels(panel)
        texts = [text for _, text in labels]
        assert len(texts) >= 2, (height, texts)  # 160 px: room for two, never one alone
        assert len(set(texts)) == len(texts), texts
        check_labels(panel, labels)
        if expected is not None and height > 200:
            shown = [label_value(text) for text in texts]
            assert any(np.isclose(v, float(expected), rtol=1e-6) for v in shown), texts


def test_linear_axis_keeps_pyqtgraph_labels(qtbot):
    panel = shown_norm_panel(qtbot, np.linspace(0.0, 10.0, 30), 400, log=False)
    axis = panel.plot.getAxis("left")
    assert axis.style["maxTextLevel"] == 2 and len(axis.style["textFillLimits"]) == 4
    texts = [text for _, text in axis_labels(panel)]
    assert {"0", "2", "4", "6", "8", "10"} <= set(texts), texts
    panel.set_options(True, False)
    assert axis.style["maxTextLevel"] == 1 and axis.style["textFillLimits"] == []
    panel.set_options(False, False)
    assert axis.style["maxTextLevel"] == 2 and len(axis.style["textFillLimits"]) == 4


# ---- summary -------------------------------------------------------------------------------


def test_a_vertical_axis_label_shortens_its_parenthesis_when_the_plot_is_short(qtbot):
    import pyqtgraph as pg

    from lstmviz.plots.axis import OpaqueLineAxis

    plot = pg.PlotWidget(axisItems={"left": OpaqueLineAxis("left")})
    qtbot.addWidget(plot)
    axis = plot.getAxis("left")
    plot.resize(400, 400)
    plot.show()
    plot.setLabel("left", "‖dL/dh_t‖ (log scale)")

    def shown() -> str:
        return axis.label.toPlainText().strip()

    qtbot.waitUntil(lambda: shown() == "‖dL/dh_t‖ (log scale)", timeout=2_000)
    plot.resize(400, 120)  # the panel of a recording's model trace in a small window
    qtbot.waitUntil(lambda: shown() == "‖dL/dh_t‖", timeout=2_000)
    assert axis.label.boundingRect().width() <= axis.size().height()
    plot.setLabel("left", "loss (log scale)")  # another label, set while short
    assert shown() == "loss (log)"  # shorter, it keeps what it needs
    plot.setLabel("left", "sample")
    assert shown() == "sample"
    plot.resize(400, 400)
    plot.setLabel("left", "‖dL/dh_t‖ (log scale)")
    qtbot.waitUntil(lambda: shown() == "‖dL/dh_t‖ (log scale)", timeout=2_000)
    seen = []  # shrinking: the whole label, then "(log)" while it fits, then none
    for height in range(400, 100, -4):
        plot.resize(400, height)
        qtbot.waitUntil(lambda h=height: axis.size().height() <= h, timeout=2_000)
        axis.resizeEvent()
        if shown() != "‖dL/dh_t‖":  # the shortest is cut where nothing fits
            assert axis.label.boundingRect().width() <= axis.size().height(), height
        if not seen or seen[-1] != shown():
            seen.append(shown())
    assert seen == ["‖dL/dh_t‖ (log scale)", "‖dL/dh_t‖ (log)", "‖dL/dh_t‖"]
