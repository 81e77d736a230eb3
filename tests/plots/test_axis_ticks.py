"""Log axis tick labels (`lstmviz.plots.axis.log_ticks`, `OpaqueLineAxis`): every axis with
room for two labels shows at least two, never overlapping and never at an end, where pyqtgraph
leaves out a label it would cut (a short training-loss panel spanning 0.527–0.697 showed "0.6"
alone). Spans of less than a decade, one decade, many decades, constant and nearly constant
values; short and tall panels; vertical and horizontal axes; the window's panels and an
exported figure."""

import math

import numpy as np
import pytest

from lstmviz.core.config import RunConfig
from tests.helpers.axis_labels import axis_labels, check_labels, label_value, shown_norm_panel

ROOM, EDGE = 22.0, 7.0  # px: label centres apart, and from either end (a ~14-px font)


def ticks(a: float, b: float, size: float) -> tuple[list[float], list[float]]:
    """(labelled, unlabelled) tick values of a log axis showing a..b over `size` px."""
    from lstmviz.plots.axis import log_ticks

    levels = log_ticks(math.log10(a), math.log10(b), size, lambda v: ROOM, lambda v: EDGE)
    assert len(levels) == 3 and all(isinstance(values, list) for _, values in levels)
    labelled = sorted(levels[0][1] + levels[1][1])
    return [10.0**v for v in labelled], [10.0**v for v in levels[2][1]]


def check_ticks(a: float, b: float, size: float) -> list[float]:
    """The labelled values, checked: inside the axis by EDGE, ROOM apart, round (six
    significant digits say them), distinct, and not also in the unlabelled level."""
    labelled, rest = ticks(a, b, size)
    lo, per_decade = math.log10(a), size / (math.log10(b) - math.log10(a))
    px = [(math.log10(v) - lo) * per_decade for v in labelled]
    assert all(EDGE - 1e-6 <= p <= size - EDGE + 1e-6 for p in px), (a, b, size, labelled)
    assert all(q - p >= ROOM - 1e-6 for p, q in zip(px, px[1:], strict=False)), (px, labelled)
    assert all(math.isclose(float(f"{v:.6g}"), v, rel_tol=1e-9) for v in labelled), labelled
    assert len({f"{v:.6g}" for v in labelled}) == len(labelled), labelled
    assert not set(np.round(np.log10(rest), 9)) & set(np.round(np.log10(labelled), 9))
    return labelled


def shown(values: list[float]) -> list[str]:
    return [f"{v:.6g}" for v in values]


@pytest.mark.parametrize(
    ("a", "b", "size", "expected"),
    [
        # the training loss panel's 0.527–0.697 (as padded) on a ~47-px axis: 0.6 and 0.7 are
        # m × 10^n, but 0.7 is at the top end, where pyqtgraph dropped its label
        (0.5138, 0.7179, 47.4, ["0.55", "0.65"]),
        (0.5184, 0.71, 97.4, ["0.55", "0.6", "0.65"]),
        (0.5224, 0.7036, 297.4, [f"{0.54 + 0.02 * k:.6g}" for k in range(8)]),  # 0.54 … 0.68
        (0.52, 0.58, 60, ["0.53", "0.57"]),  # no m × 10^n inside: the ends of a 0.01 grid
        (0.09, 1.1, 300, ["0.1", "0.2", "0.3", "0.5", "1"]),  # a decade: decades and minor
        (1e-6, 1.0, 100, ["0.0001", "0.01"]),  # every 2nd decade (the ends have no room)
        (1e-30, 1e5, 300, ["1e-25", "1e-20", "1e-15", "1e-10", "1e-05", "1"]),
        (1e-30, 1e5, 60, ["1e-20", "1"]),
        (0.59999, 0.60011, 60, ["0.60002", "0.60008"]),
        (0.59999, 0.60011, 300, ["0.6", "0.60002", "0.60004", "0.60006", "0.60008", "0.6001"]),
    ],
)
def test_log_ticks_labels(a, b, size, expected):
    assert shown(check_ticks(a, b, size)) == expected


def test_log_ticks_two_labels_wherever_two_have_room():
    """Random spans from 10⁻⁴ to 40 decades anywhere in 10⁻³⁵..10⁴⁵ and axes of 20..800 px:
    the checks of `check_ticks`, and two labels or more on every axis with room for two
    (ROOM between them, EDGE to either end, 1 % to spare for round values), one on every
    axis with room for one."""
    rng = np.random.default_rng(7)
    for _ in range(3000):
        lo = rng.uniform(-35.0, 5.0)
        span = 10.0 ** rng.uniform(-4.0, 1.6)
        size = rng.uniform(20.0, 800.0)
        labelled = check_ticks(10.0**lo, 10.0 ** (lo + span), size)
        if size >= 1.01 * (ROOM + 2 * EDGE) + 1:
            assert len(labelled) >= 2, (lo, lo + span, size, labelled)
        elif size >= 2 * EDGE + 1:
            assert len(labelled) >= 1, (lo, lo + span, size, labelled)


def labels_of_axis(axis) -> list[tuple]:
    """(rect, text) of the tick labels `axis` draws at its current size."""
    from PySide6.QtGui import QImage, QPainter

    image = QImage(8, 8, QImage.Format_ARGB32)
    painter = QPainter(image)
    try:
        _, _, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _, text in texts if text]


def check_drawn(panel, labels: list[tuple]) -> None:
    """`check_labels`, two labels at least, and each centre at least half the room the
    axis gives labels away from its neighbours' (they keep to the room `log_ticks` had)."""
    texts = [text for _, text in labels]
    assert len(texts) >= 2 and len(set(texts)) == len(texts), texts
    check_labels(panel, labels)
    axis = panel.plot.getAxis("left")
    centres = sorted(rect.center().y() for rect, _ in labels)
    room = axis.label_room(np.zeros(0))
    assert all(q - p >= room - 0.5 for p, q in zip(centres, centres[1:], strict=False)), texts


def loss_panel(qtbot, loss: np.ndarray, height: int):
    from PySide6.QtCore import Qt

    from lstmviz.plots.panels.training import LossPanel

    panel = LossPanel()
    qtbot.addWidget(panel)
    panel.setAttribute(Qt.WA_DontShowOnScreen)
    panel.resize(500, height)
    panel.set_options(True, False)
    panel.draw({"loss_by_step": loss}, RunConfig(mode="train", steps=4, train_steps=len(loss)))
    panel.show()
    panel.grab()  # a first paint sizes the axes
    qtbot.wait(10)
    return panel


@pytest.mark.parametrize("height", [150, 200, 300, 500])
def test_a_short_training_loss_panel_of_less_than_a_decade_shows_its_scale(qtbot, height):
    """0.527–0.697 in a 150-px panel (an axis ~47 px tall) showed "0.6" alone."""
    loss = 0.527 * (0.697 / 0.527) ** np.abs(np.sin(np.arange(200) * 0.37))
    loss[[0, 1]] = 0.697, 0.527
    panel = loss_panel(qtbot, loss, height)
    labels = axis_labels(panel)
    check_drawn(panel, labels)
    values = [label_value(text) for _, text in labels]
    assert all(0.5 < v < 0.72 for v in values), values
    if height >= 300:
        assert len(values) >= 3, values


@pytest.mark.parametrize("value", [0.6, 1e-8, 3.0])
def test_a_constant_training_loss_is_labelled(qtbot, value):
    """A constant loss (float64): its running mean, off by rounding, made the axis span
    10⁻¹⁵ of a decade, with no label at all (1e-8) or one."""
    panel = loss_panel(qtbot, np.full(100, value), 200)
    labels = axis_labels(panel)
    check_drawn(panel, labels)
    lo, hi = panel.plot.getAxis("left").range
    assert hi - lo > 0.1 and lo < math.log10(value) < hi
    np.testing.assert_array_equal(panel.mean.yData, np.full(100, value))


@pytest.mark.parametrize(
    ("low", "high"),
    [(0.527, 0.697), (0.1, 1.0), (1e-6, 1.0), (1e-30, 1e5), (0.6, 0.6001), (2e-4, 1.2e-2)],
)
def test_norm_panel_log_axis_two_labels_at_every_height(qtbot, low, high):
    """Less than a decade, one decade, several, 35, and 10⁻⁴ of one, on panels of 150 to
    500 px (axes of ~60 to ~410 px): two labels or more, never overlapping."""
    for height in (150, 240, 500):
        panel = shown_norm_panel(qtbot, np.geomspace(low, high, 40), height)
        check_drawn(panel, axis_labels(panel))


def test_a_horizontal_log_axis_keeps_its_labels_apart_and_inside(qtbot):
    """A bottom axis's labels need their width: at least two, none overlapping, none past
    either end of the axis."""
    import pyqtgraph as pg
    from PySide6.QtCore import Qt

    from lstmviz.plots.axis import OpaqueLineAxis

    for low, high in ((0.527, 0.697), (1e-30, 1e5), (0.6, 0.6001)):
        for width in (170, 260, 600):  # 170: room for two 7-digit labels
            plot = pg.PlotWidget(axisItems={s: OpaqueLineAxis(s) for s in ("left", "bottom")})
            qtbot.addWidget(plot)
            plot.setAttribute(Qt.WA_DontShowOnScreen)
            plot.resize(width, 200)
            plot.setLogMode(x=True)
            plot.showGrid(x=True, y=True)
            plot.plot(np.geomspace(low, high, 20), np.arange(20.0))
            plot.show()
            plot.grab()
            qtbot.wait(10)
            axis = plot.getAxis("bottom")
            labels = sorted(labels_of_axis(axis), key=lambda item: item[0].left())
            texts = [text for _, text in labels]
            assert len(texts) >= 2, (low, high, width, texts)
            for (a, _), (b, _) in zip(labels, labels[1:], strict=False):
                assert a.right() <= b.left(), texts
            length = axis.mapRectFromParent(axis.geometry()).width()
            assert all(r.left() >= 0 and r.right() <= length for r, _ in labels), texts


def synthetic_training_trace(loss: np.ndarray):
    """A training trace of the arrays the norm and loss panels draw (no TensorFlow)."""
    from lstmviz.io.trace import GradientTrace

    steps, rows = 12, len(loss)
    norms = np.geomspace(1e-4, 0.2, steps).astype(np.float32)
    arrays = {
        "norm_h_total": norms,
        "norm_h_direct": norms * 0.5,
        "norm_c_total": norms * 0.7,
        "norm_h_total_by_step": np.tile(norms, (rows, 1)),
        "loss_by_step": loss.astype(np.float32),
    }
    config = RunConfig(mode="train", steps=steps, batch=4, hidden=3, train_steps=rows)
    return GradientTrace("train", config, arrays)


@pytest.mark.parametrize("size", [(800, 500), (1600, 1000)])
def test_an_exported_training_loss_of_less_than_a_decade_shows_its_scale(qtbot, size):
    """The export's loss panel (800 × 500 px at 144 dpi: a short one) as the window's:
    at least two labels ("0.6" alone before), apart and inside the axis."""
    from lstmviz.analysis.layout import LOGICAL_DPI
    from lstmviz.plots.export.figure import Figure
    from lstmviz.plots.panels.training import LossPanel

    loss = 0.527 * (0.697 / 0.527) ** np.abs(np.sin(np.arange(150) * 0.37))
    loss[[0, 1]] = 0.697, 0.527
    with Figure(synthetic_training_trace(loss), ["norm", "loss"]) as figure:
        scale = 144 / LOGICAL_DPI
        figure.fit(size[0] / scale, size[1] / scale)
        panel = next(p for p in figure.panels if isinstance(p, LossPanel))
        labels = axis_labels(panel)
        check_drawn(panel, labels)


def test_axes_that_count_have_no_ticks_between_whole_numbers(qtbot):
    """Timesteps, training steps and unit numbers: a sequence of 3 steps had ticks at
    t = 0.5, 1.5 and 2 units at -0.5, 0.5 (pyqtgraph's finer levels); value axes keep them."""
    from lstmviz.plots.panels.heatmaps import UnitsHeatmap
    from lstmviz.plots.panels.panel import plot_widget

    units = UnitsHeatmap()
    qtbot.addWidget(units)
    units.draw({"grad_h_total": np.ones((3, 2, 2), np.float32)}, RunConfig(steps=3, hidden=2))
    for side, lo, hi in (("bottom", -0.5, 2.5), ("left", -0.5, 1.5)):
        levels = units.plot.getAxis(side).tickValues(lo, hi, 300)
        values = [v for _, level in levels for v in level]
        assert values and all(float(v).is_integer() for v in values), (side, values)
    values = plot_widget().getAxis("left").tickValues(0.0, 2.0, 300)
    assert any(not float(v).is_integer() for _, level in values for v in level)


def test_a_taped_runs_batch_samples_are_numbered_from_0_as_x_b(qtbot):
    """Rows of a taped trace are the batch's samples, numbered as the data (sample b is x[b]),
    as the saliency panel and the units number theirs: they said 1 and 2 for x[0] and x[1]."""
    from lstmviz.plots.panels.heatmaps import RowsHeatmap, UnitsHeatmap

    for panel in (RowsHeatmap(), UnitsHeatmap()):
        qtbot.addWidget(panel)
        panel.draw({"grad_h_total": np.ones((3, 2, 2), np.float32)}, RunConfig(steps=3, hidden=2))
        axis = panel.plot.getAxis("left")
        assert axis.labelText.endswith("(from 0)"), axis.labelText
        assert [label for level in axis._tickLevels for _, label in level] == ["0", "1"]
        assert panel.readout_at(1, 0.2).split(",")[0] in ("batch sample 0", "unit 0")
        assert panel.readout_at(1, 1.2).split(",")[0] in ("batch sample 1", "unit 1")
