"""A model trace drawn and exported: the model panels (values recomputed here from the trace's
own per-sample arrays), `lstmviz export` (PNG/SVG/PDF naming every direction, the saliency and
gates panels; a CSV block per direction), which file is a model."""

import csv
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from lstmviz.analysis.layout import MODEL_PANELS, panels_for
from lstmviz.cli import main
from lstmviz.core.config import RunConfig
from lstmviz.core.view import ViewOptions
from lstmviz.io import files
from lstmviz.io.trace import GradientTrace
from tests.helpers.models.model_fixtures import keras3_models, npz_stack

pytest.importorskip("pytestqt")


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """The tokens model (Embedding mask_zero → Bidirectional → LSTM go_backwards → Dense)."""
    import keras

    path = tmp_path_factory.mktemp("model") / "tokens.keras"
    keras3_models()["tokens"].save(path)
    keras.backend.clear_session()  # Keras names unnamed layers by counting: from zero again
    return path


@pytest.fixture(scope="module")
def trace(model_file):
    import lstmviz

    rng = np.random.default_rng(5)
    x = rng.integers(1, 20, (6, 7))
    x[0, 4:] = 0  # padding: sample 0 has 4 steps
    x[1:3, 5:] = 0
    x[:, 6] = 0  # the last step is padding everywhere
    y = rng.integers(0, 2, (6, 1)).astype(np.float32)
    return lstmviz.model_gradients(str(model_file), x, y)


def test_a_model_file_is_a_model_and_an_lstm_weights_file_is_weights(model_file, tmp_path):
    import keras

    assert files.kind(model_file) == "model"
    lstm_only = keras.Sequential([keras.Input((5, 2)), keras.layers.LSTM(3)])
    lstm_only.save(tmp_path / "one.keras")
    lstm_only.save(tmp_path / "one.h5")
    npz_stack(tmp_path / "stack.npz", np.random.default_rng(0), {"a": (2, 3), "b": (3, 4)})
    assert files.kind(tmp_path / "one.keras") == "weights"
    assert files.kind(tmp_path / "one.h5") == "weights"
    assert files.kind(tmp_path / "stack.npz") == "weights"
    (tmp_path / "broken.keras").write_bytes(b"not a zip")  # the loader says why, later
    assert files.kind(tmp_path / "broken.keras") == "weights"


def test_the_model_panels_show_the_trace(qtbot, trace):
    from lstmviz.plots.panels.model_curves import GatesPanel, LayerNormPanel
    from lstmviz.plots.panels.model_maps import LayerHeatmap, LayerUnitsHeatmap, SaliencyHeatmap

    a = trace.arrays
    names = [str(n) for n in a["layer_names"]]
    assert names == ["bi/forward", "bi/backward", "top"]
    assert panels_for(a, trace.config) == list(MODEL_PANELS)
    assert panels_for({}, RunConfig(mode="model"), live=True) == list(MODEL_PANELS)
    mask = a["mask"]  # [T, B]
    everywhere = ~mask.any(axis=1)
    assert everywhere.tolist() == [False] * 6 + [True]

    norm = LayerNormPanel()
    qtbot.addWidget(norm)
    norm.set_options(log=False, normalise=False)
    norm.draw(a, trace.config)
    for k in range(3):
        g = a[f"layer{k}_grad_h_total"].astype(np.float64)
        expected = np.sqrt((g**2).sum(axis=(1, 2)))
        expected[everywhere] = np.nan
        np.testing.assert_allclose(norm.curves[k].yData, expected, rtol=1e-5)
    dashed = [norm.curves[k].opts["pen"].style() for k in range(3)]
    assert dashed[1] != dashed[0] == dashed[2]  # bi/backward dashed
    colors = [norm.curves[k].opts["pen"].color().name() for k in range(3)]
    assert colors[0] == colors[1] != colors[2]  # one colour per layer
    assert [text.text for _, text in norm.legend.items] == names
    assert norm.readout_at(2, 0).startswith("t = 2 · bi/forward ")

    heat = LayerHeatmap()
    qtbot.addWidget(heat)
    heat.set_options(log=True, normalise=False)
    heat.draw(a, trace.config)
    assert np.isnan(heat.data[:, 6]).all() and np.isfinite(heat.data[:, :6]).all()
    ticks = heat.plot.getAxis("left")._tickLevels[0]
    assert [text for _, text in ticks] == ["bi →", "bi ←", "top"]  # the layer table's arrows
    assert heat.readout_at(6.2, 2.5).endswith("(masked in every sample)")

    saliency = SaliencyHeatmap()
    qtbot.addWidget(saliency)
    saliency.draw(a, trace.config)
    e = np.sqrt((a["grad_input"].astype(np.float64) ** 2).sum(-1)).T  # [B, T]
    e[~mask.T] = np.nan
    np.testing.assert_allclose(saliency.data[1:], e, rtol=1e-5)
    with np.errstate(invalid="ignore"):
        mean = np.array([np.mean(col[np.isfinite(col)]) if np.isfinite(col).any() else np.nan
                         for col in e.T])  # fmt: skip
    np.testing.assert_allclose(saliency.data[0], mean, rtol=1e-5)
    token = int(a["x"][2, 3])
    # row 4 is sample 3, numbered as the data's x[:, 3]; so are the axis's labels
    assert saliency.readout_at(2.2, 4.5).startswith(f"sample 3, t = 2, token {token}: ")
    left = saliency.plot.getAxis("left")._tickLevels
    labelled = {text: y for level in left for y, text in level}
    assert saliency.plot.getAxis("left").labelText == "sample (from 0)"
    assert labelled["mean"] == 0.5 and labelled["0"] == 1.5
    assert labelled[str(a["x"].shape[1] - 1)] == a["x"].shape[1] + 0.5
    assert saliency.readout_at(4.6, 1.5).endswith("(masked)")  # sample 0 is padding at t=5

    gates = GatesPanel()
    units = LayerUnitsHeatmap()
    for panel in (gates, units):
        qtbot.addWidget(panel)
        panel.layer = 2
        panel.draw(a, trace.config)
        assert panel.layer_box.currentText() == "top" and "top" in panel.title.text()
    for g in range(4):
        expected = a["layer2_gates_mean"][g].astype(np.float64)
        expected[everywhere] = np.nan
        np.testing.assert_allclose(gates.means[g].yData, expected, rtol=1e-6)
    grad = np.abs(a["layer2_grad_h_total"].astype(np.float64))  # [T, B, H]
    for t in range(6):
        kept = grad[t][mask[t]]  # the samples whose step t counts
        np.testing.assert_allclose(units.data[:, t], kept.mean(axis=0), rtol=1e-5)
    assert np.isnan(units.data[:, 6]).all()
    units.set_layer(0)
    assert units.data.shape[0] == a["layer0_grad_h_total"].shape[2]
    assert units.readout_at(0.7, 0.2).startswith("bi/forward, unit 0, t = 1: ")


def test_export_of_a_model_trace_names_every_direction_and_writes_a_block_per_layer(
    trace, tmp_path, capsys
):
    path = trace.save(tmp_path / "model.npz")
    out = {f: tmp_path / f"m.{f}" for f in ("png", "svg", "pdf", "csv")}
    args = [a for f, p in out.items() for a in (f"--{f}", str(p))]
    assert main(["export", str(path), *args]) == 0
    assert all(p.stat().st_size > 0 for p in out.values())
    texts = " ".join(ET.parse(out["svg"]).getroot().itertext())
    for text in ("bi/forward", "bi/backward", "top", "Input saliency", "Gates of bi/forward",
                 "Gradient norm by layer", "layers × timesteps", "Per-unit gradient of"):
        assert text in texts, text  # fmt: skip
    assert "model · tokens.keras" in texts and "3 LSTM directions in 2 layers" in texts
    with open(out["csv"], newline="") as handle:
        rows = list(csv.reader(handle))
    names = ["bi/forward", "bi/backward", "top"]
    keys = ("norm_h_total", "norm_h_direct", "norm_c_total")
    assert rows[0] == ["t", "unmasked_samples"] + [f"{n}_{k}" for n in names for k in keys]
    values = np.array(rows[1:], np.float64)
    assert values.shape == (7, 11)
    np.testing.assert_array_equal(values[:, 1], trace.mask.sum(axis=1))  # 0 where a gap
    assert values[6, 1] == 0  # the step masked in every sample
    for k in range(3):
        for j, key in enumerate(keys):
            column = values[:, 2 + 3 * k + j].astype(np.float32)  # 9 digits: float32 exactly
            np.testing.assert_array_equal(column, trace[f"{key}_by_layer"][k])


def test_the_pdf_report_lists_the_model_summary_table(trace):
    from lstmviz.plots.export.figure import Figure

    with Figure(trace, view=ViewOptions(layer=1)) as figure:
        assert figure.names == list(MODEL_PANELS)
        report = figure.report_html()
        panel = dict(figure.named)["gates"]
        assert "bi/backward" in panel.title.text()
    for line in str(trace["model_summary"]).splitlines()[2:]:
        assert line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in report
    assert "Bidirectional(LSTM)" in report and "Total params" in report
    assert "bi/forward: ‖dL/dh_t‖ largest" in report and "saturated forget gates" in report
    assert "<tt>passes</tt>" not in report  # a model run's configuration leaves out the others


def test_csv_of_a_trace_without_layer_names_numbers_the_layers():
    from lstmviz.plots.export.writer import csv_columns

    rows = np.arange(6, dtype=np.float32).reshape(2, 3)
    trace = GradientTrace("model", RunConfig(mode="model", steps=3),
                          {"norm_h_total_by_layer": rows})  # fmt: skip
    columns = csv_columns(trace)
    assert [name for name, _ in columns] == ["t", "layer1_norm_h_total", "layer2_norm_h_total"]
    np.testing.assert_array_equal(columns[2][1], rows[1])


def test_the_gates_axis_label_fits_a_short_panel(qtbot, trace):
    """The window's recording view leaves the gates panel ~150 px of plot: its y label is
    shortened to fit, not cut off by Qt; a tall panel keeps the whole label."""
    from lstmviz.plots.panels.model_curves import GATE_AXIS_LABELS, GatesPanel

    gates = GatesPanel()
    qtbot.addWidget(gates)
    gates.draw(trace.arrays, trace.config)
    axis = gates.plot.getAxis("left")
    for height, whole in ((600, True), (240, False)):
        gates.resize(400, height)
        gates.show()
        qtbot.waitUntil(lambda h=height: gates.height() == h)
        qtbot.wait(20)
        room = gates.plot.getViewBox().height()
        margin = 2 * axis.label.document().documentMargin()
        assert axis.label.boundingRect().width() <= room + margin
        shown = axis.label.toPlainText().strip()
        assert (shown == "activation / fraction") == whole, (height, room, shown)
        assert shown in GATE_AXIS_LABELS and axis.labelText == GATE_AXIS_LABELS[0]
