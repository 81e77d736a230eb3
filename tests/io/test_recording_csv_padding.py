"""A recording's CSV (`lstmviz export REC.lvz --csv`) takes its mean, min and max over t of the
steps that count: the timesteps padded in every recorded sample (a model that masks, its
sequences shorter than the padded length) are blank in every panel and left out here too, or
the minimum would be the value the masking carried through the padding. Expected values come
from the rows and the mask with plain NumPy."""

from __future__ import annotations

import csv

import numpy as np

from lstmviz.cli import main
from lstmviz.io.recording import RecordingWriter, load_recording, record_rows
from tests.helpers.recordings import NAMES, model_trace

PADDED = 2  # the first steps, padded in every sample (Keras's pad_sequences pads in front)
EVERY = 5


def padded_recording(path, seeds):
    writer = RecordingWriter(path, EVERY)
    for n, seed in enumerate(seeds, 1):
        trace = model_trace(seed)
        mask = np.array(trace.arrays["mask"])
        mask[:PADDED] = False
        mask[PADDED:, 0] = True  # every other step counts for sample 0 at least
        trace.arrays["mask"] = mask
        for key in ("norm_h_total_by_layer", "norm_h_direct_by_layer", "norm_c_total_by_layer"):
            rows = np.array(trace.arrays[key])
            rows[:, :PADDED] = 1e-9  # what the masking carried: far below every real step
            trace.arrays[key] = rows
        writer.append(record_rows(trace, n * EVERY, n, train_loss=0.5, seconds=0.1), trace)
    writer.close()


def test_the_statistics_over_t_leave_out_the_steps_padded_in_every_sample(tmp_path, capsys):
    path = tmp_path / "run.lvz"
    padded_recording(path, [3, 4, 5])
    out = tmp_path / "r.csv"
    assert main(["export", str(path), "--csv", str(out)]) == 0
    with open(out, newline="") as handle:
        rows = list(csv.DictReader(handle))
    rec = load_recording(path)
    for k, name in enumerate(NAMES):
        for key in ("norm_h_total", "norm_h_direct", "norm_c_total"):
            counted = np.asarray(rec[f"{key}_by_layer"], np.float64)[:, k, PADDED:]  # [S, T']
            for stat, expected in (("mean", counted.mean(1)), ("min", counted.min(1)),
                                   ("max", counted.max(1))):  # fmt: skip
                column = [float(row[f"{name}_{key}_{stat}"]) for row in rows]
                np.testing.assert_allclose(column, expected, rtol=1e-6, err_msg=(name, key, stat))
