"""A graph's model trace (tests/helpers/graph_trace.py: an encoder handing its final state to a
decoder, each its own length, two inputs) opened in the window: the real pyqtgraph items of the
panels (the hand-over line, the curves' lengths, the chain time axis and its toggle, a saliency
block per input), the directions table in the dock, the Diagnosis dock and the reach marked
across the hand-over. No computing process: the trace is opened from its file."""

from __future__ import annotations

import numpy as np
import pytest

pg = pytest.importorskip("pyqtgraph")
pytest.importorskip("pytestqt")

from lstmviz.gui.main_window import MainWindow  # noqa: E402
from tests.helpers.graph_trace import T_DEC, T_ENC, graph_trace  # noqa: E402


@pytest.fixture
def window(qtbot, settings, errors, tmp_path):
    win = MainWindow(settings=settings)
    win.worker_started = True  # no computing process: nothing here runs
    qtbot.addWidget(win)
    win.show()
    path = graph_trace().save(tmp_path / "graph.npz")
    assert win.open_path(str(path))
    qtbot.waitUntil(lambda: win.trace is not None, timeout=10_000)
    qtbot.waitUntil(lambda: not win.area.busy(), timeout=10_000)
    yield win
    win.close()


def _handover_lines(panel) -> list:
    return [item for item in panel.plot.getPlotItem().items
            if isinstance(item, pg.InfiniteLine) and item in panel.handover_lines]  # fmt: skip


def test_the_norm_curves_draw_the_chain_on_one_time_axis(window, errors):
    assert not errors
    panel = window.area.panel("layers")
    (line,) = _handover_lines(panel)
    assert line.value() == T_ENC - 0.5 and line.angle == 90
    assert line.label.format == "hand-over enc → dec"
    enc, dec = panel.curves[:2]
    rows = window.trace["norm_h_total_by_layer"]
    np.testing.assert_array_equal(enc.xData, np.arange(T_ENC))
    np.testing.assert_array_equal(dec.xData, T_ENC + np.arange(T_DEC))  # after the hand-over
    np.testing.assert_allclose(dec.yData, rows[1, :T_DEC], rtol=1e-6)
    assert np.isfinite(enc.yData).all() and np.isfinite(dec.yData).all()  # no padding drawn
    assert panel.plot.getAxis("bottom").labelText == "step: enc t, then dec t"
    assert panel.readout_at(T_ENC + 1, 0).startswith("step 7 · dec t=1 ")
    # the encoder's reach, across the hand-over, marked on the chain axis at enc t=1
    (reach,) = window.diagnosis.reach_lines
    assert reach.value() == 1 and reach.label.format == "reach enc"


def test_the_chain_toggles_off_to_each_directions_own_steps(window, qtbot):
    window.chain_action.trigger()  # View → Chain hand-overs on one time axis: off
    qtbot.waitUntil(lambda: not window.area.busy(), timeout=10_000)
    panel = window.area.panel("layers")
    assert not panel.handover_lines and panel.offsets is None
    np.testing.assert_array_equal(panel.curves[1].xData, np.arange(T_DEC))
    assert panel.plot.getAxis("bottom").labelText == "timestep t"
    assert window.area.panel("layer_map").data.shape == (2, T_ENC)
    (reach,) = window.diagnosis.reach_lines
    assert reach.value() == 1  # enc t=1 either way: the encoder starts at 0
    window.chain_action.trigger()
    qtbot.waitUntil(lambda: not window.area.busy(), timeout=10_000)
    assert len(panel.handover_lines) == 1


def test_the_layers_heatmap_chains_the_rows_and_blanks_the_rest(window):
    heat = window.area.panel("layer_map")
    assert heat.data.shape == (2, T_ENC + T_DEC)
    assert np.isfinite(heat.data[0, :T_ENC]).all() and np.isnan(heat.data[0, T_ENC:]).all()
    assert np.isnan(heat.data[1, :T_ENC]).all() and np.isfinite(heat.data[1, T_ENC:]).all()
    (line,) = _handover_lines(heat)
    assert line.value() == T_ENC - 0.5
    assert heat.readout_at(T_ENC + 2, 1.5).startswith("dec, step 8 (t = 2): ")
    assert heat.readout_at(T_ENC + 2, 0.5) == "enc: no step here"


def test_per_direction_panels_use_the_directions_own_steps(window, qtbot):
    window.area.set_layer(1)  # dec
    qtbot.waitUntil(lambda: not window.area.busy(), timeout=10_000)
    gates, units = window.area.panel("gates"), window.area.panel("layer_units")
    assert "dec" in gates.title.text() and "dec" in units.title.text()
    assert all(len(curve.xData) == T_DEC for curve in gates.means)
    np.testing.assert_allclose(gates.means[1].yData, window.trace["layer1_gates_mean"][1])
    assert units.data.shape == (4, T_DEC)


def test_a_saliency_block_per_input(window):
    panel = window.area.panel("saliency")
    assert panel.isVisible() and panel.blocks == [("src", 0, T_ENC), ("tgt", 4, T_DEC)]
    assert panel.data.shape == (8, T_ENC)
    a = window.trace.arrays
    np.testing.assert_allclose(panel.data[5:, :T_DEC], a["saliency_tgt"], rtol=1e-6)
    assert np.isnan(panel.data[4:, T_DEC:]).all()
    labels = {text for level in panel.plot.getAxis("left")._tickLevels for _, text in level}
    assert {"src mean", "tgt mean"} <= labels
    token = int(a["x_tgt"][2, 1])
    value = float(a["saliency_tgt"][1, 2])
    assert panel.readout_at(2.2, 6.5) == f"input tgt, sample 1, t = 2, token {token}: {value:.3g}"
    assert panel.readout_at(5.1, 6.5) == "input tgt, no step t = 5"
    lines = [item for item in panel.plot.getPlotItem().items if isinstance(item, pg.InfiniteLine)]
    assert sorted(line.value() for line in lines) == [1, 4, 5]  # under each mean, between


def test_the_dock_lists_the_directions_with_calls_and_hand_over(window):
    table = window.params.direction_table
    assert table.isVisible()
    assert table.rows() == [["enc", "LSTM", "6", ""], ["dec", "LSTM", "4 · 4 calls", "← enc"]]
    assert "initial state is enc's final state" in table.item(1, 3).toolTip()
    assert "4 calls of its layer" in table.item(1, 2).toolTip()


def test_the_diagnosis_dock_reads_the_chain(window):
    table = window.diagnosis.panel.table
    enc = [table.item(0, c).text() for c in range(table.columnCount())]
    assert enc[0] == "enc" and enc[4] == "6/7" and enc[5] == "vanishing"
    assert "across the hand-over, to enc t=1" in enc[6]
    assert "followed across the hand-over: enc → dec" in table.item(0, 0).toolTip()
    assert "initial state: enc's final state" in table.item(1, 0).toolTip()
    text = window.summary.text.text()
    assert "enc (6 steps) → dec (4 steps, 4 calls)" in text and "no NaN/Inf ✓" in text
