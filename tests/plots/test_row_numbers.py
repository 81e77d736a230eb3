"""Heatmaps whose rows are counted from 1 (passes, batches, training steps) label no row 0:
with more rows than are labelled one by one, the axis's own ticks ran from 0, a number no row
has, drawn half cut at the top of the plot. Rows counted from 0 (units, batch samples) keep
theirs."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from lstmviz.core.config import RunConfig
from lstmviz.plots.panels.heatmaps import RowsHeatmap, UnitsHeatmap
from tests.helpers.gui_checks import drawn_labels


@pytest.mark.parametrize("steps", [30, 57, 300])
def test_training_steps_are_labelled_from_1(qtbot, steps):
    rows = np.arange(1.0, steps * 4 + 1, dtype=np.float32).reshape(steps, 4)
    panel = RowsHeatmap()
    qtbot.addWidget(panel)
    panel.setAttribute(Qt.WA_DontShowOnScreen)
    panel.draw({"norm_h_total_by_step": rows, "norm_h_total": rows[-1]},
               RunConfig(mode="train", steps=4, train_steps=steps))  # fmt: skip
    labels = [int(text) for text in drawn_labels(panel, qtbot)]
    assert len(labels) >= 3 and labels[0] >= 1 and labels[-1] <= steps, labels


def test_units_are_labelled_from_0(qtbot):
    grad = np.ones((5, 2, 40), np.float32)  # [T, B, H]: 40 units, more than labelled each
    panel = UnitsHeatmap()
    qtbot.addWidget(panel)
    panel.setAttribute(Qt.WA_DontShowOnScreen)
    panel.draw({"grad_h_total": grad}, RunConfig(mode="taped", steps=5, batch=2, hidden=40))
    assert drawn_labels(panel, qtbot)[0] == "0"


@pytest.mark.parametrize("steps", [2, 3, 40])
def test_the_connectivity_maps_loss_steps_are_whole_timesteps_from_0(qtbot, steps):
    from lstmviz.plots.panels.training import ConnectivityPanel

    panel = ConnectivityPanel()
    qtbot.addWidget(panel)
    panel.setAttribute(Qt.WA_DontShowOnScreen)
    c = np.tril(np.ones((steps, steps), np.float32))
    panel.draw({"connectivity": c}, RunConfig(mode="taped", steps=steps, connectivity=True))
    labels = drawn_labels(panel, qtbot, height=300)
    assert all(text.isdigit() for text in labels), labels  # no "-0.5", no "0.5"
    assert labels[0] == "0" and int(labels[-1]) < steps, labels
