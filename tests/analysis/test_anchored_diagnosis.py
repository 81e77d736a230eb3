"""The error of one step (docs/diagnosis.md): where the loss enters at every step (a tagger's
per-step loss, the lower layers of a stack), the diagnosis follows the loss of one anchor step
t* alone back through every direction. Checked against the closed form of a zero-kernel LSTM,
against Keras's own cells unrolled under a tape with the loss of step t* alone (and, for a
classifier, the reach read from the unrolled totals), and against PyTorch's cells unrolled
with `retain_grad` for a PyTorch tagger."""

from __future__ import annotations

import json
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from lstmviz.analysis.decay import profile_decay
from lstmviz.engine.modes.model import model_gradients
from lstmviz.io.trace import GradientTrace
from tests.helpers.references.cell_reference import unrolled

B, T, V = 3, 9, 11  # batch, steps, vocabulary


def at_step(name: str, t: int):
    """A Keras loss whose mean over [B, T] is the loss `name` of step t alone: the per-step
    loss the model is compiled with, restricted to the anchor."""
    per_step = keras.losses.get(name)

    def loss(y, y_pred):
        values = per_step(y, y_pred)  # [B, T]
        return values * tf.one_hot(t, values.shape[1], dtype=values.dtype)

    return loss


def norms(grads: np.ndarray) -> np.ndarray:
    """[T, B, H] -> [T]."""
    return np.sqrt(np.square(grads.astype(np.float64)).sum(axis=(1, 2)))


def diagnosis_json(trace) -> dict:
    return json.loads(json.dumps(trace.diagnosis.to_dict()))


def test_a_zero_kernel_lstm_under_a_per_step_loss_decays_by_its_forget_gate():
    """i shut, o open, zero kernels: c_t = σ(b_f)·c_{t−1} exactly as far as the gradient goes,
    so ‖∂L_t*/∂c_s‖ falls by σ(b_f) a step back from t*, whatever the loss at other steps."""
    f = 0.5
    units = 2
    bias = np.concatenate([np.full(units, -30.0), np.full(units, math.log(f / (1 - f))),
                           np.zeros(units), np.full(units, 30.0)]).astype(np.float32)  # fmt: skip
    inputs = keras.Input((T, 2))
    lstm = keras.layers.LSTM(units, return_sequences=True, kernel_initializer="zeros",
                             recurrent_initializer="zeros")  # fmt: skip
    model = keras.Model(inputs, keras.layers.Dense(1)(lstm(inputs)))
    lstm.set_weights([np.zeros((2, 4 * units)), np.zeros((units, 4 * units)), bias])
    model.compile(loss="mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, 2)).astype(np.float32)
    y = rng.normal(size=(B, T, 1)).astype(np.float32)
    trace = model_gradients(model, x, y)
    (layer,) = diagnosis_json(trace)["layers"]
    assert layer["anchors"] == [T - 1]
    c = layer["c"]
    assert c["anchor"] == T - 1
    assert c["decay_per_step"] == pytest.approx(f, rel=1e-4)
    assert c["steps_per_decade"] == pytest.approx(math.log(10) / abs(math.log(f)), rel=1e-3)
    # reach: 1 + the farthest n with f^n ≥ 10⁻³ (n ≤ 9.97), capped at the span's T steps
    assert c["reach"] == min(T, math.floor(math.log(1e-3) / math.log(f)) + 1)
    assert c["trend"] == "vanishing"
    row = trace["anchor_norm_c_by_layer"][0, 0]
    np.testing.assert_allclose(row[:-1] / row[1:], f, rtol=1e-4)


def stacked(cell: str, top_sequences: bool) -> keras.Model:
    layer = {"lstm": keras.layers.LSTM, "gru": keras.layers.GRU,
             "simple_rnn": keras.layers.SimpleRNN}[cell]  # fmt: skip
    keras.utils.set_random_seed(1)
    model = keras.Sequential([
        keras.Input((T,), dtype="int32"),
        keras.layers.Embedding(V, 4),
        keras.layers.Bidirectional(layer(3, return_sequences=True), name="bi"),
        layer(3, return_sequences=top_sequences, name="top"),
        keras.layers.Dense(V, activation="softmax"),
    ])  # fmt: skip
    model.compile(loss="sparse_categorical_crossentropy")
    return model


def tokens(top_sequences: bool):
    rng = np.random.default_rng(2)
    x = rng.integers(1, V, (B, T)).astype(np.int32)
    y = rng.integers(0, V, (B, T) if top_sequences else (B,)).astype(np.int32)
    return x, y


@pytest.mark.parametrize("cell", ["lstm", "gru", "simple_rnn"])
def test_a_stacked_tagger_answers_every_direction_from_the_error_of_one_step(cell):
    """Every direction of Embedding → Bidirectional → top → per-step softmax is answered, from
    the last step for forward directions and the first for the backward one; the anchored
    norms equal Keras's own cells unrolled with the loss of that step alone."""
    model = stacked(cell, top_sequences=True)
    x, y = tokens(True)
    trace = model_gradients(model, x, y)
    names = [str(n) for n in trace.layer_names]
    assert names == ["bi/forward", "bi/backward", "top"]
    anchors = {"bi/forward": T - 1, "bi/backward": 0, "top": T - 1}
    out = diagnosis_json(trace)
    for k, layer in enumerate(out["layers"]):
        assert layer["anchors"] == [anchors[layer["name"]]], layer
        assert layer["h"]["anchor"] == anchors[layer["name"]]
        assert layer["h"]["decay_per_step"] is not None and layer["h"]["reach"], layer
        assert layer["h"]["trend"] in ("vanishing", "exploding", "stable"), layer
        assert "loss enters at every step" not in layer["verdict"]
        # the reference: the loss of that anchor alone, by Keras's cells stepped in Python
        _, _, dh, _ = unrolled(model, x, y, at_step("sparse_categorical_crossentropy",
                                                    anchors[names[k]]))  # fmt: skip
        np.testing.assert_allclose(trace["anchor_norm_h_by_layer"][k, 0], norms(dh[k]),
                                   rtol=2e-4, atol=1e-9, err_msg=names[k])  # fmt: skip


def test_a_stacked_classifier_answers_its_lower_layers_from_its_one_loss_step():
    """A loss on the last step only: the anchored norms are the totals, and the lower layer's
    reach is the one read from the unrolled totals of the top loss (a per-step tape)."""
    model = stacked("lstm", top_sequences=False)
    x, y = tokens(False)
    trace = model_gradients(model, x, y)
    np.testing.assert_array_equal(trace["anchor_norm_h_by_layer"][:, 0],
                                  trace["norm_h_total_by_layer"])  # fmt: skip
    _, _, dh, _ = unrolled(model, x, y, "sparse_categorical_crossentropy")
    out = diagnosis_json(trace)
    for k, layer in enumerate(out["layers"]):
        assert layer["h"]["reach"] is not None, layer
        curve = norms(dh[k])
        expected = profile_decay(curve[::-1] if k != 1 else curve, full=T)
        assert layer["h"]["reach"] == expected.reach, layer["name"]
        assert layer["h"]["decay_per_step"] == pytest.approx(expected.decay_per_step, rel=1e-3)


def test_diagnose_reads_the_anchored_norms_from_a_saved_trace(tmp_path):
    model = stacked("gru", top_sequences=True)
    x, y = tokens(True)
    trace = model_gradients(model, x, y)
    trace.save(tmp_path / "t.npz")
    again = GradientTrace.load(tmp_path / "t.npz")
    assert diagnosis_json(again) == diagnosis_json(trace)


def test_a_pytorch_tagger_answers_every_direction_against_its_unrolled_cells():
    torch = pytest.importorskip("torch")
    from torch import nn

    from lstmviz.torch import model_gradients as torch_gradients
    from tests.helpers.references.torch_reference import Tagger, reference
    from tests.helpers.references.torch_reference import tagger_loss as loss_fn

    torch.manual_seed(0)
    net = Tagger(V, layers=2)
    x = torch.randint(0, V, (B, T))
    y = torch.randint(0, V, (B, T))
    trace = torch_gradients(net, x, y, loss_fn)
    out = diagnosis_json(trace)
    assert len(out["layers"]) == 4
    for k, layer in enumerate(out["layers"]):
        backward = layer["name"].endswith("/backward")
        anchor = 0 if backward else T - 1
        assert layer["anchors"] == [anchor] and layer["h"]["decay_per_step"] is not None
        assert layer["c"]["reach"] is not None, layer

        def alone(output, target, t=anchor):  # the mean's share of step t
            return nn.functional.cross_entropy(output[:, t], target[:, t], reduction="sum") / (
                B * T)  # fmt: skip

        ref = reference(net, (x,), y, alone)["directions"][k]
        np.testing.assert_allclose(trace["anchor_norm_h_by_layer"][k, 0],
                                   norms(ref["grad_h_total"]), rtol=2e-4, atol=1e-9)  # fmt: skip
        np.testing.assert_allclose(trace["anchor_norm_c_by_layer"][k, 0],
                                   norms(ref["grad_c_total"]), rtol=2e-4, atol=1e-9)  # fmt: skip
    given = torch_gradients(net, x, y, loss_fn, anchors=[4])
    assert given["anchors_by_layer"].tolist() == [[4]] * 4
    at_four = reference(net, (x,), y, lambda output, target: nn.functional.cross_entropy(
        output[:, 4], target[:, 4], reduction="sum") / (B * T))["directions"]  # fmt: skip
    for k in range(4):
        ref = at_four[k]
        np.testing.assert_allclose(given["anchor_norm_h_by_layer"][k, 0],
                                   norms(ref["grad_h_total"]), rtol=2e-4, atol=1e-9)  # fmt: skip


def test_given_anchors_are_each_followed_back_and_their_median_answers():
    model = stacked("lstm", top_sequences=True)
    x, y = tokens(True)
    trace = model_gradients(model, x, y, anchors=[3, 7])
    assert trace.config.anchors == "3,7"
    np.testing.assert_array_equal(trace["anchors_by_layer"], [[3, 7]] * 3)
    for a, t in enumerate((3, 7)):
        _, _, dh, _ = unrolled(model, x, y, at_step("sparse_categorical_crossentropy", t))
        for k in range(3):
            np.testing.assert_allclose(trace["anchor_norm_h_by_layer"][k, a], norms(dh[k]),
                                       rtol=2e-4, atol=1e-9)  # fmt: skip
    layer = diagnosis_json(trace)["layers"][0]  # bi/forward, each anchor fitted back to t = 0
    assert layer["anchors"] == [3, 7] and layer["h"]["anchor"] in (3, 7)
    every = model_gradients(model, x, y, anchors="every:3")
    np.testing.assert_array_equal(every["anchors_by_layer"][0], [2, 5, 8])
    with pytest.raises(Exception, match="anchors.*past the output's 9 steps"):
        model_gradients(model, x, y, anchors=[9])
    with pytest.raises(Exception, match="ambiguous"):
        model_gradients(model, x, y, anchors=4)


def test_the_cli_follows_the_anchors_it_is_given_and_refuses_a_step_past_the_end(tmp_path):
    import subprocess
    import sys

    model = stacked("gru", top_sequences=True)
    x, y = tokens(True)
    model.save(tmp_path / "m.keras")
    np.savez(tmp_path / "d.npz", x=x, y=y)
    run = [sys.executable, "-m", "lstmviz", "run", "--mode", "model", "--model",
           str(tmp_path / "m.keras"), "--inputs", str(tmp_path / "d.npz"), "--quiet"]  # fmt: skip
    done = subprocess.run([*run, "--anchors", "every:4", "--out", str(tmp_path / "t.npz")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = subprocess.run([sys.executable, "-m", "lstmviz", "diagnose", str(tmp_path / "t.npz"),
                          "--json"], capture_output=True, text=True)  # fmt: skip
    assert [d["anchors"] for d in json.loads(out.stdout)["layers"]] == [[0, 4, 8]] * 3
    bad = subprocess.run([*run, "--anchors", "3,12", "--out", str(tmp_path / "u.npz")],
                         capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and "step 12 is past the output's 9 steps" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "u.npz").exists()
