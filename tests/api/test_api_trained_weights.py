"""`lstmviz.train(task=…, save_model=W.weights.h5|W.npz)`: a task run's trained weights from
Python, as `lstmviz run --mode train --task … --save-model` writes them; a name that cannot be
written is refused before training starts."""

from __future__ import annotations

import numpy as np
import pytest

import lstmviz
from lstmviz.engine.modes import train as train_module
from tests.helpers.references.reference import np_forward

KEYS = ("kernel", "recurrent_kernel", "bias", "readout_kernel", "readout_bias")
SIZES = dict(train_steps=3, steps=6, batch=3, hidden=4, seed=7)


def _readout(trace, x: np.ndarray) -> np.ndarray:
    """The read-out of an LSTM with the trace's final weights on x [T, B, I] in float64 (NumPy
    BPTT's forward): [B, T, O] at every step or [B, O] at the last, as Keras returns it."""
    _, b, _ = x.shape
    zeros = np.zeros((b, trace["recurrent_kernel"].shape[0]))
    h, _, _ = np_forward(x, trace["kernel"], trace["recurrent_kernel"], trace["bias"], zeros,
                         zeros)  # fmt: skip
    out = h @ trace["readout_kernel"].astype(np.float64) + trace["readout_bias"]
    return out.transpose(1, 0, 2) if bool(trace["readout_per_step"]) else out[-1]


@pytest.mark.parametrize(("task", "name"), [("adding", "w.weights.h5"), ("sine", "w.npz")])
def test_train_writes_the_trained_weights_where_save_model_asks(tmp_path, task, name):
    from lstmviz.engine.modes.trained_weights import keras_model

    path = tmp_path / name
    trace = lstmviz.train(task=task, save_model=path, **SIZES)
    assert trace.mode == "train" and trace.config.save_model is None
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no temporary file left
    final = [trace[key] for key in KEYS]
    model = keras_model(final[0].shape[0], final[1].shape[0], final[3].shape[1],
                        bool(trace["readout_per_step"]))  # fmt: skip
    if name.endswith(".npz"):
        with np.load(path) as saved:
            assert sorted(saved.files) == sorted(KEYS)
            model.set_weights([saved[key] for key in KEYS])
    else:
        model.load_weights(path)
    for got, want in zip(model.get_weights(), final, strict=True):
        np.testing.assert_array_equal(got, want)
    x = np.random.default_rng(2).standard_normal((5, 2, final[0].shape[0])).astype(np.float32)
    got = model(x.transpose(1, 0, 2)).numpy()  # Keras takes batch-major
    np.testing.assert_allclose(got, _readout(trace, x), rtol=1e-4, atol=1e-5)


@pytest.fixture
def no_training(monkeypatch):
    """Training that fails the test if it starts: a refusal must come before the run."""

    def refused(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(train_module.TrainingRun, "items", refused)


@pytest.mark.parametrize(("name", "message"), [
    ("w.keras", "save_model: {d}/w.keras: a task run's trained weights end in .weights.h5 or "
                ".npz (a .keras file is the model of mode='train' model=FILE)"),
    ("w.h5", "save_model: {d}/w.h5: trained weights end in .weights.h5 or .npz"),
    ("missing/w.npz", "save_model: {d}/missing: no such folder"),
    ("folder.npz", "save_model: {d}/folder.npz: is a folder, not a file name"),
    ("", "save_model: empty file name"),
])  # fmt: skip
def test_a_name_train_cannot_write_is_refused_before_training(tmp_path, no_training, name,
                                                              message):  # fmt: skip
    if name == "folder.npz":
        (tmp_path / name).mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(lstmviz.ConfigError) as caught:
        lstmviz.train(task="adding", save_model=str(tmp_path / name) if name else "", **SIZES)
    assert str(caught.value) == message.format(d=tmp_path)
    assert caught.value.flag == "save_model"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_the_sequences_trained_on_are_never_overwritten(tmp_path, no_training):
    rng = np.random.default_rng(0)
    data = tmp_path / "seq.npz"
    np.savez(data, x=rng.random((6, 5, 2), "f"), y=rng.random((6, 1), "f"))
    with pytest.raises(lstmviz.ConfigError) as caught:
        lstmviz.train(inputs=data, save_model=data, train_steps=2, batch=3)
    assert str(caught.value) == f"save_model: {data}: would overwrite the sequences it trains on " \
                                f"({data})"
    with np.load(data) as kept:
        assert sorted(kept.files) == ["x", "y"]


@pytest.mark.parametrize("name", ["W.NPZ", "W.Weights.H5"])
def test_an_upper_case_suffix_is_written_as_the_lower_case_one(tmp_path, name):
    """Suffixes are case-insensitive where lstmviz reads files (`files.suffix_of`): a name the
    check before the run accepts is written after it, in Python and on the command line."""
    from lstmviz.cli import main

    path = tmp_path / name
    trace = lstmviz.train(task="adding", save_model=path, **SIZES)
    saved = lstmviz.load_weights(path)  # read by content, as lstmviz reads any weights file
    for key in KEYS[:3]:
        np.testing.assert_array_equal(getattr(saved, key), trace[key])
    path.unlink()
    argv = ["run", "--mode", "train", "--task", "adding", "--quiet", "--save-model", str(path),
            "--out", str(tmp_path / "t.npz")] + [f"--{k.replace('_', '-')}={v}"
                                                 for k, v in SIZES.items()]  # fmt: skip
    assert main(argv) == 0
    np.testing.assert_array_equal(lstmviz.load_weights(path).kernel, trace["kernel"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, "t.npz"])
