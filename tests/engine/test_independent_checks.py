"""Independent checks of the gradients the other test files leave out, on both LSTM kernels.

Every mode runs here on the native CPU kernels and on the TensorFlow while-loops (what
LSTMVIZ_NATIVE=0 or a machine without a compiler runs: `kernel` fixture), and every gradient key
it writes, with the norms derived from them, is compared with a computation that shares no code
with the engine: NumPy BPTT in float64 (tests/helpers/references/reference.py), Keras's own layers
under tf.GradientTape, the unrolled per-step model reference
(tests/helpers/references/model_reference.py), finite differences in float64. Covered here, besides
the kernels: every per-step norm ([T] and the rows by pass, batch, training step and layer); the
training rows at every recorded step; a model's gradients at masked steps, its direct ∂L/∂h_t,
dL/d(input) and per-sample losses; a stack of LSTMs under each hidden-state loss; weights-only
PyTorch and Keras 2 files; and each record the Keras callback writes.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

from lstmviz.engine.modes import train as train_module
from lstmviz.engine.modes.batchwise import batch_step, batchwise_gradients
from lstmviz.engine.modes.model import model_gradients
from lstmviz.engine.modes.multipass import multipass_gradients
from lstmviz.engine.modes.taped import connectivity_map, taped_gradients
from lstmviz.engine.modes.train import train
from lstmviz.engine.problem.seeded import check_problem
from lstmviz.engine.problem.weight_sources import Hypernetwork
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.weights import random_weights
from tests.helpers.kernel_choice import kernel as kernel  # the fixture: both LSTM kernels
from tests.helpers.references.mode_references import (
    check_batches,
    multipass_case,
    np_connectivity,
    np_multipass,
    np_readout,
    numpy_hypernetwork,
    taped_case,
)
from tests.helpers.references.model_reference import keras_directions, reference_all
from tests.helpers.references.reference import assert_close, np_bptt, np_forward, np_loss

LOSSES = ("mean_h", "last_mse", "seq_mse")
L = keras.layers


def norms(g) -> np.ndarray:
    """[..., T, B, H] -> [..., T]: the per-step L2 norm over batch and units, in float64."""
    return np.sqrt((np.asarray(g, np.float64) ** 2).sum(axis=(-2, -1)))


# ---- one LSTM: taped, multi-pass, per-batch weights ------------------------------------------


@pytest.mark.parametrize("loss", LOSSES)
def test_taped_every_key_and_norm_matches_numpy_bptt(kernel, rng, loss):
    x, w, target, h0, c0 = taped_case(rng, loss)
    trace = taped_gradients(x, w, loss=loss, target=target, h0=h0, c0=c0)
    kernel.ran(trace)
    h, _, _ = np_forward(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0)
    value, direct = np_loss(loss, h, target)
    ref = np_bptt(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0, direct)
    assert float(trace.loss) == pytest.approx(value, rel=1e-5)
    expected = {
        "h": ref["h"], "c": ref["c"], "grad_h_direct": direct, "grad_h_total": ref["dh"],
        "grad_c_total": ref["dc"], "grad_kernel": ref["dkernel"],
        "grad_recurrent_kernel": ref["drecurrent"], "grad_bias": ref["dbias"],
        "grad_h0": ref["dh0"], "grad_c0": ref["dc0"], "norm_h_total": norms(ref["dh"]),
        "norm_h_direct": norms(direct), "norm_c_total": norms(ref["dc"]),
    }  # fmt: skip
    for key, value in expected.items():
        assert_close(trace[key], value, what=key)


def test_connectivity_on_either_kernel_matches_one_step_numpy_bptt(kernel, rng):
    x, w, target, h0, c0 = taped_case(rng, "seq_mse", steps=6)
    c = connectivity_map(x, w, loss="seq_mse", target=target, h0=h0, c0=c0)
    kernel.ran()
    h, _, _ = np_forward(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0)
    direct = np_loss("seq_mse", h, target)[1]
    ref = np_connectivity(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0, direct)
    assert_close(c, ref, what="connectivity")


@pytest.mark.parametrize("loss", LOSSES)
def test_multipass_every_key_and_norm_matches_numpy_bptt(kernel, rng, loss):
    """Full and reference against BPTT over the joined sequence, truncated against BPTT cut at
    every pass start; every [T] norm and both [P, Tp] rows."""
    passes, pass_length = 3, 4
    x, w, target, h0, c0 = multipass_case(rng, loss, passes, pass_length)
    trace = multipass_gradients(x, w, loss=loss, target=target, h0=h0, c0=c0)
    kernel.ran(trace)
    value, values, direct, full = np_multipass(loss, x, w, target, h0, c0)
    *_, cut = np_multipass(loss, x, w, target, h0, c0, cut=True)
    # The cut must show at the tolerance used: else a truncated key holding the full gradient
    # would pass.
    gap = np.abs(cut["dh"][:pass_length] - full["dh"][:pass_length]).max()
    assert gap > 1e-3 * np.abs(full["dh"]).max()
    # mean_h can be small beside the states it averages: float32 rounding scales with those
    rounding = 1e-6 * np.abs(full["h"]).max()
    assert float(trace.loss) == pytest.approx(value, rel=1e-5, abs=rounding)
    np.testing.assert_allclose(trace.loss_by_pass, values, rtol=1e-5, atol=rounding)
    expected = {
        "h": full["h"], "c": full["c"], "grad_h_direct": direct,
        "grad_kernel": full["dkernel"], "grad_recurrent_kernel": full["drecurrent"],
        "grad_bias": full["dbias"], "grad_h0": full["dh0"], "grad_c0": full["dc0"],
        "grad_kernel_truncated": cut["dkernel"],
        "grad_recurrent_kernel_truncated": cut["drecurrent"], "grad_bias_truncated": cut["dbias"],
        "norm_h_direct": norms(direct),
    }  # fmt: skip
    for kind, ref in (("total", full), ("reference", full), ("truncated", cut)):
        expected[f"grad_h_{kind}"], expected[f"grad_c_{kind}"] = ref["dh"], ref["dc"]
        expected[f"norm_h_{kind}"] = norms(ref["dh"])
    expected["norm_c_total"], expected["norm_c_truncated"] = norms(full["dc"]), norms(cut["dc"])
    expected["norm_h_total_by_pass"] = norms(full["dh"]).reshape(passes, pass_length)
    expected["norm_h_truncated_by_pass"] = norms(cut["dh"]).reshape(passes, pass_length)
    for key, ref in expected.items():
        assert_close(trace[key], ref, what=key)


def test_batchwise_every_key_and_row_matches_numpy_bptt(kernel, rng):
    n, steps, batch, inputs, hidden = 2, 5, 3, 2, 4
    weights = [random_weights(inputs, hidden, rng) for _ in range(n)]
    x = rng.standard_normal((n, steps, batch, inputs))
    target = rng.uniform(-0.5, 0.5, (n, steps, batch, hidden))
    h0 = rng.uniform(-0.5, 0.5, (n, batch, hidden))
    trace = batchwise_gradients(x, weights, "seq_mse", target, h0=h0, backend="while_loop")
    kernel.ran(trace)
    check_batches(trace, "seq_mse")  # every gradient of every batch, loss_by_batch
    zeros = np.zeros((batch, hidden))
    for k, w in enumerate(weights):
        lstm = (w.kernel, w.recurrent_kernel, w.bias)
        h, _, _ = np_forward(x[k], *lstm, h0[k], zeros)
        direct = np_loss("seq_mse", h, target[k])[1]
        ref = np_bptt(x[k], *lstm, h0[k], zeros, direct)
        assert_close(trace.grad_h_direct[k], direct, what=f"batch {k} direct")
        rows = {"norm_h_total_by_batch": ref["dh"], "norm_h_direct_by_batch": direct,
                "norm_c_total_by_batch": ref["dc"]}  # fmt: skip
        for key, grad in rows.items():
            assert_close(trace[key][k], norms(grad), what=f"{key}[{k}]")
    assert float(trace.loss) == pytest.approx(float(trace.loss_by_batch.mean()), rel=1e-6)


def test_hypernetwork_gradients_on_either_kernel_match_numpy_chain_rule(kernel, rng):
    inputs, hidden, steps, batch = 3, 4, 6, 2
    hyper = Hypernetwork(inputs, hidden, seed=5, width=4)
    x = rng.standard_normal((steps, batch, inputs)).astype(np.float32)
    target = rng.uniform(-0.5, 0.5, (batch, hidden))
    zero = random_weights(inputs, hidden, rng)
    problem = check_problem(x, zero, "last_mse", target)
    arrays, grads = batch_step(hyper, 0, problem, "last_mse", "while_loop")
    kernel.ran(arrays)
    _, _, expected = numpy_hypernetwork(hyper, x, "last_mse", target)
    for g, e, name in zip(grads, expected, ("W1", "b1", "W2", "b2"), strict=True):
        assert_close(g.numpy(), e, rtol=1e-4, atol_scale=1e-4, what=name)
    norm = np.sqrt(sum((e**2).sum() for e in expected))
    assert float(arrays["grad_generator_norm"]) == pytest.approx(norm, rel=1e-4)


# ---- training: every recorded step -----------------------------------------------------------


@pytest.mark.parametrize(("task", "task_loss"), [("adding", "mse"), ("copy", "xent")])
def test_every_training_row_matches_numpy_bptt_at_that_steps_weights(kernel, monkeypatch, task,
                                                                     task_loss):  # fmt: skip
    """Each row of norm_h_total_by_step and loss_by_step is the task loss's gradient at the
    weights and batch of that step (read as the trainer met them), and the final taped keys,
    the read-out's gradients included, are the final weights' on the last batch."""
    seen = []
    original = train_module.TaskModel.gradients

    def spy(self, x, y):
        seen.append((x, y, self.weights()))
        return original(self, x, y)

    monkeypatch.setattr(train_module.TaskModel, "gradients", spy)
    steps_done = 4
    trace = train(task=task, train_steps=steps_done, steps=6, batch=3, hidden=4, seed=7)
    kernel.ran(trace)
    assert len(seen) == steps_done + 1  # one per step, then the final weights on the last batch
    per_step = bool(trace.readout_per_step)
    for n, (x, y, w) in enumerate(seen):
        zeros = np.zeros((x.shape[1], w["recurrent_kernel"].shape[0]))
        lstm = (w["kernel"], w["recurrent_kernel"], w["bias"])
        h, _, _ = np_forward(x, *lstm, zeros, zeros)
        value, direct, dout = np_readout(task_loss, per_step, h, w["readout_kernel"],
                                         w["readout_bias"], y)  # fmt: skip
        ref = np_bptt(x, *lstm, zeros, zeros, direct)
        if n < steps_done:
            assert float(trace.loss_by_step[n]) == pytest.approx(value, rel=1e-5), n
            assert_close(trace.norm_h_total_by_step[n], norms(ref["dh"]), what=f"row {n}")
        if 0 < n < steps_done:
            continue
        # step 0 (initial weights, first batch) and the end (final weights, last batch): every
        # taped key, the read-out's gradients too
        prefix = "step0_" if n == 0 else ""
        np.testing.assert_array_equal(trace[prefix + "x"], x)
        np.testing.assert_array_equal(trace[prefix + "kernel"], w["kernel"])
        used = h.reshape(-1, h.shape[-1]) if per_step else h[-1]
        flat = dout.reshape(-1, dout.shape[-1])
        expected = {
            "loss": value, "h": ref["h"], "c": ref["c"], "grad_h_total": ref["dh"],
            "grad_c_total": ref["dc"], "grad_h_direct": direct, "grad_kernel": ref["dkernel"],
            "grad_recurrent_kernel": ref["drecurrent"], "grad_bias": ref["dbias"],
            "grad_readout_kernel": used.T @ flat, "grad_readout_bias": flat.sum(axis=0),
            "norm_h_total": norms(ref["dh"]), "norm_h_direct": norms(direct),
            "norm_c_total": norms(ref["dc"]),
        }  # fmt: skip
        for key, grad in expected.items():
            assert_close(trace[prefix + key], grad, what=prefix + key)
    assert not np.allclose(seen[-1][2]["kernel"], seen[0][2]["kernel"])  # it trained


# ---- model mode ------------------------------------------------------------------------------


def keras_weight_gradients(model, x, y, loss=None) -> dict:
    """{id(variable): dL/dvariable} by Keras's own model and tape; `loss` a callable (y, y_pred)
    -> scalar, else the model's compiled loss."""
    with tf.GradientTape() as tape:
        y_pred = model(x, training=False)
        if loss is None:
            value = model.compute_loss(x=x, y=y, y_pred=y_pred, training=False)
        else:
            value = loss(y, y_pred)
    grads = tape.gradient(value, model.trainable_weights)
    return {id(w): g for w, g in zip(model.trainable_weights, grads, strict=True)}


def check_model_trace(model, trace, x, y, loss, keras_loss=None):
    """Every numeric model-mode key of `trace` against the unrolled reference at every step
    (masked ones too) and the weight gradients against Keras's tape."""
    trace.check()
    ref = reference_all(model, x, y, loss)
    assert float(trace.loss) == pytest.approx(ref["loss"], rel=1e-5)
    assert_close(trace.y_pred, ref["y_pred"], what="y_pred")
    assert_close(trace.loss_by_sample, ref["loss_by_sample"], what="loss_by_sample")
    assert_close(trace.grad_input, ref["grad_input"], what="grad_input")
    assert_close(trace.saliency, np.linalg.norm(ref["grad_input"], axis=-1).T, what="saliency")
    names = list(ref["directions"])
    assert len(trace.layer_names) == len(names)
    grads = keras_weight_gradients(model, x, y, keras_loss)
    rows = {"norm_h_total_by_layer": [], "norm_h_direct_by_layer": [], "norm_c_total_by_layer": []}
    for k, (layer, name) in enumerate(zip(keras_directions(model), names, strict=True)):
        d = ref["directions"][name]
        pairs = (("h", "h"), ("c", "c"), ("dh", "grad_h_total"), ("dc", "grad_c_total"),
                 ("direct", "grad_h_direct"), ("gates_mean", "gates_mean"))  # fmt: skip
        for key, ours in pairs:
            assert_close(trace[f"layer{k}_{ours}"], d[key], what=f"{name} {ours}")
        cell = layer.cell
        weights = [("kernel", cell.kernel), ("recurrent_kernel", cell.recurrent_kernel)]
        weights += [("bias", cell.bias)] if cell.use_bias else []
        for key, variable in weights:
            assert_close(trace[f"layer{k}_grad_{key}"], grads[id(variable)], what=f"{name} {key}")
        rows["norm_h_total_by_layer"].append(norms(d["dh"]))
        rows["norm_h_direct_by_layer"].append(norms(d["direct"]))
        rows["norm_c_total_by_layer"].append(norms(d["dc"]))
    for key, value in rows.items():
        assert_close(trace[key], np.stack(value), what=key)
    return ref


@pytest.fixture(scope="module")
def k3():
    from tests.helpers.models.model_fixtures import keras3_models

    return keras3_models()


def masked_data(model, name):
    """The fixture models' data with masked steps: padding before, after and a hole."""
    rng = np.random.default_rng(7)
    steps = model.inputs[0].shape[1]
    if name == "tokens":
        x = rng.integers(1, 20, (3, steps)).astype(np.int32)
        x[0, :3], x[1, -2:], x[2, 3] = 0, 0, 0
        return x, rng.integers(0, 2, (3, 1)).astype(np.float32), x != 0
    x = rng.standard_normal((3, steps, model.inputs[0].shape[2])).astype(np.float32)
    x[0, :2], x[2, -1] = 0.0, 0.0
    y = np.eye(2, dtype=np.float32)[rng.integers(0, 2, x.shape[:2])]
    return x, y, np.any(x != 0, axis=-1)


@pytest.mark.parametrize("name", ["tokens", "features"])
def test_masked_models_match_the_reference_at_every_step(kernel, k3, name):
    """Embedding(mask_zero) → Bidirectional → LSTM(go_backwards) → Dense, and Masking →
    Bidirectional(ave) → LSTM without bias → TimeDistributed(Dense) → softmax under a
    label-smoothed loss: every key, masked steps included (a masked step's dL/dh_t is that of
    the state carried over), the direct gradients, dL/d input, the rows by layer."""
    model = k3[name]
    x, y, unmasked = masked_data(model, name)
    trace = model_gradients(model, x, y)
    kernel.ran(trace)
    np.testing.assert_array_equal(trace.mask, unmasked.T)
    ref = check_model_trace(model, trace, x, y, "binary_crossentropy")
    masked = ~unmasked.T  # [T, B]
    for d in ref["directions"].values():  # masked steps do carry gradient: they are checked
        assert np.abs(d["dh"][masked]).max() > 0


HIDDEN_LOSSES = {  # the loss on a stack's top output, per sample, as Keras would write it
    "mean_h": lambda y, p: tf.reduce_mean(p, axis=[1, 2]),
    "last_mse": lambda y, p: tf.reduce_mean(tf.square(p[:, -1] - y), axis=-1),
    "seq_mse": lambda y, p: tf.reduce_mean(tf.square(p - y), axis=[1, 2]),
}


@pytest.mark.parametrize("loss", LOSSES)
def test_a_stack_under_each_hidden_state_loss_matches_the_reference_and_keras(kernel, k3, loss):
    """LSTM → Bidirectional → LSTM without a head, under mean_h, last_mse and seq_mse."""
    model = k3["stack"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((3, 5, 4)).astype(np.float32)
    y = {"mean_h": None, "last_mse": rng.standard_normal((3, 3)).astype(np.float32),
         "seq_mse": rng.standard_normal((3, 5, 3)).astype(np.float32)}[loss]  # fmt: skip
    trace = model_gradients(model, x, y, loss=loss)
    kernel.ran(trace)
    per_sample = HIDDEN_LOSSES[loss]
    check_model_trace(model, trace, x, y, per_sample,
                      lambda y, p: tf.reduce_mean(per_sample(y, p)))  # fmt: skip


def test_a_pytorch_state_dict_stack_matches_finite_differences(tmp_path):
    """Weights-only PyTorch nn.LSTM(bidirectional, 2 layers): the gradients model mode shows in
    Keras's layout against central differences (float64) of PyTorch's equations in NumPy,
    weight_ih = kernelᵀ, weight_hh = recurrent_kernelᵀ, bias_ih and bias_hh both the bias."""
    from safetensors.numpy import save_file

    from tests.helpers.models.model_fixtures import torch_bidirectional_forward, torch_state_dict

    rng = np.random.default_rng(11)
    state = torch_state_dict(rng, [(3, 4), (8, 4)], bidirectional=True)
    save_file(state, tmp_path / "lstm.safetensors")
    x = rng.standard_normal((2, 5, 3))
    trace = model_gradients(str(tmp_path / "lstm.safetensors"), x.astype(np.float32),
                            loss="mean_h")  # fmt: skip
    suffixes = {"l0/forward": "_l0", "l0/backward": "_l0_reverse", "l1/forward": "_l1",
                "l1/backward": "_l1_reverse"}  # fmt: skip
    assert list(trace.layer_names) == list(suffixes)
    wide = {key: value.astype(np.float64) for key, value in state.items()}

    def loss_of(weights):
        return torch_bidirectional_forward(weights, 2, x).mean()

    eps = 1e-6
    for k, suffix in enumerate(suffixes.values()):
        keys = {"weight_ih": ("grad_kernel", True), "weight_hh": ("grad_recurrent_kernel", True),
                "bias_ih": ("grad_bias", False), "bias_hh": ("grad_bias", False)}  # fmt: skip
        for torch_key, (ours, transposed) in keys.items():
            name = f"{torch_key}{suffix}"
            grad = trace[f"layer{k}_{ours}"]
            for index in list(np.ndindex(wide[name].shape))[:: max(1, wide[name].size // 5)]:
                up, down = dict(wide), dict(wide)
                up[name], down[name] = wide[name].copy(), wide[name].copy()
                up[name][index] += eps
                down[name][index] -= eps
                numeric = (loss_of(up) - loss_of(down)) / (2 * eps)
                got = grad[index[::-1]] if transposed else grad[index]
                assert got == pytest.approx(numeric, rel=1e-3, abs=1e-7), (name, index)


def test_a_keras2_file_gives_tf_keras_gradients(tmp_path):
    """A Keras 2 .h5 (Embedding with mask_zero, Bidirectional, LSTM, Dense): every direction's
    weight gradients equal tf_keras's own tape on the model that wrote the file."""
    import tf_keras
    from tf_keras import layers as layers2

    from tests.helpers.models.model_fixtures import randomize

    model = tf_keras.Sequential([
        layers2.Embedding(20, 4, mask_zero=True, input_length=7, name="emb"),
        layers2.Bidirectional(layers2.LSTM(3, return_sequences=True), name="bi"),
        layers2.LSTM(5, name="top"),
        layers2.Dense(1, activation="sigmoid", name="head"),
    ])  # fmt: skip
    model.build((None, 7))
    model.compile(loss="binary_crossentropy", optimizer="adam")
    randomize(model, 10)
    model.save(tmp_path / "k2seq.h5")
    rng = np.random.default_rng(10)
    x = rng.integers(1, 20, (4, 7)).astype(np.int32)
    x[:, :2] = 0  # padding: the model masks id 0
    x[1, 4] = 0
    y = rng.integers(0, 2, (4, 1)).astype(np.float32)
    trace = model_gradients(str(tmp_path / "k2seq.h5"), x, y)
    with tf.GradientTape() as tape:
        value = tf.reduce_mean(tf_keras.losses.binary_crossentropy(y, model(x)))
    bi, top = model.get_layer("bi"), model.get_layer("top")
    layers = [bi.forward_layer, bi.backward_layer, top]
    variables = [v for layer in layers for v in (layer.cell.kernel, layer.cell.recurrent_kernel,
                                                 layer.cell.bias)]  # fmt: skip
    grads = tape.gradient(value, variables)
    assert float(trace.loss) == pytest.approx(float(value), rel=1e-5)
    for k in range(3):
        for j, key in enumerate(("kernel", "recurrent_kernel", "bias")):
            assert_close(trace[f"layer{k}_grad_{key}"], grads[3 * k + j], what=f"{k} {key}")


# ---- the Keras callback: every record --------------------------------------------------------


def test_every_record_of_the_callback_matches_the_reference_at_that_batch(tmp_path):
    """Each record's loss, norms by direction (total, direct, cell) and saliency against the
    unrolled reference on the model's weights at that batch; the last record's full trace too."""
    from lstmviz.io.recording import load_recording
    from lstmviz.keras import GradientFlowCallback
    from tests.helpers.models.keras_models import token_data, tokens_model

    model, (x, y) = tokens_model(), token_data(32)
    data = (x[:6], y[:6])
    callback = GradientFlowCallback(data, tmp_path / "run.lvz", every=2)
    seen = []

    class AtEachRecord(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if callback.records > len(seen):
                seen.append(reference_all(self.model, *data, "binary_crossentropy"))

    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback, AtEachRecord()], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    assert list(rec.step) == [2, 4] and len(seen) == 2
    for n, ref in enumerate(seen):
        assert float(rec.loss[n]) == pytest.approx(ref["loss"], rel=1e-5), n
        directions = [ref["directions"][name] for name in rec.layer_names]
        expected = {
            "norm_h_total_by_layer": [norms(d["dh"]) for d in directions],
            "norm_h_direct_by_layer": [norms(d["direct"]) for d in directions],
            "norm_c_total_by_layer": [norms(d["dc"]) for d in directions],
        }
        for key, rows in expected.items():
            assert_close(rec[key][n], np.stack(rows), what=f"record {n} {key}")
        saliency = np.linalg.norm(ref["grad_input"], axis=-1).mean(axis=1)  # [T]
        assert_close(rec.saliency[n], saliency, what=f"record {n} saliency")
    assert not np.allclose(rec.norm_h_total_by_layer[0], rec.norm_h_total_by_layer[1])
    check_model_trace(model, rec.last, *data, "binary_crossentropy")
