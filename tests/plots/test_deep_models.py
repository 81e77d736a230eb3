"""A deep model's panels: Embedding → 4 × Bidirectional(LSTM) → LSTM is nine LSTM directions.
Their names label the rows of the layers × timesteps and layers × training step heatmaps, and
the norm panels' legends, in panels as short as a 1366×768 laptop or an 800×500 export leaves
them: the labels never overlap, and the legend still names the layers. Arrays made here (no
TensorFlow), named as Keras names a Sequential's layers."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")
import pyqtgraph as pg  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from lstmviz.analysis.layers import row_labels, short_direction_label  # noqa: E402
from tests.helpers.axis_labels import tick_texts  # noqa: E402

LAYERS = ["bidirectional", "bidirectional_1", "bidirectional_2", "bidirectional_3"]
NAMES = [f"{layer}/{d}" for layer in LAYERS for d in ("forward", "backward")] + ["lstm_4"]
FULL = [f"{layer} {arrow}" for layer in LAYERS for arrow in "→←"] + ["lstm_4"]
SHORT = [f"{layer} {arrow}" for layer in ("bi", "bi_1", "bi_2", "bi_3") for arrow in "→←"]
SHORT += ["lstm_4"]


def trace_arrays(t: int = 20) -> dict:
    rng = np.random.default_rng(3)
    return {"layer_names": np.array(NAMES), "norm_h_total_by_layer": rng.random((9, t)) + 0.1}


def recording_arrays(records: int = 12, t: int = 20) -> dict:
    rng = np.random.default_rng(4)
    return {"layer_names": np.array(NAMES), "step": np.arange(2, 2 * records + 1, 2),
            "epoch": np.arange(records) // 4, "loss": np.linspace(0.7, 0.6, records),
            "train_loss": np.linspace(0.7, 0.6, records),
            "norm_h_total_by_layer": rng.random((records, 9, t)) + 0.1}  # fmt: skip


def test_short_direction_labels():
    assert short_direction_label("bidirectional_2/backward") == "bi_2 ←"
    assert short_direction_label("bidirectional/forward") == "bi →"
    assert short_direction_label("lstm_4") == "lstm_4"
    assert short_direction_label("encoder_layer_12/forward") == "encoder_l…_12 →"
    assert row_labels(NAMES, short=False) == FULL
    assert row_labels(NAMES, short=True) == SHORT
    # short forms that would name two directions alike: the full names
    alike = ["encoder_layer_one/forward", "encoder_layer_two/forward"]
    assert row_labels(alike, short=True) == ["encoder_layer_one →", "encoder_layer_two →"]


def drawn_labels(panel, width: int, height: int, qtbot) -> list[tuple]:
    """The row labels the panel's left axis draws at this size (boxes, texts)."""
    panel.resize(width, height)
    qtbot.waitUntil(lambda: (panel.width(), panel.height()) == (width, height), timeout=3_000)
    qtbot.wait(50)  # the axis widens to its labels in a later layout
    QApplication.processEvents()
    return [(rect, text) for rect, text in tick_texts(panel.plot.getAxis("left")) if text]


def assert_apart(texts: list[tuple], size) -> None:
    rects = [rect for rect, _ in texts]
    for i, a in enumerate(rects):
        for b in rects[i + 1:]:
            assert not a.intersects(b), (size, [text for _, text in texts])


def direction_heatmaps():
    from lstmviz.plots.panels.model_maps import LayerHeatmap
    from lstmviz.plots.panels.record_panels import RecordHeatmap

    return [(LayerHeatmap, trace_arrays()), (RecordHeatmap, recording_arrays())]


@pytest.mark.parametrize(("make", "arrays"), direction_heatmaps(), ids=["layers", "records"])
def test_direction_row_labels_never_overlap(qtbot, make, arrays):
    """Nine directions in a short panel (the window's bottom row on a 1366×768 screen: ~150 px
    of plot; an 800×500 export): every name on one tick level overlapped. Now every k-th row
    is named (the first always), short names in a narrow panel, all full names when tall."""
    panel = make()
    qtbot.addWidget(panel)
    panel.set_options(log=True, normalise=False)
    panel.draw(arrays)
    panel.show()
    for width, height in ((280, 150), (280, 200), (400, 260), (800, 220), (800, 600)):
        texts = drawn_labels(panel, width, height, qtbot)
        labels = [text for _, text in texts]
        assert_apart(texts, (width, height))
        assert labels and labels[0] in (FULL[0], SHORT[0]), (width, height, labels)
        forms = {280: SHORT, 800: FULL}.get(width)  # a narrow panel keeps its heatmap
        assert any(set(labels) <= set(f) for f in ([forms] if forms else [SHORT, FULL])), (
            width, height, labels)  # fmt: skip
        ticks = panel.plot.getAxis("left")._tickLevels[0]
        assert [round(y - 0.5) for y, _ in ticks] == list(range(9))  # a tick on every row
    assert labels == FULL  # tall: every row named
    hover = [panel.readout_at(0.5, r + 0.5) for r in range(9)]
    assert [text.split(",")[0] for text in hover] == NAMES  # hover names every row in full


def legend_texts(panel) -> list[str]:
    return [label.text for _, label in panel.legend.items] if panel.legend.isVisible() else []


@pytest.mark.parametrize("kind", ["trace", "recording"])
def test_a_legend_of_nine_directions_names_the_layers_in_a_short_panel(qtbot, kind):
    """The norm panels in the recording view on a 1366×768 screen (~360 × 180 px): nine
    entries (and the faded records') did not fit, and the legend was folded away, naming no
    curve. It now shows an entry per layer in its colour (short names if need be) and one
    for the dashed backward curves, in less room the layers alone; the whole legend where it
    fits."""
    from lstmviz.plots.panels.model_curves import LayerNormPanel
    from lstmviz.plots.panels.record_panels import RecordNormPanel

    panel = LayerNormPanel() if kind == "trace" else RecordNormPanel()
    qtbot.addWidget(panel)
    panel.draw(trace_arrays() if kind == "trace" else recording_arrays())
    panel.show()
    recording = kind == "recording"
    faded = ["3 of 11 earlier records (faded)"] * recording
    layers = [*LAYERS, "lstm_4", "backward (dashed)", *faded]
    short = ["bi", "bi_1", "bi_2", "bi_3", "lstm_4", "backward", *["earlier (faded)"] * recording]
    shown = []
    for height in range(140, 230, 10):
        panel.resize(360, height)
        qtbot.waitUntil(lambda h=height: panel.height() == h, timeout=3_000)
        QApplication.processEvents()
        shown.append(legend_texts(panel))
    least = ["bi", "bi_1", "bi_2", "bi_3", "lstm_4"]  # the layers' colours alone
    assert short in shown and shown[-1], shown  # before: folded at every height
    assert (least in shown) is recording, shown  # where the faded records' entry takes a row
    assert all(texts in ([], layers, short, least) for texts in shown), shown
    sample = panel.legend.items[5][0].item
    assert sample.opts["pen"].style() != panel.curves[0].opts["pen"].style()  # dashed
    colors = [item.item.opts["pen"].color().name() for item, _ in panel.legend.items[:5]]
    assert colors == [panel.curves[k].opts["pen"].color().name() for k in (0, 2, 4, 6, 8)]
    panel.resize(900, 500)
    qtbot.waitUntil(lambda: legend_texts(panel)[:9] == NAMES, timeout=3_000)


def test_a_legend_shown_later_keeps_the_panels_text_colour(qtbot):
    """A legend form shown on a resize outside the style the panel was made in (an export's
    is set only while it draws) kept pyqtgraph's default grey text."""
    from lstmviz.plots.panels.model_curves import LayerNormPanel

    saved = pg.getConfigOption("foreground")
    pg.setConfigOptions(foreground="#222")
    try:
        panel = LayerNormPanel()
    finally:
        pg.setConfigOptions(foreground="d")  # pyqtgraph's grey, as outside the style
    qtbot.addWidget(panel)
    panel.draw(trace_arrays())
    panel.show()
    panel.resize(900, 500)
    qtbot.waitUntil(lambda: legend_texts(panel)[:1] == [NAMES[0]], timeout=3_000)
    panel.resize(360, 190)  # a legend per layer: its entries made now
    qtbot.waitUntil(lambda: legend_texts(panel)[:1] in (["bidirectional"], ["bi"]), timeout=3_000)
    colors = {pg.mkColor(label.opts["color"]).name() for _, label in panel.legend.items}
    pg.setConfigOptions(foreground=saved)
    assert colors == {"#222222"}


@pytest.mark.parametrize("count", [9, 12])
def test_the_pdf_summary_keeps_the_top_layer(count):
    """The PDF's summary listed 8 directions, then "… and 1 more directions": of nine, the
    one left out was the top LSTM (nearest the loss). It lists nine, of more the first seven,
    how many are left out, and the last."""
    from lstmviz.analysis.report.model_report import model_lines

    names = [f"bidirectional_{k}/{d}" for k in range(count // 2) for d in ("forward", "backward")]
    names = (names + ["lstm_top"])[:count] if count % 2 else names[:-1] + ["lstm_top"]
    rng = np.random.default_rng(5)
    arrays = {"layer_names": np.array(names), "norm_h_total_by_layer": rng.random((count, 6))}
    listed = [line.split(":")[0] for line in model_lines(arrays) if "largest" in line]
    hidden = [line for line in model_lines(arrays) if line.startswith("…")]
    if count == 9:
        assert listed == names and not hidden
    else:
        assert listed == names[:7] + ["lstm_top"]
        assert hidden == [f"… and {count - 8} more directions"]


def test_a_short_legend_is_not_rebuilt_on_each_redraw(qtbot, monkeypatch):
    """With a shorter form shown, a redraw (live runs redraw a few times a second) or a resize
    to no more room tried the full legend first, clearing and refilling its nine entries and
    then the short form's: twice per redraw. Now only a larger room tries the full one."""
    from lstmviz.plots.panels.model_curves import LayerNormPanel

    panel = LayerNormPanel()
    qtbot.addWidget(panel)
    panel.draw(trace_arrays())
    panel.show()
    panel.resize(360, 200)
    qtbot.waitUntil(lambda: legend_texts(panel)[:1] in (["bidirectional"], ["bi"]), timeout=3_000)
    qtbot.wait(100)  # the axes take their labels' sizes over a few layouts
    panel.draw(trace_arrays())  # more room than when the full legend was tried: tried again
    QApplication.processEvents()
    shown = legend_texts(panel)
    cleared = []
    monkeypatch.setattr(panel.legend, "clear", lambda: cleared.append(1))
    for _ in range(3):
        panel.draw(trace_arrays())
        QApplication.processEvents()
    panel.resize(355, 195)
    qtbot.waitUntil(lambda: panel.height() == 195, timeout=3_000)
    QApplication.processEvents()
    assert cleared == [] and legend_texts(panel) == shown
    monkeypatch.undo()
    panel.resize(900, 500)  # room for the full legend again
    qtbot.waitUntil(lambda: legend_texts(panel)[:9] == NAMES, timeout=3_000)
