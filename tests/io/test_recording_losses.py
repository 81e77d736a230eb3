"""A recording whose loss changed between records (a model compiled again between two fits):
what the file says of its loss follows the records — the last record's trace and the model
summary name the loss each record was computed with — and a recording written before the
file kept the loss of every record still reads as it did."""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path

import numpy as np

from lstmviz.io.recording import RecordingWriter, load_recording, record_rows
from lstmviz.io.trace import GradientTrace
from tests.helpers.recordings import NAMES, model_trace, same_trace

DATA = Path(__file__).resolve().parents[1] / "data"


def with_loss(trace: GradientTrace, loss: str) -> GradientTrace:
    """`trace` as model mode gives it for a model compiled with `loss`: its config and the
    summary's last line name it."""
    arrays = dict(trace.arrays)
    arrays["model_summary"] = np.array(f"Model 'toy'\n  emb  Embedding\nLoss: {loss}.")
    config = dataclasses.replace(trace.config, loss=loss)
    return GradientTrace("model", config, arrays).check()


def test_each_record_keeps_the_loss_it_was_computed_with(tmp_path):
    """After a change of loss the last record's trace and the summary name the loss of the
    last record, and the summary each loss with the steps it was recorded at."""
    path = tmp_path / "run.lvz"
    losses = ["mean_squared_error", "mean_squared_error", "binary_crossentropy",
              "binary_crossentropy", "mean_squared_error"]  # fmt: skip
    writer = RecordingWriter(path, 5)
    traces = [with_loss(model_trace(n), loss) for n, loss in enumerate(losses)]
    for n, trace in enumerate(traces, 1):
        writer.append(record_rows(trace, 5 * n, 0), trace)
        rec = load_recording(path)  # while it is written too
        assert rec.last.config.loss == losses[n - 1]
        assert str(rec.last.model_summary).endswith(f"Loss: {losses[n - 1]}.")
        assert rec.loss_names == losses[:n]
    writer.close()
    rec = load_recording(path)
    same_trace(rec.last, traces[-1])
    assert str(rec.model_summary).splitlines()[-1] == (
        "Losses by record: mean_squared_error at steps 5–10, binary_crossentropy at steps "
        "15–20, mean_squared_error at step 25."
    )
    assert load_recording(path, trace=False).loss_names == losses


def test_one_loss_throughout_leaves_the_summary_as_model_mode_gave_it(tmp_path):
    path = tmp_path / "run.lvz"
    writer = RecordingWriter(path, 5)
    traces = [with_loss(model_trace(n), "mean_squared_error") for n in range(2)]
    for n, trace in enumerate(traces, 1):
        writer.append(record_rows(trace, 5 * n, 0), trace)
    writer.close()
    rec = load_recording(path)
    assert str(rec.model_summary) == str(traces[0].model_summary)
    assert rec.loss_names == ["mean_squared_error"] * 2


def test_a_loss_described_at_length_is_cut_to_what_the_row_holds(tmp_path):
    path = tmp_path / "run.lvz"
    long = "a_loss_with_a_long_name(" + ", ".join(f"arg{k}='é{k}'" for k in range(60)) + ")"
    trace = model_trace(1)
    writer = RecordingWriter(path, 5)
    writer.append(record_rows(trace, 5, 0, loss_name=long), trace)
    writer.close()
    (name,) = load_recording(path, trace=False).loss_names
    assert long.startswith(name[:-1]) and name.endswith("…") and len(name.encode()) <= 256


def test_a_recording_written_before_losses_were_kept_per_record_reads_as_before(tmp_path):
    """tests/data/recording_format1.lvz.gz: two records of `model_trace(1)` and
    `model_trace(2)` (steps 5 and 10, every 5), written by the writer of format 1 before it
    kept a loss per record."""
    path = tmp_path / "old.lvz"
    with gzip.open(DATA / "recording_format1.lvz.gz") as packed, open(path, "wb") as out:
        shutil.copyfileobj(packed, out)
    rec = load_recording(path)
    traces = [model_trace(1), model_trace(2)]
    assert rec.finished and list(rec.step) == [5, 10] and list(rec.layer_names) == NAMES
    np.testing.assert_array_equal(rec.loss, [t.loss for t in traces])
    same_trace(rec.last, traces[-1])
    assert str(rec.model_summary) == str(traces[0].model_summary)
    assert rec.loss_names == ["binary_crossentropy"] * 2  # the one loss the file names
