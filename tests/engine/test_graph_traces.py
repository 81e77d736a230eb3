"""Model traces of graphs (tests/helpers/graph_trace.py: an encoder whose final state starts its
decoder, each its own length, two inputs) through the analysis, the diagnosis across the
hand-over, the summary, the exports, `lstmviz diagnose`, `lstmviz compare` and the notebook.
The expected values are computed here from the trace's own norms."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from lstmviz.analysis import layers
from lstmviz.analysis.compare import compare
from lstmviz.analysis.diagnosis import reach_point
from lstmviz.analysis.report.summary import plain, summary_text
from lstmviz.cli import main
from lstmviz.io.trace import GradientTrace
from tests.helpers.graph_trace import T_DEC, T_ENC, chain_norms, graph_arrays, graph_trace


@pytest.fixture
def trace() -> GradientTrace:
    return graph_trace()


def test_each_direction_keeps_its_length_calls_and_hand_over(trace):
    a = trace.arrays
    assert [layers.direction_steps(a, k) for k in range(2)] == [T_ENC, T_DEC]
    assert [layers.calls_of(a, k) for k in range(2)] == [1, T_DEC]
    assert [layers.initial_from(a, k) for k in range(2)] == [-1, 0]
    rows = layers.layer_rows(a)
    assert rows.shape == (2, T_ENC)
    assert np.isfinite(rows[0]).all() and np.isnan(rows[1, T_DEC:]).all()
    np.testing.assert_array_equal(layers.chain_offsets(a), [0, T_ENC])
    assert layers.handovers(a) == [(1, 0, T_ENC - 0.5)]
    assert layers.chain_names(a) == ["enc → dec"]
    chained = layers.chain_rows(rows, a)
    assert chained.shape == (2, T_ENC + T_DEC)
    np.testing.assert_array_equal(chained[0, :T_ENC], rows[0])
    np.testing.assert_array_equal(chained[1, T_ENC:], rows[1, :T_DEC])
    assert np.isnan(chained[0, T_ENC:]).all() and np.isnan(chained[1, :T_ENC]).all()
    assert layers.input_names(a) == ["src", "tgt"]
    rows_by_input = {name: layers.saliency_rows(a, name) for name in ("src", "tgt")}
    assert rows_by_input["tgt"].shape == (1 + 3, T_DEC)
    stacked, blocks = layers.saliency_blocks(a)
    assert blocks == [("src", 0, T_ENC), ("tgt", 4, T_DEC)]
    assert stacked.shape == (8, T_ENC) and np.isnan(stacked[4:, T_DEC:]).all()
    assert layers.token_at(a, 2, 1, "tgt") == int(a["x_tgt"][2, 1])


def test_traces_of_earlier_versions_have_no_chain(trace):
    a = {k: v for k, v in trace.arrays.items() if not k.endswith(("_calls", "_initial_from"))}
    assert [layers.calls_of(a, k) for k in range(2)] == [1, 1]
    assert [layers.initial_from(a, k) for k in range(2)] == [-1, -1]
    assert layers.chain_offsets(a) is None and layers.handovers(a) == []
    alone = GradientTrace("model", trace.config, a).diagnosis.layer("enc")
    assert alone.chain == [] and alone.h.steps is None
    assert alone.h.reach == 5 and alone.h.span == T_ENC  # its own steps only: 0.25^5 < 1e-3


def _fit(values: np.ndarray) -> tuple[float, int]:
    """(decay per step, reach) of `values` [n] steps back, as docs/diagnosis.md defines them."""
    n = np.arange(len(values))
    slope = np.polyfit(n, np.log(values), 1)[0]
    farthest = int(np.flatnonzero(values >= 1e-3 * values.max()).max())
    return math.exp(slope), len(values) if farthest == len(values) - 1 else farthest + 1


def test_the_diagnosis_follows_the_decoders_loss_back_into_the_encoder(trace):
    diagnosis = trace.diagnosis
    assert diagnosis.T == T_ENC and diagnosis.nonfinite is None  # padding is no NaN
    enc, dec = diagnosis.layer("enc"), diagnosis.layer("dec")
    # the decoder's loss enters at every step: its first step (t=0) is the nearest to the
    # hand-over; the span runs from there back through every encoder step
    span = chain_norms(trace)[T_ENC::-1]  # dec t=0, enc t=5, …, enc t=0
    rate, reach = _fit(span)
    assert enc.chain == ["enc", "dec"] and enc.h.span == T_ENC + 1
    assert enc.h.decay_per_step == pytest.approx(rate, rel=1e-6)
    assert enc.h.reach == reach == 6 and enc.h.trend == "vanishing"
    assert enc.h.step_at(0) == ("dec", 0) and enc.h.step_at(1) == ("enc", T_ENC - 1)
    assert reach_point(enc) == ("enc", 1)
    c_rate, _ = _fit(chain_norms(trace, "norm_c_total_by_layer")[T_ENC::-1])
    assert enc.c.decay_per_step == pytest.approx(c_rate, rel=1e-6)
    assert "from dec t=0 across the hand-over, to enc t=1" in enc.verdict
    assert dec.fed_by == "enc" and dec.steps == T_DEC
    assert dec.h.trend is None  # a loss at every step of its own: nothing to separate
    d = diagnosis.to_dict()
    assert d["layers"][0]["across"] == {"chain": ["enc", "dec"], "span": 7,
                                        "loss_at": ["dec", 0], "reached": ["enc", 1]}
    assert "steps" not in d["layers"][0] and d["layers"][1]["steps"] == T_DEC
    table = diagnosis.table()
    assert "6/7" in table and "followed across the hand-over: enc → dec" in table


def test_a_source_whose_own_loss_enters_at_its_last_step_is_diagnosed_alone():
    a = graph_arrays()
    a["norm_h_direct_by_layer"][0, T_ENC - 1] = 0.3  # the encoder's output read at its end
    enc = GradientTrace("model", graph_trace().config, a).check().diagnosis.layer("enc")
    assert enc.chain == [] and enc.h.steps is None and enc.h.span == T_ENC
    assert any("not followed across the hand-over into dec" in line for line in enc.handover)


def test_the_summary_names_the_chain_and_inputs_and_no_nan_from_padding(trace):
    text = plain(summary_text("model", trace.arrays, trace.config, None))
    assert "enc (6 steps) → dec (4 steps, 4 calls)" in text and "inputs src, tgt" in text
    assert "no NaN/Inf ✓" in text
    a = dict(trace.arrays)
    a["norm_h_total_by_layer"] = a["norm_h_total_by_layer"].copy()
    a["norm_h_total_by_layer"][1, 2] = np.nan  # inside the decoder's own steps
    assert "1 in norm_h_total_by_layer" in plain(summary_text("model", a, trace.config, None))


def test_export_csv_png_pdf_of_a_graph_trace(trace, tmp_path):
    pytest.importorskip("pytestqt")
    path = trace.save(tmp_path / "graph.npz")
    out = {f: tmp_path / f"g.{f}" for f in ("png", "pdf", "csv")}
    flags = [a for f, p in out.items() for a in (f"--{f}", str(p))]
    assert main(["export", str(path), *flags]) == 0
    assert out["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out["pdf"].read_bytes()[:5] == b"%PDF-"
    with open(out["csv"], newline="") as handle:
        rows = list(csv.reader(handle))
    keys = ("norm_h_total", "norm_h_direct", "norm_c_total")
    assert rows[0] == ["t"] + [f"{n}_{k}" for n in ("enc", "dec") for k in keys]
    assert len(rows) == 1 + T_ENC
    for t, row in enumerate(rows[1:]):
        assert float(row[1]) == pytest.approx(float(trace["norm_h_total_by_layer"][0, t]))
        assert (row[4:] == ["", "", ""]) == (t >= T_DEC)  # the decoder's padding: empty
    with open(tmp_path / "g_diagnosis.csv", newline="") as handle:
        diagnosis = {(r["direction"], r["of"]): r for r in csv.DictReader(handle)}
    assert diagnosis["enc", "h"]["reach"] == "6"
    assert "across the hand-over" in diagnosis["enc", "h"]["verdict"]


def test_lstmviz_diagnose_json_of_a_graph_trace(trace, tmp_path, capsys):
    path = trace.save(tmp_path / "graph.npz")
    assert main(["diagnose", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["T"] == T_ENC
    assert out["layers"][0]["across"]["reached"] == ["enc", 1]
    assert out["layers"][1]["steps"] == T_DEC


def test_compare_aligns_each_direction_on_its_own(tmp_path, capsys):
    a, b = graph_trace(0), graph_trace(1, enc_steps=8)
    c = compare(a, b)
    by_name = {layer.name: layer for layer in c.layers}
    assert by_name["enc"].steps == T_ENC and by_name["dec"].steps == T_DEC
    assert c.T == T_ENC and c.ratio_matrix().shape == (2, T_ENC)
    b_enc = np.asarray(b["norm_h_total_by_layer"][0, 8 - T_ENC : 8], np.float64)
    np.testing.assert_allclose(by_name["enc"].b_h, b_enc)  # aligned at its last step
    assert np.isnan(by_name["dec"].log10_ratio_h[T_DEC:]).all()
    assert any("enc: A has 6 steps, B 8" in note for note in c.notes)
    d = c.to_dict()
    assert [len(layer["log10_ratio_h"]) for layer in d["layers"]] == [T_ENC, T_DEC]
    pa, pb = a.save(tmp_path / "a.npz"), b.save(tmp_path / "b.npz")
    assert main(["compare", str(pa), str(pb), "--out", str(tmp_path / "c.csv")]) == 0
    with open(tmp_path / "c.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == T_ENC
    assert rows[T_DEC]["dec_a_h"] == "" and rows[T_DEC]["enc_a_h"] != ""
    pytest.importorskip("pytestqt")
    assert main(["compare", str(pa), str(pb), "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 0
    capsys.readouterr()


def test_the_notebook_html_of_a_graph_trace(trace):
    text = plain(trace._repr_html_())
    assert "enc (6 steps) → dec (4 steps, 4 calls)" in text and "no NaN/Inf" in text
    assert "saliency_tgt" in text and "x_src" in text


def test_a_single_input_graph_keeps_the_plain_keys():
    a = graph_trace(legacy_input=True).arrays
    assert layers.input_names(a) == [""]
    assert layers.saliency_rows(a).shape == (4, T_ENC)
    assert layers.saliency_blocks(a)[1] == [("", 0, T_ENC)]


def test_a_recording_of_graph_traces_keeps_each_directions_length(tmp_path):
    from lstmviz.analysis.records import panel_arrays, window_norms
    from lstmviz.analysis.report.tables import recording_columns
    from lstmviz.io.recording import RecordingWriter, load_recording, record_rows

    writer = RecordingWriter(tmp_path / "run.lvz", 5)
    traces = [graph_trace(seed) for seed in (1, 2)]
    for n, trace in enumerate(traces, 1):
        writer.append(record_rows(trace, 5 * n, 0, train_loss=0.5, seconds=0.1), trace)
    writer.close()
    rec = load_recording(tmp_path / "run.lvz")
    norms = window_norms(panel_arrays(rec))  # [L, S]: over each direction's own steps
    for s, trace in enumerate(traces):
        rows = np.asarray(trace["norm_h_total_by_layer"], np.float64)
        expected = [np.sqrt((rows[0] ** 2).sum()), np.sqrt((rows[1, :T_DEC] ** 2).sum())]
        np.testing.assert_allclose(norms[:, s], expected, rtol=1e-6)
    columns = dict(recording_columns(rec))
    assert np.isfinite(columns["dec_norm_h_total_mean"]).all()
    last = rec.diagnosis.records[-1].layer("enc")
    assert last.chain == ["enc", "dec"] and last.h.reach == 6
