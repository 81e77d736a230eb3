"""What the window makes of the files it is given, across files and sessions: a weights-only
stack opened after a compiled model, paths kept absolute (another working folder opens the same
files), a file named by the settings or a trace that is gone, and `--layer` on a file that
would open as a model. Real files written by Keras; windows that start no computing process."""

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import QSettings  # noqa: E402

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.gui.main_window import MainWindow  # noqa: E402
from lstmviz.io.trace import GradientTrace  # noqa: E402
from tests.helpers import gui_fakes  # noqa: E402
from tests.helpers.gui_checks import idle_window  # noqa: E402
from tests.helpers.gui_fakes import PASSES, TP  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """compiled.keras: Input(6, 3) → LSTM(4) 'low' → LSTM(5) 'high' → Dense(1, sigmoid), compiled
    with binary_crossentropy; stack.keras and stack.weights.h5: LSTM(4) 'lstm_0' → LSTM(5)
    'lstm_1' alone (no head, no loss); x.npy: [2, 6, 3]."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    from keras import layers

    folder = tmp_path_factory.mktemp("file_state")
    compiled = keras.Sequential([keras.Input((6, 3)),
                                 layers.LSTM(4, return_sequences=True, name="low"),
                                 layers.LSTM(5, name="high"),
                                 layers.Dense(1, activation="sigmoid")])  # fmt: skip
    compiled.compile(loss="binary_crossentropy", optimizer="adam")
    compiled.save(folder / "compiled.keras")
    stack = keras.Sequential([keras.Input((6, 3)),
                              layers.LSTM(4, return_sequences=True, name="lstm_0"),
                              layers.LSTM(5, name="lstm_1")])  # fmt: skip
    stack.save(folder / "stack.keras")
    stack.save_weights(folder / "stack.weights.h5")
    np.save(folder / "x.npy", np.random.default_rng(0).standard_normal((2, 6, 3)))
    keras.backend.clear_session()
    names = ("compiled.keras", "stack.keras", "stack.weights.h5", "x.npy")
    return {name.split(".")[0] if name != "stack.weights.h5" else "weights": str(folder / name)
            for name in names}  # fmt: skip


def reopened(qtbot, settings) -> MainWindow:
    """The next session's window: the same settings file, read again."""
    return idle_window(qtbot, QSettings(settings.fileName(), QSettings.Format.IniFormat))


# ---- a stack after a compiled model ----------------------------------------------------------


def test_a_stack_after_a_compiled_model_drops_that_models_loss(qtbot, settings, errors, files,
                                                               tmp_path):  # fmt: skip
    other = tmp_path / "other.weights.h5"
    other.write_bytes(Path(files["weights"]).read_bytes())
    win = idle_window(qtbot, settings)
    loss = win.params.widgets["loss"]
    assert win.open_path(files["compiled"])
    assert loss.currentText() == "binary_crossentropy" and not loss.isEnabled()
    assert win.open_path(files["weights"])  # model mode: the stack opens as a model
    config = win.params.config()
    assert config.mode == "model" and config.model == files["weights"]
    assert config.loss == "mean_h" and loss.isEnabled()  # as a fresh start has it
    # a loss the user chose for a stack stays when another stack opens
    loss.setCurrentText("seq_mse")
    assert win.open_path(str(other))
    assert win.params.config().loss == "seq_mse" and not errors
    win.close()


def test_a_stack_opened_in_the_next_session_drops_the_last_models_loss(qtbot, settings, errors,
                                                                        files):  # fmt: skip
    first = idle_window(qtbot, settings)
    assert first.open_path(files["compiled"])
    first.close()
    again = reopened(qtbot, settings)
    assert again.params.config().loss == "binary_crossentropy"  # the model is back, locked
    assert again.open_path(files["weights"]) and again.open_path(files["x"])
    config = again.params.validated()
    assert (config.model, config.inputs, config.loss) == (files["weights"], files["x"], "mean_h")
    assert not errors
    again.close()


# ---- --layer on a file that would open as a model --------------------------------------------


@pytest.mark.parametrize("name", ["stack", "compiled"])
def test_a_layer_named_opens_that_layer_also_after_a_model_session(qtbot, settings, errors, files,
                                                                   name):  # fmt: skip
    first = idle_window(qtbot, settings)
    assert first.open_path(files["compiled"])  # the session ends in model mode
    first.close()
    again = reopened(qtbot, settings)
    assert again.params.model_mode()
    assert again.open_path(files[name], "lstm_1" if name == "stack" else "high")
    config = again.params.config()
    assert config.mode == "taped" and config.weights == files[name]  # one LSTM, as `run` does
    assert config.layer == ("lstm_1" if name == "stack" else "high")
    assert (config.input_dim, config.hidden) == (4, 5)  # that layer's I and H (locked)
    assert not again.params.widgets["hidden"].isEnabled() and not errors
    again.close()


# ---- paths: absolute, and files that are gone -------------------------------------------------


def test_a_file_opened_by_a_relative_name_is_kept_by_its_whole_path(
    qtbot, settings, errors, tmp_path, monkeypatch
):
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, batch in ((first, 2), (second, 3)):  # the same name, different files
        folder.mkdir()
        np.save(folder / "x.npy", np.zeros((batch, 7, 3), np.float32))
    monkeypatch.chdir(first)
    win = idle_window(qtbot, settings)
    assert win.open_path("x.npy")
    assert win.params.config().inputs == str(first / "x.npy")
    win.close()
    monkeypatch.chdir(second)
    again = reopened(qtbot, settings)
    config = again.params.validated()
    assert config.inputs == str(first / "x.npy") and config.batch == 2  # a's, not b's
    assert not errors
    again.close()


def test_a_trace_naming_a_file_that_is_gone_says_so_and_keeps_saying_it(qtbot, settings, errors,
                                                                         tmp_path):  # fmt: skip
    gone = tmp_path / "gone.npz"
    config = RunConfig(steps=PASSES * TP, batch=3, hidden=5)
    trace = next(item for item in gui_fakes.multipass(config) if isinstance(item, GradientTrace))
    trace.config.weights = str(gone)  # as a trace made from a file since removed
    path = trace.save(tmp_path / "t.npz")
    win = idle_window(qtbot, settings)
    assert win.open_path(str(path))
    text = win.message.text()
    assert text.startswith(f"opened {path}") and f"not found: weights {gone}" in text
    field = win.params.widgets["weights"]
    assert "not found" in field.edit.text() and str(gone) in field.edit.toolTip()
    with pytest.raises(Exception, match="no such file"):  # Run says so too: no seeded stand-in
        win.params.validated()
    assert not errors
    win.close()


def test_a_file_of_the_last_session_that_is_gone_is_named_at_start(qtbot, settings, errors,
                                                                    files, tmp_path):  # fmt: skip
    kept = tmp_path / "x.npy"
    kept.write_bytes(Path(files["x"]).read_bytes())
    first = idle_window(qtbot, settings)
    assert first.open_path(str(kept))
    first.close()
    kept.unlink()
    again = reopened(qtbot, settings)
    assert f"not found: inputs {kept}" in again.message.text()
    assert "not found" in again.params.widgets["inputs"].edit.text()
    assert again.open_path(files["x"])  # opening a file ends the mark
    assert "not found" not in again.params.widgets["inputs"].edit.text()
    assert not errors
    again.close()


def test_a_trace_naming_a_file_that_cannot_be_read_keeps_saying_why(qtbot, settings, errors,
                                                                     tmp_path):  # fmt: skip
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"not an npz")
    config = RunConfig(steps=PASSES * TP, batch=3, hidden=5)
    trace = next(item for item in gui_fakes.multipass(config) if isinstance(item, GradientTrace))
    trace.config.weights = str(broken)
    path = trace.save(tmp_path / "t.npz")
    win = idle_window(qtbot, settings)
    assert win.open_path(str(path))
    text = win.message.text()
    assert text.startswith(f"opened {path} · weights not loaded: ") and "broken.npz" in text
    assert not errors
    win.close()


def test_a_per_batch_session_without_weight_files_starts(qtbot, settings, errors):
    """Per-batch mode lists its weights files comma-separated; none given is none to check."""
    first = idle_window(qtbot, settings)
    mode = first.params.widgets["mode"]
    mode.setCurrentIndex(mode.findData("batchwise"))
    first.close()
    again = reopened(qtbot, settings)
    assert again.params.config().mode == "batchwise" and again.params.config().weights is None
    assert "not found" not in again.message.text() and not errors
    again.close()
