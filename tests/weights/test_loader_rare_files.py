"""Rare but real weight files: several nn.LSTM modules in one .safetensors file (which keeps no
module order), and a Keras 3 legacy .h5 of a Bidirectional with a backward layer of its own."""

import numpy as np
import pytest

import lstmviz
from lstmviz.core.errors import ModelError
from lstmviz.weights.loaders import list_lstm_layers, read_weights
from lstmviz.weights.model_files import load_model


def write_modules(path, rng, modules):
    """A state dict of several one-layer nn.LSTM modules {prefix: (I, H)}, written with
    safetensors; returns the arrays by key."""
    from safetensors.numpy import save_file

    tensors = {}
    for prefix, (i, h) in modules.items():
        shapes = {"weight_ih": (4 * h, i), "weight_hh": (4 * h, h), "bias_ih": (4 * h,)}
        shapes["bias_hh"] = (4 * h,)
        for kind, shape in shapes.items():
            tensors[f"{prefix}{kind}_l0"] = rng.standard_normal(shape).astype(np.float32)
    save_file(tensors, str(path))
    return tensors


def stacked(spec):
    """The names of a stack's LSTM layers, in the order it runs them."""
    return [layer.name for layer in spec.layers[1:]]


def test_a_module_list_stacks_in_the_order_of_its_numbers(tmp_path, rng):
    # nn.ModuleList registers layers.0, layers.1, …, layers.11: the order a model runs them.
    path = tmp_path / "list.safetensors"
    t = write_modules(path, rng, {f"layers.{k}.": (3, 3) for k in range(12)})
    order = [f"layers.{k}.l0" for k in range(12)]
    assert [info.name for info in list_lstm_layers(path)] == order
    spec = load_model(path)
    assert stacked(spec) == order
    for k, layer in enumerate(spec.layers[1:]):
        np.testing.assert_array_equal(layer.weights["kernel"], t[f"layers.{k}.weight_ih_l0"].T)
    assert "order of their numbers" in spec.source


def test_numbered_modules_compare_as_numbers(tmp_path, rng):
    path = tmp_path / "num.safetensors"
    write_modules(path, rng, {"lstm2.": (3, 4), "lstm10.": (4, 5)})
    assert stacked(load_model(path)) == ["lstm2.l0", "lstm10.l0"]


def test_named_modules_stack_in_the_only_order_their_sizes_chain(tmp_path, rng):
    path = tmp_path / "ed.safetensors"
    t = write_modules(path, rng, {"encoder.": (3, 4), "decoder.": (4, 5)})
    spec = load_model(path)
    assert stacked(spec) == ["encoder.l0", "decoder.l0"]
    assert spec.layers[-1].output_shape == (None, 5)
    np.testing.assert_array_equal(spec.layers[2].weights["kernel"], t["decoder.weight_ih_l0"].T)
    assert "'encoder.', 'decoder.'" in spec.source and "sizes" in spec.source


def test_named_modules_of_one_size_are_refused_naming_the_way_out(tmp_path, rng):
    path = tmp_path / "same.safetensors"
    write_modules(path, rng, {"encoder.": (3, 3), "decoder.": (3, 3)})
    message = r"same.safetensors: .*does not store the order.*--layer NAME.*\.pt keeps"
    with pytest.raises(ModelError, match=message):
        load_model(path)
    # One module at a time still loads.
    assert read_weights(path, "encoder.l0")[0].hidden == 3


# ---- Keras 3 legacy .h5: Bidirectional(LSTM, backward_layer=LSTM(go_backwards=True)) ----------


@pytest.fixture(scope="module")
def custom_backward(tmp_path_factory):
    import keras

    folder = tmp_path_factory.mktemp("custom_backward")
    keras.utils.set_random_seed(3)
    inputs = keras.Input((6, 3))
    forward = keras.layers.LSTM(4, return_sequences=True, name="fw")
    backward = keras.layers.LSTM(4, return_sequences=True, go_backwards=True, name="bw")
    y = keras.layers.Bidirectional(forward, backward_layer=backward, name="bi")(inputs)
    model = keras.Model(inputs, keras.layers.Dense(1, name="head")(y))
    for suffix in ("h5", "keras"):
        model.save(folder / f"m.{suffix}")
    x = np.random.default_rng(3).standard_normal((2, 6, 3)).astype(np.float32)
    return {"folder": folder, "x": x}


@pytest.mark.parametrize("suffix", ["h5", "keras"])
def test_a_custom_backward_layer_is_the_bidirectionals_backward_half(custom_backward, suffix):
    import keras

    path = custom_backward["folder"] / f"m.{suffix}"
    infos = list_lstm_layers(path)
    assert [info.name for info in infos] == ["forward_fw", "bw"]
    assert infos[1].note.startswith("backward half of a Bidirectional")
    weights, text = read_weights(path, "bi/backward")
    assert "'bw'" in text
    bi = keras.models.load_model(path, compile=False).get_layer("bi")
    mine = (weights.kernel, weights.recurrent_kernel, weights.bias)
    for ours, theirs in zip(mine, bi.backward_layer.get_weights(), strict=True):
        np.testing.assert_array_equal(ours, theirs)
    # Keras runs the backward half on the reversed sequence: lstmviz runs it forward on x[::-1].
    x = custom_backward["x"]
    expected = np.asarray(bi.backward_layer(x)).transpose(1, 0, 2)
    trace = lstmviz.taped_gradients(x[:, ::-1].transpose(1, 0, 2), weights)
    np.testing.assert_allclose(trace.h, expected, atol=1e-5)
    _, text = read_weights(path, "bi")
    assert "its backward half: 'bi/backward'" in text


def test_a_weights_only_stack_that_merged_by_sum_says_why_it_does_not_chain(tmp_path):
    import keras

    keras.utils.set_random_seed(4)
    bi = keras.layers.Bidirectional(keras.layers.LSTM(4, return_sequences=True), merge_mode="sum")
    model = keras.Sequential([keras.Input((5, 3)), bi, keras.layers.LSTM(2)])
    model.save_weights(tmp_path / "sum.weights.h5")
    message = r"width 8 \(a weights-only file does not store merge_mode"
    with pytest.raises(ModelError, match=message):
        load_model(tmp_path / "sum.weights.h5")


def test_lstms_named_forward_and_backward_outside_a_bidirectional(tmp_path):
    """Keras 2 names a Bidirectional's halves forward_<name> and backward_<name>; LSTMs the
    user named so, on their own, are plain LSTMs."""
    import tf_keras

    lstm = tf_keras.layers.LSTM
    model = tf_keras.Sequential([tf_keras.Input((5, 3)), lstm(4, return_sequences=True,
                                 name="forward_lstm"), lstm(2, name="backward_lstm")])  # fmt: skip
    model.save_weights(tmp_path / "w.h5")
    assert [(i.name, i.note) for i in list_lstm_layers(tmp_path / "w.h5")] == [
        ("forward_lstm", ""), ("backward_lstm", "")
    ]
    spec = load_model(tmp_path / "w.h5")
    assert [(layer.name, layer.kind) for layer in spec.layers[1:]] == [
        ("forward_lstm", "lstm"), ("backward_lstm", "lstm")
    ]
    kernel = model.layers[1].get_weights()[0]
    np.testing.assert_array_equal(spec.layers[2].weights["kernel"], kernel)
