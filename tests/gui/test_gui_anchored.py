"""The error of one step in the window (docs/diagnosis.md, "The error of one step"): a Keras
tagger's trace (a loss at every step) fills every row of the Diagnosis dock with the anchor it
followed; View → Error of one step t* (Ctrl+T, the dock's check box) draws each direction's
‖∂L_t*/∂h_t‖ beside its full gradient with a diamond at its reach; a trace of two anchors
gets the connectivity map C[t*, s] per direction and the anchor chooser. Real pyqtgraph
items, offscreen; no computing process (traces are shown as opened).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pyqtgraph")
pytest.importorskip("pytestqt")

from lstmviz.analysis.diagnosis import reach_point  # noqa: E402
from lstmviz.gui.main_window import MainWindow  # noqa: E402
from lstmviz.io.trace import GradientTrace  # noqa: E402

B, T, V = 2, 24, 9  # batch, steps, vocabulary: reach within T for some direction
FLOOR = 1e-3  # reach: steps whose norm stays at least this fraction of the peak


@pytest.fixture(scope="module")
def tagger() -> GradientTrace:
    """Embedding → Bidirectional(LSTM) → LSTM → Dense softmax per step, sparse cross-entropy
    on every step: the default single anchor (t* = T-1 forward, 0 backward)."""
    import keras

    import lstmviz

    keras.utils.set_random_seed(0)
    inputs = keras.Input((T,), dtype="int32")
    h = keras.layers.Embedding(V, 3)(inputs)
    h = keras.layers.Bidirectional(keras.layers.LSTM(3, return_sequences=True), name="bi")(h)
    h = keras.layers.LSTM(3, return_sequences=True, name="top")(h)
    model = keras.Model(inputs, keras.layers.Dense(4, activation="softmax")(h))
    model.compile(loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    trace = lstmviz.model_gradients(model, rng.integers(1, V, (B, T)), rng.integers(0, 4, (B, T)))
    keras.backend.clear_session()
    return trace


@pytest.fixture(scope="module")
def two_anchors(tagger) -> GradientTrace:
    """The tagger's trace with A = 2 anchors, t* = 0 and T-1 in every direction, built from
    its real rows: each direction's real row where its anchor is (T-1 forward, 0 backward),
    and that row mirrored in time for the other (a decay the other way, from the other end)."""
    arrays = dict(tagger.arrays)
    real = np.asarray(arrays["anchor_norm_h_by_layer"])[:, 0]  # [L, T]
    real_c = np.asarray(arrays["anchor_norm_c_by_layer"])[:, 0]
    backward = np.asarray(arrays["anchors_by_layer"])[:, 0] == 0
    rows, rows_c = (np.stack([np.where(backward[:, None], r, r[:, ::-1]),
                              np.where(backward[:, None], r[:, ::-1], r)], axis=1)
                    for r in (real, real_c))  # fmt: skip
    arrays["anchors_by_layer"] = np.tile(np.array([0, T - 1], np.int64), (len(real), 1))
    arrays["anchor_norm_h_by_layer"] = rows.astype(np.float32)
    arrays["anchor_norm_c_by_layer"] = rows_c.astype(np.float32)
    return GradientTrace("model", tagger.config, arrays).check()


def shown(win, qtbot, trace) -> None:
    win.show_trace(trace, None)
    qtbot.waitUntil(lambda: not win.area.busy(), timeout=10_000)


def empty(curve) -> bool:
    return curve.xData is None or len(curve.xData) == 0


def reach_of(row: np.ndarray, anchor: int, backward: bool) -> int | None:
    """The input position of the farthest step ‖∂L_t*/∂h_s‖ `row` [T] reaches from t* =
    `anchor`, as docs/diagnosis.md defines the reach: the span runs from t* back to the start
    (forward to the end for a backward direction), and the farthest step whose norm is at
    least 10⁻³ of the span's peak is reached. None for an anchor at the direction's first
    step: nothing to follow back."""
    span = row[anchor:] if backward else row[anchor::-1]
    if len(span) < 2:
        return None
    n = int(np.flatnonzero(span >= FLOOR * span.max())[-1])
    return anchor + n if backward else anchor - n


def test_the_dock_answers_every_direction_from_the_error_of_one_step(idle, qtbot, tagger):
    shown(idle, qtbot, tagger)
    table = idle.diagnosis.panel.table
    names = [table.item(r, 0).text() for r in range(table.rowCount())]
    assert names == ["bi/forward", "bi/backward", "top"]
    anchor_column = [table.horizontalHeaderItem(c).text()
                     for c in range(table.columnCount())].index("from t*")  # fmt: skip
    assert not table.isColumnHidden(anchor_column)
    for r, t in enumerate((T - 1, 0, T - 1)):
        cells = [table.item(r, c).text() for c in range(table.columnCount())]
        assert all(cell != "–" for cell in cells[2:6]), cells  # decay, s, reach, trend
        assert f"from the error of step t={t}" in cells[6]
        assert cells[anchor_column] == f"t={t}"
    # the anchor column shows before the verdict, which takes the rest of the width
    header = table.horizontalHeader()
    assert header.visualIndex(anchor_column) == header.visualIndex(6) - 1
    panel = idle.diagnosis.panel
    assert panel.controls.isVisible() and not panel.anchored_box.isChecked()
    assert not panel.anchor_box.isVisible()  # one anchor: nothing to choose


def test_the_toggle_draws_each_directions_error_of_one_step_and_its_reach(idle, qtbot, tagger):
    shown(idle, qtbot, tagger)
    curves = idle.area.panel("layers")
    assert idle.anchored_action.shortcut().toString() == "Ctrl+T"
    assert all(empty(line) for line in curves.anchored_lines)
    idle.anchored_action.trigger()  # View → Error of one step t*
    qtbot.waitUntil(lambda: not idle.area.busy(), timeout=10_000)
    assert idle.shown.view.anchored and idle.diagnosis.panel.anchored_box.isChecked()
    rows = tagger["anchor_norm_h_by_layer"][:, 0]
    diagnosis = tagger.diagnosis
    for k, line in enumerate(curves.anchored_lines[:3]):
        np.testing.assert_array_equal(line.xData, np.arange(T))
        np.testing.assert_allclose(line.yData, rows[k], rtol=1e-6)
        assert line.opts["pen"].color().name() == curves.curves[k].opts["pen"].color().name()
    marks = curves.reach_marks
    at = [reach_point(d)[1] for d in diagnosis.layers]
    assert list(marks.xData) == at
    np.testing.assert_allclose(marks.yData, rows[np.arange(3), at], rtol=1e-6)
    anchors = tagger["anchors_by_layer"][:, 0]
    assert at == [reach_of(rows[k], anchors[k], k == 1) for k in range(3)]
    assert at[1] < T - 1 or at[2] > 0  # some direction's error does not reach every step
    assert any("error of one step t*" in text for _, text in curves.legend_forms[0])
    idle.diagnosis.panel.anchored_box.setChecked(False)  # the dock's check box: off again
    qtbot.waitUntil(lambda: not idle.area.busy(), timeout=10_000)
    assert not idle.anchored_action.isChecked() and not idle.shown.view.anchored
    assert all(empty(line) for line in curves.anchored_lines) and empty(marks)


def test_two_anchors_get_the_connectivity_map_and_the_anchor_chooser(idle, qtbot, two_anchors):
    shown(idle, qtbot, two_anchors)
    panel = idle.area.panel("connectivity")
    assert panel.isVisible() and panel.has_data()
    rows = two_anchors["anchor_norm_h_by_layer"]  # [L, 2, T]
    for k in (0, 1):
        idle.area.set_layer(k)  # the direction the gates and per-unit panels show too
        qtbot.waitUntil(lambda: not idle.area.busy(), timeout=10_000)
        np.testing.assert_allclose(panel.data, rows[k], rtol=1e-6)
        np.testing.assert_allclose(panel.shown, np.log10(rows[k]), rtol=1e-5)  # log colours
        assert panel.image.image.shape[:2] == (2, T)
        assert [panel.plot.getAxis("left")._tickLevels[0][a][1] for a in (0, 1)] == ["0",
                                                                                     str(T - 1)]
        spots = panel.reach_marks.getData()  # (s, row a) of each anchor reaching back
        expected = [(reach_of(rows[k, a], t, k == 1), a) for a, t in enumerate((0, T - 1))]
        assert list(zip(*spots, strict=True)) == [(s, a) for s, a in expected if s is not None]
        # the anchor at the direction's first step (forward t* = 0, backward T-1) reaches
        # nothing back: no mark on its row
        assert len(spots[0]) == 1
    chooser = idle.diagnosis.panel.anchor_box
    assert chooser.isVisible() and chooser.count() == 3  # as diagnosed, t*=0, t*=23
    assert chooser.itemText(2) == f"t*={T - 1}"
    chooser.activated.emit(1)  # t* = 0 in every direction: the curves follow it
    qtbot.waitUntil(lambda: not idle.area.busy(), timeout=10_000)
    assert idle.shown.view.anchored and idle.shown.view.anchor == 0
    curves = idle.area.panel("layers")
    assert list(curves.anchors) == [0, 0, 0]
    for k, line in enumerate(curves.anchored_lines[:3]):
        np.testing.assert_allclose(line.yData, rows[k, 0], rtol=1e-6)
    assert list(curves.reach_marks.xData) == [reach_of(rows[1, 0], 0, True)]  # bi/backward's
    from lstmviz.gui.dialogs.export_dialog import _view_options

    view = _view_options(idle)  # File → Export… draws what the window shows
    assert view.anchored and view.anchor == 0
    shown(idle, qtbot, idle.trace)  # shown again: the choice stays


def test_one_anchor_shows_no_map_and_the_toggle_is_kept(qtbot, settings, errors, tagger):
    first = MainWindow(settings=settings)
    first.worker_started = True
    qtbot.addWidget(first)
    first.show()
    shown(first, qtbot, tagger)
    assert not idle_map(first)
    first.anchored_action.trigger()
    first.close()
    again = MainWindow(settings=settings)  # the next session starts with it on
    again.worker_started = True
    qtbot.addWidget(again)
    assert again.anchored_action.isChecked() and again.shown.view.anchored
    again.close()


def idle_map(win) -> bool:
    panel = win.area.by_name.get("connectivity")
    return panel is not None and panel.isVisible()
