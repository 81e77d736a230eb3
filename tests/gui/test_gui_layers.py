"""The dock's Layer field: the LSTM layers of the weights file opened, listed with their sizes,
picked or typed, and read again on a change (I and H follow). Real files: Keras 3 .keras,
legacy .h5, .npz, safetensors; picked weights checked against Keras's own get_weights()."""

import os

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QStyleOptionViewItem  # noqa: E402

from lstmviz.weights import loaders  # noqa: E402
from lstmviz.weights.loaders import list_lstm_layers  # noqa: E402


@pytest.fixture
def window(idle):
    """The window without a computing process: the files are read in the window's process,
    nothing runs."""
    return idle


@pytest.fixture(scope="module")
def keras_pair(tmp_path_factory):
    """Two models of one shape, Input → Bidirectional(LSTM(3)) 'bi' → LSTM(5) 'top', with
    different weights, each saved as .keras and legacy .h5."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    from keras import layers

    folder = tmp_path_factory.mktemp("layers")
    models = []
    for seed in (1, 2):
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((6, 4)),
                                  layers.Bidirectional(layers.LSTM(3, return_sequences=True),
                                                       name="bi"),
                                  layers.LSTM(5, name="top")])  # fmt: skip
        model.save(folder / f"m{seed}.keras")
        model.save(folder / f"m{seed}.h5")
        models.append(model)
    return folder, models


def _keras_weights(layer):
    return dict(zip(("kernel", "recurrent_kernel", "bias"), layer.get_weights(), strict=True))


def _loaded(window):
    """The weights the window would run: read as the engine reads them (config's file and
    layer), so a field that shows one layer while another is loaded is caught."""
    config = window.params.config()
    return loaders.load_weights(config.weights, config.layer)


def _sizes(window):
    widgets = window.params.widgets
    return widgets["input_dim"].value(), widgets["hidden"].value()


def _pick_in_list(qtbot, field, row):
    """Open the Layer field's list and click row `row`, as a user does."""
    field.showPopup()
    view = field.view()
    qtbot.waitUntil(view.isVisible, timeout=2_000)
    rect = view.visualRect(field.model().index(row, 0))
    qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: not view.isVisible(), timeout=2_000)


def _type(qtbot, field, text):
    edit = field.lineEdit()
    edit.setFocus()
    edit.selectAll()
    qtbot.keyClicks(edit, text)
    qtbot.keyClick(edit, Qt.Key_Return)


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_the_layer_field_lists_the_files_layers_and_reloads_the_one_picked(
    qtbot, window, errors, keras_pair, suffix
):
    folder, (model, _) = keras_pair
    path = str(folder / f"m1{suffix}")
    infos = list_lstm_layers(path)
    asked = []
    # the dialog: "top"
    window.files.pick_layer = lambda p, layers: asked.append(layers) or layers[2]
    assert window.files.open_weights(path)
    field = window.params.widgets["layer"]
    names = [field.itemText(k) for k in range(field.count())]
    assert names == [info.name for info in infos] and names[2] == "top" and len(asked) == 1
    assert field.currentText() == "top" and field.currentIndex() == 2
    for k, info in enumerate(infos):  # sizes beside each name in the list, and in its tooltip
        option = QStyleOptionViewItem()
        field.itemDelegate().initStyleOption(option, field.model().index(k, 0))
        assert option.text == f"{info.name}   (I={info.input_dim}, H={info.hidden})"
        assert f"I={info.input_dim}, H={info.hidden}" in field.itemData(k, Qt.ToolTipRole)
    assert "forward half" in field.itemData(0, Qt.ToolTipRole)
    assert _sizes(window) == (6, 5)
    np.testing.assert_array_equal(_loaded(window).kernel, _keras_weights(model.get_layer("top"))
                                  ["kernel"])  # fmt: skip

    _pick_in_list(qtbot, field, 1)  # the Bidirectional's backward half
    assert window.params.config().layer == infos[1].name and not errors
    assert _sizes(window) == (4, 3) and not window.params.widgets["hidden"].isEnabled()
    for name, array in _keras_weights(model.get_layer("bi").backward_layer).items():
        np.testing.assert_array_equal(getattr(_loaded(window), name), array)
    assert infos[1].name in window.params.sources.text()
    assert len(asked) == 1  # a pick in the field asks nothing more


def test_a_typed_name_is_read_and_a_wrong_one_changes_nothing(qtbot, window, errors, keras_pair):
    folder, (model, _) = keras_pair
    path = str(folder / "m1.keras")
    assert window.files.open_weights(path, "top")
    field = window.params.widgets["layer"]
    _type(qtbot, field, "bi")  # the Bidirectional's own name: its forward half
    assert window.params.config().layer == "bi" and not errors
    assert _sizes(window) == (4, 3)
    for name, array in _keras_weights(model.get_layer("bi").forward_layer).items():
        np.testing.assert_array_equal(getattr(_loaded(window), name), array)
    assert "using its forward half" in window.params.sources.text()

    _type(qtbot, field, "nope")
    assert len(errors) == 1 and "no layer named 'nope'" in errors[0]
    assert "'top'" in errors[0] and "'bi/backward'" in errors[0]  # the names it has
    assert field.currentText() == "bi" and window.params.config().layer == "bi"
    assert _sizes(window) == (4, 3)
    field.lineEdit().clearFocus()  # leaving the field does not ask again
    assert len(errors) == 1
    _type(qtbot, field, "TOP")  # a listed name in other letters: the listed one
    assert window.params.config().layer == "top" and _sizes(window) == (6, 5)
    assert len(errors) == 1


def test_a_file_of_one_layer_needs_no_choice(qtbot, window, errors, tmp_path, rng):
    """safetensors with one nn.LSTM layer: its name, listed alone; a plain .npz: no name, its
    sizes in the placeholder. Nobody is asked."""
    from safetensors.numpy import save_file

    window.files.pick_layer = lambda *args: pytest.fail("asked for a layer of a one-layer file")
    shapes = {"weight_ih_l0": (8, 3), "weight_hh_l0": (8, 2), "bias_ih_l0": (8,),
              "bias_hh_l0": (8,)}  # fmt: skip
    save_file({k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()},
              str(tmp_path / "one.safetensors"))  # fmt: skip
    field = window.params.widgets["layer"]
    assert window.open_path(str(tmp_path / "one.safetensors"))
    assert [field.itemText(k) for k in range(field.count())] == ["l0"]
    assert field.currentText() == "l0" and _sizes(window) == (3, 2)

    np.savez(tmp_path / "plain.npz", kernel=rng.standard_normal((5, 12)),
             recurrent_kernel=rng.standard_normal((3, 12)), bias=np.zeros(12))  # fmt: skip
    assert window.open_path(str(tmp_path / "plain.npz"))
    assert field.count() == 0 and field.currentText() == ""
    assert field.lineEdit().placeholderText() == "the file's only LSTM (I=5, H=3)"
    assert window.params.config().layer is None and _sizes(window) == (5, 3) and not errors
    window.params.set_path("weights", None)  # ✕: seeded random again, nothing listed
    assert field.count() == 0 and not field.isEnabled()


def test_opening_weights_reads_the_file_once(window, keras_pair, monkeypatch):
    """Listing the layers and reading the one picked come from one read of the file."""
    folder, _ = keras_pair
    reads = []
    real = loaders.layer_reader

    def counted(suffix):
        reads.append(suffix)
        return real(suffix)

    monkeypatch.setattr(loaders, "layer_reader", counted)
    window.files.pick_layer = lambda p, layers: layers[0]
    assert window.files.open_weights(str(folder / "m1.keras"))
    assert reads == [".keras"]
    reads.clear()
    assert window.files.choose_layer("top")
    assert reads == [".keras"]


def test_per_batch_files_use_the_layer_picked(qtbot, window, errors, keras_pair):
    """Batchwise mode's files generator with files of several LSTMs: the layer picked is read
    from every file (it failed, asking for --layer), and picking another reads them again."""
    folder, models = keras_pair
    mode = window.params.widgets["mode"]
    mode.setCurrentIndex(mode.findData("batchwise"))
    generator = window.params.widgets["generator"]
    generator.setCurrentIndex(generator.findData("files"))
    window.files.pick_layer = lambda p, layers: layers[2]
    paths = [str(folder / "m1.keras"), str(folder / "m2.keras")]
    assert window.files.open_batch_weights(paths) and not errors
    field = window.params.widgets["layer"]
    assert field.currentText() == "top" and _sizes(window) == (6, 5)
    _type(qtbot, field, "bi")
    assert not errors and _sizes(window) == (4, 3)
    assert "using its forward half" in window.params.sources.text()
    config = window.params.validated()
    assert config.layer == "bi" and config.batches == 2
    from lstmviz.engine.problem.weight_sources import make_generator

    generator = make_generator(config, [])
    for n, model in enumerate(models):
        kernel, recurrent, bias = generator(n, None)
        want = _keras_weights(model.get_layer("bi").forward_layer)
        np.testing.assert_array_equal(kernel, want["kernel"])
        np.testing.assert_array_equal(recurrent, want["recurrent_kernel"])
        np.testing.assert_array_equal(bias, want["bias"])


def test_a_config_naming_a_layer_lists_the_files_layers_again(window, errors, keras_pair):
    """A reopened trace or the saved settings name the file and layer: the file is read again
    (quietly) and its layers listed, the one named shown; a file that is gone lists nothing."""
    from dataclasses import replace

    folder, _ = keras_pair
    config = replace(window.params.config(), weights=str(folder / "m1.h5"), layer="bi")
    window.params.set_config(config)
    window.files.reload_sources()  # as the window does after set_config
    field = window.params.widgets["layer"]
    assert field.count() == 3 and field.currentText() == "bi" and _sizes(window) == (4, 3)
    window.params.set_config(replace(config, weights=str(folder / "gone.keras"), layer="top"))
    window.files.reload_sources()
    assert field.count() == 0 and field.currentText() == "top" and not errors


def test_gui_layer_opens_the_named_layer_of_a_file_with_several(keras_pair, tmp_path):
    """`lstmviz gui FILE --layer NAME`: the layer named, with no one to ask (--screenshot);
    without it, a file of several LSTMs is an error that says how to name one."""
    import subprocess
    import sys

    from lstmviz.cli import main

    folder, _ = keras_pair
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = os.environ | {"QT_QPA_PLATFORM": "offscreen", "XDG_CONFIG_HOME": str(tmp_path),
                        "PYTHONPATH": root}  # fmt: skip
    shot = tmp_path / "top.png"
    done = subprocess.run([sys.executable, os.path.join(root, "main.py"), str(folder / "m1.h5"),
                           "--layer", "top", "--screenshot", str(shot)], capture_output=True,
                          text=True, env=env, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.read_bytes()[:4] == b"\x89PNG"
    done = subprocess.run([sys.executable, os.path.join(root, "main.py"), str(folder / "m1.h5"),
                           "--screenshot", str(tmp_path / "none.png")], capture_output=True,
                          text=True, env=env, timeout=240)  # fmt: skip
    assert done.returncode == 1 and "--layer" in done.stderr, done.stderr[-2000:]
    assert main(["gui", "--layer", "top"]) == 2  # no file to take it from
    assert main(["gui", "--demo", "--layer", "top"]) == 2


def test_open_path_takes_the_layer_named(window, errors, keras_pair):
    folder, models = keras_pair
    assert window.open_path(str(folder / "m2.keras"), "top") and not errors
    assert window.params.widgets["layer"].text() == "top"
    assert _sizes(window) == (6, 5)
    got = _loaded(window)
    for key, value in _keras_weights(models[1].get_layer("top")).items():
        np.testing.assert_array_equal(getattr(got, key), value)
