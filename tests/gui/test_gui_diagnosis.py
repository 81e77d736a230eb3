"""The window's Diagnosis dock (a row per direction, the reach marked on the norm curves, a
recording's steps per decade and reach over training steps) and File → Compare with… (a
window with both runs, one cursor for both). No computing process: traces are shown as opened.
"""

from __future__ import annotations

import numpy as np
import pytest

pg = pytest.importorskip("pyqtgraph")

pytest.importorskip("pytestqt")

from tests.helpers.recordings import write  # noqa: E402
from tests.helpers.trace_fixtures import decaying_trace, scaled_copy  # noqa: E402


def test_diagnosis_dock_and_the_reach_on_the_norm_curves(idle, qtbot):
    trace = decaying_trace(30)  # ‖dL/dh_t‖ ∝ 0.7^n: 0.7^19 ≥ 1e-3 > 0.7^20, reach 20 of 30
    idle.show_trace(trace, None)
    qtbot.waitUntil(lambda: not idle.area.busy(), timeout=10_000)
    table = idle.diagnosis.panel.table
    cells = [table.item(0, c).text() for c in range(table.columnCount())]
    assert cells[:6] == ["lstm", "lstm", "0.7", "6.46", "20/30", "vanishing"]
    assert cells[6] == "vanishing: falls 10× every 6.46 steps, reaches back 20 of 30 steps"
    (line,) = idle.diagnosis.reach_lines
    assert line.value() == 29 - 19 and line.scene() is idle.area.panel("norm").plot.scene()
    assert not idle.diagnosis.panel.history.isVisible()
    idle.show_trace(decaying_trace(30, seed=2), None)  # a new trace: the old mark goes
    assert len(idle.diagnosis.reach_lines) == 1 and line.scene() is None


def test_compare_with_opens_both_runs_with_one_cursor(idle, qtbot, tmp_path, errors):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    decaying_trace(30).save(a)
    scaled_copy(decaying_trace(30), 100.0).save(b)
    assert idle.diagnosis.compare_with(str(b), str(a))
    (shown,) = idle.diagnosis.compare_windows
    np.testing.assert_allclose(shown.comparison.layers[0].log10_ratio_h, 2.0, rtol=1e-6)
    assert "reach 20 → 20 steps" in shown.text.toPlainText()
    shown.set_cursor(7.0)
    assert [line.value() for line in shown.cursors] == [7.0, 7.0]
    write(tmp_path / "r.lvz", [1, 2])
    assert not idle.diagnosis.compare_with(str(tmp_path / "r.lvz"), str(a))
    assert errors and "cannot compare a trace with a recording" in errors[-1]


def decaying_recording(path, rates) -> None:
    """A recording whose record s has ‖dL/dh_t‖ = rates[s]^n, n steps back from a loss on the
    last step (forward) or the first (backward), in both directions."""
    from lstmviz.io.recording import RecordingWriter, record_rows
    from tests.helpers.recordings import model_trace

    writer = RecordingWriter(path, 5)
    for s, rate in enumerate(rates, 1):
        trace = model_trace(s)
        T = trace.arrays["norm_h_total_by_layer"].shape[1]
        back = rate ** np.arange(T, dtype=np.float64)
        norms = np.stack([back[::-1], back]).astype(np.float32)
        direct = np.zeros_like(norms)
        direct[0, -1], direct[1, 0] = 1.0, 1.0
        for key in ("norm_h_total_by_layer", "norm_c_total_by_layer"):
            trace.arrays[key] = norms
        trace.arrays["norm_h_direct_by_layer"] = direct
        writer.append(record_rows(trace, 5 * s, 0), trace)
    writer.close()


def test_recording_shows_steps_per_decade_and_reach_over_training(idle, qtbot, tmp_path):
    path = tmp_path / "r.lvz"
    decaying_recording(path, [0.1, 0.2, 0.5])  # reach of T=6: n = 0…3, 0…4, all: 4, 5, 6
    assert idle.open_path(str(path))
    qtbot.waitUntil(lambda: idle.diagnosis.dock is not None, timeout=10_000)
    panel = idle.diagnosis.panel
    qtbot.waitUntil(panel.history.isVisible, timeout=10_000)
    curves = panel.plots["reach"].getPlotItem().listDataItems()
    assert [c.name() for c in curves] == ["bi/forward", "bi/backward"]
    for curve in curves:
        assert list(curve.getData()[0]) == [5, 10, 15]
        assert list(curve.getData()[1]) == [4, 5, 6]


def test_two_recordings_compared_over_training(idle, tmp_path):
    a, b = tmp_path / "a.lvz", tmp_path / "b.lvz"
    decaying_recording(a, [0.1, 0.2])
    decaying_recording(b, [0.2, 0.5, 0.5])
    assert idle.diagnosis.compare_with(str(b), str(a))
    shown = idle.diagnosis.compare_windows[-1]
    loss, reach = (w.getPlotItem() for w in shown.records.findChildren(pg.PlotWidget))
    names = [c.name() for c in reach.listDataItems()]
    assert names == ["bi/forward · a.lvz", "bi/backward · a.lvz", "bi/forward · b.lvz",
                     "bi/backward · b.lvz"]  # fmt: skip
    assert list(reach.listDataItems()[2].getData()[1]) == [5, 6, 6]
    assert len(loss.listDataItems()) == 2
