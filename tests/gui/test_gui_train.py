"""The desktop app with the real engines: multi-pass, per-batch, training (pause, keep the steps
on Stop, save weights), the connectivity map, and loading weights with the layer picker."""

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6.QtWidgets import QDialog, QFileDialog, QMessageBox  # noqa: E402

from lstmviz.analysis.report.summary import LSTM_KERNEL_TEXT  # noqa: E402
from lstmviz.gui.dialogs.file_dialogs import LayerPickerDialog  # noqa: E402


def set_params(win, **values):
    for name, value in values.items():
        widget = win.params.widgets[name]
        if hasattr(widget, "findData"):
            widget.setCurrentIndex(widget.findData(value))
        elif hasattr(widget, "setValue"):
            widget.setValue(value)
        else:
            widget.setChecked(value)


def run_and_wait(qtbot, win, timeout=60_000):
    with qtbot.waitSignal(win.settled, timeout=timeout):
        win.run_button.click()
    assert win.trace is not None


def test_multipass_curves_are_the_engine_rows(qtbot, window):
    set_params(window, mode="multipass", steps=8, passes=3, batch=2, input_dim=3, hidden=4)
    set_params(window, loss="seq_mse", seed=3)
    run_and_wait(qtbot, window)
    full = window.trace.norm_h_total_by_pass
    truncated = window.trace.norm_h_truncated_by_pass
    for p in range(3):
        solid, dashed = window.area.norm.row_curves[p]
        np.testing.assert_array_equal(solid.xData, p * 8 + np.arange(8))
        np.testing.assert_allclose(solid.yData, full[p])
        np.testing.assert_allclose(dashed.yData, truncated[p])
    assert "full = one-pass reference ✓" in window.summary.text.text()
    assert not window.area.loss.isVisible() and not window.area.connectivity.isVisible()


def test_batchwise_shows_the_backend_and_generator(qtbot, window):
    set_params(window, mode="batchwise", generator="hypernetwork", batches=2, steps=5, batch=2)
    set_params(window, input_dim=3, hidden=4, loss="last_mse")
    assert window.params.cudnn_note.isVisibleTo(window.dock)
    assert "cuDNN" in window.params.cudnn_note.text()
    run_and_wait(qtbot, window)
    trace, text = window.trace, window.summary.text.text()
    cudnn = str(trace.rnn_backend) == "cudnn"
    backend = "LSTM on <b>cuDNN</b>" if cudnn else LSTM_KERNEL_TEXT[str(trace.lstm_kernel)]
    assert backend in text and "generator hypernetwork" in text
    assert "θ_generator" in text and "per-sample" in window.summary.text.toolTip()
    rows = trace.norm_h_total_by_batch
    for n in range(2):  # one curve per batch, the heatmap's rows
        np.testing.assert_allclose(window.area.norm.row_curves[n][0].yData, rows[n])
    np.testing.assert_allclose(window.area.rows.data, trace.norm_h_total_by_batch)
    # a weight set per batch: Verify cannot rebuild the loss, and says so
    assert not window.summary.verify_button.isEnabled() and not window.verify_action.isEnabled()
    assert "Not for this mode" in window.summary.verify_button.toolTip()
    set_params(window, mode="taped")
    assert not window.params.cudnn_note.isVisibleTo(window.dock)


def test_training_pause_resume_keep_steps_connectivity_and_save(
    qtbot, window, monkeypatch, tmp_path
):
    set_params(window, mode="train", task="adding", train_steps=5000, steps=8, batch=4)
    set_params(window, hidden=4, seed=2, connectivity=True)
    window.run_button.click()
    qtbot.waitUntil(lambda: window.state.done >= 3, timeout=60_000)
    assert window.area.loss.isVisible()
    with qtbot.waitSignal(window.worker.paused, timeout=5_000):
        window.pause_button.click()
    held = window.state.done
    qtbot.wait(400)
    assert window.state.done == held and "paused" in window.message.text()
    window.pause_button.click()  # resume
    qtbot.waitUntil(lambda: window.state.done > held, timeout=5_000)

    asked = []
    monkeypatch.setattr(
        QMessageBox, "question", lambda *args: asked.append(args) or QMessageBox.Yes
    )
    with qtbot.waitSignal(window.settled, timeout=30_000):
        window.stop_button.click()
    trace = window.trace
    assert asked and trace is not None and trace.mode == "train"
    # The run stops at the first step boundary after Stop: the steps shown live, or a few more
    # done before the run held at its next (throttled) update.
    assert len(trace.loss_by_step) == trace.config.train_steps >= window.state.done
    assert int(trace.units_requested) == 5000 and "stopped early" in window.summary.text.text()
    np.testing.assert_array_equal(window.area.loss.curve.yData, trace.loss_by_step)
    assert window.area.norm.history_steps  # earlier steps drawn faded under the latest curve
    np.testing.assert_array_equal(window.area.rows.data, trace.norm_h_total_by_step)
    assert window.area.connectivity.isVisible() and trace.connectivity.shape == (8, 8)
    np.testing.assert_array_equal(window.area.connectivity.data, trace.connectivity)
    window.summary.verify_button.click()  # the task's loss on the read-out, rebuilt
    qtbot.waitUntil(lambda: "entries" in window.summary.verify_result.text(), timeout=10_000)
    assert "✓" in window.summary.verify_result.text()

    path = tmp_path / "adding.weights.h5"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(path), ""))
    assert window.save_weights_button.isEnabled()
    with qtbot.waitSignal(window.worker.saved, timeout=30_000) as saved:
        window.save_weights_button.click()
    assert saved.args[1] == str(path) and not saved.args[2]
    from lstmviz.engine.modes.trained_weights import keras_model

    model = keras_model(2, 4, 1, False)
    model.load_weights(path)
    keys = ("kernel", "recurrent_kernel", "bias", "readout_kernel", "readout_bias")
    for key, value in zip(keys, model.get_weights(), strict=True):
        np.testing.assert_array_equal(value, trace[key])


def test_stop_training_and_discard(qtbot, window, monkeypatch):
    set_params(window, mode="train", task="sine", train_steps=5000, steps=6, batch=2, hidden=3)
    set_params(window, connectivity=False)
    window.run_button.click()
    qtbot.waitUntil(lambda: window.state.done >= 2, timeout=60_000)
    monkeypatch.setattr(QMessageBox, "question", lambda *args: QMessageBox.No)
    with qtbot.waitSignal(window.worker.cancelled, timeout=5_000):
        window.stop_button.click()
    assert window.trace is None and not window.state.running


def test_open_keras_with_two_lstms_picks_a_layer_and_locks_sizes(
    qtbot, window, errors, monkeypatch, tmp_path
):
    from lstmviz.engine.quiet_tensorflow import tf

    keras = tf.keras
    model = keras.Sequential(
        [
            keras.Input((None, 3)),
            keras.layers.LSTM(5, return_sequences=True, name="lstm_a"),
            keras.layers.LSTM(4, name="lstm_b"),
            keras.layers.Dense(1),
        ]
    )
    path = tmp_path / "two.keras"
    model.save(path)
    shown = []

    def choose_second(dialog):
        shown.append(dialog.rows())
        dialog.table.selectRow(1)
        return QDialog.Accepted

    monkeypatch.setattr(LayerPickerDialog, "exec", choose_second)
    # File → Open weights… (with its Dense head the file is a model: a drop opens model mode)
    window.files.open_weights(str(path))
    assert shown == [[["lstm_a", "3", "5", ""], ["lstm_b", "5", "4", ""]]]
    widgets = window.params.widgets
    assert widgets["layer"].text() == "lstm_b"
    assert (widgets["input_dim"].value(), widgets["hidden"].value()) == (5, 4)
    assert not widgets["input_dim"].isEnabled() and not widgets["hidden"].isEnabled()
    assert "two.keras" in window.params.sources.text()

    x = np.random.default_rng(0).standard_normal((2, 6, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)  # batch-major [B, T, I]
    window.open_path(str(tmp_path / "x.npy"))
    assert (widgets["steps"].value(), widgets["batch"].value()) == (6, 2)
    assert not widgets["steps"].isEnabled() and not errors
    set_params(window, mode="taped", loss="mean_h")
    run_and_wait(qtbot, window)
    kernel, recurrent, bias = model.get_layer("lstm_b").get_weights()
    np.testing.assert_array_equal(window.trace.kernel, kernel)
    np.testing.assert_array_equal(window.trace.recurrent_kernel, recurrent)
    np.testing.assert_array_equal(window.trace.x, x.transpose(1, 0, 2))
    text = window.summary.text.text()
    assert "weights: two.keras" in text and "inputs: x.npy" in text

    widgets["weights"].set_path(None)  # ✕: back to seeded weights, H editable again
    assert widgets["hidden"].isEnabled() and not widgets["input_dim"].isEnabled()
    (tmp_path / "bad.keras").write_bytes(b"not a zip file")
    assert window.files.open_weights(str(tmp_path / "bad.keras")) is False
    assert errors[-1].startswith(str(tmp_path / "bad.keras"))
    assert window.params.config().weights is None


def test_training_on_sequences_greys_the_task_it_does_not_read(idle, tmp_path):
    window = idle  # nothing here runs: no computing process
    set_params(window, mode="train")
    task = window.params.widgets["task"]
    assert task.isEnabled()
    x = np.random.default_rng(1).standard_normal((8, 7, 2)).astype(np.float32)
    np.save(tmp_path / "walks.npy", x)
    assert window.open_path(str(tmp_path / "walks.npy"))
    assert not task.isEnabled()  # the run trains on walks.npy, whatever the task says
    window.params.widgets["inputs"].set_path(None)
    assert task.isEnabled()
