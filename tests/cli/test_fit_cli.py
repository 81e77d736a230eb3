"""`lstmviz run --mode train --model FILE`: Keras fits the user's model on their data while a
recording grows; the saved model and the final trace are the trained weights' (model mode
from the saved file); bad input is one line and exit 2; Ctrl-C stops fit at the next batch and
the recording keeps its records, readable while fit runs; a disk that fills up ends the run at
once in one line, exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import keras
import numpy as np
import pytest

from lstmviz.cli import main
from lstmviz.engine.modes.model import model_gradients
from lstmviz.io.recording import load_recording
from lstmviz.io.trace import GradientTrace

L = keras.layers
ROOT = Path(__file__).resolve().parents[2]


def files_in(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.fixture
def workspace(tmp_path):
    """A compiled token model, an uncompiled one, and data (x, y) of 100 samples."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((9,), dtype="int32"), L.Embedding(40, 6),
                              L.Bidirectional(L.LSTM(5, return_sequences=True)), L.LSTM(4),
                              L.Dense(1, activation="sigmoid")])  # fmt: skip
    model.save(tmp_path / "bare.keras")
    model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.Adam(0.02))
    model.save(tmp_path / "m.keras")
    rng = np.random.default_rng(0)
    x = rng.integers(1, 40, (100, 9)).astype(np.int32)
    y = (x[:, 0] > 20).astype(np.float32)[:, None]
    np.savez(tmp_path / "d.npz", x=x, y=y)
    return tmp_path


def test_training_a_model_writes_the_recording_the_model_and_the_trace(workspace, capsys):
    w = workspace
    args = ["run", "--mode", "train", "--model", str(w / "m.keras"), "--inputs",
            str(w / "d.npz"), "--epochs", "2", "--every", "3", "--batch", "10", "--record",
            str(w / "run.lvz"), "--save-model", str(w / "trained.keras"), "--out",
            str(w / "last.npz")]  # fmt: skip
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "run.lvz (6 records: batches 3…18)" in out, out
    rec = load_recording(w / "run.lvz")
    assert list(rec.step) == [3, 6, 9, 12, 15, 18] and list(rec.epoch) == [0, 0, 0, 1, 1, 1]
    assert rec.finished and rec.last.x.shape == (9, 64)  # the first 64 samples
    trace = GradientTrace.load(w / "last.npz")
    assert trace.mode == "model" and str(trace["stopped"]) == "completed"
    assert int(trace["units_done"]) == int(trace["units_requested"]) == 20
    data = np.load(w / "d.npz")
    expected = model_gradients(str(w / "trained.keras"), data["x"][:64], data["y"][:64])
    for key in ("loss", "y_pred", "layer0_grad_h_total", "layer2_grad_kernel",
                "norm_h_total_by_layer", "saliency"):  # fmt: skip
        np.testing.assert_allclose(trace[key], expected[key], rtol=1e-4, atol=1e-7, err_msg=key)
    # 20 batches, every 3: the last record is at batch 18, two batches before the end
    assert not np.allclose(rec.last.norm_h_total_by_layer, trace.norm_h_total_by_layer)
    assert files_in(w) == {"bare.keras", "m.keras", "d.npz", "run.lvz", "trained.keras",
                           "last.npz"}  # fmt: skip


def test_a_model_without_a_loss_trains_with_the_one_given(workspace, capsys):
    w = workspace
    base = ["run", "--mode", "train", "--model", str(w / "bare.keras"), "--inputs",
            str(w / "d.npz"), "--every", "4", "--record", str(w / "run.lvz"),
            "--quiet"]  # fmt: skip
    assert main(base) == 2
    assert "give --loss" in capsys.readouterr().err
    assert main([*base, "--loss", "binary_crossentropy"]) == 0
    rec = load_recording(w / "run.lvz")
    assert list(rec.step) == [4] and "binary_crossentropy" in rec.last.config.loss


def test_a_model_without_a_loss_trains_with_a_keras_alias_of_one(workspace, capsys):
    """--loss mse compiles the model with Keras's mean_squared_error: the records take it."""
    w = workspace
    args = ["run", "--mode", "train", "--model", str(w / "bare.keras"), "--inputs",
            str(w / "d.npz"), "--every", "4", "--batch", "25", "--record", str(w / "run.lvz"),
            "--loss", "mse", "--save-model", str(w / "trained.keras"), "--quiet"]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    rec = load_recording(w / "run.lvz")
    assert list(rec.step) == [4] and rec.last.config.loss == "mean_squared_error"
    data = np.load(w / "d.npz")
    x, y = data["x"][:64], data["y"][:64]
    pred = keras.models.load_model(w / "trained.keras").predict(x, verbose=0)
    # the record at batch 4, the fit's last: the saved model's weights
    assert abs(rec.loss[-1] - np.mean((pred[:, 0] - y[:, 0]) ** 2)) < 1e-5


def refused(source: Path, target: Path) -> None:
    """A copy of a .keras file whose LSTMs carry Keras 2's `time_major` argument: lstmviz reads
    it, Keras 3 refuses it."""
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w") as copy:
        for item in original.infolist():
            data = original.read(item)
            if item.filename == "config.json":
                config = json.loads(data)
                for layer in config["config"]["layers"]:
                    if layer["class_name"] == "LSTM":
                        layer["config"]["time_major"] = False
                data = json.dumps(config).encode()
            copy.writestr(item, data)


def test_bad_input_is_one_line_and_writes_nothing(workspace, capsys):
    w = workspace
    (w / "garbage.keras").write_bytes(b"PK\x03\x04 not a zip")
    (w / "notes.lvz").write_text("my notes")
    refused(w / "m.keras", w / "keras2.keras")
    keras.models.load_model(w / "m.keras", compile=False).save_weights(w / "w.weights.h5")
    np.savez(w / "short.npz", x=np.ones((5, 9), np.int32), y=np.ones((4, 1), np.float32))
    np.savez(w / "shape.npz", x=np.ones((20, 9), np.int32), y=np.ones((20, 3, 2), np.float32))
    run = ["run", "--mode", "train"]
    model, data, rec = ["--model", str(w / "m.keras")], ["--inputs", str(w / "d.npz")], [
        "--record", str(w / "r.lvz")]  # fmt: skip
    cases = [
        ([*model, *data], "--record: training a model"),
        ([*model, *rec], "--inputs: training a model"),
        ([*data, *rec, "--out", str(w / "t.npz")], "--record: only applies to --mode train "
         "--model FILE"),  # fmt: skip
        ([*model, *data, "--record", str(w / "r.npz")], "recordings end in .lvz"),
        ([*model, *data, "--record", str(w / "notes.lvz")],
         f"--record: {w / 'notes.lvz'}: is there already and is not a recording"),
        ([*model, *data, *rec, "--save-model", str(w / "m.keras")], "the same file as --model"),
        ([*model, *data, *rec, "--save-model", str(w / "s.h5")], "saved models end in .keras"),
        ([*model, *data, *rec, "--connectivity"], "does not apply when training a model"),
        (["--model", str(w / "garbage.keras"), *data, *rec], "not a readable Keras model"),
        (["--model", str(w / "keras2.keras"), *data, *rec], "Keras cannot load this model"),
        (["--model", str(w / "w.weights.h5"), *data, *rec], "training needs a whole Keras model"),
        ([*model, "--inputs", str(w / "short.npz"), *rec], "y has 4 samples but x has 5"),
        ([*model, "--inputs", str(w / "shape.npz"), *rec], "y has shape [20, 3, 2]"),
        ([*model, *data, *rec, "--epochs", "0"], "--epochs: 0 is out of range"),
        ([*model, *data, *rec, "--batch", "64", "--every", "5"],
         "the fit runs 2 batches (100 samples, --batch 64, --epochs 1), fewer than --every 5"),
    ]
    for args, expected in cases:
        assert main([*run, *args]) == 2, args
        lines = capsys.readouterr().err.strip().splitlines()  # a progress line may come first
        errors = [line for line in lines if "error" in line]
        assert errors == lines[-1:] and expected in lines[-1], (args, lines)
        assert lines[-1].startswith("lstmviz: error: "), (args, lines)
    assert files_in(w) == {"bare.keras", "m.keras", "d.npz", "garbage.keras", "keras2.keras",
                           "w.weights.h5", "short.npz", "shape.npz", "notes.lvz"}  # fmt: skip
    assert (w / "notes.lvz").read_text() == "my notes"


def test_an_error_inside_fit_is_one_line_naming_the_data(workspace, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise ValueError("Keras says\nno")

    monkeypatch.setattr(keras.Model, "fit", refuse)
    args = ["run", "--mode", "train", "--model", str(workspace / "m.keras"), "--inputs",
            str(workspace / "d.npz"), "--record", str(workspace / "r.lvz"), "--every", "5",
            "--quiet"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"lstmviz: error: {workspace / 'd.npz'}: Keras cannot train "
                   f"{workspace / 'm.keras'} on this data (ValueError: Keras says no)"), err


def test_built_in_training_refuses_what_only_a_model_run_reads(workspace, capsys):
    args = ["run", "--mode", "train", "--train-steps", "2", "--steps", "5", "--out",
            str(workspace / "t.npz"), "--quiet"]  # fmt: skip
    assert main([*args, "--save-model", str(workspace / "s.keras")]) == 2
    assert ("s.keras: a task run's trained weights end in .weights.h5 or .npz (a .keras file "
            "is the model of --mode train --model FILE)") in capsys.readouterr().err
    assert main(args) == 0 and GradientTrace.load(workspace / "t.npz").mode == "train"


class _Fit:
    """The CLI training a model in a subprocess, stderr collected live."""

    def __init__(self, args: list[str], cwd: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lstmviz", "run", *args], cwd=cwd, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2",
                                         "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        self.err = bytearray()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while chunk := self.proc.stderr.read1(4096):
            self.err.extend(chunk)

    def text(self) -> str:
        return self.err.decode(errors="replace")


@pytest.mark.parametrize("keep", [False, True], ids=["plain", "keep-partial"])
@pytest.mark.slow
def test_ctrl_c_stops_fit_and_the_recording_keeps_its_records(workspace, keep):
    """While fit runs, another process (this one) reads the growing recording; Ctrl-C then
    stops fit after its batch: exit 130, the records made are kept (the file closed as
    finished), and with --keep-partial the model and the trace are written too."""
    w = workspace
    args = ["--mode", "train", "--model", "m.keras", "--inputs", "d.npz", "--epochs", "100000",
            "--every", "2", "--batch", "10", "--record", "run.lvz", "--save-model",
            "trained.keras", "--out", "t.npz"] + ["--keep-partial"] * keep  # fmt: skip
    fit = _Fit(args, w)
    seen, end = [], time.monotonic() + 180
    while len(seen) < 3 or seen[-1] < 3:
        assert fit.proc.poll() is None and time.monotonic() < end, fit.text()
        if (w / "run.lvz").exists():
            rec = load_recording(w / "run.lvz")
            np.testing.assert_array_equal(rec.step, 2 * np.arange(1, len(rec) + 1))
            np.testing.assert_array_equal(rec.norm_h_total_by_layer[-1],
                                          rec.last.norm_h_total_by_layer)  # fmt: skip
            assert not rec.finished
            seen.append(len(rec))
        time.sleep(0.05)
    fit.proc.send_signal(signal.SIGINT)
    assert fit.proc.wait(timeout=60) == 130, fit.text()
    time.sleep(0.05)
    text = fit.text()
    assert "Traceback" not in text and "interrupted" in text, text
    rec = load_recording(w / "run.lvz")
    assert rec.finished and len(rec) >= seen[-1]
    written = files_in(w) - {"bare.keras", "m.keras", "d.npz"}
    if keep:
        assert written == {"run.lvz", "trained.keras", "t.npz"}, text
        trace = GradientTrace.load(w / "t.npz")
        assert str(trace["stopped"]) == "cancelled" and int(trace["units_done"]) >= rec.step[-1]
    else:
        assert written == {"run.lvz"}, text
        assert "run.lvz keeps" in text or "wrote run.lvz" in text, text


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("records", [0, 3], ids=["first-record", "fourth-record"])
@pytest.mark.slow
def test_a_full_disk_ends_the_fit_at_once_in_one_line(workspace, records):
    """The disk fills up in the middle of record `records` + 1 (every HDF5 write of the
    recording fails with ENOSPC from then on; tests/io/test_recording.py): exit 2 promptly with
    one line naming --record and what the file keeps, no traceback, no hang, no crash, and
    neither the model nor the trace written."""
    w = workspace
    code = ("import sys; from tests.helpers.recordings import fill_the_disk; "
            f"fill_the_disk('writing', {records + 1}); from lstmviz.cli import main; "
            "sys.exit(main(sys.argv[1:]))")  # fmt: skip
    args = ["run", "--mode", "train", "--model", "m.keras", "--inputs", "d.npz", "--epochs",
            "200", "--every", "1", "--batch", "10", "--record", "run.lvz", "--save-model",
            "trained.keras", "--out", "t.npz"]  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=w, capture_output=True,
                          text=True, timeout=150,
                          env={"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2",
                               "PATH": "/usr/bin:/bin"})  # fmt: skip
    kept = f"it keeps its {records} complete records" if records else "nothing written"
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert lines[-1] == ("lstmviz: error: --record run.lvz: cannot write the recording "
                         f"(No space left on device); {kept}"), done.stderr[-3000:]  # fmt: skip
    written = files_in(w) - {"bare.keras", "m.keras", "d.npz"}
    assert written == ({"run.lvz"} if records else set()), written
    if records:
        rec = load_recording(w / "run.lvz")
        assert list(rec.step) == [1, 2, 3] and rec.last.x.shape == (9, 64)
