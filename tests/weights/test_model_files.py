"""Whole models read from real files (Keras 3, Keras 2, weights-only stacks, PyTorch) and live
Keras models, checked against the models that wrote them and independent NumPy forwards."""

import json
import warnings
import zipfile
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lstmviz.core.errors import LstmvizError, ModelError
from lstmviz.weights.formats.keras_config import LOSSES
from lstmviz.weights.loaders import list_lstm_layers, read_weights
from lstmviz.weights.model_files import load_model, spec_from_keras
from lstmviz.weights.model_spec import ACTIVATIONS
from tests.helpers.models.model_fixtures import (
    bad_keras3_models,
    cudnn_forward,
    keras2_models,
    keras3_models,
    npz_stack,
    sigmoid,
    torch_bidirectional_forward,
    torch_state_dict,
)
from tests.helpers.references.reference import np_forward

# ---- a NumPy forward of a ModelSpec, written from Keras's documented semantics --------------

ACTS = {
    "linear": lambda z: z,
    "tanh": np.tanh,
    "sigmoid": sigmoid,
    "relu": lambda z: np.maximum(z, 0),
    "softmax": lambda z: (
        np.exp(z - z.max(-1, keepdims=True))
        / np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True)
    ),
}


def np_lstm(x, w, prefix, args, mask):
    """One Keras LSTM on x [B, T, I] (float64): masked steps carry h and c; their output is the
    previous output, or zeros with zero_output_for_mask; go_backwards runs (and returns) the
    reversed sequence."""
    kernel, recurrent = w[f"{prefix}kernel"], w[f"{prefix}recurrent_kernel"]
    bias = w.get(f"{prefix}bias", np.zeros(recurrent.shape[1]))
    if args["go_backwards"]:
        x = x[:, ::-1]
        mask = None if mask is None else mask[:, ::-1]
    hidden = recurrent.shape[0]
    h = np.zeros((x.shape[0], hidden))
    c, out, outputs = np.zeros_like(h), np.zeros_like(h), []
    for t in range(x.shape[1]):
        z = x[:, t] @ kernel + h @ recurrent + bias
        i, f, g, o = (z[:, n * hidden : (n + 1) * hidden] for n in range(4))
        c_new = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h_new = sigmoid(o) * np.tanh(c_new)
        if mask is None:
            h, c, out = h_new, c_new, h_new
        else:
            m = mask[:, t, None]
            h, c = np.where(m, h_new, h), np.where(m, c_new, c)
            out = np.where(m, h_new, 0.0 if args["zero_output_for_mask"] else out)
        outputs.append(out)
    return np.stack(outputs, axis=1) if args["return_sequences"] else outputs[-1]


def merged(mode, forward, backward):
    if mode == "concat":
        return np.concatenate([forward, backward], axis=-1)
    both = np.stack([forward, backward])
    return {"sum": both.sum(0), "mul": both.prod(0), "ave": both.mean(0)}[mode]


def np_model(spec, x):
    """The model's output for batch-major x ([B, T] ids or [B, T, I])."""
    y, mask = np.asarray(x), None
    for layer in spec.layers[1:]:
        kind, a, w = layer.kind, layer.args, layer.weights
        if kind == "embedding":
            mask = (y != 0) if a["mask_zero"] else None
            y = w["embeddings"][y].astype(np.float64)
        elif kind == "masking":
            mask = np.any(y != a["mask_value"], axis=-1)
            y = y * mask[..., None]
        elif kind == "lstm":
            y = np_lstm(y, w, "", a, mask)
        elif kind == "bidirectional":
            forward = np_lstm(y, w, "forward/", a["forward"], mask)
            backward = np_lstm(y, w, "backward/", a["backward"], mask)
            if a["return_sequences"]:
                backward = backward[:, ::-1]
            y = merged(a["merge_mode"], forward, backward)
        elif kind in ("dense", "time_distributed_dense"):
            y = ACTS[a["activation"]](y @ w["kernel"] + w.get("bias", 0.0))
        elif kind == "activation":
            y = ACTS[a["activation"]](y)
        elif kind != "identity":
            raise AssertionError(f"the NumPy forward does not run {kind!r}")
        if kind in ("lstm", "bidirectional") and not a["return_sequences"]:
            mask = None
    return y


# ---- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def k3(tmp_path_factory):
    """Keras 3 models saved as .keras, legacy .h5 (those without Conv1D/attention) and
    .weights.h5, with an input batch for each."""
    folder = tmp_path_factory.mktemp("k3")
    models = keras3_models()
    for name, model in models.items():
        model.save(folder / f"{name}.keras")
        model.save_weights(folder / f"{name}.weights.h5")
        if name != "nested":
            model.save(folder / f"{name}.h5")
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 20, size=(4, 7))
    ids[0, :3] = 0  # leading padding, trailing padding, a gap, a sample with nothing masked
    ids[1, 5:] = 0
    ids[2, 2:4] = 0
    inputs = {"tokens": ids, "nested": rng.integers(0, 30, size=(3, 6))}
    for name in ("features", "stack") + tuple(n for n in models if n.startswith("merge")):
        shape = models[name].input_shape[1:]
        inputs[name] = rng.standard_normal((4, *shape)).astype(np.float32)
    inputs["features"][1, 4:] = 0.0  # masked by Masking
    inputs["features"][2, :2] = 0.0
    return {"folder": folder, "models": models, "x": inputs}


@pytest.fixture(scope="module")
def k2(tmp_path_factory):
    """tf_keras (Keras 2) full-model .h5 files and a weights-only .h5."""
    folder = tmp_path_factory.mktemp("k2")
    models = keras2_models()
    for name in ("k2seq", "k2fun", "k2cudnn"):
        models[name].save(folder / f"{name}.h5")
    models["k2stack"].save_weights(folder / "k2stack.h5")
    return {"folder": folder, "models": models}


def assert_weights(layer_spec, keras_layer):
    """The spec's arrays equal the Keras layer's own get_weights(), in Keras's order."""
    expected = keras_layer.get_weights()
    got = list(layer_spec.weights.values())
    assert len(got) == len(expected), layer_spec.name
    for a, b in zip(got, expected, strict=True):
        np.testing.assert_array_equal(a, b)


# ---- Keras 3 -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["keras", "h5", "live"])
def test_keras3_sequential_with_tokens(k3, kind):
    model = k3["models"]["tokens"]
    spec = spec_from_keras(model) if kind == "live" else load_model(k3["folder"] / f"tokens.{kind}")
    kinds = [layer.kind for layer in spec.layers]
    assert kinds == [
        "input", "embedding", "identity", "bidirectional", "identity", "lstm", "dense",
    ]  # fmt: skip
    assert spec.tokens and spec.input_shape == (7,) and spec.vocabulary == 20
    assert spec.lstm_directions() == ["bi/forward", "bi/backward", "top"]
    assert spec.loss == "binary_crossentropy" and spec.loss_args == {}
    emb, bi, top, head = (spec.layers[i] for i in (1, 3, 5, 6))
    assert emb.args == {"input_dim": 20, "output_dim": 4, "mask_zero": True}
    assert bi.args["merge_mode"] == "concat" and bi.args["return_sequences"]
    assert bi.args["backward"]["go_backwards"] and not bi.args["forward"]["go_backwards"]
    assert top.args["go_backwards"] and not top.args["return_sequences"]
    assert head.args == {"units": 1, "activation": "sigmoid", "use_bias": True}
    for spec_layer in (emb, bi, top, head):
        assert_weights(spec_layer, model.get_layer(spec_layer.name))
    assert [layer.output_shape for layer in spec.layers[1:]] == [
        tuple(layer.output.shape[1:]) for layer in model.layers
    ]
    assert spec.params == model.count_params()
    x = k3["x"]["tokens"]
    np.testing.assert_allclose(np_model(spec, x), model.predict(x, verbose=0), atol=1e-5)


@pytest.mark.parametrize("name", ["features", "merge_sum", "merge_mul", "merge_concat"])
@pytest.mark.parametrize("kind", ["keras", "h5", "live"])
def test_keras3_models_match_keras(k3, name, kind):
    model = k3["models"][name]
    spec = spec_from_keras(model) if kind == "live" else load_model(k3["folder"] / f"{name}.{kind}")
    assert not spec.tokens and spec.input_shape == tuple(model.input_shape[1:])
    for spec_layer in spec.lstm_layers():
        assert_weights(spec_layer, model.get_layer(spec_layer.name))
    assert spec.params == model.count_params()
    x = k3["x"][name]
    np.testing.assert_allclose(np_model(spec, x), model.predict(x, verbose=0), atol=1e-5)
    losses = {
        "features": ("categorical_crossentropy", {"label_smoothing": 0.1}),
        "merge_sum": ("sparse_categorical_crossentropy", {}),
        "merge_mul": ("mean_squared_error", {}),
        "merge_concat": (None, {}),
    }
    loss, args = losses[name]
    assert spec.loss == loss
    assert {k: spec.loss_args[k] for k in args} == args
    if name == "features":
        assert [layer.kind for layer in spec.layers] == [
            "input", "masking", "bidirectional", "identity", "lstm", "time_distributed_dense",
            "activation",
        ]  # fmt: skip
        assert "bias" not in spec.layers[4].weights and not spec.layers[4].args["use_bias"]


def test_keras3_layers_only_keras_runs(k3):
    """Conv1D and self-attention become kind "keras"; rebuilt, they compute what the model's own
    layers compute; a nested Sequential is flattened in place."""
    import keras

    from lstmviz.weights.live.keras_rebuild import keras_layer

    model = k3["models"]["nested"]
    spec = load_model(k3["folder"] / "nested.keras")
    assert [(layer.name, layer.kind) for layer in spec.layers] == [
        ("input", "input"),
        ("emb", "embedding"),
        ("conv", "keras"),
        ("inner_lstm", "lstm"),
        ("lstm", "lstm"),
        ("attention", "keras"),
        ("pool", "keras"),
        ("head", "dense"),
    ]
    assert spec.lstm_directions() == ["inner_lstm", "lstm"]
    assert spec.loss == "binary_crossentropy" and spec.loss_args["from_logits"] is False
    assert_weights(spec.layers[3], model.get_layer("sub").get_layer("inner_lstm"))
    assert spec.params == model.count_params()
    x = k3["x"]["nested"]
    for index in (2, 5, 6):
        layer = spec.layers[index]
        before = keras.Model(model.input, model.layers[index - 1].output)(x)
        want = keras.Model(model.input, model.layers[index].output)(x)
        got = keras_layer(layer)(before)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5)
        assert layer.output_shape == tuple(model.layers[index].output.shape[1:])


def test_keras3_weights_only_stack_in_model_order(k3):
    model = k3["models"]["stack"]
    spec = load_model(k3["folder"] / "stack.weights.h5")
    assert spec.stack and spec.loss is None
    assert [layer.name for layer in spec.layers[1:]] == ["first", "second", "third"]
    assert spec.lstm_directions() == ["first", "second/forward", "second/backward", "third"]
    for spec_layer in spec.layers[1:]:
        assert_weights(spec_layer, model.get_layer(spec_layer.name))
    x = k3["x"]["stack"]
    np.testing.assert_allclose(np_model(spec, x), model.predict(x, verbose=0), atol=1e-5)


def test_summary_is_a_table_keras_would_print(k3):
    spec = load_model(k3["folder"] / "tokens.keras")
    text = spec.summary()
    assert "Model 'tokens'" in text and "tokens.keras" in text
    assert "Bidirectional(LSTM)" in text and "(None, 7, 6)" in text and "(None, 5)" in text
    assert f"Total params: {k3['models']['tokens'].count_params():,}" in text
    assert "token ids (None, 7), vocabulary 20" in text and "binary_crossentropy" in text
    rows = [line.split() for line in text.splitlines()[3:10]]
    assert [row[0] for row in rows] == [layer.name for layer in spec.layers]


# ---- Keras 2 (tf_keras) --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["k2seq", "k2fun"])
def test_keras2_full_model_h5_that_keras3_refuses(k2, name):
    import keras

    path = k2["folder"] / f"{name}.h5"
    with pytest.raises(Exception, match="time_major"):
        keras.models.load_model(path)
    model = k2["models"][name]
    spec = load_model(path)
    assert "Keras 2" in spec.source
    for spec_layer in spec.layers[1:]:
        if spec_layer.weights:
            assert_weights(spec_layer, model.get_layer(spec_layer.name))
    assert spec.params == model.count_params()
    rng = np.random.default_rng(3)
    if name == "k2seq":
        x = rng.integers(0, 20, size=(4, 7))
        x[0, 4:] = 0
        assert spec.loss == "binary_crossentropy" and spec.tokens
        assert spec.lstm_directions() == ["bi/forward", "bi/backward", "top"]
    else:
        x = rng.standard_normal((4, 6, 3)).astype(np.float32)
        x[1, 3:] = 0.0
        assert spec.loss == "categorical_crossentropy"
        assert spec.loss_args["label_smoothing"] == pytest.approx(0.1)
        assert [layer.kind for layer in spec.layers[1:]] == [
            "masking", "lstm", "time_distributed_dense", "activation",
        ]  # fmt: skip
    np.testing.assert_allclose(np_model(spec, x), model.predict(x, verbose=0), atol=1e-5)


def test_keras2_cudnn_lstm_is_an_lstm_with_summed_biases(k2):
    """Keras 2 CuDNNLSTM groups read as what Keras 2 itself loads into an LSTM, and compute
    what cuDNN computes from them."""
    path = k2["folder"] / "k2cudnn.h5"
    lstm_model = k2["models"]["k2lstm"]
    lstm_model.load_weights(path)  # Keras 2 converts the CuDNNLSTM weights here
    spec = load_model(path)
    assert spec.lstm_directions() == ["cbi/forward", "cbi/backward", "cud"]
    assert [layer.class_name for layer in spec.layers[1:]] == ["Bidirectional", "CuDNNLSTM"]
    for spec_layer in spec.layers[1:]:
        assert_weights(spec_layer, lstm_model.get_layer(spec_layer.name))
    cud = k2["models"]["k2cudnn"].get_layer("cud").get_weights()
    x = np.random.default_rng(4).standard_normal((3, 5, 8))
    w = spec.layers[2].directions()[0].lstm_weights()
    h0 = np.zeros((3, 2))
    ours = np_forward(x.transpose(1, 0, 2), w.kernel, w.recurrent_kernel, w.bias, h0, h0)[0][-1]
    np.testing.assert_allclose(ours, cudnn_forward(*cud, x), atol=1e-5)
    # The single-layer loaders accept the same groups (--weights FILE --layer NAME).
    weights, source = read_weights(path, "cud")
    np.testing.assert_array_equal(weights.bias, lstm_model.get_layer("cud").get_weights()[2])
    assert "CuDNNLSTM" in source
    names = {info.name for info in list_lstm_layers(path)}  # Keras numbers a repeated
    assert "cud" in names and any(n.startswith("forward_cu_dnnlstm") for n in names)  # name


def test_keras2_weights_only_h5_is_a_stack(k2):
    model = k2["models"]["k2stack"]
    spec = load_model(k2["folder"] / "k2stack.h5")
    assert spec.stack and spec.lstm_directions() == ["a", "b/forward", "b/backward"]
    for spec_layer in spec.layers[1:]:
        assert_weights(spec_layer, model.get_layer(spec_layer.name))
    x = np.random.default_rng(5).standard_normal((2, 5, 3)).astype(np.float32)
    np.testing.assert_allclose(np_model(spec, x), model.predict(x, verbose=0), atol=1e-5)


def test_live_tf_keras_model(k2):
    """Read through an .h5 of it, without tf_keras's warning that .h5 is legacy."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = spec_from_keras(k2["models"]["k2seq"])
    assert not [w for w in caught if "HDF5" in str(w.message)], [str(w.message) for w in caught]
    assert spec.source == "keras.Model 'k2seq' (tf_keras, in memory)"
    assert spec.lstm_directions() == ["bi/forward", "bi/backward", "top"]


# ---- weights-only stacks: NumPy and PyTorch ------------------------------------------------


def test_pytorch_two_layer_bidirectional_stack_matches_keras(tmp_path, rng):
    import keras
    from keras import layers as L
    from safetensors.numpy import save_file

    state = torch_state_dict(rng, [(3, 4), (8, 4)], bidirectional=True, prefix="rnn.")
    path = tmp_path / "lstm.safetensors"
    save_file(state, str(path))
    spec = load_model(path)
    assert spec.stack and spec.input_shape == (None, 3)
    assert spec.lstm_directions() == [
        "rnn.l0/forward", "rnn.l0/backward", "rnn.l1/forward", "rnn.l1/backward",
    ]  # fmt: skip
    model = keras.Sequential(
        [keras.Input((6, 3))]
        + [L.Bidirectional(L.LSTM(4, return_sequences=True)) for _ in range(2)]
    )
    weights = []
    for k in range(2):
        for suffix in ("", "_reverse"):
            s = {key.removeprefix("rnn."): v for key, v in state.items()}
            weights += [
                s[f"weight_ih_l{k}{suffix}"].T,
                s[f"weight_hh_l{k}{suffix}"].T,
                s[f"bias_ih_l{k}{suffix}"] + s[f"bias_hh_l{k}{suffix}"],
            ]
    model.set_weights(weights)
    x = rng.standard_normal((2, 6, 3)).astype(np.float32)
    ours = np_model(spec, x)
    np.testing.assert_allclose(ours, model.predict(x, verbose=0), atol=1e-5)
    plain = {key.removeprefix("rnn."): v.astype(np.float64) for key, v in state.items()}
    np.testing.assert_allclose(ours, torch_bidirectional_forward(plain, 2, x), atol=1e-5)


def test_npz_stack_with_named_layers(tmp_path, rng):
    sizes = {"enc": (3, 4), "bi/forward": (4, 2), "bi/backward": (4, 2)}
    arrays = npz_stack(tmp_path / "s.npz", rng, sizes)
    spec = load_model(tmp_path / "s.npz")
    assert spec.lstm_directions() == ["enc", "bi/forward", "bi/backward"]
    assert spec.output_shape == (None, 4)
    backward_bias = spec.layers[2].weights["backward/bias"]
    np.testing.assert_array_equal(backward_bias, arrays["bi/backward/bias"].astype(np.float32))
    # The single-layer loader picks one of them by name.
    weights = read_weights(tmp_path / "s.npz", "enc")[0]
    np.testing.assert_array_equal(weights.kernel, arrays["enc/kernel"].astype(np.float32))


# ---- what the names mean to Keras ----------------------------------------------------------


def test_activation_and_loss_names_are_keras_own():
    import keras

    for name in ACTIVATIONS:
        if name != "hard_sigmoid_keras2":  # Keras 2's, which Keras 3 does not have
            assert callable(keras.activations.get(name)), name
    for name in LOSSES:
        assert callable(keras.losses.get(name)), name


@pytest.mark.parametrize(
    ("compiled", "name"),
    [
        ("mse", "mean_squared_error"),
        ("MAE", "mean_absolute_error"),
        ("kl_divergence", "kl_divergence"),
        ("huber", "huber"),
        ("binary_crossentropy", "binary_crossentropy"),
    ],
)
def test_compiled_losses_compute_what_keras_computes(compiled, name):
    """The name and arguments lstmviz reads give Keras's loss function the value of the
    model's own compiled loss."""
    import keras

    objects = {
        "huber": keras.losses.Huber(),  # Keras 3 does not save delta: keep its default
        "binary_crossentropy": keras.losses.BinaryCrossentropy(
            from_logits=True, label_smoothing=0.2
        ),
        "kl_divergence": keras.losses.kl_divergence,
    }
    model = keras.Sequential([keras.Input((4, 2)), keras.layers.LSTM(3)])
    model.compile(loss=objects.get(compiled, compiled))
    spec = spec_from_keras(model)
    assert spec.loss == name
    rng = np.random.default_rng(6)
    y, p = rng.uniform(0.1, 0.9, (5, 3)), rng.uniform(0.1, 0.9, (5, 3))
    ours = np.mean(keras.losses.get(spec.loss)(y, p, **spec.loss_args))
    theirs = keras.losses.get(objects.get(compiled, compiled))(y, p)
    np.testing.assert_allclose(ours, np.mean(theirs), rtol=1e-6)


# ---- bad input -----------------------------------------------------------------------------


def assert_refused(path, pattern):
    with pytest.raises(ModelError, match=pattern) as err:
        load_model(path)
    text = str(err.value)
    assert text.startswith(str(path)) and "\n" not in text, text


def test_keras3_models_lstmviz_refuses(tmp_path):
    for name, (model, pattern) in bad_keras3_models().items():
        path = tmp_path / f"{name}.keras"
        model.save(path)
        assert_refused(path, pattern)
    with pytest.raises(ModelError, match="^keras.Model '.*': layer 'g' .*return_state=True"):
        spec_from_keras(bad_keras3_models()["return_state"][0])


def test_keras3_model_without_input_or_of_another_class(tmp_path, k3):
    import keras

    with pytest.raises(ModelError, match="not built yet"):
        spec_from_keras(keras.Sequential([keras.layers.LSTM(2)]))
    with pytest.raises(ModelError, match="expected a keras.Model, got a dict"):
        spec_from_keras({})
    # A subclassed model's config has no layers: rewrite a real archive's config to say so.
    source = zipfile.ZipFile(k3["folder"] / "merge_sum.keras")
    path = tmp_path / "subclassed.keras"
    with zipfile.ZipFile(path, "w") as archive:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "config.json":
                data = json.dumps({"class_name": "MyModel", "config": {"units": 3}}).encode()
            archive.writestr(item, data)
    assert_refused(path, "class 'MyModel'.*Sequential and Functional")


def test_layers_outside_keras_files_are_refused(tmp_path):
    import keras
    import tf_keras as k2

    conv = keras.Sequential([keras.Input((5, 2)), keras.layers.Conv1D(3, 2, name="conv")])
    conv.add(keras.layers.LSTM(2))
    conv.save(tmp_path / "conv.h5")
    assert_refused(tmp_path / "conv.h5", "'conv' \\(Conv1D\\) is not supported; a Keras 3 .keras")
    hard = k2.Sequential([k2.Input((5, 2)), k2.layers.LSTM(2, recurrent_activation="hard_sigmoid")])
    hard.add(k2.layers.Dense(1, "hard_sigmoid"))
    hard.save(tmp_path / "hard.h5")
    # Keras 2's hard_sigmoid is not Keras 3's: the spec names Keras 2's
    lstm, dense = load_model(tmp_path / "hard.h5").layers[1:]
    assert lstm.args["recurrent_activation"] == dense.args["activation"] == "hard_sigmoid_keras2"


def test_bad_stacks_and_paths(tmp_path, rng):
    from safetensors.numpy import save_file

    def npz(name, sizes, nan=False):
        npz_stack(tmp_path / name, rng, sizes, nan)
        return tmp_path / name

    assert_refused(npz("gap.npz", {"a": (3, 4), "b": (5, 2)}), "do not chain: 'b'.*width 5")
    assert_refused(npz("nan.npz", {"a": (3, 4)}, nan=True), "'a': kernel contains NaN")
    assert_refused(npz("half.npz", {"bi/forward": (3, 4)}), "do not make one LSTM or Bidirectional")
    state = torch_state_dict(rng, [(3, 4), (5, 2)], bidirectional=False)
    save_file(state, str(tmp_path / "gap.safetensors"))
    assert_refused(tmp_path / "gap.safetensors", "do not chain: 'l1'")
    odd = {"weight_ih_l0": np.ones((9, 2), np.float32), "weight_hh_l0": np.ones((9, 4), np.float32)}
    save_file(odd, str(tmp_path / "odd.safetensors"))
    assert_refused(tmp_path / "odd.safetensors", r"'l0': weight_ih \[9, 2\] and weight_hh \[9, 4\]")
    (tmp_path / "model.onnx").write_bytes(b"1234")
    assert_refused(tmp_path / "model.onnx", "unknown model format '.onnx'")
    assert_refused(tmp_path / "missing.keras", "no such file")


FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("name", ["tokens.keras", "k2seq.h5", "stack.weights.h5", "l.safetensors"])
def test_truncated_and_bit_flipped_files_load_or_raise_one_line(k3, k2, tmp_path_factory, name):
    from safetensors.numpy import save_file

    folder = tmp_path_factory.mktemp("mutants")
    if name.endswith(".safetensors"):
        state = torch_state_dict(np.random.default_rng(7), [(3, 4), (8, 2)], bidirectional=True)
        save_file(state, str(folder / name))
        original = (folder / name).read_bytes()
    else:
        original = ((k2 if name.startswith("k2") else k3)["folder"] / name).read_bytes()
    path = folder / name
    path.write_bytes(original[: len(original) // 2])
    assert_refused(path, "not a readable")

    @FUZZ
    @given(
        cut=st.integers(0, 64) | st.integers(0, 40000),
        flips=st.lists(st.integers(0, 10**6), max_size=3),
    )
    def check(cut, flips):
        data = bytearray(original[: max(1, len(original) - cut)])
        for position in flips:
            data[position % len(data)] ^= 1 << (position % 8)
        path.write_bytes(bytes(data))
        try:
            spec = load_model(path)
        except LstmvizError as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc), str(exc)
        else:
            assert all(
                np.all(np.isfinite(a)) for layer in spec.layers for a in layer.weights.values()
            )

    check()


def test_model_spec_checks_the_chain(rng):
    """ModelSpec refuses layers that do not take what the layer before gives."""
    from lstmviz.weights.model_spec import LayerSpec, ModelSpec

    def lstm(name, i, h, sequences):
        w = {"kernel": rng.standard_normal((i, 4 * h)), "recurrent_kernel": np.ones((h, 4 * h))}
        args = {"return_sequences": sequences}
        out = (None, h) if sequences else (h,)
        return LayerSpec(name, "lstm", "LSTM", args, w, (None, i), out, 0)

    def chain(*layers, shape=(None, 3)):
        return ModelSpec(
            "m", "test", (LayerSpec("in", "input", "InputLayer", output_shape=shape), *layers)
        )

    dropout = LayerSpec("drop", "identity", "Dropout", input_shape=(4,), output_shape=(4,))
    dense = LayerSpec(
        "head", "dense", "Dense", {"activation": "linear"}, {"kernel": np.ones((4, 1))}, (4,), (1,)
    )
    spec = chain(lstm("a", 3, 4, False), dropout, dense)
    assert spec.lstm_directions() == ["a"] and spec.output_shape == (1,)
    with pytest.raises(
        ModelError, match="'b' \\(LSTM\\) takes \\(None, 5\\) but 'a' \\(LSTM\\) gives"
    ):
        chain(lstm("a", 3, 4, True), lstm("b", 5, 2, True))
    with pytest.raises(ModelError, match="'b' \\(LSTM\\) needs a sequence \\(T, W\\) but 'a'"):
        chain(lstm("a", 3, 4, False), replace(lstm("b", 4, 2, True), input_shape=None))
    with pytest.raises(ModelError, match="takes inputs of width 5 .* but 'in' \\(InputLayer\\)"):
        chain(replace(lstm("a", 5, 4, True), input_shape=None))
    with pytest.raises(ModelError, match="no Embedding comes first"):
        chain(replace(lstm("a", 3, 4, True), input_shape=None), shape=(7,))
    with pytest.raises(ModelError, match="no recurrent layer .* \\('head' \\(Dense\\)\\)"):
        chain(dense, shape=(4,))
