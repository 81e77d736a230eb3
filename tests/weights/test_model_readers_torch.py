"""PyTorch-layout nn.GRU and nn.RNN weights (state dicts in .safetensors and .npz, and .npz
arrays named `<prefix>w_ih` …) read as stacks: Keras's own GRU / SimpleRNN layers given the
converted weights compute what PyTorch's documented equations (written here in NumPy) compute
from the file's arrays."""

from __future__ import annotations

import os

import numpy as np
import pytest

from lstmviz.core.errors import ModelError, WeightsError
from lstmviz.weights.loaders import load_weights
from lstmviz.weights.model_files import load_model

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def torch_gru(x, w_ih, w_hh, b_ih, b_hh):
    """nn.GRU's equations on x [B, T, I] (gates r, z, n in that order in the arrays)."""
    hidden = w_hh.shape[1]
    h = np.zeros((x.shape[0], hidden))
    out = []
    for t in range(x.shape[1]):
        gi = x[:, t] @ w_ih.T + b_ih
        gh = h @ w_hh.T + b_hh
        r = sigmoid(gi[:, :hidden] + gh[:, :hidden])
        z = sigmoid(gi[:, hidden : 2 * hidden] + gh[:, hidden : 2 * hidden])
        n = np.tanh(gi[:, 2 * hidden :] + r * gh[:, 2 * hidden :])
        h = (1 - z) * n + z * h
        out.append(h)
    return np.stack(out, 1)


def torch_rnn(x, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh"):
    """nn.RNN's equation h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh) on x [B, T, I]."""
    act = np.tanh if nonlinearity == "tanh" else (lambda v: np.maximum(v, 0.0))
    h = np.zeros((x.shape[0], w_hh.shape[1]))
    out = []
    for t in range(x.shape[1]):
        h = act(x[:, t] @ w_ih.T + b_ih + h @ w_hh.T + b_hh)
        out.append(h)
    return np.stack(out, 1)


def torch_stack(state, cell, layers, x, bidirectional=False, prefix="", **kw):
    """num_layers of nn.GRU / nn.RNN (`cell`), each direction's outputs concatenated."""
    for k in range(layers):
        outs = []
        for suffix in ("", "_reverse") if bidirectional else ("",):
            arrays = [state[f"{prefix}{name}_l{k}{suffix}"]
                      for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]  # fmt: skip
            run = x[:, ::-1] if suffix else x
            out = cell(run, *arrays, **kw)
            outs.append(out[:, ::-1] if suffix else out)
        x = np.concatenate(outs, -1)
    return x


def state_dict(rng, gates, sizes, bidirectional=False, prefix="", bias=True):
    state = {}
    for k, (inputs, hidden) in enumerate(sizes):
        for suffix in ("", "_reverse") if bidirectional else ("",):
            shapes = {"weight_ih": (gates * hidden, inputs), "weight_hh": (gates * hidden, hidden)}
            if bias:
                shapes.update(bias_ih=(gates * hidden,), bias_hh=(gates * hidden,))
            for name, shape in shapes.items():
                value = 0.6 * rng.standard_normal(shape)
                state[f"{prefix}{name}_l{k}{suffix}"] = value.astype(np.float32)
    return state


def keras_forward(spec, x):
    """The spec's stack run by Keras's own layers (GRU, SimpleRNN, Bidirectional) with the
    spec's weights, on x [B, T, I]."""
    import keras
    from keras import layers as L

    def cell(kind, args):
        options = {"units": args["units"], "return_sequences": True,
                   "activation": args["activation"], "use_bias": args["use_bias"]}  # fmt: skip
        if kind == "gru":
            return L.GRU(reset_after=args["reset_after"],
                         recurrent_activation=args["recurrent_activation"], **options)  # fmt: skip
        if kind == "lstm":
            return L.LSTM(recurrent_activation=args["recurrent_activation"], **options)
        return L.SimpleRNN(**options)

    model = keras.Sequential([keras.Input(x.shape[1:])])
    for layer in spec.layers[1:]:
        if layer.kind == "bidirectional":
            model.add(L.Bidirectional(cell(layer.args["cell"], layer.args["forward"])))
        else:
            model.add(cell(layer.kind, layer.args))
        model.layers[-1].set_weights(list(layer.weights.values()))
    return np.asarray(model(x.astype(np.float32)))


@pytest.fixture
def x(rng):
    return rng.standard_normal((3, 5, 3))


def test_safetensors_bidirectional_two_layer_gru(tmp_path, rng, x):
    from safetensors.numpy import save_file

    state = state_dict(rng, 3, [(3, 4), (8, 4)], bidirectional=True, prefix="gru.")
    save_file(state, tmp_path / "g.safetensors")
    spec = load_model(tmp_path / "g.safetensors")
    assert [(layer.kind, layer.args.get("cell")) for layer in spec.layers[1:]] == [
        ("bidirectional", "gru")] * 2  # fmt: skip
    assert spec.layers[1].args["forward"]["reset_after"] is True
    assert spec.layers[1].weights["forward/bias"].shape == (2, 12)
    assert "nn.GRU" in spec.source and "Bidirectional(nn.GRU)" in spec.summary()
    want = torch_stack(state, torch_gru, 2, x, bidirectional=True, prefix="gru.")
    np.testing.assert_allclose(keras_forward(spec, x), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("how", ["metadata", "npz", "default"])
def test_rnn_nonlinearity_from_the_file_or_tanh(tmp_path, rng, x, how):
    from safetensors.numpy import save_file

    state = state_dict(rng, 1, [(3, 4), (4, 2)], prefix="rnn.")
    if how == "metadata":
        save_file(state, tmp_path / "r.safetensors", metadata={"nonlinearity": "relu"})
        path = tmp_path / "r.safetensors"
    elif how == "npz":
        np.savez(tmp_path / "r.npz", **state, **{"rnn.nonlinearity": np.array("relu")})
        path = tmp_path / "r.npz"
    else:
        np.savez(tmp_path / "r.npz", **state)
        path = tmp_path / "r.npz"
    act = "tanh" if how == "default" else "relu"
    spec = load_model(path)
    assert [(layer.kind, layer.class_name) for layer in spec.layers[1:]] == [
        ("simple_rnn", "nn.RNN")] * 2  # fmt: skip
    assert all(layer.args["activation"] == act for layer in spec.layers[1:])
    said = ": PyTorch's default" if how == "default" else ", as the file says"
    assert f"(nn.RNN nonlinearity {act}{said}" in spec.source
    want = torch_stack(state, torch_rnn, 2, x, prefix="rnn.", nonlinearity=act)
    np.testing.assert_allclose(keras_forward(spec, x), want, rtol=1e-4, atol=1e-5)


def test_npz_arrays_named_with_a_prefix_chain_as_a_stack(tmp_path, rng, x):
    gru = state_dict(rng, 3, [(3, 4)])
    rnn = state_dict(rng, 1, [(4, 2)])
    arrays = {f"enc_{k[0]}_{k.split('_')[1]}": v for k, v in gru.items()}
    arrays |= {f"dec_{k[0]}_{k.split('_')[1]}": v for k, v in rnn.items()}
    assert sorted(arrays)[:4] == ["dec_b_hh", "dec_b_ih", "dec_w_hh", "dec_w_ih"]
    np.savez(tmp_path / "p.npz", **arrays)
    spec = load_model(tmp_path / "p.npz")
    assert [(layer.name, layer.kind) for layer in spec.layers[1:]] == [
        ("enc", "gru"), ("dec", "simple_rnn")]  # fmt: skip
    assert "a stack of 2 nn.GRU/nn.RNN layers" in spec.source
    hidden = torch_gru(x, *(gru[f"{n}_l0"] for n in ("weight_ih", "weight_hh", "bias_ih",
                                                     "bias_hh")))  # fmt: skip
    want = torch_rnn(hidden, *(rnn[f"{n}_l0"] for n in ("weight_ih", "weight_hh", "bias_ih",
                                                        "bias_hh")))  # fmt: skip
    np.testing.assert_allclose(keras_forward(spec, x), want, rtol=1e-4, atol=1e-5)
    # listed the other way round (dec_ first), they chain only as enc -> dec
    np.savez(tmp_path / "q.npz", **dict(sorted(arrays.items())))
    spec = load_model(tmp_path / "q.npz")
    assert [layer.name for layer in spec.layers[1:]] == ["enc", "dec"]
    np.testing.assert_allclose(keras_forward(spec, x), want, rtol=1e-4, atol=1e-5)
    # the single-layer modes run LSTMs: a GRU is named, with the mode that runs it
    with pytest.raises(WeightsError, match=r"'enc': not an LSTM but a nn.GRU layer \(gru\); "
                                           r"model mode \(--mode model\) runs it"):
        load_weights(tmp_path / "p.npz", "enc")


def test_pytorch_layout_problems_are_one_line(tmp_path, rng):
    good = state_dict(rng, 3, [(3, 4)])
    arrays = {"a_w_ih": good["weight_ih_l0"], "a_w_hh": rng.standard_normal((12, 5))}
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ModelError, match=r"layer 'a': a_w_ih \[12, 3\] and a_w_hh \[12, 5\] "
                                         r"are not \[GH, I\] and \[GH, H\]"):
        load_model(tmp_path / "bad.npz")
    two = {"a_w_ih": good["weight_ih_l0"], "a_w_hh": good["weight_hh_l0"],
           "b_w_ih": good["weight_ih_l0"], "b_w_hh": good["weight_hh_l0"]}  # fmt: skip
    np.savez(tmp_path / "two.npz", **two)  # 3 -> 4, then 3 -> 4: they do not chain
    with pytest.raises(ModelError, match="do not chain: 'b' \\(nn.GRU\\) takes inputs of width 3"):
        load_model(tmp_path / "two.npz")
    np.savez(tmp_path / "nl.npz", **state_dict(rng, 1, [(3, 4)]), nonlinearity=np.array("gelu"))
    with pytest.raises(ModelError, match="nonlinearity 'gelu' is not tanh or relu"):
        load_model(tmp_path / "nl.npz")


def test_keras_layout_weights_only_gru_by_its_shapes(tmp_path, rng, x):
    """A Keras GRU model's weights-only file: the kind is told by the shapes (3 gates), the
    bias [2, 3H] says reset_after=True."""
    import keras
    from keras import layers as L

    model = keras.Sequential([keras.Input((5, 3)), L.GRU(4, return_sequences=True, name="g"),
                              L.SimpleRNN(2, return_sequences=True, name="s")])  # fmt: skip
    model.save_weights(tmp_path / "m.weights.h5")
    spec = load_model(tmp_path / "m.weights.h5")
    assert [layer.kind for layer in spec.layers[1:]] == ["gru", "simple_rnn"]
    assert spec.layers[1].args["reset_after"] is True
    np.testing.assert_allclose(keras_forward(spec, x), np.asarray(model(x.astype(np.float32))),
                               rtol=1e-5, atol=1e-6)  # fmt: skip


def test_pytorch_gru_and_rnn_stack_end_to_end_against_pytorch_equations(tmp_path, rng):
    """model mode on a .safetensors of a bidirectional nn.GRU and an nn.RNN(relu) after it:
    the top h is PyTorch's equations' (NumPy), and the weight gradients of the mean_h loss are
    float64 finite differences of those equations, element by element of PyTorch's arrays
    (mapped to Keras's layout: GRU gate blocks r, z, n -> z, r, h̃, transposed)."""
    from safetensors.numpy import save_file

    from lstmviz import model_gradients

    state = state_dict(rng, 3, [(3, 3)], bidirectional=True, prefix="gru.")
    state |= state_dict(rng, 1, [(6, 2)], prefix="rnn.")
    save_file(state, tmp_path / "m.safetensors", metadata={"rnn.nonlinearity": "relu"})
    x = rng.standard_normal((2, 4, 3))

    def forward(s):
        hidden = torch_stack(s, torch_gru, 1, x, bidirectional=True, prefix="gru.")
        return torch_stack(s, torch_rnn, 1, hidden, prefix="rnn.", nonlinearity="relu")

    trace = model_gradients(str(tmp_path / "m.safetensors"), x.astype(np.float32), loss="mean_h")
    assert list(trace["layer_names"]) == ["gru.l0/forward", "gru.l0/backward", "rnn.l0"]
    assert list(trace["layer2_cell"].reshape(-1)) == ["simple_rnn"]
    want = forward({k: v.astype(np.float64) for k, v in state.items()})
    np.testing.assert_allclose(trace["y_pred"], want, rtol=1e-4, atol=1e-5)
    assert float(trace.loss) == pytest.approx(want.mean(), rel=1e-5)

    def numeric(key):
        grad = np.zeros(state[key].shape)
        for index in np.ndindex(*state[key].shape):
            up = {k: v.astype(np.float64) for k, v in state.items()}
            down = {k: v.copy() for k, v in up.items()}
            up[key][index] += 1e-6
            down[key][index] -= 1e-6
            grad[index] = (forward(up).mean() - forward(down).mean()) / 2e-6
        return grad

    keras_block = [1, 0, 2]  # PyTorch's r, z, n -> Keras's blocks z, r, h̃
    for k, key in ((0, "gru.weight_hh_l0"), (1, "gru.weight_ih_l0_reverse")):
        got = trace[f"layer{k}_grad_{'recurrent_kernel' if 'hh' in key else 'kernel'}"]
        fd = numeric(key)
        mapped = np.concatenate([fd[3 * keras_block.index(b): 3 * keras_block.index(b) + 3]
                                 for b in range(3)]).T  # fmt: skip
        np.testing.assert_allclose(got, mapped, rtol=2e-3, atol=1e-6, err_msg=key)
    np.testing.assert_allclose(trace["layer2_grad_kernel"], numeric("rnn.weight_ih_l0").T,
                               rtol=2e-3, atol=1e-6)  # fmt: skip
