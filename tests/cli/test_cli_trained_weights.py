"""`lstmviz run --mode train --task … --save-model W.weights.h5|W.npz`: a task run's trained
weights from the command line, as the app's Save trained weights… writes them; Keras loads
them and computes what an LSTM of those weights computes."""

from __future__ import annotations

import numpy as np
import pytest

from lstmviz.cli import main
from lstmviz.io.trace import GradientTrace
from tests.helpers.references.reference import np_forward

KEYS = ("kernel", "recurrent_kernel", "bias", "readout_kernel", "readout_bias")


def _run(tmp_path, task: str, weights: str, *more: str) -> tuple[int, GradientTrace | None]:
    out = tmp_path / "t.npz"
    argv = ["run", "--mode", "train", "--task", task, "--train-steps", "4", "--steps", "7",
            "--batch", "3", "--hidden", "5", "--seed", "4", "--save-model", weights,
            "--out", str(out), *more]  # fmt: skip
    code = main(argv)
    return code, GradientTrace.load(out) if out.exists() else None


def _reference(trace: GradientTrace, x: np.ndarray) -> np.ndarray:
    """The read-out of an LSTM with the trace's final weights on x [T, B, I], in float64:
    [B, T, O] at every step or [B, O] at the last, as Keras's model returns it."""
    t, b, _ = x.shape
    hidden = trace["recurrent_kernel"].shape[0]
    zeros = np.zeros((b, hidden))
    h, _, _ = np_forward(x, trace["kernel"], trace["recurrent_kernel"], trace["bias"], zeros,
                         zeros)  # fmt: skip
    out = h @ trace["readout_kernel"].astype(np.float64) + trace["readout_bias"]
    return out.transpose(1, 0, 2) if bool(trace["readout_per_step"]) else out[-1]


@pytest.mark.parametrize(("task", "name"), [("adding", "w.weights.h5"), ("sine", "w.npz"),
                                            ("copy", "w.weights.h5")])  # fmt: skip
def test_a_task_runs_trained_weights_load_in_keras_and_compute_the_lstm(tmp_path, capsys, task,
                                                                         name):  # fmt: skip
    from lstmviz.engine.modes.trained_weights import keras_model

    weights = tmp_path / name
    code, trace = _run(tmp_path, task, str(weights))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith(f"wrote {tmp_path / 't.npz'}, {weights} (loss "), out
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["t.npz", name])
    final = [trace[key] for key in KEYS]
    model = keras_model(final[0].shape[0], final[1].shape[0], final[3].shape[1],
                        bool(trace["readout_per_step"]))  # fmt: skip
    if name.endswith(".npz"):
        with np.load(weights) as saved:
            assert sorted(saved.files) == sorted(KEYS)
            model.set_weights([saved[key] for key in KEYS])
    else:
        model.load_weights(weights)
    for got, want in zip(model.get_weights(), final, strict=True):
        np.testing.assert_array_equal(got, want)
    x = np.random.default_rng(1).standard_normal((9, 2, final[0].shape[0])).astype(np.float32)
    got = model(x.transpose(1, 0, 2)).numpy()  # Keras takes batch-major
    np.testing.assert_allclose(got, _reference(trace, x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("name", "message"), [
    ("w.h5", "--save-model: {d}/w.h5: trained weights end in .weights.h5 or .npz"),
    ("w.keras", "--save-model: {d}/w.keras: a task run's trained weights end in .weights.h5 or "
                ".npz (a .keras file is the model of --mode train --model FILE)"),
    ("t.npz", "--save-model: {d}/t.npz: the same file as --out"),
    ("missing/w.npz", "--save-model: {d}/missing: no such folder"),
    ("", "--save-model: empty file name"),
])  # fmt: skip
def test_a_weights_file_that_cannot_be_written_is_refused_before_the_run(tmp_path, capsys, name,
                                                                         message):  # fmt: skip
    code, _ = _run(tmp_path, "adding", str(tmp_path / name) if name else "")
    err = capsys.readouterr().err
    assert code == 2 and err == f"lstmviz: error: {message.format(d=tmp_path)}\n", err
    assert list(tmp_path.iterdir()) == []


def test_save_model_outside_training_names_both_uses(tmp_path, capsys):
    code = main(["run", "--mode", "taped", "--steps", "3", "--save-model",
                 str(tmp_path / "w.npz"), "--out", str(tmp_path / "t.npz")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--save-model" in err and "--mode train" in err, err
    assert list(tmp_path.iterdir()) == []
