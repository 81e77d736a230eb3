"""Small real model files for tests/weights/test_model_files.py, written by Keras 3, tf_keras (Keras
2 for the installed TensorFlow), NumPy and safetensors; plus independent NumPy forwards.

Every model gets random weights (biases too), so a mixed-up array cannot pass by accident.
"""

from __future__ import annotations

import json
import os

import h5py
import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def randomize(model, seed: int) -> None:
    rng = np.random.default_rng(seed)
    model.set_weights([0.5 * rng.standard_normal(w.shape) for w in model.get_weights()])


def keras3_models() -> dict:
    """name -> a Keras 3 model, compiled as a user would."""
    import keras
    from keras import layers as L

    keras.utils.set_random_seed(1)
    models = {}
    tokens = keras.Sequential(
        [
            keras.Input((7,), dtype="int32"),
            L.Embedding(20, 4, mask_zero=True, name="emb"),
            L.SpatialDropout1D(0.2),
            L.Bidirectional(L.LSTM(3, return_sequences=True), name="bi"),
            L.Dropout(0.5),
            L.LSTM(5, go_backwards=True, name="top"),
            L.Dense(1, activation="sigmoid", name="head"),
        ],
        name="tokens",
    )
    tokens.compile(loss="binary_crossentropy", optimizer="adam")
    models["tokens"] = tokens

    x = inputs = keras.Input((6, 3), name="features")
    x = L.Masking(0.0)(x)
    x = L.Bidirectional(L.LSTM(4, return_sequences=True), merge_mode="ave", name="bi")(x)
    x = L.GaussianNoise(0.3)(x)
    x = L.LSTM(3, return_sequences=True, use_bias=False, name="nobias")(x)
    x = L.TimeDistributed(L.Dense(2), name="td")(x)
    features = keras.Model(inputs, L.Activation("softmax")(x), name="features")
    features.compile(loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.1))
    models["features"] = features

    merges = (("sum", "sparse_categorical_crossentropy"), ("mul", "mse"), ("concat", None))
    for merge, loss in merges:
        model = keras.Sequential(
            [
                keras.Input((5, 3)),
                L.Bidirectional(L.LSTM(2), merge_mode=merge),
                L.Dense(3, activation="softmax" if loss else "tanh"),
            ],
            name=f"merge_{merge}",
        )
        if loss:
            model.compile(loss=loss)
        models[f"merge_{merge}"] = model

    inner = keras.Sequential(
        [keras.Input((6, 5)), L.LSTM(3, return_sequences=True, name="inner_lstm")], name="sub"
    )
    x = inputs = keras.Input((6,), dtype="int32")
    x = L.Embedding(30, 4, name="emb")(x)
    x = L.Conv1D(5, 3, padding="same", activation="relu", name="conv")(x)
    x = inner(x)
    x = L.LSTM(2, return_sequences=True, name="lstm")(x)
    x = L.MultiHeadAttention(2, 3, name="attention")(x, x)
    x = L.GlobalAveragePooling1D(name="pool")(x)
    nested = keras.Model(inputs, L.Dense(1, activation="sigmoid", name="head")(x), name="nested")
    nested.compile(loss=keras.losses.BinaryCrossentropy(from_logits=False))
    models["nested"] = nested

    # LSTM first, then a Bidirectional of the same width: in a weights-only file their groups
    # ("lstm", "bidirectional") sort the other way round, and would chain in either order.
    models["stack"] = keras.Sequential(
        [
            keras.Input((5, 4)),
            L.LSTM(4, return_sequences=True, name="first"),
            L.Bidirectional(L.LSTM(2, return_sequences=True), name="second"),
            L.LSTM(3, return_sequences=True, name="third"),
        ],
        name="stack",
    )
    for seed, model in enumerate(models.values()):
        randomize(model, seed)
    return models


def keras2_models() -> dict:
    """name -> a tf_keras (Keras 2) model; their .h5 files carry configs Keras 3 refuses."""
    import tf_keras as k2
    import tf_keras.src.layers  # noqa: F401  (CuDNNLSTM lives there)
    from tf_keras import layers as L

    k2.utils.set_random_seed(2)
    models = {}
    seq = k2.Sequential(
        [
            L.Embedding(20, 4, mask_zero=True, input_length=7, name="emb"),
            L.Bidirectional(L.LSTM(3, return_sequences=True), name="bi"),
            L.LSTM(5, name="top"),
            L.Dense(1, activation="sigmoid", name="head"),
        ],
        name="k2seq",
    )
    seq.compile(loss="binary_crossentropy", optimizer="adam")
    models["k2seq"] = seq

    inputs = k2.Input((6, 3))
    x = L.Masking(0.0)(inputs)
    x = L.LSTM(4, return_sequences=True, name="core")(x)
    x = L.TimeDistributed(L.Dense(2), name="td")(x)
    fun = k2.Model(inputs, L.Activation("softmax")(x), name="k2fun")
    fun.compile(loss=k2.losses.CategoricalCrossentropy(label_smoothing=0.1), optimizer="sgd")
    models["k2fun"] = fun

    cudnn = k2.src.layers.CuDNNLSTM
    models["k2cudnn"] = k2.Sequential(
        [
            k2.Input((5, 3)),
            L.Bidirectional(cudnn(4, return_sequences=True), name="cbi"),
            cudnn(2, name="cud"),
        ],
        name="k2cudnn",
    )
    # The same model with LSTM layers: Keras 2 converts CuDNNLSTM weights when loading them.
    models["k2lstm"] = k2.Sequential(
        [
            k2.Input((5, 3)),
            L.Bidirectional(L.LSTM(4, return_sequences=True), name="cbi"),
            L.LSTM(2, name="cud"),
        ],
        name="k2lstm",
    )
    models["k2stack"] = k2.Sequential(
        [
            k2.Input((5, 3)),
            L.LSTM(4, return_sequences=True, name="a"),
            L.Bidirectional(L.LSTM(2, return_sequences=True), name="b"),
        ],
        name="k2stack",
    )
    for seed, model in enumerate(models.values()):
        randomize(model, 10 + seed)
    return models


def torch_state_dict(rng, sizes, bidirectional: bool, prefix: str = "") -> dict:
    """An nn.LSTM(num_layers=len(sizes), bidirectional) state dict: sizes = [(I_k, H)]."""
    tensors = {}
    for k, (inputs, hidden) in enumerate(sizes):
        for suffix in ("", "_reverse") if bidirectional else ("",):
            shapes = {
                "weight_ih": (4 * hidden, inputs),
                "weight_hh": (4 * hidden, hidden),
                "bias_ih": (4 * hidden,),
                "bias_hh": (4 * hidden,),
            }
            for kind, shape in shapes.items():
                value = 0.5 * rng.standard_normal(shape)
                tensors[f"{prefix}{kind}_l{k}{suffix}"] = value.astype(np.float32)
    return tensors


def npz_stack(path, rng, sizes: dict, nan: bool = False) -> dict:
    """An .npz of LSTM layers named as model mode names directions: sizes = {name: (I, H)}."""
    arrays = {}
    for layer, (i, h) in sizes.items():
        arrays[f"{layer}/kernel"] = rng.standard_normal((i, 4 * h)) * (np.nan if nan else 1)
        arrays[f"{layer}/recurrent_kernel"] = rng.standard_normal((h, 4 * h))
        arrays[f"{layer}/bias"] = rng.standard_normal(4 * h)
    np.savez(path, **arrays)
    return arrays


# ---- Keras 2 files as older Keras wrote them ---------------------------------------------------


def rewrite_config(path, edit, version: str | None = None) -> None:
    """Edit the model_config of a legacy .h5 in place (as an older Keras would have written
    it); `version` replaces its keras_version."""
    with h5py.File(path, "r+") as f:
        config = json.loads(f.attrs["model_config"])
        edit(config)
        f.attrs["model_config"] = np.bytes_(json.dumps(config))  # fixed-length, as Keras 2.0
        if version:
            f.attrs["keras_version"] = np.bytes_(version)


def drop_key(key: str):
    """A config edit removing `key` from every layer config in the tree."""

    def walk(node):
        if isinstance(node, dict):
            node.pop(key, None)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    return walk


# ---- independent forwards ------------------------------------------------------------------


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def torch_bidirectional_forward(state: dict, layers: int, x):
    """PyTorch's nn.LSTM(bidirectional=True) equations on x [B, T, I]: each layer's output is
    [forward h, backward h] per position, the backward direction run from the end."""

    def run(x, suffix):
        w_ih, w_hh = state[f"weight_ih{suffix}"], state[f"weight_hh{suffix}"]
        b = state[f"bias_ih{suffix}"] + state[f"bias_hh{suffix}"]
        hidden = w_hh.shape[1]
        h = np.zeros((x.shape[0], hidden))
        c = np.zeros_like(h)
        out = []
        for t in range(x.shape[1]):
            gates = x[:, t] @ w_ih.T + h @ w_hh.T + b
            i, f, g, o = (gates[:, n * hidden : (n + 1) * hidden] for n in range(4))
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
            h = sigmoid(o) * np.tanh(c)
            out.append(h)
        return np.stack(out, axis=1)

    for k in range(layers):
        forward = run(x, f"_l{k}")
        backward = run(x[:, ::-1], f"_l{k}_reverse")[:, ::-1]
        x = np.concatenate([forward, backward], axis=-1)
    return x


def cudnn_forward(kernel, recurrent_kernel, bias, x):
    """What cuDNN computes from Keras 2 CuDNNLSTM weights on x [B, T, I] (its documented
    equations): gate g = W_g x + R_g h + bW_g + bR_g, where W_g is the [H, I] matrix cuDNN reads
    from the row-major bytes of kernel[:, gH:(g+1)H], R_g likewise, bias = [bW (4H), bR (4H)]."""
    inputs, hidden = kernel.shape[0], recurrent_kernel.shape[0]
    w = [np.ascontiguousarray(kernel[:, g * hidden : (g + 1) * hidden]).reshape(hidden, inputs)
         for g in range(4)]  # fmt: skip
    r = [np.ascontiguousarray(recurrent_kernel[:, g * hidden : (g + 1) * hidden])
         for g in range(4)]  # fmt: skip
    bw, br = bias[: 4 * hidden], bias[4 * hidden :]
    h = np.zeros((x.shape[0], hidden))
    c = np.zeros_like(h)
    for t in range(x.shape[1]):
        z = [
            x[:, t] @ w[g].T + h @ r[g].T + bw[g * hidden : (g + 1) * hidden]
            + br[g * hidden : (g + 1) * hidden]
            for g in range(4)
        ]  # fmt: skip
        c = sigmoid(z[1]) * c + sigmoid(z[0]) * np.tanh(z[2])
        h = sigmoid(z[3]) * np.tanh(c)
    return h


def bad_keras3_models() -> dict:
    """name -> (a Keras 3 model lstmviz refuses, a pattern of the message naming why)."""
    import keras
    from keras import layers as L

    bad = {}
    a, b = keras.Input((5, 2)), keras.Input((5, 3))
    x = L.LSTM(2)(L.Concatenate()([a, b]))
    bad["two_inputs"] = (keras.Model([a, b], x), "2 inputs")
    a = keras.Input((5, 2))
    x = L.LSTM(2)(a)
    bad["two_outputs"] = (keras.Model(a, [L.Dense(1)(x), L.Dense(2)(x)]), "2 outputs")
    x = L.LSTM(2, return_sequences=True, name="inner")(a)
    x = L.LSTM(3, name="outer")(L.Add(name="residual")([a, x]))
    bad["residual"] = (keras.Model(a, x), "'residual'.*branching graph")
    shared = L.Dense(2, name="shared")
    bad["shared"] = (keras.Model(a, L.LSTM(2)(shared(shared(a)))), "'shared'.*called 2 times")
    out, h, _ = L.LSTM(2, return_state=True, name="stateful")(a)
    bad["state"] = (keras.Model(a, L.Dense(1)(h)), "output 1 of 'stateful'")
    bad["return_state"] = (
        keras.Sequential([a, L.GRU(2, return_state=True, name="g")]),
        "'g' \\(GRU\\) has return_state=True",
    )
    bad["dense_only"] = (keras.Sequential([keras.Input((3,)), L.Dense(2)]), "no recurrent layer")

    x = keras.ops.mean(L.LSTM(2, return_sequences=True)(a), axis=1)
    bad["op"] = (keras.Model(a, L.Dense(1)(x)), "\\(Mean\\) is a Keras operation, not a layer")
    x = L.Lambda(lambda t: 2 * t, name="code")(a)
    bad["lambda"] = (keras.Model(a, L.LSTM(2)(x)), "'code' \\(Lambda\\) holds Python code")

    @keras.saving.register_keras_serializable(package="lstmviz_tests")
    class Twice(L.Layer):
        def call(self, x):
            return 2 * x

    model = keras.Sequential([a, Twice(name="twice"), L.LSTM(2)])
    bad["custom"] = (model, "'twice' \\(Twice\\) \\(a custom layer\\) is not supported")
    return bad
