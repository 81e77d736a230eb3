"""The window as laptops and high-DPI screens show it: a first size that fits the screen (also
under QT_SCALE_FACTOR), colour-bar and axis labels that fit a short panel, saliency row labels
that never overlap. Panels are drawn from arrays made here (no TensorFlow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")
import pyqtgraph as pg  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from lstmviz.gui.main_window import MainWindow  # noqa: E402
from tests.helpers.axis_labels import tick_texts  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


# ---- the window's first size -------------------------------------------------------------------


def test_first_size_fits_the_screen(qtbot, settings, monkeypatch):
    """No saved geometry, on a screen smaller than 1280×820 (the test screen: 800×800, taken
    for a real one): 1280×820 did not fit, as it did not fit a 1366×768 laptop."""
    monkeypatch.setattr(QApplication, "platformName", staticmethod(lambda: "xcb"))
    room = QApplication.primaryScreen().availableGeometry()
    assert room.height() < 820  # else this test proves nothing
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    assert win.width() <= room.width() and win.height() <= room.height()
    assert win.height() >= win.minimumSizeHint().height()


def test_offscreen_keeps_the_screenshot_size(qtbot, settings):
    """Offscreen (screenshots, 800×800 unless configured) there is no one's screen to fit."""
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    assert (win.width(), win.height()) == (1280, 820)


# A window made (not shown: no computing process) on a screen the offscreen platform is given
# (`configfile`), taken for a real one; its size and the screen's in logical px.
FIRST_SIZE = """
import sys
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QApplication
app = QApplication([])
QApplication.platformName = staticmethod(lambda: "xcb")
from lstmviz.gui.main_window import MainWindow
win = MainWindow(settings=QSettings(sys.argv[1], QSettings.Format.IniFormat))
room = app.primaryScreen().availableGeometry()
print(win.width(), win.height(), room.width(), room.height())
"""


@pytest.mark.parametrize(("screen", "scale"), [((1366, 768), "1"), ((2560, 1600), "2"),
                                               ((2880, 1800), "1.5")])  # fmt: skip
def test_first_size_fits_a_scaled_screen(tmp_path, screen, scale):
    """QT_SCALE_FACTOR divides the screen (2560×1600 at 2: 1280×800, less than 820)."""
    config = tmp_path / "screen.json"
    config.write_text(json.dumps({"screens": [{"name": "s", "x": 0, "y": 0, "width": screen[0],
                                               "height": screen[1], "logicalDpi": 96,
                                               "logicalBaseDpi": 96, "dpr": 1}]}))  # fmt: skip
    env = {**os.environ, "QT_QPA_PLATFORM": f"offscreen:configfile={config}",
           "QT_SCALE_FACTOR": scale}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", FIRST_SIZE, str(tmp_path / "s.ini")], env=env,
                         cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    width, height, room_width, room_height = map(int, out.stdout.split()[-4:])
    assert room_width == round(screen[0] / float(scale))  # the screen this test meant
    assert 0 < width <= room_width and 0 < height <= room_height


# ---- heatmap labels in a short panel ------------------------------------------------------------


def shown_label(axis: pg.AxisItem) -> str:
    return axis.label.toPlainText().strip()


def units_arrays(t: int = 20, b: int = 4, h: int = 8) -> dict:
    g = np.random.default_rng(0).standard_normal((t, b, h)).astype(np.float32)
    return {"grad_h_total": g, "norm_h_total": np.sqrt((g**2).sum((1, 2)))}


def test_colour_bar_label_fits_a_short_panel(qtbot):
    """The colour bar's label, longer than a short panel's bar (a recording's row of model
    panels in a 1280×720 window), was cut at both ends ("og₁₀ mean |dL/dh"): it shows a
    shorter form that fits, and the whole label again once the panel is tall."""
    from lstmviz.plots.panels.heatmaps import UnitsHeatmap

    panel = UnitsHeatmap()
    qtbot.addWidget(panel)
    panel.set_options(log=True, normalise=False)
    panel.draw(units_arrays())
    panel.resize(360, 400)
    panel.show()
    axis = panel.bar.axis
    qtbot.waitUntil(lambda: shown_label(axis) == "log₁₀ mean |dL/dh_t,j|", timeout=3_000)
    panel.resize(360, 170)
    qtbot.waitUntil(lambda: axis.size().height() < 120, timeout=3_000)
    axis.resizeEvent()
    assert shown_label(axis) in ("log₁₀ |dL/dh_t,j|", "log₁₀ |dL/dh|")
    assert axis.label.boundingRect().width() <= axis.size().height()
    panel.set_options(log=False, normalise=False)  # a label set while short: fitted at once
    assert shown_label(axis) in ("mean |dL/dh_t,j|", "|dL/dh_t,j|", "|dL/dh|")
    assert axis.label.boundingRect().width() <= axis.size().height()
    panel.set_options(log=True, normalise=False)
    panel.resize(360, 500)
    qtbot.waitUntil(lambda: shown_label(axis) == "log₁₀ mean |dL/dh_t,j|", timeout=3_000)


def model_arrays(samples: int, t: int = 30) -> dict:
    rng = np.random.default_rng(1)
    names = np.array(["bidirectional/forward", "bidirectional/backward", "lstm_1"])
    return {"layer_names": names, "norm_h_total_by_layer": rng.random((3, t)) + 0.1,
            "saliency": rng.random((samples, t)) + 0.1}  # fmt: skip


def test_direction_axis_label_fits_a_short_panel(qtbot):
    from lstmviz.plots.panels.model_maps import LayerHeatmap

    panel = LayerHeatmap()
    qtbot.addWidget(panel)
    panel.draw(model_arrays(4))
    panel.resize(400, 130)
    panel.show()
    axis = panel.plot.getAxis("left")
    qtbot.waitUntil(lambda: shown_label(axis) == "direction", timeout=3_000)  # "recurrent dir…"
    panel.resize(400, 400)
    qtbot.waitUntil(lambda: shown_label(axis) == "recurrent direction", timeout=3_000)


def test_saliency_row_labels_never_overlap(qtbot):
    """64 samples: "mean" and a label every 8 samples. In a short panel (a recording's model
    row in a 1280×720 window) all nine were drawn on top of each other."""
    from lstmviz.plots.panels.model_maps import SaliencyHeatmap

    panel = SaliencyHeatmap()
    qtbot.addWidget(panel)
    panel.draw(model_arrays(64))
    panel.show()
    axis = panel.plot.getAxis("left")
    for height in (120, 160, 260, 600):
        panel.resize(400, height)
        qtbot.waitUntil(lambda h=height: panel.height() == h, timeout=3_000)
        QApplication.processEvents()
        texts = tick_texts(axis)
        labels = [text for _, text in texts]
        assert "mean" in labels, height
        rects = [rect for rect, _ in texts]
        for i, a in enumerate(rects):
            for b in rects[i + 1:]:
                assert not a.intersects(b), (height, labels)
    # tall: every one; samples numbered from 0 (the last is 63), 0 left out beside "mean"
    assert labels == ["mean", "16", "32", "48", "63", "8", "24", "40", "56"]


# ---- the window at its minimum size -------------------------------------------------------------


def test_panels_keep_a_readable_size_in_the_smallest_window(qtbot, settings):
    """Shrunk to its minimum, the window squeezed its panels to slivers (~30 px high: crushed
    axes, overlapping tick labels): its minimum now leaves every panel shown 10 × 7 lines."""
    from lstmviz.gui.widgets.panel_area import MIN_PANEL_LINES

    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.show()
    area = win.area
    area._show({"norm", "rows", "units", "connectivity"})
    win.resize(100, 100)
    qtbot.waitUntil(lambda: win.width() > 100, timeout=3_000)
    QApplication.processEvents()
    for panel in area.visible_panels():
        lines = panel.fontMetrics().lineSpacing()
        assert panel.height() >= MIN_PANEL_LINES[1] * lines, panel_name(panel)
        assert panel.width() >= MIN_PANEL_LINES[0] * lines, panel_name(panel)
    win.close()


def panel_name(panel) -> str:
    from lstmviz.plots.panels.panel import panel_title

    return panel_title(panel)


def test_the_recording_bars_controls_do_not_touch(qtbot):
    """"Heatmap over", its combo box and the note after it, and the slider's row: a gap between
    neighbours (the window's style gave these rows none: the note touched the combo box)."""
    from lstmviz.gui.widgets.recording_bar import RecordingBar

    bar = RecordingBar()
    qtbot.addWidget(bar)
    bar.resize(900, 80)
    bar.show()
    qtbot.waitExposed(bar)
    combo, note = bar.range_box, bar.note
    assert note.geometry().left() - combo.geometry().right() >= 6
    slider, label = bar.slider, bar.record_label
    assert label.geometry().left() - slider.geometry().right() >= 4
