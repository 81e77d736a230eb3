"""Heatmaps of very long or very tall traces: drawn in the right colours, never a crash.

Qt's painter crashed (segmentation fault) on a zero-copy RGBA image 32768 or more pixels
wide or tall, so each case draws in a subprocess of its own: a crash there fails the test
instead of ending the test run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# Draws a units or rows heatmap of `steps` timesteps (or `rows` rows) whose first half is 1e-3
# and second half 1, grabs the panel and prints the colours at a quarter and three quarters
# of the matrix, with the colour map's two ends as pyqtgraph gives them.
SCRIPT = r"""
import json, sys
import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QApplication

from lstmviz.core.config import RunConfig
from lstmviz.plots.panels.heatmaps import RowsHeatmap, UnitsHeatmap

app = QApplication([])
kind, steps, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if kind == "units":  # [T, B, H]: H units as rows, T columns
    g = np.full((steps, 2, rows), 1e-3, np.float32)
    g[steps // 2:] = 1.0
    panel, arrays, config = UnitsHeatmap(), {"grad_h_total": g}, RunConfig(steps=steps, hidden=rows)
else:  # training steps as rows [S, T]
    by_step = np.full((rows, steps), 1e-3, np.float32)
    by_step[rows // 2:] = 1.0
    panel = RowsHeatmap()
    arrays = {"norm_h_total_by_step": by_step, "norm_h_total": by_step[-1]}
    config = RunConfig(mode="train", steps=steps, train_steps=rows)
panel.setAttribute(Qt.WA_DontShowOnScreen)
panel.resize(600, 400)
panel.draw(arrays, config)
panel.show()
app.processEvents()
view = panel.plot.getPlotItem().getViewBox()
view.autoRange(padding=0)
image = panel.plot.grab().toImage()
ratio = image.devicePixelRatio()

def colour_at(x, y):
    at = panel.plot.mapFromScene(view.mapViewToScene(QPointF(x, y)))
    return list(image.pixelColor(int(at.x() * ratio), int(at.y() * ratio)).getRgb()[:3])

if kind == "units":
    low, high = colour_at(steps / 4, rows / 2 - 0.5), colour_at(3 * steps / 4, rows / 2 - 0.5)
else:
    low, high = colour_at(steps / 2, 1 + rows / 4), colour_at(steps / 2, 1 + 3 * rows / 4)
ends = pg.colormap.get("viridis").getLookupTable(nPts=2, alpha=False).tolist()
print(json.dumps({"low": low, "high": high, "ends": ends}))
"""


def draw(kind: str, steps: int, rows: int) -> dict:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, "-c", SCRIPT, kind, str(steps), str(rows)],
                          capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("kind", "steps", "rows"),
    [("units", 40_000, 2),  # a long sequence: 40 000 columns
     ("rows", 8, 40_000)],  # a long training run: 40 000 rows
)  # fmt: skip
def test_a_heatmap_over_32767_cells_wide_or_tall_draws_its_two_halves(kind, steps, rows):
    """The 1e-3 half in the colour map's low end, the 1 half in its high end (log scale:
    levels -3 … 0), where Qt's painter crashed on the zero-copy image."""
    found = draw(kind, steps, rows)
    low_end, high_end = found["ends"]
    for got, want in ((found["low"], low_end), (found["high"], high_end)):
        assert max(abs(a - b) for a, b in zip(got, want, strict=True)) <= 12, found
