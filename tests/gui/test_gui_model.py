"""Model mode in the window (pytest-qt, offscreen): opening every kind of model file, its data,
bad files and data (a dialog, nothing changes), a run drawn in the model panels, Stop."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from tests.helpers.gui_checks import stop_within_a_second  # noqa: E402
from tests.helpers.models.model_fixtures import keras2_models, keras3_models, npz_stack  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Model files of every kind, data for the token model, and bad ones."""
    import keras
    import tf_keras

    folder = tmp_path_factory.mktemp("models")
    paths = {"keras": folder / "tokens.keras", "h5": folder / "k2seq.h5",
             "stack": folder / "stack.npz", "relu": folder / "relu.keras"}  # fmt: skip
    keras3_models()["tokens"].save(paths["keras"])
    keras2_models()["k2seq"].save(paths["h5"])
    npz_stack(paths["stack"], np.random.default_rng(0), {"first": (3, 4), "second": (4, 5)})
    inputs = keras.Input((5, 2))  # Python code in a file: neither lstmviz nor Keras runs it
    doubled = keras.layers.Lambda(lambda t: 2 * t, name="code")(inputs)
    keras.Model(inputs, keras.layers.LSTM(2, name="r")(doubled)).save(paths["relu"])
    # Keras names unnamed layers by counting: start the tests after these from zero again
    keras.backend.clear_session()
    tf_keras.backend.clear_session()
    rng = np.random.default_rng(1)
    x = rng.integers(1, 20, (5, 7))
    x[0, 4:] = 0
    np.savez(folder / "data.npz", x=x, y=rng.integers(0, 2, (5, 1)).astype(np.float32))
    np.savez(folder / "long.npz", x=rng.integers(1, 20, (5, 8)), y=np.zeros((5, 1)))
    paths |= {"data": folder / "data.npz", "long": folder / "long.npz"}
    return {name: str(path) for name, path in paths.items()}


def test_each_model_file_kind_opens_in_model_mode(qtbot, idle, errors, models):
    window = idle  # nothing here runs: no computing process
    params = window.params
    assert window.open_path(models["keras"])  # a drop
    config = params.config()
    assert config.mode == "model" and config.model == models["keras"]
    assert params.model_table.isVisibleTo(window) and not errors
    rows = params.model_table.rows()
    names = [r[0] for r in rows]  # Dropout layers: named by Keras
    assert len(rows) == 7 and names[:2] == ["input", "emb"] and names[3] == "bi → ←"
    assert names[5:] == ["top ←", "head"]
    i, h = 4, 3  # the Embedding width, each half's units: 2 × 4h(i + h + 1) parameters
    assert rows[3][1:] == ["Bidirectional(LSTM)", "(None, 7, 6)", str(2 * 4 * h * (i + h + 1))]
    for name, value in (("steps", 7), ("hidden", 3)):  # the model fixes T and H
        assert params.widgets[name].value() == value and not params.widgets[name].isEnabled()
    assert params.widgets["loss"].currentText() == "binary_crossentropy"
    assert not params.widgets["loss"].isEnabled()  # compiled into the model
    assert not params.widgets["passes"].isVisibleTo(window)  # unused in model mode

    assert window.open_path(models["h5"])  # Keras 2
    assert params.config().model == models["h5"]
    assert [r[0] for r in params.model_table.rows()][-2:] == ["top →", "head"]

    params.widgets["mode"].setCurrentIndex(params.widgets["mode"].findData("taped"))
    window.files.pick_layer = lambda path, layers: layers[1]  # the layer picker's choice
    assert window.open_path(models["stack"])  # outside model mode: LSTM weights (a layer)
    assert params.config().weights == models["stack"] and params.config().mode == "taped"
    window.files.open_model(models["stack"])  # File → Open model…: a stack of LSTM layers
    config = params.config()
    assert config.mode == "model" and config.model == models["stack"]
    assert [r[0] for r in params.model_table.rows()] == ["input", "first →", "second →"]
    assert params.widgets["loss"].isEnabled() and params.widgets["steps"].isEnabled()
    assert not errors


def test_a_model_without_a_compiled_loss_asks_for_one(qtbot, window, errors, models, tmp_path):
    """An uncompiled model's loss is the user's to choose: the field is emptied (no loss
    from an earlier model or mode is kept silently) and Run says what is missing."""
    import keras

    params = window.params
    assert window.open_path(models["keras"])  # a compiled one first: its loss in the field
    assert params.widgets["loss"].currentText() == "binary_crossentropy"
    bare = keras.Sequential([keras.Input((7,)), keras.layers.Embedding(20, 3),
                             keras.layers.LSTM(2), keras.layers.Dense(1)])  # fmt: skip
    bare.save(tmp_path / "bare.keras")
    assert window.open_path(str(tmp_path / "bare.keras"))
    loss = params.widgets["loss"]
    assert loss.currentText() == "" and loss.isEnabled()
    assert "no compiled loss" in loss.lineEdit().placeholderText()
    assert not window.start_run()
    assert errors and errors[-1].startswith("Loss: the model has no compiled loss")
    loss.setCurrentText("mse")
    assert params.validated().loss == "mse"


def test_an_unsupported_layer_gets_a_dialog_and_nothing_changes(qtbot, idle, errors, models):
    window = idle  # nothing here runs: no computing process
    assert window.open_path(models["keras"])
    before = window.params.config()
    assert not window.open_path(models["relu"])
    assert len(errors) == 1
    assert errors[0].startswith(models["relu"]) and "'code' (Lambda)" in errors[0]
    assert "Python code" in errors[0]
    assert window.params.config() == before
    assert [r[0] for r in window.params.model_table.rows()][-1] == "head"


def test_data_of_the_wrong_shape_gets_a_dialog_and_nothing_changes(qtbot, idle, errors, models):
    window = idle  # nothing here runs: no computing process
    assert window.open_path(models["keras"])
    assert window.open_path(models["data"])  # model mode: inputs are the model's data
    before = window.params.config()
    assert before.inputs == models["data"] and window.params.widgets["batch"].value() == 5
    assert not window.params.widgets["batch"].isEnabled()
    window.files.open_data(models["long"])
    assert len(errors) == 1 and errors[0].startswith(models["long"])
    assert "x has shape [5, 8], the model takes (None, 7) token ids" in errors[0]
    assert window.params.config() == before


def test_a_model_run_fills_the_model_panels(qtbot, window, errors, models):
    window.open_path(models["keras"])
    window.open_path(models["data"])
    with qtbot.waitSignal(window.settled, timeout=120_000):
        window.run_button.click()
    trace = window.trace
    assert trace is not None and trace.mode == "model" and not errors
    area = window.area
    shown = {name for name, panel in area.by_name.items() if panel.isVisibleTo(window)}
    assert shown == {"layers", "gates", "layer_map", "saliency", "layer_units"}
    assert all(area.by_name[name].has_data() for name in shown)
    np.testing.assert_allclose(area.by_name["layer_map"].data[:, :4],
                               trace["norm_h_total_by_layer"][:, :4], rtol=1e-6)  # fmt: skip
    text = window.summary.text.text()
    for part in ("model</b> · tokens.keras", "3 LSTM directions in 2 layers",
                 "loss binary_crossentropy", "data data.npz", "no NaN/Inf"):  # fmt: skip
        assert part in text, part
    gates, units = area.by_name["gates"], area.by_name["layer_units"]
    gates.layer_box.activated.emit(2)  # the user picks "top": both panels follow
    while area.busy():
        area.turn()
    assert area.layer == 2 and units.layer_box.currentText() == "top"
    np.testing.assert_allclose(gates.means[1].yData[:4], trace["layer2_gates_mean"][1, :4])
    assert units.data.shape[0] == trace["layer2_grad_h_total"].shape[2]
    # the model's five panels and its layer table still fit a 1024 × 640 window (the dock's
    # fields scroll; the panels' titles clip rather than widen them)
    least = window.minimumSizeHint()
    assert least.width() <= 1024 and least.height() <= 640, least
    units.title.setText("<b>Per-unit gradient of bidirectional_with_a_long_name/backward</b>")
    assert units.minimumSizeHint().width() < 300

    window.params.set_path("inputs", None)  # no data: random data, and the summary says so
    with qtbot.waitSignal(window.settled, timeout=120_000):
        window.run_button.click()
    assert "random data (seed 0)" in window.summary.text.text()
    assert window.trace.x.shape == (7, window.params.config().batch)


@pytest.mark.serial  # times the stop: alone under xdist
def test_stop_cancels_a_model_run_within_a_second(qtbot, window, models, tmp_path):
    """The run's one unit of work is the model's forward and backward: Stop interrupts the
    native kernels inside it. The computing process reads the model once (so the second run
    reuses the compiled function and is computing, not tracing, when Stop comes)."""
    import keras

    from tests.helpers.gui_fakes import same_model

    steps = 6000
    model = keras.Sequential([keras.Input((steps,), dtype="int32"),
                              keras.layers.Embedding(10, 8),
                              keras.layers.LSTM(64, return_sequences=True),
                              keras.layers.LSTM(64), keras.layers.Dense(1)])  # fmt: skip
    model.compile(loss="mse")
    model.save(tmp_path / "long.keras")
    window.worker.engine = same_model
    window.files.open_model(str(tmp_path / "long.keras"))
    window.params.widgets["batch"].setValue(32)
    with qtbot.waitSignal(window.settled, timeout=120_000):
        window.run_button.click()  # compiles, then computes
    before = window.trace
    started = []
    window.worker.progress.connect(lambda run_id, update: started.append(time.perf_counter()))
    window.run_button.click()
    qtbot.waitUntil(lambda: bool(started), timeout=10_000)
    # inside the kernels: the forward and backward, begun as the first update came, must
    # outlast a 300 ms wait even on the fastest machine (B=16 was too small for that)
    qtbot.wait(100)
    assert window.state.running
    stop_within_a_second(qtbot, window, before)  # the model's first trace, shown again


def test_gui_model_and_data_on_the_command_line_run_and_screenshot(tmp_path, models):
    shot = tmp_path / "shot.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path))
    command = [sys.executable, "-m", "lstmviz", "gui", models["keras"], models["data"], "--run",
               "--screenshot", str(shot)]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    from tests.helpers.gui_checks import coloured_fraction

    assert coloured_fraction(shot) > 0.05  # five panels of curves and heatmaps
