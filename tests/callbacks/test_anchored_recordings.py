"""Recordings keep the error of one step (docs/recording.md, docs/diagnosis.md): a Keras tagger
(a loss at every step) recorded while it trains answers every direction at every record, its
last record's anchored rows are model mode's at the final weights, to the bit; a recording
written before the anchored rows opens and diagnoses as before; compare, the diagnosis CSV
and the PDF report carry the anchor t*; the PyTorch recorder's records hold the rows too."""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from pathlib import Path

import h5py
import keras
import numpy as np
import pytest

from lstmviz.analysis.compare import compare
from lstmviz.cli import main
from lstmviz.engine.modes.model import model_gradients
from lstmviz.io.recording import RecordingWriter, load_recording, record_rows
from lstmviz.io.recording.rows import ANCHOR_KEYS
from lstmviz.keras import GradientFlowCallback
from lstmviz.plots.export.writer import export
from tests.helpers.recordings import L, model_trace
from tests.helpers.recordings import T as T_REC

DATA = Path(__file__).resolve().parents[1] / "data"
B, T, V = 4, 6, 9  # recorded samples, steps, vocabulary


def tagger() -> keras.Model:
    """Embedding → LSTM(return_sequences) → a softmax at every step (sparse CE on each)."""
    keras.utils.set_random_seed(3)
    model = keras.Sequential([
        keras.Input((T,), dtype="int32"),
        keras.layers.Embedding(V, 4),
        keras.layers.LSTM(3, return_sequences=True, name="lstm"),
        keras.layers.Dense(V, activation="softmax"),
    ])  # fmt: skip
    model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.Adam(0.05))
    return model


def tokens(count: int, seed: int):
    rng = np.random.default_rng(seed)
    return (rng.integers(1, V, (count, T)).astype(np.int32),
            rng.integers(0, V, (count, T)).astype(np.int32))  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(folder, model, (x, y)): `tagged.lvz` records every batch of 3 (one epoch of 12
    samples), `other.lvz` every second batch of a fit on other samples."""
    folder = tmp_path_factory.mktemp("anchored")
    x, y = tokens(12, 0)
    model = tagger()
    callback = GradientFlowCallback((x[:B], y[:B]), folder / "tagged.lvz", every=1)
    model.fit(x, y, batch_size=4, epochs=1, callbacks=[callback], verbose=0, shuffle=False)
    other = tagger()
    x2, y2 = tokens(16, 1)
    callback = GradientFlowCallback((x[:B], y[:B]), folder / "other.lvz", every=2)
    other.fit(x2, y2, batch_size=4, epochs=1, callbacks=[callback], verbose=0)
    return folder, model, (x[:B], y[:B])


def test_every_record_answers_the_tagger_from_the_error_of_its_last_step(run):
    folder, model, (x, y) = run
    rec = load_recording(folder / "tagged.lvz")
    assert list(rec.step) == [1, 2, 3]
    assert rec.anchors_by_layer.shape == (3, 1, 1) and (rec.anchors_by_layer == T - 1).all()
    assert rec.anchor_norm_h_by_layer.shape == rec.anchor_norm_c_by_layer.shape == (3, 1, 1, T)
    diagnosis = rec.diagnosis
    for record in diagnosis.records:
        (d,) = record.layers
        assert d.anchors == [T - 1] and d.h.anchor == T - 1 and d.c.anchor == T - 1
        assert d.h.decay_per_step is not None and d.c.decay_per_step is not None
        assert f"from the error of step t={T - 1}" in d.verdict
    (series,) = diagnosis.series().values()
    for key in ("steps_per_decade", "reach", "anchor"):
        assert np.isfinite(series[key]).all(), key
    np.testing.assert_array_equal(series["anchor"], T - 1)
    records = json.loads(json.dumps(diagnosis.to_dict()))["records"]
    assert [r["layers"][0]["h"]["anchor"] for r in records] == [T - 1] * 3
    # the last record is model mode at the final weights, its anchored rows to the bit
    trace = model_gradients(model, x, y)
    for key in ANCHOR_KEYS:
        np.testing.assert_array_equal(rec[key][-1], trace[key], err_msg=key)
    np.testing.assert_array_equal(rec.last["anchor_norm_h_by_layer"],
                                  trace["anchor_norm_h_by_layer"])  # fmt: skip


def test_a_recording_without_anchored_rows_opens_and_diagnoses_as_before(run, tmp_path):
    folder, _, _ = run
    old = tmp_path / "old.lvz"
    with gzip.open(DATA / "recording_format1.lvz.gz") as packed, open(old, "wb") as out:
        shutil.copyfileobj(packed, out)
    rec = load_recording(old)
    assert not any(key in rec for key in ANCHOR_KEYS)
    assert all(d.anchors == [] for r in rec.diagnosis.records for d in r.layers)
    # the tagger's recording with its anchored rows taken out: as written before them
    stripped = tmp_path / "stripped.lvz"
    shutil.copy(folder / "tagged.lvz", stripped)
    with h5py.File(stripped, "r+") as f:
        for key in ANCHOR_KEYS:
            del f[key]
    rec = load_recording(stripped)
    (d,) = rec.diagnosis.records[-1].layers
    assert d.anchors == [] and d.h.decay_per_step is None and d.h.anchor is None
    assert "loss enters at every step" in d.verdict
    assert np.isnan(rec.diagnosis.series()["lstm"]["reach"]).all()


def test_a_record_without_them_in_a_file_with_them_gets_no_anchor(tmp_path):
    """The file holds the anchored rows its first record had; a later record without them
    (or with another number of anchors) gets anchor -1 and NaN norms: no error of one
    step there, its diagnosis from the loss's own span."""
    path = tmp_path / "run.lvz"
    writer = RecordingWriter(path, 5)
    for n, seed in enumerate((1, 2, 3), 1):
        trace = model_trace(seed)
        if n != 2:
            trace.arrays["anchors_by_layer"] = np.full((L, 1), T_REC - 1, np.int64)
            for key in ANCHOR_KEYS[1:]:
                trace.arrays[key] = np.abs(trace.arrays["norm_h_total_by_layer"])[:, None] * 0.5
        writer.append(record_rows(trace, 5 * n, 0), trace)
    writer.close()
    rec = load_recording(path)
    np.testing.assert_array_equal(rec.anchors_by_layer[:, :, 0], [[T_REC - 1] * L, [-1] * L,
                                                                    [T_REC - 1] * L])  # fmt: skip
    assert np.isnan(rec.anchor_norm_h_by_layer[1]).all()
    anchors = [[d.anchors for d in r.layers] for r in rec.diagnosis.records]
    assert anchors == [[[T_REC - 1]] * L, [[]] * L, [[T_REC - 1]] * L]


def test_compare_carries_the_anchored_measures(run, capsys):
    folder, _, _ = run
    a, b = folder / "tagged.lvz", folder / "other.lvz"
    assert main(["compare", str(a), str(b), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (layer,) = out["layers"]
    for side in ("a", "b"):
        assert layer[side]["anchors"] == [T - 1] and layer[side]["h"]["anchor"] == T - 1
        assert layer[side]["h"]["reach"] is not None
        records = out["records"][side]
        assert records["anchor"]["lstm"] == [T - 1] * len(records["step"])
        assert None not in records["reach"]["lstm"] + records["steps_per_decade"]["lstm"]
    ratio = np.array(layer["log10_ratio_anchor_h"], np.float64)
    recs = load_recording(a), load_recording(b)
    rows = [r.anchor_norm_h_by_layer[-1, 0, 0].astype(np.float64) for r in recs]
    np.testing.assert_allclose(ratio, np.log10(rows[1]) - np.log10(rows[0]), rtol=1e-6)
    c = compare(*recs)
    assert f"from the error of step t={T - 1}" in c.table()
    assert main(["compare", str(a), str(b), "--out", str(folder / "c.csv")]) == 0
    header = (folder / "c.csv").read_text().splitlines()[0]
    assert "lstm_log10_ratio_anchor_h" in header.split(",")


def test_the_csv_and_the_pdf_report_carry_the_anchor(run, tmp_path):
    from lstmviz.plots.export.recording_figure import RecordingFigure

    folder, _, _ = run
    written = export(folder / "tagged.lvz", csv=tmp_path / "rec.csv", pdf=tmp_path / "rec.pdf")
    assert tmp_path / "rec_diagnosis.csv" in written
    assert (tmp_path / "rec.pdf").read_bytes().startswith(b"%PDF-")
    with open(tmp_path / "rec_diagnosis.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["record"], r["of"], r["anchor"]) for r in rows] == [
        (str(step), of, str(T - 1)) for step in (1, 2, 3) for of in ("h", "c")]  # fmt: skip
    assert all(r["reach"] and r["steps_per_decade"] for r in rows)
    with RecordingFigure(load_recording(folder / "tagged.lvz")) as figure:
        lines = figure.summary_lines()
    assert any(line.startswith("diagnosis · lstm: steps per decade") and
               f"from the error of step t={T - 1}" in line for line in lines), lines
    verdicts = [line for line in lines if line.startswith("diagnosis · lstm: ")
                and "steps per decade" not in line.split(":")[1]]  # the last record's verdict
    assert verdicts and f"from the error of step t={T - 1}" in verdicts[-1], lines


def test_tensorboard_scalars_of_the_tagger_are_the_error_of_one_steps(run, tmp_path):
    """Where the loss enters at every step, a record with the anchored rows writes defined
    reach and steps per decade (those of the recording's diagnosis), not NaN."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder, _, _ = run
    assert main(["export", str(folder / "tagged.lvz"), "--tensorboard", str(tmp_path)]) == 0
    events = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    events.Reload()
    series = load_recording(folder / "tagged.lvz").diagnosis.series()["lstm"]
    for key in ("reach", "steps_per_decade"):
        found = events.Scalars(f"lstmviz/lstm/{key}")
        assert [e.step for e in found] == [1, 2, 3]
        np.testing.assert_allclose([e.value for e in found], series[key], rtol=1e-6)


def test_a_pytorch_recorder_record_holds_the_anchored_rows(tmp_path):
    torch = pytest.importorskip("torch")

    from lstmviz.torch import GradientFlowRecorder
    from lstmviz.torch import model_gradients as torch_gradients
    from tests.helpers.references.torch_reference import Tagger
    from tests.helpers.references.torch_reference import tagger_loss as loss_fn

    torch.manual_seed(0)
    net = Tagger(V)
    x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
    with GradientFlowRecorder(net, (x, y), tmp_path / "run.lvz", every=1,
                              loss_fn=loss_fn) as recorder:  # fmt: skip
        recorder.step()
    rec = load_recording(tmp_path / "run.lvz")
    trace = torch_gradients(net, x, y, loss_fn)
    np.testing.assert_array_equal(rec.anchors_by_layer[0], [[T - 1], [0]])
    for key in ANCHOR_KEYS[1:]:
        np.testing.assert_allclose(rec[key][0], trace[key], rtol=1e-6, err_msg=key)
    layers = rec.diagnosis.records[0].layers
    assert [d.h.anchor for d in layers] == [T - 1, 0]
    assert all(d.h.decay_per_step is not None for d in layers)
