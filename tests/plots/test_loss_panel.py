"""The training-loss panel (`lstmviz.plots.panels.training.LossPanel`): a run of one training step
shows its one loss as a dot (a curve of one point draws no line, and the panel looked empty);
the legend sits below the plot."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import Qt  # noqa: E402

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.plots.panels.training import LossPanel  # noqa: E402


def red_pixels(panel) -> int:
    """Pixels of the running mean's red (#d62728) in the panel as painted."""
    image = panel.grab().toImage()
    rgb = np.array([[image.pixelColor(x, y).getRgb()[:3] for x in range(image.width())]
                    for y in range(0, image.height(), 2)])  # fmt: skip
    return int((np.abs(rgb - [214, 39, 40]).sum(axis=-1) < 60).sum())


def shown_panel(qtbot, width: int, height: int) -> LossPanel:
    panel = LossPanel()
    qtbot.addWidget(panel)
    panel.setAttribute(Qt.WA_DontShowOnScreen)
    panel.resize(width, height)
    panel.show()
    return panel


def test_one_training_step_shows_its_loss_as_a_dot_and_more_steps_as_a_line(qtbot):
    panel = shown_panel(qtbot, 300, 260)
    for losses, symbol in (([0.7], "o"), (np.linspace(1.0, 0.1, 30), None), ([0.4], "o")):
        panel.draw({"loss_by_step": np.asarray(losses)}, RunConfig(mode="train", steps=4,
                                                                    train_steps=len(losses)))
        qtbot.wait(20)
        assert panel.mean.opts["symbol"] == symbol
        if len(losses) == 1:
            panel.legend.hide()  # its sample line is red too
            assert red_pixels(panel) > 10  # the dot
            panel.legend.show()


def test_the_legend_sits_below_the_plot(qtbot):
    """Inside the plot it covered the loss in small panels: below it, as the curve panels'."""
    panel = shown_panel(qtbot, 400, 400)
    panel.draw({"loss_by_step": np.linspace(1.0, 0.1, 50)}, RunConfig(mode="train", steps=4))
    qtbot.wait(50)
    view = panel.plot.getViewBox().sceneBoundingRect()
    assert panel.legend.isVisible()
    assert panel.legend.sceneBoundingRect().top() >= view.bottom()
