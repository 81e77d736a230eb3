"""`lstmviz run --mode train --model FILE` on a model compiled with a custom loss (or metric)
Keras cannot load without its code: `--loss` trains it with that Keras loss and an optimizer of
the saved one's settings; without
`--loss`, one line naming the custom loss; Keras's reason never cut inside its config dump."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from lstmviz.cli import main
from lstmviz.io.recording import load_recording

L = keras.layers


def cubic_error(y, y_pred):
    """A custom loss, not registered: Keras cannot find it when it loads the file."""
    return keras.ops.mean(keras.ops.abs(y - y_pred) ** 3, axis=-1)


@pytest.fixture
def workspace(tmp_path):
    """m.keras compiled with cubic_error, metric.keras with it as a metric; data of 40."""
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((6, 3)), L.LSTM(4), L.Dense(1)])
    model.compile(loss=cubic_error, optimizer=keras.optimizers.SGD(0.01))
    model.save(tmp_path / "m.keras")
    model.compile(loss="mse", optimizer="sgd", metrics=[cubic_error])
    model.save(tmp_path / "metric.keras")
    rng = np.random.default_rng(3)
    np.savez(tmp_path / "d.npz", x=rng.standard_normal((40, 6, 3)).astype(np.float32),
             y=rng.standard_normal((40, 1)).astype(np.float32))  # fmt: skip
    return tmp_path


def args(w, model: str, *more: str) -> list[str]:
    return ["run", "--mode", "train", "--model", str(w / model), "--inputs", str(w / "d.npz"),
            "--every", "2", "--batch", "20", "--record", str(w / "run.lvz"), "--quiet", *more]


def test_a_custom_loss_trains_with_the_loss_given_and_the_saved_optimizer(workspace, capsys):
    w = workspace
    assert main(args(w, "m.keras", "--loss", "mse", "--save-model", str(w / "t.keras"))) == 0, (
        capsys.readouterr().err)
    rec = load_recording(w / "run.lvz")
    assert list(rec.step) == [2] and rec.last.config.loss == "mean_squared_error"
    trained = keras.models.load_model(w / "t.keras")
    assert type(trained.optimizer).__name__ == "SGD"  # as saved, with its learning rate
    assert float(trained.optimizer.learning_rate) == pytest.approx(0.01)
    data = np.load(w / "d.npz")
    pred = trained.predict(data["x"], verbose=0)
    # the record at batch 2, the fit's last: the saved model's weights
    assert abs(rec.loss[-1] - np.mean((pred[:, 0] - data["y"][:, 0]) ** 2)) < 1e-5


def test_a_custom_loss_without_loss_given_is_one_line_naming_it(workspace, capsys):
    w = workspace
    assert main(args(w, "m.keras")) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "'cubic_error'" in lines[0] and "give --loss" in lines[0], lines
    assert "Full object config" not in lines[0] and not (w / "run.lvz").exists()


def test_keras_s_reason_is_never_cut_inside_its_config_dump(workspace, capsys):
    w = workspace
    assert main(args(w, "metric.keras")) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "'cubic_error'" in lines[0], lines
    assert "Full object config" not in lines[0] and lines[0].endswith("from model.save"), lines
    assert not (w / "run.lvz").exists()
