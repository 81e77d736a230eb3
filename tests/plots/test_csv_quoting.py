"""CSV exports stay CSV whatever the layer names hold: Keras allows commas and quotes in a
layer's name, and a column named after it is quoted as RFC 4180 says, so that a CSV reader
finds as many headers as values in every row, each header the direction's own name."""

from __future__ import annotations

import csv

import numpy as np

from lstmviz.io.recording import RecordingWriter, record_rows
from lstmviz.plots.export.writer import export
from tests.helpers.recordings import model_trace

NAMES = ['enc,1/forward', 'say "hi"/backward']
KEYS = ("norm_h_total", "norm_h_direct", "norm_c_total")


def named_trace(seed: int):
    trace = model_trace(seed)
    trace.arrays["layer_names"] = np.array(NAMES)
    return trace


def read(path) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    assert all(len(row) == len(rows[0]) for row in rows), [len(row) for row in rows]
    return rows[0], rows[1:]


def test_a_trace_csv_quotes_the_names_that_need_it(tmp_path):
    trace = named_trace(4)
    out = tmp_path / "t.csv"
    export(trace, csv=out)
    header, rows = read(out)
    for k, name in enumerate(NAMES):
        for key in KEYS:
            column = header.index(f"{name}_{key}")
            values = np.array([float(row[column]) for row in rows])
            np.testing.assert_allclose(values, trace[f"{key}_by_layer"][k], rtol=1e-7)
    assert out.read_text().splitlines()[0].count('"say ""hi""/backward_norm_h_total"') == 1


def test_a_recording_csv_quotes_the_names_that_need_it(tmp_path):
    path = tmp_path / "run.lvz"
    writer = RecordingWriter(path, 5)
    traces = [named_trace(seed) for seed in (1, 2)]
    for n, trace in enumerate(traces, 1):
        writer.append(record_rows(trace, 5 * n, 0, train_loss=0.5, seconds=0.1), trace)
    writer.close()
    out = tmp_path / "r.csv"
    export(path, csv=out)
    header, rows = read(out)
    column = header.index(f"{NAMES[1]}_norm_h_total_max")
    expected = [t["norm_h_total_by_layer"][1].max() for t in traces]
    np.testing.assert_allclose([float(row[column]) for row in rows], expected, rtol=1e-7)
