"""TensorBoard event files of lstmviz (lstmviz.tensorboard), read back with TensorBoard's own
EventAccumulator: from `lstmviz export RUN.lvz|TRACE.npz --tensorboard LOGDIR` and from the PyTorch
recorder (the Keras callback: tests/callbacks/test_tensorboard_keras.py). Per direction the scalars
at the records' steps equal lstmviz's diagnosis of the same record (tested in
tests/analysis/test_diagnosis.py), NaN where it leaves a value undefined; the loss is the record's;
one PNG per record per panel, of its size and not blank; a bad log folder is one line (CLI: exit 2)
before anything is written."""

from __future__ import annotations

import math
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from lstmviz.analysis.diagnosis import diagnose  # noqa: E402
from lstmviz.analysis.images.raster import viridis  # noqa: E402
from lstmviz.cli import main  # noqa: E402
from lstmviz.core.errors import LstmvizError  # noqa: E402
from lstmviz.io.recording import RecordingWriter, load_recording, record_rows  # noqa: E402
from lstmviz.io.trace import GradientTrace  # noqa: E402
from lstmviz.tensorboard import DECAY, TensorBoardWriter  # noqa: E402
from tests.helpers.recordings import NAMES, T, model_trace  # noqa: E402
from tests.helpers.tensorboard_events import check_images, read, scalar_series  # noqa: E402

R = 0.5  # the decay per step of the first direction's ‖dL/dh_t‖ in `geometric_trace`


def geometric_trace(seed: int) -> GradientTrace:
    """A model trace of two directions: `bi/forward` with the loss at its last step only and
    ‖dL/dh_t‖ = R^(T−1−t) (decay per step R, reach T: closed form), `bi/backward` with the
    loss entering at every step (its reach, steps per decade and decay undefined: NaN)."""
    trace = model_trace(seed)
    a = trace.arrays
    scale = 1.0 + seed / 10
    a["norm_h_total_by_layer"][0] = scale * R ** (T - 1 - np.arange(T))
    a["norm_c_total_by_layer"][0] = scale * 0.8 ** (T - 1 - np.arange(T))
    a["norm_h_direct_by_layer"][0] = 0.0
    a["norm_h_direct_by_layer"][0, -1] = scale
    a["norm_h_direct_by_layer"][1] = 1.0 + np.arange(T)  # the loss at every step
    return trace


def write_recording(path: Path, seeds=(1, 2, 3), every: int = 5) -> None:
    writer = RecordingWriter(path, every)
    for n, seed in enumerate(seeds, 1):
        trace = geometric_trace(seed)
        writer.append(record_rows(trace, n * every, 0, train_loss=1.0 / n), trace)
    writer.close()


def check_against_diagnosis(events: EventAccumulator, path: Path) -> None:
    """Every scalar of every record equals the recording's own diagnosis of that record."""
    rec = load_recording(path)
    steps = [int(s) for s in rec.step]
    diagnosis = rec.diagnosis
    for name in NAMES:
        for of, prefix in (("h", ""), ("c", "c_")):
            for key in DECAY:
                at, values = scalar_series(events, f"lstmviz/{name}/{prefix}{key}")
                assert at == steps
                expected = [getattr(getattr(d.layer(name), of), key) for d in diagnosis.records]
                expected = np.array([np.nan if v is None else v for v in expected], np.float64)
                np.testing.assert_allclose(values, expected, rtol=1e-6, equal_nan=True)
    at, loss = scalar_series(events, "lstmviz/loss")
    assert at == steps
    np.testing.assert_allclose(loss, rec.loss, rtol=1e-7)  # the record's own loss
    np.testing.assert_allclose(scalar_series(events, "lstmviz/train_loss")[1], rec.train_loss)
    check_images(events, steps)


def test_cli_export_of_a_recording_writes_each_record_at_its_step(tmp_path, capsys):
    write_recording(tmp_path / "run.lvz")
    assert main(["export", str(tmp_path / "run.lvz"), "--tensorboard", str(tmp_path / "tb")]) == 0
    assert "tfevents" in capsys.readouterr().out
    events = read(tmp_path / "tb")
    check_against_diagnosis(events, tmp_path / "run.lvz")
    # independent of the diagnosis: the closed form of a geometric decay, and NaN (not left
    # out) where the loss enters at every step
    _, decay = scalar_series(events, "lstmviz/bi/forward/decay_per_step")
    np.testing.assert_allclose(decay, R, rtol=1e-5)
    _, reach = scalar_series(events, "lstmviz/bi/forward/reach")
    np.testing.assert_array_equal(reach, T)
    _, steps_per_decade = scalar_series(events, "lstmviz/bi/forward/steps_per_decade")
    np.testing.assert_allclose(steps_per_decade, math.log(10) / math.log(1 / R), rtol=1e-5)
    at, reach = scalar_series(events, "lstmviz/bi/backward/reach")
    assert at == [5, 10, 15] and np.isnan(reach).all()


def test_cli_export_of_a_trace_is_one_step(tmp_path):
    trace = geometric_trace(4)
    trace.save(tmp_path / "t.npz")
    assert main(["export", str(tmp_path / "t.npz"), "--tensorboard", str(tmp_path / "tb"),
                 "--png", str(tmp_path / "t.png"), "--quiet"]) == 0  # fmt: skip
    assert (tmp_path / "t.png").is_file()
    events = read(tmp_path / "tb")
    expected = diagnose(trace, full=False).layer("bi/forward").h
    at, reach = scalar_series(events, "lstmviz/bi/forward/reach")
    assert at == [0] and reach[0] == expected.reach == T
    assert scalar_series(events, "lstmviz/loss")[1][0] == np.float32(trace.loss)
    check_images(events, [0])


@pytest.mark.parametrize("how", ["a file in the way", "under a file", "remote", "empty"])
def test_cli_a_log_folder_it_cannot_write_is_one_line_exit_2_and_nothing_written(
    tmp_path, capsys, how
):
    write_recording(tmp_path / "run.lvz", seeds=(1,))
    (tmp_path / "file").write_text("x")
    logdir = {"a file in the way": tmp_path / "file", "under a file": tmp_path / "file" / "tb",
              "remote": "gs://bucket/runs", "empty": ""}[how]  # fmt: skip
    code = main(["export", str(tmp_path / "run.lvz"), "--tensorboard", str(logdir),
                 "--png", str(tmp_path / "out.png")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("lstmviz: error: --tensorboard") and err.count("\n") == 1
    assert not (tmp_path / "out.png").exists() and not Path("gs:").exists()


def test_a_folder_that_cannot_be_made_is_refused_by_the_writer():
    with pytest.raises(LstmvizError, match="cannot make the folder"):
        TensorBoardWriter("/proc/lstmviz-no/tb", "tensorboard")


def test_records_written_from_another_thread_read_back_live(tmp_path):
    """A training loop's thread writes; the file holds each record as soon as it is written."""
    writer = TensorBoardWriter(tmp_path / "tb")
    assert writer.path is None and list((tmp_path / "tb").iterdir()) == []  # nothing yet
    seen = []

    def train():
        for n in (1, 2):
            trace = geometric_trace(n)
            writer.add_rows(record_rows(trace, 10 * n, 0), trace)
            seen.append([e.step for e in read(tmp_path / "tb").Scalars("lstmviz/loss")])

    thread = threading.Thread(target=train)
    thread.start()
    thread.join()
    assert seen == [[10], [10, 20]]  # each record readable before close
    writer.close()


def test_the_colour_map_is_the_apps(qapp):
    import pyqtgraph as pg

    from lstmviz.plots.style import COLOR_MAP

    table = pg.colormap.get(COLOR_MAP).getLookupTable(nPts=256, alpha=False).astype(int)
    ours = viridis(np.arange(256) / 255.0).astype(int)
    assert np.abs(ours - table).max() <= 2


torch = pytest.importorskip("torch")


def test_the_pytorch_recorder_writes_each_record_live_and_a_failed_write_warns(tmp_path):
    from torch import nn

    from lstmviz.torch import GradientFlowRecorder

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.head = nn.LSTM(3, 4, batch_first=True), nn.Linear(4, 1)

        def forward(self, x):
            return self.head(self.lstm(x)[0][:, -1])

    torch.manual_seed(0)
    net = Net()
    x, y = torch.randn(8, 5, 3), torch.randn(8, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    with pytest.raises(LstmvizError, match="GradientFlowRecorder tensorboard: .*not a folder"):
        (tmp_path / "taken").write_text("x")
        GradientFlowRecorder(net, (x[:4], y[:4]), tmp_path / "bad.lvz", tensorboard=tmp_path
                             / "taken")  # fmt: skip
    assert not (tmp_path / "bad.lvz").exists()
    recorder = GradientFlowRecorder(net, (x[:4], y[:4]), tmp_path / "run.lvz", every=2,
                                    loss_fn="mse", tensorboard=tmp_path / "tb")  # fmt: skip
    for n in range(4):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
        recorder.step(loss)
        if n == 1:  # live: the first record is in the event file before the next step
            assert [e.step for e in read(tmp_path / "tb").Scalars("lstmviz/loss")] == [2]
    recorder.close()
    events = read(tmp_path / "tb")
    rec = load_recording(tmp_path / "run.lvz")
    name = str(rec.layer_names[0])
    at, reach = scalar_series(events, f"lstmviz/{name}/reach")
    assert at == [2, 4] and list(reach) == [d.layers[0].h.reach for d in rec.diagnosis.records]
    np.testing.assert_allclose(scalar_series(events, "lstmviz/loss")[1], rec.loss, rtol=1e-7)
    check_images(events, [2, 4])

    class Full:  # an event file on a disk that has filled up
        def write(self, data):
            raise OSError(28, "No space left on device")

        def close(self):
            pass

    recorder.tensorboard._file = Full()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):  # two records: one warning, and the .lvz keeps both
            recorder.step()
    said = [str(w.message) for w in caught if "TensorBoard" in str(w.message)]
    assert len(said) == 1 and "No space left on device" in said[0], said
    assert len(load_recording(tmp_path / "run.lvz")) == 4
    recorder.close()
