"""The norm panel's curves made ahead (pytest-qt, offscreen): the empty ones cost nothing at a
draw (hidden, not re-set when the y range moves), and the window's idle turns make the faded
curves of a training run before its live draws need them."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest

pytest.importorskip("pytestqt")

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.plots.panels.curves import MAX_HISTORY_CURVES, NormHistoryPanel  # noqa: E402


def norms(seed: int, shape) -> np.ndarray:
    return np.abs(np.random.default_rng(seed).standard_normal(shape)).astype(np.float32) + 0.1


@pytest.fixture
def panel(qtbot):
    """A norm panel, shown, with every per-row and faded curve made."""
    panel = NormHistoryPanel()
    qtbot.addWidget(panel)
    panel.resize(600, 400)
    panel.show()
    panel.make_row_curves(20)
    panel.make_history_curves(MAX_HISTORY_CURVES)
    panel.draw({"norm_h_total": norms(0, 30), "norm_h_direct": norms(1, 30)},
               RunConfig(steps=30, batch=2, hidden=3))  # fmt: skip
    return panel


def test_empty_curves_are_hidden_and_shown_with_data(panel):
    item_curves = [c for c in panel.plot.getPlotItem().items if isinstance(c, pg.PlotDataItem)]
    assert len(item_curves) >= 3 + 40 + MAX_HISTORY_CURVES
    for curve in item_curves:
        holds = curve.yData is not None and len(curve.yData) > 0
        assert curve.isVisible() == holds
    assert sum(c.isVisible() for c in item_curves) == 2  # total and direct
    full, _ = panel.row_curves[0]
    full.setData(np.arange(4), norms(2, 4))
    assert full.isVisible()
    full.setData([], [])
    assert not full.isVisible()


def test_a_curve_hidden_from_its_legend_stays_hidden_as_its_data_change(panel):
    """A click on a legend sample hides its curve: a live update of the data keeps it so."""
    total = panel.curves["norm_h_total"]
    total.setVisible(False)
    total.setData(np.arange(30), norms(3, 30))
    assert not total.isVisible()


def test_a_y_range_change_re_sets_only_curves_with_data(panel, monkeypatch):
    """pyqtgraph re-sets a curve's data at every y range change (its dynamic range limit):
    the empty curves of 67 made ahead are left alone."""
    updated = []
    original = pg.PlotDataItem.updateItems

    def counted(self, *args, **kwargs):
        updated.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pg.PlotDataItem, "updateItems", counted)
    panel.plot.getPlotItem().setYRange(-3, 5, padding=0)
    panel.plot.getPlotItem().getViewBox().prepareForPaint()
    assert updated, "the range change reached no curve"
    assert {id(c) for c in updated} <= {id(panel.curves[k]) for k in
                                        ("norm_h_total", "norm_h_direct")}  # fmt: skip


def test_the_auto_range_ignores_empty_curves(panel):
    """The y range follows the curves shown; the empty ones' bounds are not asked."""
    asked = []
    for full, cut in panel.row_curves:
        for curve in (full, cut):
            curve.dataBounds = lambda *a, c=curve, **k: asked.append(c) or (None, None)
    view = panel.plot.getPlotItem().getViewBox()
    view.enableAutoRange(y=True)
    view.childrenBounds()
    assert asked == []


def test_idle_turns_make_the_faded_curves_before_a_training_run(qtbot, bare_window):
    """`PanelArea.prepare` makes every faded curve; a training run's live draw then adds no
    item to the norm panel's plot (made during live draws they would lengthen them)."""
    win = bare_window
    qtbot.waitUntil(lambda: not win.area.preparing and not win.area.busy(), timeout=20_000)
    norm = win.area.norm
    assert len(norm.history) == MAX_HISTORY_CURVES
    items = len(norm.plot.getPlotItem().items)
    steps = 40
    arrays = {"norm_h_total": norms(4, 50), "norm_h_total_by_step": norms(5, (steps, 50)),
              "loss_by_step": norms(6, steps)}  # fmt: skip
    norm.draw(arrays, RunConfig(mode="train", steps=50, batch=2, hidden=3), rows_total=99)
    assert len(norm.plot.getPlotItem().items) == items
    holding = sum(c.yData is not None and len(c.yData) > 0 for c in norm.history)
    assert holding == len(norm.history_steps) > 0


def test_a_panel_with_only_faded_curves_counts_as_drawn(panel):
    panel.draw({"norm_h_total_by_step": norms(7, (5, 30))},
               RunConfig(mode="train", steps=30, batch=2, hidden=3), rows_total=9)  # fmt: skip
    assert panel.has_data() and panel.stack.currentWidget() is panel.plot


def test_a_changed_legend_keeps_its_rows_and_matches_a_fresh_one(qtbot):
    """`set_legend` changes rows in place (new rows cost two graphics widgets each) and lays
    them out as a legend built afresh would, also when an item moves to another row."""
    from lstmviz.plots.panels.curves import fit_legend, legend_below, set_legend

    def plot():
        widget = pg.PlotWidget()
        qtbot.addWidget(widget)
        widget.resize(500, 400)
        widget.show()
        return widget, legend_below(widget)

    def cells(legend):
        legend.layout.activate()
        grid = legend.layout
        return [(r, c, grid.itemAt(r, c + 1).text, grid.itemAt(r, c).item)
                for r in range(grid.rowCount()) for c in range(0, grid.columnCount(), 2)
                if grid.itemAt(r, c) is not None]  # fmt: skip

    items = [pg.PlotDataItem([1, 2], [1, 2], pen=colour) for colour in "rgbcmyk"]
    widget, legend = plot()
    for n in (5, 2, 4, 7, 1, 3):
        rows = [(items[(3 * i + n) % 7], f"row {i} of {n}") for i in range(n)]
        before = [sample for sample, _ in legend.items]
        set_legend(legend, rows)
        fit_legend(legend, widget)
        kept = [sample for sample, _ in legend.items[: len(before)]]
        assert kept == before[: len(rows)]  # the same widgets, reused
        fresh_widget, fresh = plot()
        for item, text in rows:
            fresh.addItem(item, text)
        fit_legend(fresh, fresh_widget)
        assert [(s.item, label.text) for s, label in legend.items] == rows
        assert cells(legend) == cells(fresh)


def test_faded_curves_keep_their_steps_as_a_live_run_grows(panel, monkeypatch):
    """Each shown earlier step's curve holds that step's row (the oldest lightest) at every
    live update; when the stride doubles only the curves of steps not shown before are
    re-set (re-setting all 24 would stall one draw)."""
    from lstmviz.plots.panels.curves import HISTORY_COLOR

    rows = norms(8, (80, 30))
    config = RunConfig(mode="train", steps=30, batch=2, hidden=3)
    re_set = []
    original = type(panel.history[0]).setData

    def counted(self, *args, **kwargs):
        if args and len(args[0]):
            re_set.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(type(panel.history[0]), "setData", counted)
    before: list[int] = []
    for n in range(1, 81):
        re_set.clear()
        panel.draw({"norm_h_total": rows[n - 1], "norm_h_total_by_step": rows[:n]}, config,
                   rows_total=200)  # fmt: skip
        steps = panel.history_steps
        assert steps == list(range(0, n - 1, steps[1] - steps[0] if len(steps) > 1 else 1))
        assert len(panel.history_shown) == len(steps) <= MAX_HISTORY_CURVES
        for curve, s in zip(panel.history_shown, steps, strict=True):
            np.testing.assert_allclose(curve.yData, rows[s], rtol=1e-6)
            assert curve.isVisible()
        alphas = [c.opts["pen"].color().alpha() for c in panel.history_shown]
        assert alphas == sorted(alphas) and all(
            c.opts["pen"].color().getRgb()[:3] == HISTORY_COLOR for c in panel.history_shown)
        new = set(steps) - set(before)
        assert len([c for c in re_set if c in panel.history]) == len(new), n
        hidden = [c for c in panel.history if c not in panel.history_shown]
        assert all(c.yData is None or len(c.yData) == 0 for c in hidden)
        before = steps
    # a finished trace: every curve drawn afresh from its arrays
    re_set.clear()
    panel.draw({"norm_h_total": rows[-1], "norm_h_total_by_step": rows}, config)
    assert len([c for c in re_set if c in panel.history]) == len(panel.history_steps)
