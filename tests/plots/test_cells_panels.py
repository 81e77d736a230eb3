"""A GRU / SimpleRNN model trace downstream of the engine: saved and checked, the summary line,
the report's lines, the CSV (no cell norm for a direction without c), a PDF, and the window
(gates panel under the cell's own gate names)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from lstmviz.analysis.report.model_report import model_lines
from lstmviz.analysis.report.summary import summary_text
from lstmviz.engine.modes.model import model_gradients
from lstmviz.io.trace import GradientTrace
from lstmviz.plots.export.writer import csv_columns, export
from tests.helpers.references.cell_reference import spec_of

L = keras.layers


@pytest.fixture(scope="module")
def gru_trace(tmp_path_factory):
    """Embedding → Bidirectional(GRU) → SimpleRNN(relu) → Dense: a model trace, saved."""
    keras.utils.set_random_seed(20)
    model = keras.Sequential([
        keras.Input((6,), dtype="int32"),
        L.Embedding(15, 3, mask_zero=True),
        L.Bidirectional(L.GRU(3, return_sequences=True), name="bi"),
        L.SimpleRNN(2, activation="relu", name="top"),
        L.Dense(1, activation="sigmoid"),
    ], name="grus")  # fmt: skip
    rng = np.random.default_rng(21)
    x = rng.integers(1, 15, (3, 6)).astype(np.int32)
    x[0, 4:] = 0
    y = rng.integers(0, 2, (3, 1)).astype(np.float32)
    trace = model_gradients(spec_of(model, "binary_crossentropy"), x, y)
    path = tmp_path_factory.mktemp("gru") / "gru.npz"
    trace.save(path)
    return path


def test_gru_trace_reads_back_and_speaks_of_its_cells(gru_trace):
    trace = GradientTrace.load(gru_trace).check()
    arrays = trace.arrays
    assert [str(arrays[f"layer{k}_cell"]) for k in range(3)] == ["gru", "gru", "simple_rnn"]
    assert not any(f"layer{k}_c" in arrays for k in range(3))
    assert np.isnan(arrays["norm_c_total_by_layer"]).all()
    text = summary_text("model", arrays, trace.config, None)
    assert "3 recurrent directions (GRU, SimpleRNN) in 2 layers" in text
    assert "NaN" not in text.replace("no NaN/Inf", "")  # the NaN rows of c are not a warning
    lines = model_lines(arrays)
    assert lines[0].startswith("bi/forward (GRU): ‖dL/dh_t‖ largest")
    assert lines[2].startswith("top (SimpleRNN)")
    assert not any("forget" in line for line in lines)
    headers = [name for name, _ in csv_columns(trace)]
    assert "bi/forward_norm_h_total" in headers and "top_norm_h_direct" in headers
    assert not any(h.endswith("norm_c_total") for h in headers)


def test_gru_trace_exports_a_pdf(gru_trace, tmp_path):
    pytest.importorskip("pyqtgraph")
    paths = export(str(gru_trace), pdf=tmp_path / "gru.pdf", layer=2)
    assert paths[0].stat().st_size > 1000


def test_window_shows_a_gru_trace_with_its_gates(qtbot, idle, errors, gru_trace):
    window = idle  # nothing here runs: no computing process
    pytest.importorskip("pytestqt")
    assert window.open_path(str(gru_trace))
    qtbot.waitUntil(lambda: window.trace is not None, timeout=30_000)
    area = window.area
    while area.busy():
        area.turn()
    assert not errors
    gates = area.by_name["gates"]
    assert gates.has_data() and gates.gates == ("z", "r", "h~")
    assert "(GRU)" in gates.title.text()
    assert gates.means[3].yData is None or len(gates.means[3].yData) == 0  # three gates only
    np.testing.assert_allclose(gates.means[0].yData[:4], window.trace["layer0_gates_mean"][0, :4])
    gates.layer_box.activated.emit(2)  # the SimpleRNN: one "gate", its output
    while area.busy():
        area.turn()
    assert gates.gates == ("h",) and "(SimpleRNN)" in gates.title.text()
    assert "h " in gates.readout_at(1, 0.5)
    assert area.by_name["layer_units"].has_data()
    assert "GRU" in window.summary.text.text()


def test_notebook_repr_of_a_gru_trace(gru_trace):
    html = GradientTrace.load(gru_trace)._repr_html_()
    assert "bi/forward" in html and "GRU" in html
