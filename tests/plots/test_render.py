"""lstmviz.plots: the panel choice shared by the window and the exported figure (a real
training trace with a connectivity map), log-axis labels on real axes, and the summary line
before any results."""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from lstmviz.analysis.layout import (
    LSTM_PANELS,
    PANEL_NAMES,
    RECORDING_PANELS,
    RECORDING_ROWS,
    WINDOW_ROWS,
    panels_for,
)
from lstmviz.core.config import RunConfig

ROOT = Path(__file__).resolve().parents[2]


def test_plot_and_analysis_modules_are_small():
    sizes = {
        p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
        for p in [*ROOT.glob("lstmviz/plots/**/*.py"), *ROOT.glob("lstmviz/analysis/**/*.py")]
    }
    assert sizes and max(sizes.values()) <= 600, sizes


# ---- which panels --------------------------------------------------------------------------


def test_panels_for_follows_the_arrays_and_a_live_run():
    base = ["norm", "rows", "units"]
    norms = {"norm_h_total": np.ones(4)}
    assert panels_for({}) == base
    assert panels_for(norms) == base
    assert panels_for({**norms, "loss_by_step": np.ones(3)}) == ["norm", "loss", "rows", "units"]
    assert panels_for({**norms, "connectivity": np.ones((4, 4))}) == [*base, "connectivity"]
    train = RunConfig(mode="train", connectivity=True)
    taped = RunConfig(mode="taped", connectivity=True)
    # a live run shows the panels its results will fill before they arrive; a finished trace
    # only those it has data for
    assert panels_for({}, train, live=True) == list(LSTM_PANELS)
    assert panels_for({}, train) == base
    assert panels_for({}, taped, live=True) == [*base, "connectivity"]
    assert panels_for({}, RunConfig(mode="multipass", connectivity=True), live=True) == base
    assert panels_for({}, RunConfig(mode="train"), live=True) == ["norm", "loss", "rows", "units"]
    assert sorted(n for row in WINDOW_ROWS for n in row) == sorted(PANEL_NAMES)
    assert sorted(n for row in RECORDING_ROWS for n in row) == sorted(RECORDING_PANELS)


@pytest.fixture(scope="module")
def trained():
    import lstmviz

    return lstmviz.train(
        task="adding", train_steps=5, steps=12, batch=4, hidden=8, connectivity=True
    )


def test_figure_of_a_training_trace_has_loss_and_connectivity_laid_out_like_the_window(trained):
    from lstmviz.plots.export.figure import Figure

    with Figure(trained) as figure:
        assert figure.names == list(LSTM_PANELS)
        boxes = dict(zip(figure.names, (box for _, box in figure.boxes(1200, 800)), strict=True))
    norm, loss = boxes["norm"], boxes["loss"]
    # top row: the norm panel, wider, with the loss on its right
    assert norm.top() == loss.top() and norm.right() == loss.left() and norm.width() > loss.width()
    bottom = [boxes[n] for n in ("rows", "units", "connectivity")]
    assert all(b.top() == norm.bottom() for b in bottom)
    assert [b.left() for b in bottom] == sorted(b.left() for b in bottom)
    assert bottom[0].left() == 0 and bottom[-1].right() == 1200 and loss.right() == 1200
    assert all(b.bottom() == 800 for b in bottom)


def _svg_texts(path) -> str:
    return " ".join(ET.parse(path).getroot().itertext())


def test_export_of_a_training_trace_writes_the_loss_and_connectivity_panels(trained, tmp_path):
    from PySide6.QtGui import QImage

    from lstmviz.plots.export.writer import export

    png, svg = export(trained, png=tmp_path / "t.png", svg=tmp_path / "t.svg", width=1400,
                      height=900, dpi=96)  # fmt: skip
    texts = _svg_texts(svg)
    for title in ("Gradient norm over timesteps", "Training loss",
                  "Total gradient norm: rows × timesteps", "Per-unit gradient: units × timesteps",
                  "Connectivity map ‖∂L_t/∂h_s‖"):  # fmt: skip
        assert title in texts, title
    assert "running mean" in texts and "training step" in texts  # the loss panel's legend, axis
    assert "hidden state h_s, step s" in texts  # the connectivity map's axis
    # the PNG holds the loss curve: its running mean's red pen, top right
    image = QImage(str(png)).convertToFormat(QImage.Format_RGB888)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), -1)
    rgb = pixels[:, : image.width() * 3].reshape(image.height(), image.width(), 3).astype(int)
    red = np.abs(rgb - [0xD6, 0x27, 0x28]).sum(-1) < 60
    top_right = red[: image.height() // 2, image.width() * 2 // 3 :]
    assert top_right.sum() > 50
    # and the connectivity map's image, bottom right: viridis colours
    bottom_right = rgb[image.height() * 2 // 3 :, image.width() * 2 // 3 :]
    assert len(np.unique(bottom_right.reshape(-1, 3), axis=0)) > 20


def test_panel_flag_takes_the_five_names(trained, tmp_path, capsys):
    from lstmviz.cli import main

    path = tmp_path / "t.npz"
    trained.save(path)
    out = tmp_path / "loss.svg"
    assert main(["export", str(path), "--svg", str(out), "--panel", "loss",
                 "--panel", "connectivity"]) == 0  # fmt: skip
    texts = _svg_texts(out)
    assert "Training loss" in texts and "Connectivity map ‖∂L_t/∂h_s‖" in texts
    assert "Gradient norm over timesteps" not in texts
    assert main(["export", str(path), "--svg", str(out), "--panel", "bogus"]) == 2
    assert "'norm', 'loss', 'rows', 'units', 'connectivity'" in capsys.readouterr().err


def test_export_of_a_recording_draws_its_evolution_figure(tmp_path, capsys):
    """`lstmviz export REC.lvz --png/--svg/--pdf`: the recording's three panels (the layer
    names on the heatmap's rows), its model panels when asked for, one line for what cannot
    be drawn."""
    from PySide6.QtGui import QImage

    from lstmviz.cli import main
    from tests.helpers.recordings import NAMES, write

    path = tmp_path / "run.lvz"
    write(path, [1, 2, 3, 4], every=5)
    png, svg, pdf = (tmp_path / f"r.{ext}" for ext in ("png", "svg", "pdf"))
    assert main(["export", str(path), "--png", str(png), "--svg", str(svg), "--pdf", str(pdf),
                 "--width", "1200", "--height", "800"]) == 0  # fmt: skip
    texts = _svg_texts(svg)
    for title in ("lstmviz · training recording · run.lvz", "4 records every 5 batches",
                  "Gradient norm by layer at step 20 (epoch 3)", "Loss per record",
                  "Layers × training step (all t)", "training step", *NAMES):  # fmt: skip
        assert title in texts, title
    assert "Input saliency" not in texts  # the model panels only when asked for
    assert pdf.read_bytes().startswith(b"%PDF")
    image = QImage(str(png)).convertToFormat(QImage.Format_RGB888)
    assert (image.width(), image.height()) == (1200, 800)
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), -1)
    rgb = pixels[:, : image.width() * 3].reshape(image.height(), image.width(), 3).astype(int)
    # the heatmap fills the lower half (many viridis colours), the curves the upper: the two
    # directions of the layer in its colour
    assert len(np.unique(rgb[image.height() * 5 // 8 :].reshape(-1, 3), axis=0)) > 20
    blue = np.abs(rgb - [0x1F, 0x77, 0xB4]).sum(-1) < 60
    assert blue[: image.height() // 2, : image.width() * 2 // 3].sum() > 200

    out = tmp_path / "m.svg"
    assert main(["export", str(path), "--svg", str(out), "--panel", "record_map",
                 "--panel", "saliency"]) == 0  # fmt: skip
    texts = _svg_texts(out)
    assert "Layers × training step (all t)" in texts and "Input saliency" in texts
    assert "Loss per record" not in texts

    capsys.readouterr()  # the exports above: progress lines once one took a second
    assert main(["export", str(path), "--png", str(tmp_path / "x.png"), "--panel", "norm"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--panel norm: not a panel of a recording" in err, err
    half = tmp_path / "half.lvz"
    half.write_bytes(path.read_bytes()[:4000])
    assert main(["export", str(half), "--png", str(tmp_path / "h.png"), "--svg",
                 str(tmp_path / "h.svg")]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(half) in err and "truncated" in err, err
    assert not list(tmp_path.glob("h.*")) and not list(tmp_path.glob("x.*"))


# ---- log axis labels -----------------------------------------------------------------------


def test_beside_pass_colours_the_direct_and_cell_curves_are_grey_and_listed_last(qtbot):
    """Colour means a pass (or batch) in a multi-pass plot: the direct and cell curves take no
    pass's colour, and the legend lists the passes in order before them."""
    from lstmviz.plots.panels.curves import NormPanel
    from lstmviz.plots.style import PALETTE

    panel = NormPanel()
    qtbot.addWidget(panel)
    rows = np.random.default_rng(3).uniform(0.1, 1.0, (4, 5)).astype(np.float32)
    arrays = {"norm_h_total_by_pass": rows, "norm_h_truncated_by_pass": rows / 2,
              "norm_h_direct": rows.ravel() / 3, "norm_c_total": rows.ravel(),
              "pass_length": np.int32(5)}  # fmt: skip
    panel.draw(arrays, RunConfig(mode="multipass", steps=5, passes=4))
    colours = {panel.curves[key].opts["pen"].color().name()
               for key in ("norm_h_direct", "norm_c_total")}  # fmt: skip
    assert not colours & {c.lower() for c in PALETTE}
    names = [label.text for _, label in panel.legend.items]
    assert names[:5] == ["pass 1 full", "pass 2 full", "pass 3 full", "pass 4 full",
                         "truncated (stateful), dashed"]  # fmt: skip
    assert names[5:] == ["direct ‖∂L/∂h_t‖", "cell ‖dL/dc_t‖"]
    last_steps = np.zeros(20, np.float32)
    last_steps[4::5] = 0.3  # a loss on each pass's last step: one direct value a pass
    assert panel.curves["norm_h_direct"].opts["symbol"] is None
    panel.draw(dict(arrays, norm_h_direct=last_steps), RunConfig(mode="multipass", steps=5,
                                                                 passes=4))  # fmt: skip
    assert panel.curves["norm_h_direct"].opts["symbol"] == "o"  # marked: a line shows nothing
    panel.set_options(False, True)  # View → Normalise per pass: every curve, pass by pass
    cell = panel.curves["norm_c_total"].yData.reshape(4, 5)
    np.testing.assert_allclose(cell, rows / rows.max(axis=1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(panel.curves["norm_h_direct"].yData[4::5], 1.0)
    panel.set_options(True, False)
    panel.draw({"norm_h_total": rows[0], "norm_c_total": rows[1]}, RunConfig(steps=5))
    assert panel.curves["norm_c_total"].opts["pen"].color().name() == "#2ca02c"  # taped: green


def test_a_heatmap_cell_without_a_value_is_grey_not_the_background(qtbot):
    """A zero on the log scale (or NaN, a masked step, a row to come) has no colour: it shows
    the heatmaps' grey, which white, the panel's background, would hide."""
    from PySide6.QtCore import QPointF, Qt

    from lstmviz.plots.panels.heatmaps import NO_VALUE, RowsHeatmap

    panel = RowsHeatmap()
    qtbot.addWidget(panel)
    panel.setAttribute(Qt.WA_DontShowOnScreen)
    panel.resize(500, 400)
    rows = np.ones((4, 6), np.float32)
    rows[1, 2] = 0.0  # vanished
    panel.draw({"norm_h_total_by_pass": rows, "norm_h_total": rows.ravel()},
               RunConfig(mode="multipass", steps=6, passes=4))  # fmt: skip
    panel.show()
    panel.grab()
    view = panel.plot.getPlotItem().getViewBox()
    image = panel.plot.grab().toImage()
    ratio = image.devicePixelRatio()

    def colour_at(t: float, row: float) -> str:
        at = panel.plot.mapFromScene(view.mapViewToScene(QPointF(t, row)))
        return image.pixelColor(int(at.x() * ratio), int(at.y() * ratio)).name()

    assert colour_at(2, 1.5) == NO_VALUE
    assert colour_at(3, 1.5) not in (NO_VALUE, "#ffffff")  # a value: a colour of the map
    panel.set_options(False, False)  # linear: small values keep their own digits on the bar
    panel.draw({"norm_h_total_by_pass": rows * 1e-3, "norm_h_total": rows.ravel()},
               RunConfig(mode="multipass", steps=6, passes=4))  # fmt: skip
    assert "x0.001" not in panel.bar.axis.labelString()


def test_a_heatmap_column_is_centred_on_its_timestep_where_the_curves_put_it(qtbot):
    """Step t's cell spans t-0.5…t+0.5 (the axis's tick t at its centre, as the curves above
    draw step t at x = t), and hovering reads the cell under the pointer."""
    from lstmviz.plots.panels.curves import NormPanel
    from lstmviz.plots.panels.heatmaps import RowsHeatmap, UnitsHeatmap
    from lstmviz.plots.panels.training import ConnectivityPanel

    rows = np.arange(1.0, 25.0, dtype=np.float32).reshape(4, 6)
    arrays = {"norm_h_total_by_pass": rows, "norm_h_total": rows.ravel()}
    config = RunConfig(mode="multipass", steps=6, passes=4)
    heat, curves = RowsHeatmap(), NormPanel()
    for panel in (heat, curves):
        qtbot.addWidget(panel)
        panel.draw(arrays, config)
    cells = heat.image.mapRectToParent(heat.image.boundingRect())
    # rows too: pass p (from 1) centred on its number, as its tick
    assert (cells.left(), cells.right(), cells.top(), cells.bottom()) == (-0.5, 5.5, 0.5, 4.5)
    assert heat.plot.getAxis("left")._tickLevels[0][1] == (2, "2")  # 4 rows: each a major tick
    assert heat.readout_at(2.6, 1.6).startswith("pass 2, t = 3: ")
    assert heat.readout_at(3.4, 2.4).startswith("pass 2, t = 3: ")
    assert heat.readout_at(-0.6, 2) == "" and heat.readout_at(5.6, 2) == ""
    units = UnitsHeatmap()  # units from 0, unit j centred on j
    qtbot.addWidget(units)
    units.draw({"grad_h_total": np.ones((6, 2, 3), np.float32)}, RunConfig(steps=6, hidden=3))
    cells = units.image.mapRectToParent(units.image.boundingRect())
    assert (cells.top(), cells.bottom()) == (-0.5, 2.5)
    assert units.readout_at(1, 2.3).startswith("unit 2, t = 1: ")
    assert curves.row_curves[0][0].xData[3] == 3.0  # pass 1, step 3: the same x

    connectivity = ConnectivityPanel()
    qtbot.addWidget(connectivity)
    c = np.tril(np.arange(1.0, 17.0).reshape(4, 4))
    connectivity.draw({"connectivity": c}, RunConfig(mode="train", steps=4))
    cells = connectivity.image.mapRectToParent(connectivity.image.boundingRect())
    assert (cells.left(), cells.top(), cells.width(), cells.height()) == (-0.5, -0.5, 4.0, 4.0)
    assert connectivity.readout_at(1.4, 2.6).startswith("t = 3, s = 1: ")


def _multipass_norm_panel(qtbot):
    """A NormPanel (not on screen) drawing 4 passes of 6 steps: a legend of five rows."""
    from PySide6.QtCore import Qt

    from lstmviz.plots.panels.curves import NormPanel

    rows = np.arange(1.0, 25.0, dtype=np.float32).reshape(4, 6)
    panel = NormPanel()
    qtbot.addWidget(panel)
    panel.setAttribute(Qt.WA_DontShowOnScreen)
    arrays = {"norm_h_total_by_pass": rows, "norm_h_total": rows.ravel(),
              "norm_c_total": rows.ravel()}  # fmt: skip
    panel.draw(arrays, RunConfig(mode="multipass", steps=6, passes=4))
    return panel


def test_a_legend_folds_away_in_a_panel_too_short_for_it_and_its_curves(qtbot):
    """In a small window a legend below the x axis left the curves a sliver: under
    MIN_VIEW_PX of room it is hidden and gives its room back, and returns when there is."""
    from lstmviz.plots.panels.curves import MIN_VIEW_PX

    panel = _multipass_norm_panel(qtbot)
    panel.show()
    view = panel.plot.getPlotItem().getViewBox()
    for height, folded in ((500, False), (150, True), (500, False)):
        panel.resize(600, height)
        qtbot.waitUntil(lambda h=height: panel.plot.height() < h)  # laid out
        qtbot.wait(20)
        assert panel.legend.isVisible() is not folded, height
        assert view.height() >= MIN_VIEW_PX or folded
        if folded:  # the room it gave back went to the curves
            assert view.height() > panel.plot.height() - panel.plot.getAxis("bottom").height() - 30


def test_the_curves_keep_the_panels_width_when_the_legend_narrows(qtbot, rng):
    """Tick labels that widen the y axis after the legend was laid out make fewer legend
    columns fit: the plot had stayed as wide as the wider legend had made it, wider than the
    panel, and the last timesteps were cut off on the right."""
    import pyqtgraph as pg
    from PySide6.QtCore import Qt

    from lstmviz.plots.panels.curves import NormHistoryPanel

    steps = 30
    history = np.exp(rng.uniform(np.log(0.002), np.log(0.012), (20, steps))).astype(np.float32)
    arrays = {"norm_h_total_by_step": history, "norm_h_total": history[-1],
              "norm_h_direct": history[-1] * 0.7, "norm_c_total": history[-1] * 0.4}  # fmt: skip
    panel = NormHistoryPanel()
    qtbot.addWidget(panel)
    panel.setAttribute(Qt.WA_DontShowOnScreen)
    panel.resize(449, 330)  # the plot 441 px wide: two legend columns fit a narrow y axis only
    panel.show()
    qtbot.waitExposed(panel)
    panel.draw(arrays, RunConfig(mode="train", steps=steps, batch=4, train_steps=20))
    for _ in range(3):  # painted: the axis takes its tick labels' width
        panel.grab()
        qtbot.wait(20)
    item, view = panel.plot.getPlotItem(), panel.plot.getViewBox()
    assert item.geometry().width() <= panel.plot.width()
    right = view.mapViewToScene(pg.Point(steps - 1, 0.005)).x()  # the last timestep's x
    assert right < panel.plot.width()


def test_training_steps_count_from_1_in_every_panel_and_the_summary(qtbot):
    """The loss panel, its NaN/Inf marks, its readout and the summary count training steps
    from 1, as the steps × timesteps heatmap labels its rows and the CSV names its columns."""
    from lstmviz.analysis.report.summary import summary_text
    from lstmviz.plots.panels.training import LossPanel

    loss = np.array([1.0, 0.8, np.nan, 0.5, 0.4])
    arrays = {"loss_by_step": loss, "nonfinite_loss_steps": np.array([2])}  # the third step
    panel = LossPanel()
    qtbot.addWidget(panel)
    panel.draw(arrays, RunConfig(mode="train", steps=4, train_steps=5))
    np.testing.assert_array_equal(panel.curve.xData, [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(panel.marks.steps, [3])
    assert panel.readout_at(4.2, 0.5) == "step 4: loss 0.5"
    assert panel.readout_at(0.4, 0.5) == ""
    assert "NaN/Inf at training step = 3 (1 step)" in summary_text("train", arrays, None, 1.0)


def test_a_recording_of_one_record_marks_its_training_loss(qtbot, tmp_path):
    """One record: the training loss is one point, drawn (a line of one point is invisible,
    and the legend named it); with more records it is a line again."""
    from lstmviz.analysis.records import panel_arrays
    from lstmviz.io.recording import load_recording
    from lstmviz.plots.panels.record_panels import RecordLossPanel
    from tests.helpers.recordings import write

    panel = RecordLossPanel()
    qtbot.addWidget(panel)
    for seeds, symbol in (([1], "s"), ([1, 2, 3], None)):
        path = tmp_path / f"run{len(seeds)}.lvz"
        write(path, seeds, every=5)
        panel.draw(panel_arrays(load_recording(path)), None)
        assert panel.train.opts["symbol"] == symbol and len(panel.train.yData) == len(seeds)


def test_row_labels_thin_out_in_a_short_heatmap(qtbot):
    """20 rows are each labelled where there is room; in a short panel only rows 1, 5, 10,
    15, 20 are (the labels of every row overlapped)."""
    from PySide6.QtCore import Qt

    from lstmviz.plots.panels.heatmaps import RowsHeatmap
    from tests.helpers.gui_checks import drawn_labels

    rows = np.arange(1.0, 121.0, dtype=np.float32).reshape(20, 6)
    panel = RowsHeatmap()
    qtbot.addWidget(panel)
    panel.setAttribute(Qt.WA_DontShowOnScreen)
    panel.draw({"norm_h_total_by_pass": rows, "norm_h_total": rows.ravel()},
               RunConfig(mode="multipass", steps=120, passes=20))  # fmt: skip

    assert drawn_labels(panel, qtbot, 900) == [str(r) for r in range(1, 21)]
    assert drawn_labels(panel, qtbot, 160) == ["1", "5", "10", "15", "20"]


def test_a_narrow_panel_elides_its_title_and_folds_a_legend_wider_than_its_plot(qtbot):
    """In a small window a title cut mid-letter ran under the controls beside it, and a
    one-column legend wider than the plot had its labels cut: the title ends in "…" (the
    full one stays its text, for exports), the legend folds away."""
    from lstmviz.plots.panels.panel import panel_title

    panel = _multipass_norm_panel(qtbot)
    for width, narrow in ((900, False), (150, True), (900, False)):
        panel.resize(width, 500)
        panel.show()
        qtbot.waitUntil(lambda w=width: panel.width() == w)
        qtbot.wait(20)
        shown = panel.title.shown_text()
        assert (shown is not None and shown.endswith("…")) is narrow, (width, shown)
        assert panel_title(panel) == "Gradient norm over timesteps"
        assert panel.legend.isVisible() is not narrow, width


def test_summary_shapes_are_never_parted_by_a_wrap():
    """Qt's line breaker finds no break in a shape or "(max |Δ| 1.9e-08)" (it broke after "|")."""
    from PySide6.QtCore import QTextBoundaryFinder

    from lstmviz.analysis.report.summary import plain, reference_part, summary_text

    config = RunConfig(mode="model", steps=40, batch=32, loss="mse")
    arrays = {"loss": np.float32(0.5), "inputs_source": "d.npz: x [32, 40] · y [32, 1]"}
    text = summary_text("model", arrays, config, 1.0)
    part = reference_part({"max_abs_diff_full_vs_reference": np.float32(1.9e-8)})
    for check in (text[text.index("[32,"):][:8], part[part.index("(max"):]):
        finder = QTextBoundaryFinder(QTextBoundaryFinder.BoundaryType.Line, check)
        assert finder.toNextBoundary() == len(check), check
    assert plain(part).endswith("(max\u00a0|Δ|\u00a01.9e-08)")


def test_summary_vouches_for_no_nan_only_once_there_are_arrays():
    from lstmviz.analysis.report.summary import summary_text

    config = RunConfig(mode="taped", steps=5)
    before = summary_text("taped", {}, config, 0.0)
    assert "NaN" not in before and "Inf" not in before, before
    after = summary_text("taped", {"norm_h_total": np.ones(5, np.float32)}, config, 0.5)
    assert after.endswith("no NaN/Inf ✓"), after
    bad = summary_text("taped", {"norm_h_total": np.array([1.0, np.nan], np.float32)}, config, 0)
    assert "non-finite values: 1 in norm_h_total" in bad
    checked = summary_text("taped", {"nonfinite_steps": np.zeros(0, np.int64)}, config, 0)
    assert checked.endswith("no NaN/Inf ✓"), checked
    assert re.search(r"\d+\.\d\d\u00a0s", after)  # the run time, never split by a wrap
    assert before.endswith("running…") and "kernel" not in before  # neither known yet
    train = RunConfig(mode="train", steps=5)
    live = {"loss_by_step": np.array([0.9, 0.5], np.float32)}
    assert "loss 0.5" in summary_text("train", live, train, 1.0)  # the latest step's
    done = dict(live, loss=np.float32(0.25))  # the final weights', as the CLI prints it
    assert "loss 0.25" in summary_text("train", done, train, 1.0)


def test_render_pins_the_singletons_for_exports_without_the_window():
    """lstmviz.plots.export.writer draws with Qt but never imports lstmviz.gui: importing
    lstmviz.plots pins None/True/False against PySide6 6.12's reference-counting bug (CPython <
    3.12)."""
    import subprocess
    import sys

    code = (
        "import sys; before = sys.getrefcount(None); "
        "import lstmviz.plots, lstmviz.plots.export.writer; "
        "print(before, sys.getrefcount(None), 'lstmviz.gui' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, check=True)  # fmt: skip
    before, after, gui = done.stdout.split()
    assert gui == "False"
    if sys.version_info < (3, 12):
        assert int(before) < 2**40 < int(after)


def test_heatmap_reductions_are_computed_once_and_match_a_float64_loop():
    """`prepare.warm` (the worker thread, before the window draws a finished trace) computes
    what the heatmaps reduce from grad_h_total; the panels then get the same kept result,
    which equals a plain float64 loop over the batch, and is dropped with the array."""
    import gc

    from lstmviz.analysis import values
    from lstmviz.plots import prepare

    g = np.random.default_rng(3).standard_normal((7, 5, 4)).astype(np.float32)
    arrays = {"grad_h_total": g}
    gc.collect()  # what earlier tests left: not dropped below, in the middle of this one
    before = set(values._REDUCED)
    prepare.warm(arrays)
    added = set(values._REDUCED) - before
    units = values.units_matrix(arrays)
    rows, name = values.rows_matrix(arrays)
    assert units is values.units_matrix(arrays) and rows is values.rows_matrix(arrays)[0]
    assert set(values._REDUCED) - before == added and name == "batch sample"
    of_g = {key for key in added if key[0] == id(g)}  # its unit means and sample norms
    assert len(of_g) == 2
    expect_units = np.zeros((4, 7))
    expect_rows = np.zeros((5, 7))
    for t in range(7):
        for b in range(5):
            row = g[t, b].astype(np.float64)
            expect_units[:, t] += np.abs(row) / 5
            expect_rows[b, t] = np.sqrt(np.sum(row * row))
    np.testing.assert_allclose(units, expect_units, rtol=1e-12)
    np.testing.assert_allclose(rows, expect_rows, rtol=1e-12)
    with pytest.raises(ValueError):
        units[0, 0] = 1.0  # shared by the panels: read-only
    del arrays, g
    gc.collect()
    assert not of_g & set(values._REDUCED)  # dropped with the array


def test_prepare_keeps_each_directions_unit_means_which_match_a_masked_loop():
    from lstmviz.analysis import layers, values
    from lstmviz.plots import prepare

    rng = np.random.default_rng(5)
    g0 = rng.standard_normal((6, 4, 3)).astype(np.float32)
    g1 = rng.standard_normal((6, 4, 2)).astype(np.float32)
    mask = rng.random((6, 4)) > 0.3
    mask[2] = False  # a step masked in every sample: NaN
    arrays = {"layer_names": np.array(["bi/forward", "bi/backward"]),
              "layer0_grad_h_total": g0, "layer1_grad_h_total": g1, "mask": mask}  # fmt: skip
    before = len(values._REDUCED)
    prepare.warm(arrays)
    assert len(values._REDUCED) == before + 2  # one per direction
    for k, g in enumerate((g0, g1)):
        units = layers.units_of_layer(arrays, k)
        assert units is layers.units_of_layer(arrays, k)  # kept, not recomputed
        expect = np.full((g.shape[2], 6), np.nan)
        for t in range(6):
            rows = [np.abs(g[t, b].astype(np.float64)) for b in range(4) if mask[t, b]]
            if rows:
                expect[:, t] = np.mean(rows, axis=0)
        np.testing.assert_allclose(units, expect, rtol=1e-6)


def test_running_mean_skips_a_nan_step_instead_of_ending_the_curve():
    """A loss that is NaN or Inf at one training step leaves a gap as wide as the window in the
    bold running mean, not NaN for the rest of the run; checked against a direct per-window
    mean of the finite values."""
    from lstmviz.analysis.values import running_mean

    y = np.array([1.0, 2.0, np.nan, 4.0, 5.0, np.inf, 7.0, 8.0, 9.0, 10.0])
    for window in (1, 2, 3, 4):
        got = running_mean(y, window)
        for i in range(len(y)):
            part = y[max(0, i + 1 - window) : i + 1]
            part = part[np.isfinite(part)]
            want = part.mean() if part.size else np.nan
            np.testing.assert_equal(np.isnan(got[i]), np.isnan(want))
            if part.size:
                assert got[i] == pytest.approx(want)
    assert np.isnan(running_mean(y, 1)[2]) and running_mean(y, 2)[-1] == 9.5


def test_a_recordings_report_lists_the_last_records_lines_under_one_heading(tmp_path):
    """The PDF summary of a recording: the last record's model lines (one a direction, and
    more) under one heading, not each prefixed with "last record (step …)", which made every
    line wrap in two and, with many directions, squeezed the panels."""
    from lstmviz.analysis.report.model_report import model_lines
    from lstmviz.io.recording import load_recording
    from lstmviz.plots.export.recording_figure import RecordingFigure
    from tests.helpers.recordings import write

    path = tmp_path / "run.lvz"
    write(path, [1, 2, 3, 4], every=5)
    recording = load_recording(path)
    with RecordingFigure(recording) as figure:
        lines = figure.summary_lines()
    expected = model_lines(recording.last.arrays)
    assert expected and not any(line.startswith("last record (") for line in lines)
    headed = [line for line in lines if line.startswith("at the last record, step 20")]
    assert len(headed) == 1 and all(f"<li>{line}</li>" in headed[0] for line in expected)
