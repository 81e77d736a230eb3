"""Export: PNG/SVG/PDF/CSV of real traces of every mode, the `lstmviz export` CLI (exit codes,
atomic writes, headless), and the GUI's export actions."""

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from lstmviz.cli import main
from lstmviz.core.view import ViewOptions
from lstmviz.plots.export.writer import ExportError, export, export_csv, export_pdf, export_png
from tests.helpers.trace_fixtures import CONFIGS, N, P, S, T, read_csv
from tests.helpers.trace_fixtures import traces as traces  # the fixture: a trace of each mode

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
HEADERS = {
    "taped": ["t", "norm_h_total", "norm_h_direct", "norm_c_total"],
    "multipass": ["t", "pass", "t_in_pass", "norm_h_total", "norm_h_direct", "norm_c_total",
                  "norm_h_reference", "norm_h_truncated", "norm_c_truncated"],
    "batchwise": ["t"] + [f"{k}_batch{n}" for k in ("norm_h_total", "norm_h_direct",
                                                   "norm_c_total") for n in range(1, N + 1)],
    "train": ["t", "norm_h_total", "norm_h_direct", "norm_c_total"]
    + [f"norm_h_total_step{s}" for s in range(1, S + 1)]
    + ["step0_norm_h_total", "step0_norm_h_direct", "step0_norm_c_total"],
}  # fmt: skip


@pytest.fixture(scope="module")
def trace_file(traces, tmp_path_factory):
    return traces["multipass"].save(tmp_path_factory.mktemp("trace") / "multipass.npz")


def pdf_pages(data: bytes) -> int:
    return len(re.findall(rb"/Type\s*/Page\b(?!s)", data))


# ---- formats -------------------------------------------------------------------------------


def test_png_has_the_requested_size_dpi_and_the_curves(traces, tmp_path):
    from PySide6.QtGui import QImage

    path = export_png(traces["taped"], tmp_path / "a.png", width=900, height=640, dpi=120)
    image = QImage(str(path))
    assert (image.width(), image.height()) == (900, 640)
    assert abs(image.dotsPerMeterX() - 120 / 0.0254) < 2
    pixels = np.frombuffer(image.convertToFormat(QImage.Format_RGB888).constBits(), np.uint8)
    rgb = pixels.reshape(640, -1)[:, : 900 * 3].reshape(640, 900, 3).astype(int)
    navy = np.abs(rgb - [0x1F, 0x3B, 0x73]).sum(-1) < 40  # the total-gradient curve's pen
    assert navy.sum() > 200
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 50  # heatmaps, text, curves


def test_png_grid_is_light_when_pyqtgraphs_own_background_is_black(traces, tmp_path):
    """The CLI never sets pyqtgraph's options (default background black); the export's first
    paint happens outside its style, and the opaque grid lines were blended with black."""
    import pyqtgraph as pg
    from PySide6.QtGui import QImage

    saved = pg.getConfigOption("background")
    pg.setConfigOptions(background="k")
    try:
        path = export_png(traces["taped"], tmp_path / "a.png", width=900, height=640, dpi=96)
    finally:
        pg.setConfigOptions(background=saved)
    image = QImage(str(path)).convertToFormat(QImage.Format_RGB888)
    rgb = np.frombuffer(image.constBits(), np.uint8).reshape(640, -1)[:, : 900 * 3]
    plot = rgb.reshape(640, 900, 3)[80:300, 100:850].astype(int)  # the norm panel's view
    dark = (plot.sum(-1) < 3 * 90).mean()
    assert dark < 0.02, f"{dark:.1%} of the norm plot is near-black"


def test_a_part_made_ahead_in_other_colours_is_not_taken(qapp, traces, tmp_path):
    """A window's plots made ahead (`plots.panels.panel.SPARES`) under a black background were taken
    by a later export, whose norm plot then stayed black (seen when a test window came first)."""
    import pyqtgraph as pg

    from lstmviz.plots.panels.panel import SPARES, plot_widget

    saved = pg.getConfigOption("background")
    pg.setConfigOptions(background="k")
    try:
        spare = SPARES.make(plot_widget)
        test_png_grid_is_light_when_pyqtgraphs_own_background_is_black(traces, tmp_path)
        assert spare in SPARES.waiting(plot_widget)  # not taken by the export
    finally:
        pg.setConfigOptions(background=saved)
        for parts in SPARES.made.values():
            if spare in parts:
                parts.remove(spare)


def test_svg_parses_with_vector_curves_labels_and_embedded_heatmaps(traces, tmp_path):
    trace = traces["taped"]
    path = export(trace, svg=tmp_path / "a.svg", width=1200, height=800, dpi=96)[0]
    root = ET.parse(path).getroot()
    assert root.tag == SVG + "svg" and root.get("viewBox") == "0 0 1200 800"
    texts = " ".join("".join(t.itertext()) for t in root.iter(SVG + "text"))
    labels = ["timestep t", "gradient norm (log scale)", "Gradient norm over timesteps",
              "rows × timesteps", "units × timesteps", "batch sample",
              "total ‖dL/dh_t‖"]  # fmt: skip
    for label in labels:
        assert label in texts, label
    points = [len(re.findall(r"[ML]\s*-?[\d.]", p.get("d", ""))) for p in root.iter(SVG + "path")]
    points += [len(p.get("points", "").split()) for p in root.iter(SVG + "polyline")]
    assert sum(n >= T for n in points) >= 3  # total, direct and cell curves, T points each
    images = [i for i in root.iter(SVG + "image")]
    hrefs = [i.get("{http://www.w3.org/1999/xlink}href", "") for i in images]
    assert len(images) >= 2 and all(h.startswith("data:image/png;base64,") for h in hrefs)
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("mode", list(CONFIGS))
def test_the_exported_summary_names_no_run_time(traces, tmp_path, mode):
    """A figure is of a saved trace, whose run time is not known: the summary under the title
    must not claim one (a stray "0.00 s")."""
    path = export(traces[mode], svg=tmp_path / "a.svg", width=1200, height=800, dpi=96)[0]
    texts = " ".join("".join(t.itertext()) for t in ET.parse(path).getroot().iter(SVG + "text"))
    assert "loss" in texts and not re.search(r"\d\.\d\d[\s\u00a0]s\b", texts)


@pytest.mark.parametrize("mode", list(CONFIGS))
def test_csv_has_one_row_per_timestep_and_the_trace_norms(traces, tmp_path, mode):
    trace = traces[mode]
    header, rows = read_csv(export_csv(trace, tmp_path / "c.csv"))
    assert header == HEADERS[mode]
    length = T * (P if mode == "multipass" else 1)
    assert len(rows) == length and all(len(r) == len(header) for r in rows)
    table = {name: np.array([float(r[i]) for r in rows]) for i, name in enumerate(header)}
    np.testing.assert_array_equal(table["t"], np.arange(length))
    a = trace.arrays
    if mode == "batchwise":
        for n in range(N):
            for key in ("norm_h_total", "norm_h_direct", "norm_c_total"):
                np.testing.assert_array_equal(table[f"{key}_batch{n + 1}"].astype(np.float32),
                                              a[f"{key}_by_batch"][n])  # fmt: skip
        return
    for key in header[1:]:
        if key.startswith("norm_h_total_step"):
            expected = a["norm_h_total_by_step"][int(key.removeprefix("norm_h_total_step")) - 1]
        elif key in ("pass", "t_in_pass"):
            continue
        else:
            expected = a[key]
        np.testing.assert_array_equal(table[key].astype(np.float32), expected, err_msg=key)
    if mode == "multipass":
        np.testing.assert_array_equal(table["pass"], np.repeat(np.arange(1, P + 1), T))
        full = table["norm_h_total"].astype(np.float32).reshape(P, T)
        np.testing.assert_array_equal(full, a["norm_h_total_by_pass"])


def test_pdf_report_lists_only_the_fields_the_run_reads(traces):
    """The run configuration in the PDF listed the model fit's `epochs` and `every` for a
    multi-pass run, which reads neither."""
    from lstmviz.plots.export.figure import Figure

    with Figure(traces["multipass"]) as figure:
        report = figure.report_html()
    assert "<tt>passes</tt>" in report and "<tt>hidden</tt>" in report
    assert "<tt>epochs</tt>" not in report and "<tt>every</tt>" not in report
    with Figure(traces["train"]) as figure:
        report = figure.report_html()
    assert "<tt>task</tt>" in report and "<tt>passes</tt>" not in report


def test_pdf_is_one_page(traces, tmp_path):
    data = export_pdf(traces["multipass"], tmp_path / "r.pdf").read_bytes()
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    assert pdf_pages(data) == 1


@pytest.mark.parametrize("mode", list(CONFIGS))
def test_every_mode_exports_every_format(traces, tmp_path, mode):
    out = {fmt: tmp_path / f"{mode}.{fmt}" for fmt in ("png", "svg", "pdf", "csv")}
    written = export(traces[mode], **out, width=800, height=560, dpi=96)
    beside = tmp_path / f"{mode}_diagnosis.csv"  # the diagnosis, beside the curves
    assert written == [*out.values(), beside]
    assert out["png"].read_bytes().startswith(b"\x89PNG")
    ET.parse(out["svg"])
    assert pdf_pages(out["pdf"].read_bytes()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in written)
    assert beside.read_text().startswith("record,direction,cell,of,decay_per_step,")


def test_single_panel_and_view_options(traces, tmp_path):
    path = export(traces["multipass"], svg=tmp_path / "n.svg", panels=["rows"], log=False)[0]
    texts = " ".join(ET.parse(path).getroot().itertext())
    assert "rows × timesteps" in texts and "Gradient norm over timesteps" not in texts
    assert "log₁₀" not in texts  # a linear colour bar
    with pytest.raises(ExportError, match="--panel: unknown panel 'bogus'"):
        export(traces["taped"], png=tmp_path / "x.png", panels=["bogus"])
    # the same view as one ViewOptions: the same SVG
    again = export(traces["multipass"], svg=tmp_path / "v.svg", panels=["rows"],
                   view=ViewOptions(log=False))[0]  # fmt: skip
    assert again.read_bytes() == path.read_bytes()
    assert ViewOptions.given(ViewOptions(layer=2), log=False) == ViewOptions(False, layer=2)


def _rgb(path) -> np.ndarray:
    from PySide6.QtGui import QImage

    image = QImage(str(path)).convertToFormat(QImage.Format_RGB888)
    w, h = image.width(), image.height()
    return np.frombuffer(image.constBits(), np.uint8).reshape(h, -1)[:, : w * 3].reshape(h, w, 3)


def test_png_legend_scales_with_the_dpi(traces, tmp_path):
    """The legend below the curves is three times as large at 288 dpi as at 96 (pyqtgraph draws
    legends unscaled: they came out a third of their size, unreadable)."""
    spans = []
    for dpi in (96, 288):
        k = dpi // 96
        path = export_png(traces["taped"], tmp_path / f"{dpi}.png", width=800 * k,
                          height=500 * k, dpi=dpi, panels=["norm"])  # fmt: skip
        navy = np.abs(_rgb(path).astype(int) - [0x1F, 0x3B, 0x73]).sum(-1) < 60
        rows = np.flatnonzero(navy.any(axis=1))
        swatch = navy[rows[-1]]  # the lowest navy pixels: the legend's sample of the curve
        columns = np.flatnonzero(swatch)
        spans.append((columns[-1] - columns[0] + 1, np.flatnonzero(navy[:, columns[0]])[-1]))
    (w96, y96), (w288, y288) = spans
    assert 2.6 < w288 / w96 < 3.4, spans
    assert 2.6 < y288 / y96 < 3.4, spans  # where it sits, too


def test_png_curves_thicken_with_the_dpi(traces, tmp_path):
    """A curve is three times as thick at 288 dpi as at 96 (pyqtgraph's pens are cosmetic, as
    wide in device pixels at any scale: at 288 dpi the curves came out a third as thick)."""
    widths = []
    for dpi in (96, 288):
        k = dpi // 96
        path = export_png(traces["taped"], tmp_path / f"{dpi}.png", width=800 * k,
                          height=500 * k, dpi=dpi, panels=["norm"])  # fmt: skip
        navy = np.abs(_rgb(path).astype(int) - [0x1F, 0x3B, 0x73]).sum(-1) < 60
        plot = navy[: int(0.8 * navy.shape[0])]  # above the legend
        columns = np.linspace(0.3, 0.7, 9) * navy.shape[1]
        widths.append(np.median([plot[:, int(c)].sum() for c in columns]))
    assert widths[0] >= 1 and 2.4 < widths[1] / widths[0] < 3.6, widths


def _svg_texts(path):
    """(text, x, y, font px) of the SVG's own text elements (not the plots')."""
    root = ET.parse(path).getroot()
    return root, [("".join(t.itertext()), float(t.get("x")), float(t.get("y")),
                   float(t.get("font-size"))) for t in root.findall(SVG + "text")]  # fmt: skip


def test_a_narrow_figure_wraps_its_summary_and_elides_titles(traces, tmp_path):
    from PySide6.QtGui import QFontMetricsF

    from lstmviz.plots.export.app import ensure_app
    from lstmviz.plots.export.header import font

    ensure_app()
    path = export(traces["multipass"], svg=tmp_path / "n.svg", width=480, height=400,
                  panels=["norm", "rows", "units"])[0]  # fmt: skip
    root, texts = _svg_texts(path)
    width = float(root.get("viewBox").split()[2])
    for text, x, _, px in texts:  # nothing runs past the right edge
        advance = QFontMetricsF(font(px, bold=px != 11)).horizontalAdvance(text)
        assert x + advance <= width + 1, (text, x + advance, width)
    summary = [text for text, _, _, px in texts if px == 11]
    assert len(summary) >= 2  # wrapped, and every part of it kept
    assert " · ".join(summary).startswith("multi-pass · P=3 × T=12")
    assert " · ".join(summary).endswith("no NaN/Inf ✓")
    ys = [y for _, _, y, px in texts if px != 12]  # the title, then the summary's lines
    panels = [y for _, _, y, px in texts if px == 12]
    assert all(b - a >= 11 for a, b in zip(ys, ys[1:] + [min(panels)], strict=True)), ys


def test_a_small_figure_has_room_for_every_plot(traces, tmp_path):
    """At 600 × 400 px and 144 dpi the panels' plots were wider than their boxes: the PNG
    squeezed them (condensed text), the SVG cut their right side off. Now the figure is laid
    out larger and scaled down: every plot's axes and labels lie inside its box."""
    path = export(traces["train"], svg=tmp_path / "s.svg", png=tmp_path / "s.png",
                  width=600, height=400)[1]  # fmt: skip
    root = ET.parse(path).getroot()
    groups = [g for g in root.iter(SVG + "g") if re.fullmatch(r"panel\d+_plot", g.get("id", ""))]
    assert len(groups) == 4
    for group in groups:
        clip = root.find(f".//{SVG}clipPath[@id='{group.get('id')[:-4]}box']/{SVG}rect")
        box_w = float(clip.get("width"))
        xs = [float(t.get("x")) for t in group.iter(SVG + "text") if t.get("x")]
        assert max(xs) < box_w, (group.get("id"), max(xs), box_w)


def _rows_of(figure):
    """{top of a row of panels: [(title box, plot box)]} of a laid-out Figure."""
    rows = {}
    for (_, box), (_, plot) in zip(figure.titles, figure.cells, strict=True):
        rows.setdefault(box.y(), []).append((box, plot))
    return rows


def _label_spills(figure) -> list[tuple[str, str]]:
    """(panel title, label) of every axis label that reaches past its plot item, the part
    of the scene an export draws (less the text's document margins)."""
    import pyqtgraph as pg

    from lstmviz.plots.panels.panel import panel_title

    spills = []
    for panel in figure.panels:
        item = panel.plot.getPlotItem()
        clip = item.sceneBoundingRect().adjusted(-0.5, -0.5, 0.5, 0.5)
        for axis in (i for i in item.scene().items() if isinstance(i, pg.AxisItem)):
            if axis.label is None or not (axis.isVisible() and axis.label.isVisible()):
                continue
            m = axis.label.document().documentMargin()
            if not clip.contains(axis.label.sceneBoundingRect().adjusted(m, m, -m, -m)):
                spills.append((panel_title(panel), axis.label.toPlainText()))
    return spills


def test_titles_in_a_row_line_up_beside_a_layer_box():
    """A model panel's layer box (its title row's control, which the figure does not draw) put
    its title and plot ~5 px lower than those of the panels beside it."""
    from lstmviz.plots.export.figure import Figure
    from tests.helpers.recordings import model_trace

    with Figure(model_trace(0)) as figure:
        assert {"gates", "layer_units"} <= set(figure.names)  # the panels with a layer box
        figure.fit(1067, 667)  # the default 1600 × 1000 px at 144 dpi
        rows = _rows_of(figure)
        assert [len(row) for row in rows.values()] == [2, 3]
        for row in rows.values():
            assert len({(t.y(), t.height()) for t, _ in row}) == 1, row
            assert len({round(p.y(), 3) for _, p in row}) == 1, row


@pytest.mark.parametrize("size", [(427, 320), (200, 150), (1067, 667), (1032, 400)])
def test_axis_labels_and_legends_fit_at_every_size(traces, size):
    """Long axis labels ("activation / fraction", a colour bar's "log₁₀ mean |dL/dh_t,j|") ran
    past short plots and were cut at small sizes (640 × 480 px at 144 dpi: 427 × 320 logical;
    the smallest 200 × 150; a wide, short one like the PDF's), and the gates' legend was folded
    away. Now the figure is laid out larger, then labels are shortened, until they fit."""
    from lstmviz.plots.export.figure import Figure
    from lstmviz.plots.export.fitting import folded_legend
    from tests.helpers.recordings import model_trace

    for trace in (model_trace(0), traces["multipass"], traces["train"]):
        with Figure(trace) as figure:
            figure.fit(*size)
            assert _label_spills(figure) == [], (trace.mode, size)
            assert not [p for p in figure.panels if folded_legend(p)], (trace.mode, size)


def test_a_label_without_room_is_shortened_with_an_ellipsis():
    """Laid out too small for its labels (no `fit`), each label is cut at a character with
    "…" and stays inside its plot; a larger layout shows the whole label again."""
    from lstmviz.plots.export.figure import Figure
    from lstmviz.plots.panels.model_curves import GATE_AXIS_LABELS
    from tests.helpers.recordings import model_trace

    with Figure(model_trace(0), panels=["gates", "layer_units"]) as figure:
        figure.layout(700, 250)
        assert not _label_spills(figure)
        long = ("activation / fraction", "log₁₀ mean |dL/dh_t,j|")
        shown = {text: axis.label.toPlainText().strip()
                 for axis, text in figure.full_labels.values()}  # fmt: skip
        assert shown[long[1]].endswith("…"), shown
        assert shown[long[0]] in GATE_AXIS_LABELS[1:], shown  # its own shorter form
        assert figure.shortened == 1
        figure.layout(1400, 900)
        assert figure.shortened == 0 and not _label_spills(figure)
        assert sorted(axis.label.toPlainText().strip() for axis, text in
                      figure.full_labels.values() if text in long) == sorted(long)  # fmt: skip


def test_svg_in_qts_renderer_has_no_frame_the_png_lacks(traces, tmp_path):
    """Qt's SVG renderer does not clip; it drew the plots' clip paths with pyqtgraph's black
    stroke: a frame around every plot, whose right side is a dark column the PNG lacks."""
    from PySide6.QtGui import QColor, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    path = export(traces["taped"], svg=tmp_path / "f.svg", width=800, height=500, dpi=96,
                  panels=["norm"])[0]  # fmt: skip
    image = QImage(800, 500, QImage.Format_RGB888)
    image.fill(QColor("white"))
    painter = QPainter(image)
    QSvgRenderer(str(path)).render(painter)
    painter.end()
    image.save(str(tmp_path / "f.png"))
    dark = _rgb(tmp_path / "f.png").astype(int).sum(-1) < 200
    assert dark[70:300, -40:].mean(axis=0).max() < 0.5  # no vertical line at the plot's right


def test_a_failure_in_any_format_writes_nothing(traces, tmp_path, monkeypatch):
    from lstmviz.plots.export import figure

    old = tmp_path / "a.png"
    old.write_bytes(b"previous")

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(figure.Figure, "pdf", broken)
    with pytest.raises(ExportError, match="No space left"):
        export(traces["taped"], png=old, csv=tmp_path / "a.csv", pdf=tmp_path / "a.pdf")
    assert [p.name for p in tmp_path.iterdir()] == ["a.png"] and old.read_bytes() == b"previous"


# ---- CLI -----------------------------------------------------------------------------------


def test_cli_writes_every_format(trace_file, tmp_path, capsys):
    out = [tmp_path / f"e.{fmt}" for fmt in ("png", "svg", "pdf", "csv")]
    argv = ["export", str(trace_file), "--width", "700", "--height", "500", "--dpi", "96"]
    for path in out:
        argv += [f"--{path.suffix[1:]}", str(path)]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("wrote ")
    assert all(p.stat().st_size > 0 for p in out)
    assert oct(out[0].stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ([], "nothing to export"),
        (["--png", "{tmp}/missing/a.png"], "--png: {tmp}/missing: no such folder"),
        (["--csv", "{tmp}/a.csv", "--svg", "{tmp}/file/a.svg"], "--svg: {tmp}/file: no such"),
        (["--png", "{tmp}"], "is a folder"),
        (["--png", "{tmp}/a.png", "--width", "5"], "--width: 5 is out of range"),
        (["--png", "{tmp}/a.png", "--dpi", "1"], "--dpi"),
        (["--png", "{tmp}/a.png", "--svg", "{tmp}/a.png"], "the same file as --png"),
        (["--png", "{tmp}/a.png", "--panel", "bogus"], "--panel"),
    ],
)
def test_cli_bad_outputs_exit_2_with_one_line_and_write_nothing(
    trace_file, tmp_path, capsys, extra, needle
):
    (tmp_path / "file").write_text("a file, not a folder")
    argv = ["export", str(trace_file)] + [e.format(tmp=tmp_path) for e in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert needle.format(tmp=tmp_path) in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


@pytest.mark.parametrize(
    ("fmt", "name"),
    [("png", "out/a.jpg"), ("png", "out/a"), ("pdf", "x.png"), ("csv", "x.pdf"), ("svg", "x.txt")],
)
def test_cli_output_must_end_in_its_formats_suffix(trace_file, tmp_path, capsys, fmt, name):
    (tmp_path / "out").mkdir()
    path = tmp_path / name
    assert main(["export", str(trace_file), f"--{fmt}", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lstmviz: error: --{fmt}: {path}: "), err
    assert err.endswith(f" end in .{fmt}\n") and len(err.splitlines()) == 1, err
    assert [p.name for p in tmp_path.rglob("*")] == ["out"]
    with pytest.raises(ExportError, match=f"--{fmt}: "):  # the same refusal in Python
        export(trace_file, **{fmt: path})


@pytest.mark.parametrize(
    ("panels", "missing", "lacks"),
    [
        (["connectivity"], "connectivity", "connectivity map (run with --connectivity)"),
        (["layers"], "layers", "model layers (a --mode model run)"),
        (["loss"], "loss", "training loss (a --mode train run)"),
        (["norm", "connectivity"], "connectivity", "connectivity map (run with --connectivity)"),
    ],
)
def test_cli_a_panel_the_trace_lacks_is_named_with_the_panels_it_has(
    traces, tmp_path, capsys, panels, missing, lacks
):
    path = traces["taped"].save(tmp_path / "taped.npz")
    argv = ["export", str(path), "--png", str(tmp_path / "a.png")]
    for name in panels:
        argv += ["--panel", name]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"lstmviz: error: --panel {missing}: this trace has no {lacks}; it has: norm, rows, units\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["taped.npz"]


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_cli_a_write_that_fails_names_the_file_given_and_leaves_nothing(trace_file, tmp_path, fmt):
    """A disk that fills up half way (here the file size limit, which fails writes past 4 KiB
    as a full disk does): one line naming the path given, not the temporary file being
    written, and no file left, not even the first 4 KiB of one."""
    import resource

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))

    out = tmp_path / f"a.{fmt}"
    # --quiet: no progress lines before the error, however long a busy machine takes
    cmd = [sys.executable, "-m", "lstmviz", "export", "--quiet", str(trace_file), f"--{fmt}",
           str(out)]  # fmt: skip
    env = os.environ | {"QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
                          preexec_fn=small_files)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"lstmviz: error: --{fmt} {out}: "), done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content", [b"", b"not a zip", b"PK\x03\x04broken"])
def test_cli_corrupt_or_missing_trace_exits_2(tmp_path, capsys, content):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(content)
    for path in (bad, tmp_path / "none.npz"):
        assert main(["export", str(path), "--png", str(tmp_path / "a.png")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"lstmviz: error: {path}:") and len(err.splitlines()) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["bad.npz"]


def test_cli_export_works_headless_in_a_fresh_process(trace_file, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}  # fmt: skip
    out = [tmp_path / f"h.{fmt}" for fmt in ("png", "svg", "pdf", "csv")]
    # --quiet: on a busy machine the export may take the second after which it shows progress
    cmd = [sys.executable, "-m", "lstmviz", "export", "--quiet", str(trace_file)]
    for path in out:
        cmd += [f"--{path.suffix[1:]}", str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no Qt noise, no "Fatal Python error" at exit
    assert all(p.stat().st_size > 0 for p in out)


def test_singletons_are_pinned_against_the_pyside_refcount_bug():
    """PySide6 6.12 drops a reference to None on every void call and to True on every emit
    (CPython < 3.12); lstmviz.gui pins them so long sessions do not die in none_dealloc."""
    from PySide6.QtCore import QObject, Signal

    import lstmviz.gui  # noqa: F401

    class Emitter(QObject):
        fired = Signal()

    emitter = Emitter()
    before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(1000):
        emitter.setObjectName("x")
        emitter.fired.emit()
    after = sys.getrefcount(None), sys.getrefcount(True)
    if sys.version_info < (3, 12):
        assert min(after) > 2**39  # whatever the calls did (a long run drains some), far from zero
    assert after[0] - before[0] > -2000 and after[1] - before[1] > -2000
