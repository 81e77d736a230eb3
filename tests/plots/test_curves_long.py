"""The norm panel with a long sequence: the first draw of its curves builds no scatter spots
(pyqtgraph gives a curve made with a symbol size or pen the symbol "o", which the panel turns
off only after the data are set: a spot per timestep, slow for a long curve)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")


@pytest.fixture
def spots(monkeypatch):
    """The scatter spots pyqtgraph makes, counted per `addPoints` call."""
    import pyqtgraph as pg

    made = []
    add_points = pg.ScatterPlotItem.addPoints

    def counted(self, *args, **kwargs):
        before = len(self.data)
        add_points(self, *args, **kwargs)
        made.append(len(self.data) - before)

    monkeypatch.setattr(pg.ScatterPlotItem, "addPoints", counted)
    return made


def test_the_first_draw_of_a_long_trace_builds_no_scatter_spots(qtbot, spots):
    from lstmviz.plots.panels.curves import NormPanel

    panel = NormPanel()
    qtbot.addWidget(panel)
    steps = 5000
    rng = np.random.default_rng(0)
    arrays = {key: rng.uniform(0.1, 1.0, steps).astype(np.float32)
              for key in ("norm_h_total", "norm_h_direct", "norm_c_total")}  # fmt: skip
    panel.draw(arrays)
    assert sum(spots) == 0
    assert all(curve.xData is not None and len(curve.xData) == steps
               for curve in panel.curves.values())  # fmt: skip
    # a curve of points apart from each other (one step) still shows them as dots
    panel.draw({"norm_h_total": np.float32([0.5]), "norm_h_direct": np.float32([0.2])})
    assert panel.curves["norm_h_total"].opts["symbol"] == "o" and sum(spots) > 0


def test_the_loss_panel_of_a_long_training_run_builds_no_scatter_spots(qtbot, spots):
    from lstmviz.plots.panels.training import LossPanel

    panel = LossPanel()
    qtbot.addWidget(panel)
    loss = np.random.default_rng(1).uniform(0.1, 1.0, 5000).astype(np.float32)
    panel.draw({"loss_by_step": loss})
    assert sum(spots) == 0 and len(panel.mean.xData) == 5000
    panel.draw({"loss_by_step": loss[:1]})  # one step: its mean as a dot
    assert panel.mean.opts["symbol"] == "o" and sum(spots) <= 2  # its one point (set twice)
