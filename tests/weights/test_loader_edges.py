"""Loader edge cases from real files: a Keras 2 Bidirectional's activations, bfloat16
safetensors, a trace given as inputs, arguments of the wrong type."""

import json
import os
import struct

import numpy as np
import pytest

import lstmviz
from lstmviz.cli import main
from lstmviz.core.errors import InputError, WeightsError
from lstmviz.io.inputs import describe_inputs, load_inputs
from lstmviz.weights.loaders import load_weights


@pytest.fixture(scope="module")
def keras2_bidirectionals(tmp_path_factory):
    """tf_keras (Keras 2) .h5 files whose Bidirectional LSTMs are not lstmviz's cell: Keras 2
    keeps the inner LSTM's config (named `lstm`) under the Bidirectional's name, and names the
    halves' weight groups `forward_lstm` / `backward_lstm`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tf_keras as k2
    from tf_keras import layers as L

    folder = tmp_path_factory.mktemp("k2bi")
    cases = {
        "relu": dict(activation="relu"),
        "hard_sigmoid": dict(recurrent_activation="hard_sigmoid"),  # Keras < 2.3's default
        "plain": {},
    }
    for name, options in cases.items():
        model = k2.Sequential([k2.Input((6, 3)), L.Bidirectional(L.LSTM(2, **options), name="bi")])
        model.save(folder / f"{name}.h5")
        if name == "plain":
            expected = model.get_layer("bi").get_weights()
    return folder, expected


@pytest.mark.parametrize(
    ("name", "message"),
    [("relu", "activation='relu'"), ("hard_sigmoid", "recurrent_activation='hard_sigmoid'")],
)
@pytest.mark.parametrize("layer", ["bi", "bi/backward", None])
def test_keras2_bidirectional_with_another_activation_is_refused(
    keras2_bidirectionals, name, message, layer
):
    folder, _ = keras2_bidirectionals
    path = folder / f"{name}.h5"
    with pytest.raises(WeightsError, match=message if layer else "no LSTM layer inside"):
        load_weights(path, layer)
    assert lstmviz.list_lstm_layers(path) == []


def test_keras2_bidirectional_with_lstmviz_cell_loads_both_halves(keras2_bidirectionals):
    folder, expected = keras2_bidirectionals
    for layer, arrays in (("bi", expected[:3]), ("bi/backward", expected[3:])):
        weights = load_weights(folder / "plain.h5", layer)
        for got, want in zip(
            (weights.kernel, weights.recurrent_kernel, weights.bias), arrays, strict=True
        ):
            np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """A taped trace and a model-mode trace saved as `.npz`, with the batch-major x they ran."""
    folder = tmp_path_factory.mktemp("traces")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 3)).astype(np.float32)  # [B, T, I]: B != T
    weights = lstmviz.random_weights(3, 4, rng)
    lstmviz.taped_gradients(x.transpose(1, 0, 2), weights).save(folder / "taped.npz")
    keys = ("kernel", "recurrent_kernel", "bias")
    np.savez(folder / "stack.npz", **{f"a/{key}": getattr(weights, key) for key in keys})
    lstmviz.model_gradients(folder / "stack.npz", x, None).save(folder / "model.npz")
    return folder, x


def test_a_trace_as_inputs_is_read_time_major_with_or_without_the_flag(traces):
    """A trace keeps x time-major: read as batch-major, T and B would swap unnoticed."""
    folder, x = traces
    for time_major in (False, True):
        got = load_inputs(folder / "taped.npz", time_major=time_major)
        np.testing.assert_array_equal(got, x.transpose(1, 0, 2))
        assert "trace's x, time-major" in describe_inputs(folder / "taped.npz", got, time_major)


def test_the_cli_runs_on_a_traces_inputs_as_the_trace_ran(traces, tmp_path):
    folder, x = traces
    out = tmp_path / "t.npz"
    taped = folder / "taped.npz"
    assert main(["run", "--mode", "taped", "--inputs", str(taped), "--out", str(out)]) == 0
    np.testing.assert_array_equal(np.load(out)["x"], np.load(taped)["x"])


def test_a_model_trace_as_data_gives_its_batch_major_x(traces):
    from lstmviz.io.model_data import load_data

    folder, x = traces
    got, y, description = load_data(folder / "model.npz")
    np.testing.assert_array_equal(got, x)
    assert y is None and "trace" in description


def write_bf16_safetensors(path, tensors: dict) -> dict:
    """A .safetensors file of bfloat16 tensors, written byte by byte as the format specifies
    (what `torch.save_file` writes for a bf16 model); returns their values as float32."""
    header, blobs, values, offset = {}, [], {}, 0
    for name, value in tensors.items():
        top = (np.asarray(value, np.float32).view(np.uint32) >> 16).astype("<u2")  # truncate
        values[name] = (top.astype(np.uint32) << 16).view(np.float32)
        header[name] = {"dtype": "BF16", "shape": list(top.shape),
                        "data_offsets": [offset, offset + top.nbytes]}  # fmt: skip
        blobs.append(top.tobytes())
        offset += top.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    return values


def test_bfloat16_safetensors_load_as_their_float32_values(tmp_path):
    rng = np.random.default_rng(5)
    shapes = {"lstm.weight_ih_l0": (8, 3), "lstm.weight_hh_l0": (8, 2),
              "lstm.bias_ih_l0": (8,), "lstm.bias_hh_l0": (8,)}  # fmt: skip
    path = tmp_path / "bf16.safetensors"
    values = write_bf16_safetensors(path, {k: rng.standard_normal(s) for k, s in shapes.items()})
    weights = load_weights(path)
    np.testing.assert_array_equal(weights.kernel, values["lstm.weight_ih_l0"].T)
    np.testing.assert_array_equal(weights.recurrent_kernel, values["lstm.weight_hh_l0"].T)
    np.testing.assert_allclose(
        weights.bias, values["lstm.bias_ih_l0"] + values["lstm.bias_hh_l0"], rtol=1e-7
    )


def test_a_layer_that_is_not_a_name_is_refused_naming_the_names(tmp_path):
    rng = np.random.default_rng(6)
    weights = lstmviz.random_weights(3, 2, rng)
    path = tmp_path / "w.npz"
    np.savez(
        path, kernel=weights.kernel, recurrent_kernel=weights.recurrent_kernel, bias=weights.bias
    )
    for layer in (0, ["a"], b"lstm"):
        with pytest.raises(WeightsError, match=r"layer must be a name.*not a"):
            load_weights(path, layer)


@pytest.mark.parametrize("x", [[[1.0, 2.0], [3.0]], [["a", "b"]], {"x": 1}])
def test_model_data_that_is_no_array_is_an_input_error(traces, x):
    from lstmviz.io.model_data import check_data
    from lstmviz.weights.model_files import load_model

    folder, _ = traces
    spec = load_model(folder / "stack.npz")
    with pytest.raises(InputError, match="data: x"):
        check_data(spec, x, None)
    with pytest.raises(InputError, match="data: y"):
        check_data(spec, np.zeros((2, 5, 3)), [[1.0], [2.0, 3.0]])


def test_a_folder_of_weights_takes_every_weight_file_whatever_the_case(tmp_path):
    from lstmviz.weights.loaders import weight_files

    rng = np.random.default_rng(7)
    for name in ("B.NPZ", "a.npz", "c.Weights.H5"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "notes.txt").write_bytes(b"")
    (tmp_path / "sub.npz").mkdir()  # a folder, not a weights file
    assert [p.name for p in weight_files(str(tmp_path))] == ["B.NPZ", "a.npz", "c.Weights.H5"]
    weights = lstmviz.random_weights(3, 2, rng)
    arrays = {k: getattr(weights, k) for k in ("kernel", "recurrent_kernel", "bias")}
    with open(tmp_path / "B.NPZ", "wb") as handle:  # np.savez would append ".npz"
        np.savez(handle, **arrays)
    np.testing.assert_array_equal(load_weights(tmp_path / "B.NPZ").kernel, weights.kernel)


@pytest.mark.parametrize("kind", ["keras", "h5"])
def test_a_go_backwards_lstm_says_keras_runs_it_reversed(tmp_path, kind):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras

    model = keras.Sequential(
        [keras.Input((4, 3)), keras.layers.LSTM(2, go_backwards=True, name="gb")]
    )
    model.save(tmp_path / f"m.{kind}")
    (info,) = lstmviz.list_lstm_layers(tmp_path / f"m.{kind}")
    assert "reversed sequence" in info.note
    _, description = lstmviz.read_weights(tmp_path / f"m.{kind}")
    assert "reversed sequence" in description


def test_model_data_given_as_a_path_says_to_load_it(traces):
    folder, _ = traces
    with pytest.raises(InputError, match=r"x is a path .*model\.npz.*np\.load it first"):
        lstmviz.model_gradients(folder / "stack.npz", str(folder / "model.npz"))


def test_traces_without_one_lstms_weights_say_what_they_are(traces, tmp_path):
    folder, _ = traces
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 5, 2, 3))  # [N, T, B, I]
    stacked = [lstmviz.random_weights(3, 4, rng) for _ in range(3)]
    lstmviz.batchwise_gradients(x, stacked).save(tmp_path / "batches.npz")
    with pytest.raises(WeightsError, match=r"a per-batch trace: 3 weight sets"):
        load_weights(tmp_path / "batches.npz")
    with pytest.raises(WeightsError, match=r"model\.npz: a model-mode trace holds no weights"):
        load_weights(folder / "model.npz")
    np.testing.assert_array_equal(load_weights(folder / "taped.npz").kernel.shape, (3, 16))
