"""The norm panel of a per-batch-weights trace (computed by the engine): every per-batch curve
drawn is named in the legend (on screen and in an exported SVG), the batches past the drawn
ones are said to be left to the rows heatmap, and hovering names the nearest curve and its
value. Expected norms are computed here from `grad_h_total` [N, T, B, H]."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

import lstmviz
from lstmviz.core.config import RunConfig

N, T, B, I, H = 12, 9, 3, 4, 5
DRAWN = 10  # curves the panel draws (one per palette colour)


@pytest.fixture(scope="module")
def batches():
    rng = np.random.default_rng(7)
    weights = [lstmviz.random_weights(I, H, rng) for _ in range(N)]
    x = rng.standard_normal((N, T, B, I)).astype(np.float32)
    return lstmviz.batchwise_gradients(x, weights, loss="mean_h")


def batch_norms(trace) -> np.ndarray:
    """‖dL/dh_t‖ over (b, j) per batch [N, T], in float64, from the gradients themselves."""
    g = np.asarray(trace.grad_h_total, np.float64)
    return np.sqrt((g**2).sum(axis=(2, 3)))


def _panel(qtbot, trace, log=True, normalise=False):
    from lstmviz.plots.panels.curves import NormPanel

    panel = NormPanel()
    qtbot.addWidget(panel)
    panel.resize(1400, 700)
    panel.set_options(log, normalise)
    panel.draw(trace.arrays, RunConfig(mode="batchwise", batches=N, steps=T, batch=B,
                                       input_dim=I, hidden=H))  # fmt: skip
    return panel


def test_every_drawn_batch_curve_is_named_in_the_legend(qtbot, batches):
    panel = _panel(qtbot, batches)
    norms = batch_norms(batches)
    entries = [(sample.item, label.text) for sample, label in panel.legend.items]
    named = [(item, text) for item, text in entries if text.startswith("batch ")]
    assert [text for _, text in named] == [f"batch {r + 1}" for r in range(DRAWN)]
    colours = set()
    for r, (item, _) in enumerate(named):  # each entry's sample is the curve of that batch
        np.testing.assert_allclose(item.yData, norms[r], rtol=1e-4)
        colours.add(item.opts["pen"].color().name())
    assert len(colours) == DRAWN  # told apart by colour alone: they overlap
    drawn = [full for full, _ in panel.row_curves if full.yData is not None and len(full.yData)]
    assert len(drawn) == DRAWN
    assert entries[-1][1] == f"batches {DRAWN + 1}–{N}: rows heatmap only"


@pytest.mark.parametrize("count, note", [(DRAWN, []), (DRAWN + 1, ["batch 11: rows heatmap only"])])
def test_ten_batches_get_no_note_and_eleven_name_the_one_left_out(qtbot, batches, count, note):
    arrays = dict(batches.arrays)
    arrays["norm_h_total_by_batch"] = arrays["norm_h_total_by_batch"][:count]
    from lstmviz.io.trace import GradientTrace

    panel = _panel(qtbot, GradientTrace(batches.mode, batches.config, arrays))
    texts = [label.text for _, label in panel.legend.items]
    assert texts == [f"batch {r + 1}" for r in range(DRAWN)] + note


def test_the_exported_norm_panel_names_every_drawn_batch(batches, tmp_path):
    from lstmviz.plots.export.writer import export

    svg = export(batches, svg=tmp_path / "n.svg", width=1600, height=1000, dpi=144,
                 panels=["norm"])[0]  # fmt: skip
    texts = " ".join(ET.parse(svg).getroot().itertext())
    for r in range(DRAWN):
        assert f"batch {r + 1}" in texts, r
    assert f"batches {DRAWN + 1}–{N}: rows heatmap only" in texts


@pytest.mark.parametrize("log", [True, False])
def test_hover_names_the_nearest_batch_curve_and_its_value(qtbot, batches, log):
    panel = _panel(qtbot, batches, log=log)
    norms = batch_norms(batches)
    t = 5
    order = np.argsort(norms[:DRAWN, t])
    for r in (order[0], order[len(order) // 2], order[-1]):
        y = np.log10(norms[r, t]) if log else norms[r, t]
        text = panel.readout_at(t + 0.2, y)
        assert text.startswith(f"batch {r + 1}, t = {t} · total "), text
        assert float(text.rsplit(" ", 1)[1]) == pytest.approx(norms[r, t], rel=5e-3)
    assert panel.readout_at(T + 3, 0.0) == "" and panel.readout_at(-2, 0.0) == ""


def test_hover_with_normalised_curves_picks_the_curve_shown_there(qtbot, batches):
    panel = _panel(qtbot, batches, log=False, normalise=True)
    norms = batch_norms(batches)[:DRAWN]
    shown = norms / norms.max(axis=1, keepdims=True)
    t = 2
    r = int(np.argmin(shown[:, t]))
    text = panel.readout_at(t, shown[r, t])
    # named by the curve under the pointer, with its value (not the normalised one)
    assert text.startswith(f"batch {r + 1}, t = {t} · total "), text
    assert float(text.rsplit(" ", 1)[1]) == pytest.approx(norms[r, t], rel=5e-3)


def test_hover_skips_a_batch_with_no_value_at_that_step(qtbot, batches):
    arrays = dict(batches.arrays)
    rows = np.array(arrays["norm_h_total_by_batch"])
    t = 4
    r = int(np.argmax(rows[:DRAWN, t]))
    top = float(rows[r, t])
    rows[r, t] = np.nan
    arrays["norm_h_total_by_batch"] = rows
    from lstmviz.io.trace import GradientTrace

    panel = _panel(qtbot, GradientTrace(batches.mode, batches.config, arrays), log=False)
    text = panel.readout_at(t, top)
    second = int(np.nanargmax(np.where(np.arange(N) < DRAWN, rows[:, t], np.nan)))
    assert text.startswith(f"batch {second + 1}, t = {t} · total "), text
