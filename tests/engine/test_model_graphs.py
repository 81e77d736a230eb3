"""Model mode on graphs Keras runs (encoder–decoders, attention, shared layers, subclassed
models): every direction's totals against Keras's own cells stepped in Python with every h_t and
c_t an intermediate of the tape, weight gradients against Keras's own `tape.gradient` of the
model, the loss against `model.evaluate`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lstmviz.core.errors import InputError
from tests.helpers.models.seq2seq import TD, TE, TOL, B, E, H, V, reference, seq2seq, unrolled

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")
L = keras.layers


@pytest.mark.parametrize("attention", [False, True], ids=["states", "attention"])
def test_an_encoder_decoder_matches_its_unrolled_cells(attention):
    import lstmviz

    model, x, y = seq2seq(attention)
    trace = lstmviz.model_gradients(model, x, y)
    a = trace.arrays
    assert list(a["layer_names"]) == ["encoder", "decoder"]
    assert int(a["layer0_initial_from"]) == -1 and int(a["layer1_initial_from"]) == 0
    assert a["layer0_h"].shape == (TE, B, H) and a["layer1_h"].shape == (TD, B, H)
    assert np.isnan(a["norm_h_total_by_layer"][1, TD:]).all()
    loss, expected = reference(model, x, y, attention)
    np.testing.assert_allclose(a["loss"], loss, rtol=1e-5)
    np.testing.assert_allclose(a["loss"], model.evaluate(x, y, verbose=0), rtol=1e-5)
    for k, name in enumerate(("encoder", "decoder")):
        total_h, total_c, direct = expected[name]
        np.testing.assert_allclose(a[f"layer{k}_grad_h_total"], total_h, **TOL)
        np.testing.assert_allclose(a[f"layer{k}_grad_c_total"], total_c, **TOL)
        np.testing.assert_allclose(a[f"layer{k}_grad_h_direct"], direct, **TOL)
    # without attention the encoder's gradient arrives through the hand-over alone
    assert np.abs(a["layer0_grad_h_total"][0]).max() > 1e-6
    with tf.GradientTape() as tape:
        value = model.compute_loss(x=None, y=y, y_pred=model(x, training=False))
    weights = [model.get_layer(n).cell.kernel for n in ("encoder", "decoder")]
    for k, grad in enumerate(tape.gradient(value, weights)):
        np.testing.assert_allclose(a[f"layer{k}_grad_kernel"], grad.numpy(), **TOL)
    assert a["saliency_enc"].shape == (B, TE) and a["x_dec"].shape == (TD, B)
    trace.check()


def test_the_error_of_the_decoders_last_step_is_followed_into_the_encoder():
    """A loss on every decoder token: each direction's anchored norms are the gradient of the
    loss of the decoder's last step alone (through the attention and the hand-over), and the
    decoder's diagnosis is answered from it."""
    import lstmviz

    model, x, y = seq2seq(True)
    trace = lstmviz.model_gradients(model, x, y)
    _, alone = reference(model, x, y, True, step=TD - 1)
    for k, name in enumerate(("encoder", "decoder")):
        steps = (TE, TD)[k]
        total_h, total_c, _ = alone[name]
        norms = [np.sqrt(np.square(g.astype(np.float64)).sum(axis=(1, 2)))
                 for g in (total_h, total_c)]  # fmt: skip
        np.testing.assert_allclose(trace["anchor_norm_h_by_layer"][k, 0, :steps], norms[0], **TOL)
        np.testing.assert_allclose(trace["anchor_norm_c_by_layer"][k, 0, :steps], norms[1], **TOL)
        assert trace["anchors_by_layer"][k, 0] == steps - 1
    decoder = trace.diagnosis.to_dict()["layers"][1]
    assert decoder["anchors"] == [TD - 1] and decoder["h"]["decay_per_step"] is not None


class Stepper(keras.Model):
    """A subclassed decoder stepping one LSTM layer a token at a time, its state handed on."""

    def __init__(self):
        super().__init__()
        self.rnn = L.LSTM(H, return_state=True, name="rnn")
        self.head = L.Dense(2, name="head")

    def call(self, x):
        h = c = tf.zeros([tf.shape(x)[0], H])
        outs = []
        for t in range(x.shape[1]):
            out, h, c = self.rnn(x[:, t:t + 1], initial_state=[h, c])
            outs.append(self.head(out))
        return tf.stack(outs, 1)


def test_a_layer_stepped_with_its_state_handed_on_is_one_direction():
    import lstmviz

    keras.utils.set_random_seed(3)
    model = Stepper()
    rng = np.random.default_rng(4)
    x = rng.standard_normal((B, TD, 2)).astype(np.float32)
    y = rng.standard_normal((B, TD, 2)).astype(np.float32)
    a = lstmviz.model_gradients(model, x, y, loss="mse").arrays
    assert list(a["layer_names"]) == ["rnn"] and int(a["layer0_calls"]) == TD
    with tf.GradientTape(persistent=True) as tape:
        states, outs = unrolled(model.rnn, tf.constant(x), [tf.zeros([B, H])] * 2)
        pred = model.head(tf.stack(outs, 1))
        loss = tf.reduce_mean(tf.square(pred - y))
    np.testing.assert_allclose(a["loss"], float(loss), rtol=1e-5)
    totals = np.stack([tape.gradient(loss, s[0]).numpy() for s in states])
    np.testing.assert_allclose(a["layer0_grad_h_total"], totals, **TOL)
    with tf.GradientTape() as tape:
        value = tf.reduce_mean(tf.square(model(x) - y))
    grad = tape.gradient(value, model.rnn.cell.recurrent_kernel)
    np.testing.assert_allclose(a["layer0_grad_recurrent_kernel"], grad.numpy(), **TOL)


def test_subclassed_shared_and_branching_models():
    import lstmviz

    class Classifier(keras.Model):
        def __init__(self):
            super().__init__()
            self.emb, self.gru = L.Embedding(V, E), L.GRU(H, name="gru")
            self.head = L.Dense(1, activation="sigmoid")

        def call(self, x):
            return self.head(self.gru(self.emb(x)))

    keras.utils.set_random_seed(5)
    rng = np.random.default_rng(5)
    ids, y = rng.integers(1, V, (B, TE)), rng.integers(0, 2, (B, 1)).astype(np.float32)
    model = Classifier()
    model.compile(loss="binary_crossentropy")
    a = lstmviz.model_gradients(model, ids, y).arrays
    assert list(a["layer_names"]) == ["gru"] and a["saliency"].shape == (B, TE)
    np.testing.assert_allclose(a["loss"], model.evaluate(ids, y, verbose=0), rtol=1e-5)
    with tf.GradientTape() as tape:
        value = tf.reduce_mean(keras.losses.binary_crossentropy(y, model(ids)))
    grad = tape.gradient(value, model.gru.cell.kernel)
    np.testing.assert_allclose(a["layer0_grad_kernel"], grad.numpy(), **TOL)

    first, second = keras.Input((TE, 2), name="a"), keras.Input((TE, 2), name="b")
    enc = L.LSTM(H, name="enc", kernel_regularizer=keras.regularizers.L2(0.3))
    both = keras.Model([first, second], L.Dense(1)(L.Concatenate()([enc(first), enc(second)])))
    xs = [rng.standard_normal((B, TE, 2)), rng.standard_normal((B, TE, 2))]
    a = lstmviz.model_gradients(both, xs, np.zeros((B, 1)), loss="mse").arrays
    assert list(a["layer_names"]) == ["enc#0", "enc#1"]
    # the shared layer's two calls sum to Keras's gradient, its L2 penalty's part included
    with tf.GradientTape() as tape:
        value = tf.reduce_mean(tf.square(both(xs))) + tf.add_n(both.losses)
    np.testing.assert_allclose(a["loss"], value.numpy(), rtol=1e-5)
    grad = tape.gradient(value, enc.cell.kernel).numpy()
    np.testing.assert_allclose(a["layer0_grad_kernel"] + a["layer1_grad_kernel"], grad, **TOL)
    with pytest.raises(InputError, match="takes 'a', 'b'"):
        lstmviz.model_gradients(both, xs[0], np.zeros((B, 1)), loss="mse")

    ids = keras.Input((TE,), dtype="int32")
    s = L.Bidirectional(L.LSTM(H, return_sequences=True), name="bi")(
        L.Embedding(V, E, mask_zero=True)(ids))  # fmt: skip
    pooled = L.GlobalAveragePooling1D()(L.Concatenate()([s, L.Attention()([s, s])]))
    model = keras.Model(ids, L.Dense(1, activation="sigmoid")(pooled))
    model.compile(loss="binary_crossentropy")
    x = rng.integers(1, V, (B, TE))
    x[0, 3:] = 0
    a = lstmviz.model_gradients(model, x, y).arrays
    assert list(a["layer_names"]) == ["bi/forward", "bi/backward"]
    np.testing.assert_allclose(a["loss"], model.evaluate(x, y, verbose=0), rtol=1e-5)
    assert not a["mask"][3:, 0].any() and a["mask"][:3, 0].all()


def test_the_cli_runs_a_saved_encoder_decoder_on_named_inputs(tmp_path):
    model, x, y = seq2seq(True)
    model.save(tmp_path / "s2s.keras")
    np.savez(tmp_path / "data.npz", enc=x["enc"], dec=x["dec"], y=y)
    np.savez(tmp_path / "wrong.npz", source=x["enc"], y=y)
    run = [sys.executable, "-m", "lstmviz", "run", "--mode", "model", "--model",
           str(tmp_path / "s2s.keras")]  # fmt: skip
    done = subprocess.run([*run, "--inputs", str(tmp_path / "data.npz"), "--out",
                           str(tmp_path / "t.npz")], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    from lstmviz.io.trace import GradientTrace

    trace = GradientTrace.load(tmp_path / "t.npz")
    np.testing.assert_allclose(trace.arrays["loss"], model.evaluate(x, y, verbose=0), rtol=1e-5)
    assert list(trace.arrays["layer_names"]) == ["encoder", "decoder"]
    bad = subprocess.run([*run, "--inputs", str(tmp_path / "wrong.npz"), "--out",
                          str(tmp_path / "u.npz")], capture_output=True, text=True)  # fmt: skip
    assert bad.returncode == 2 and "enc, dec" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "u.npz").exists()


def test_a_keras2_two_input_file_computes_as_keras2_did(tmp_path):
    """A tf_keras functional `.h5` of two inputs, one LSTM on each (one with Keras 2's
    hard_sigmoid), their Dense heads concatenated, a softmax and categorical cross-entropy:
    totals against tf_keras's own cells unrolled, weight gradients against its tape."""
    import tf_keras as k2

    import lstmviz

    k2.utils.set_random_seed(6)
    a, b = k2.Input((TE, 3), name="left"), k2.Input((TE, 2), name="right")
    first, second = k2.layers.LSTM(H, name="l"), k2.layers.LSTM(
        H, recurrent_activation="hard_sigmoid", name="r")  # fmt: skip
    heads = [k2.layers.Dense(2)(first(a)), k2.layers.Dense(2)(second(b))]
    out = k2.layers.Dense(3, activation="softmax")(k2.layers.Concatenate()(heads))
    model = k2.Model([a, b], out)
    model.compile(loss="categorical_crossentropy", optimizer="sgd")
    model.save(tmp_path / "two.h5")
    rng = np.random.default_rng(7)
    x = [rng.standard_normal((B, TE, 3)).astype(np.float32),
         rng.standard_normal((B, TE, 2)).astype(np.float32)]  # fmt: skip
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, B)]
    a = lstmviz.model_gradients(tmp_path / "two.h5", x, y).arrays
    np.testing.assert_allclose(a["loss"], model.evaluate(x, y, verbose=0), rtol=1e-5)
    with tf.GradientTape(persistent=True) as tape:
        states = {}
        for layer, value in ((first, x[0]), (second, x[1])):
            state, states[layer.name] = [tf.zeros([B, H])] * 2, []
            for t in range(TE):
                _, state = layer.cell(value[:, t], state)
                states[layer.name].append(state[0])
        merged = [model.layers[4](states["l"][-1]), model.layers[5](states["r"][-1])]
        probs = model.layers[-1](model.layers[-2](merged))
        loss = tf.reduce_mean(k2.losses.categorical_crossentropy(y, probs))
    names = list(a["layer_names"])
    for name in ("l", "r"):
        k = names.index(name)
        totals = np.stack([tape.gradient(loss, h).numpy() for h in states[name]])
        np.testing.assert_allclose(a[f"layer{k}_grad_h_total"], totals, **TOL)
        kernel = (first if name == "l" else second).cell.kernel
        np.testing.assert_allclose(a[f"layer{k}_grad_kernel"],
                                   tape.gradient(loss, kernel).numpy(), **TOL)  # fmt: skip
    assert "Keras 2" in str(a["model_source"]) and a["x_left"].shape == (TE, B, 3)


def test_the_callback_records_an_encoder_decoder_while_it_trains(tmp_path):
    import lstmviz
    from lstmviz.keras import GradientFlowCallback

    model, x, y = seq2seq(False)
    model.compile(loss="sparse_categorical_crossentropy", optimizer="sgd")
    path = tmp_path / "run.lvz"
    model.fit(x, y, epochs=2, batch_size=B, verbose=0,
              callbacks=[GradientFlowCallback((x, y), path, every=1)])  # fmt: skip
    recording = lstmviz.load_recording(path)
    assert list(recording.arrays["layer_names"]) == ["encoder", "decoder"]
    assert recording.arrays["norm_h_total_by_layer"].shape == (2, 2, TE)
    final = lstmviz.model_gradients(model, x, y).arrays
    np.testing.assert_allclose(recording.arrays["loss"][-1], final["loss"], rtol=1e-5)


def test_several_outputs_take_their_compiled_losses_and_weights():
    """Two heads on one GRU, compiled with a loss per output name and loss_weights: the loss is
    what `model.evaluate` reports, the untraced recurrent layer (a custom cell) is named."""
    import lstmviz

    class Cell(L.Layer):  # a cell lstmviz does not know: Keras runs its layer
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.state_size = 2

        def call(self, x, states):
            h = tf.tanh(x[:, :2] + states[0])
            return h, [h]

    keras.utils.set_random_seed(8)
    inp = keras.Input((TE, 2), name="x")
    seq = L.GRU(H, return_sequences=True, name="gru")(inp)
    seq = L.Concatenate()([seq, L.RNN(Cell(), return_sequences=True, name="own")(inp)])
    first = L.Dense(1, name="first")(L.GlobalAveragePooling1D()(seq))
    second = L.TimeDistributed(L.Dense(2, activation="softmax"), name="second")(seq)
    model = keras.Model(inp, [first, second])
    model.compile(loss={"first": "mse", "second": "sparse_categorical_crossentropy"},
                  loss_weights={"first": 0.5, "second": 2.0})  # fmt: skip
    rng = np.random.default_rng(9)
    x = rng.standard_normal((B, TE, 2)).astype(np.float32)
    y = {"first": rng.standard_normal((B, 1)), "second": rng.integers(0, 2, (B, TE))}
    trace = lstmviz.model_gradients(model, x, y)
    a = trace.arrays
    np.testing.assert_allclose(a["loss"], model.evaluate(x, y, verbose=0)[0], rtol=1e-5)
    assert list(a["layer_names"]) == ["gru"] and "not traced: own" in str(a["model_summary"])
    assert a["y_pred_second"].shape == (B, TE, 2) and "y_first" in a
    trace.check()


def test_halves_kept_apart_and_a_mixed_precision_layer():
    """Bidirectional(merge_mode=None) hands its halves on as two outputs; an LSTM under a
    mixed_float16 policy computes as its float32 twin (Keras casts its output back)."""
    import lstmviz

    keras.utils.set_random_seed(10)
    inp = keras.Input((TE, 2))
    forward, backward = L.Bidirectional(L.LSTM(H, return_sequences=True), merge_mode=None,
                                        name="bi")(inp)  # fmt: skip
    mixed = L.LSTM(H, dtype="mixed_float16", name="mixed")(L.Add()([forward, backward]))
    model = keras.Model(inp, L.Dense(1, dtype="float32")(mixed))
    model.compile(loss="mse")
    rng = np.random.default_rng(11)
    x, y = rng.standard_normal((B, TE, 2)), rng.standard_normal((B, 1))
    a = lstmviz.model_gradients(model, x, y).arrays
    assert list(a["layer_names"]) == ["bi/forward", "bi/backward", "mixed"]
    np.testing.assert_allclose(a["loss"], model.evaluate(x, y, verbose=0), rtol=1e-2)
    assert a["layer2_h"].dtype == np.float32 and np.isfinite(a["norm_h_total_by_layer"]).all()


def _numpy_seq2seq(model, x, y, bump=None):
    """The states-only seq2seq in float64 NumPy from its weights: the loss, with `bump` =
    (t, b, j, eps) added to the encoder's h_t after step t (a bumped state: what follows sees
    it)."""
    def weights(name):
        return [np.asarray(w, np.float64) for w in model.get_layer(name).get_weights()]

    def sigmoid(v):
        return 1 / (1 + np.exp(-v))

    def run(kernel, recurrent, bias, inputs, h, c, bumped=None):
        outputs = []
        for t in range(inputs.shape[1]):
            i, f, g, o = np.split(inputs[:, t] @ kernel + h @ recurrent + bias, 4, axis=-1)
            c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
            h = sigmoid(o) * np.tanh(c)
            if bumped is not None and bumped[0] == t:
                h = h.copy()
                h[bumped[1], bumped[2]] += bumped[3]
            outputs.append(h)
        return h, c, np.stack(outputs, 1)

    e = weights("emb_e")[0][x["enc"]]
    d = weights("emb_d")[0][x["dec"]]
    zeros = np.zeros((len(e), H))
    h, c, _ = run(*weights("encoder"), e, zeros, zeros, bump)
    _, _, seq = run(*weights("decoder"), d, h, c)
    kernel, bias = weights("head")
    logits = seq @ kernel + bias
    logits -= logits.max(-1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, y[..., None], -1).mean()


def test_the_encoders_totals_match_float64_finite_differences():
    """dL/dh_t of the encoder — reached only through the hand-over — against central
    differences of the loss in float64 with the encoder's state bumped at step t."""
    import lstmviz

    model, x, y = seq2seq(False)
    a = lstmviz.model_gradients(model, x, y).arrays
    eps = 1e-5
    for t, b, j in ((0, 0, 0), (2, 1, 2), (TE - 1, 2, 1)):
        up = _numpy_seq2seq(model, x, y, (t, b, j, eps))
        down = _numpy_seq2seq(model, x, y, (t, b, j, -eps))
        np.testing.assert_allclose(a["layer0_grad_h_total"][t, b, j], (up - down) / (2 * eps),
                                   rtol=2e-3, atol=1e-8)  # fmt: skip
    np.testing.assert_allclose(a["loss"], _numpy_seq2seq(model, x, y), rtol=1e-5)


def test_a_keras2_graph_clips_probabilities_as_keras2_did(tmp_path):
    """A saturated softmax: Keras 2's cross-entropy clips its probabilities to [1e-7, 1 − 1e-7]
    (Keras 3 would read the logits): the loss of a Keras 2 graph is the clipped one."""
    import tf_keras as k2

    import lstmviz

    k2.utils.set_random_seed(12)
    a, b = k2.Input((TE, 2)), k2.Input((TE, 2))
    both = k2.layers.Concatenate()([k2.layers.LSTM(H)(a), k2.layers.LSTM(H)(b)])
    head = k2.layers.Dense(3, activation="softmax")
    model = k2.Model([a, b], head(both))
    model.compile(loss="categorical_crossentropy")
    head.set_weights([w * 1e4 for w in head.get_weights()])
    model.save(tmp_path / "saturated.h5")
    rng = np.random.default_rng(13)
    x = [rng.standard_normal((B, TE, 2)), rng.standard_normal((B, TE, 2))]
    probs = model.predict(x, verbose=0).astype(np.float64)
    y = np.eye(3)[probs.argmin(-1)]  # the least likely class: a probability under 1e-7
    clipped = -np.log(np.clip((probs * y).sum(-1), 1e-7, 1 - 1e-7)).mean()
    found = lstmviz.model_gradients(tmp_path / "saturated.h5", x, y).arrays["loss"]
    assert clipped < 17 and (probs * y).sum(-1).max() < 1e-7
    np.testing.assert_allclose(found, clipped, rtol=1e-4)


def test_a_keras2_graph_with_python_code_is_refused_in_one_line(tmp_path):
    import tf_keras as k2

    import lstmviz
    from lstmviz.core.errors import ModelError

    a, b = k2.Input((TE, 2)), k2.Input((TE, 2))
    doubled = k2.layers.Lambda(lambda t: 2 * t)(b)
    model = k2.Model([a, b], k2.layers.Concatenate()([k2.layers.LSTM(H)(a),
                                                     k2.layers.LSTM(H)(doubled)]))  # fmt: skip
    model.save(tmp_path / "code.h5")
    with pytest.raises(ModelError, match="Lambda layer holds Python code"):
        lstmviz.model_gradients(tmp_path / "code.h5", loss="mse")


def test_a_live_tf_keras_graph_follows_its_weights():
    """A tf_keras model of two inputs in memory: computed as Keras 2 does, and after its
    weights change the next call gives the new loss."""
    import tf_keras as k2

    import lstmviz

    k2.utils.set_random_seed(14)
    a, b = k2.Input((TE, 2)), k2.Input((TE, 2))
    out = k2.layers.Dense(1)(k2.layers.Concatenate()([k2.layers.LSTM(H)(a),
                                                      k2.layers.GRU(H)(b)]))  # fmt: skip
    model = k2.Model([a, b], out)
    model.compile(loss="mse", optimizer="sgd")
    rng = np.random.default_rng(15)
    x, y = [rng.standard_normal((B, TE, 2)), rng.standard_normal((B, TE, 2))], np.ones((B, 1))
    first = lstmviz.model_gradients(model, x, y).arrays
    np.testing.assert_allclose(first["loss"], model.evaluate(x, y, verbose=0), rtol=1e-5)
    model.fit(x, y, epochs=3, verbose=0)
    later = lstmviz.model_gradients(model, x, y).arrays
    np.testing.assert_allclose(later["loss"], model.evaluate(x, y, verbose=0), rtol=1e-5)
    assert abs(later["loss"] - first["loss"]) > 1e-4
    assert "tf_keras" in str(later["model_source"])


def test_a_loss_object_or_any_callable_gives_the_compiled_losses_values():
    import lstmviz

    model, x, y = seq2seq(False)
    compiled = lstmviz.model_gradients(model, x, y).arrays
    for loss in (keras.losses.SparseCategoricalCrossentropy(),
                 lambda t, p: tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(t, p))):
        given = lstmviz.model_gradients(model, x, y, loss=loss).arrays
        np.testing.assert_allclose(given["loss"], compiled["loss"], rtol=1e-6)
        np.testing.assert_allclose(given["loss_by_sample"], compiled["loss_by_sample"], rtol=1e-5)
        np.testing.assert_allclose(given["layer0_grad_h_total"], compiled["layer0_grad_h_total"],
                                   rtol=1e-5, atol=1e-9)  # fmt: skip


def test_without_the_native_kernels_the_while_loops_give_the_same(tmp_path):
    """LSTMVIZ_NATIVE=0 (no compiler, or forced): the graph's recurrent calls run in
    TensorFlow's while loops, checked against the same unrolled cells."""
    script = tmp_path / "loops.py"
    script.write_text(
        "import numpy as np, lstmviz\n"
        "from tests.helpers.models.seq2seq import reference, seq2seq, TOL\n"
        "model, x, y = seq2seq(True)\n"
        "a = lstmviz.model_gradients(model, x, y).arrays\n"
        "assert str(a['lstm_kernel']) == 'while_loop', a['lstm_kernel']\n"
        "_, expected = reference(model, x, y, True)\n"
        "for k, name in enumerate(('encoder', 'decoder')):\n"
        "    np.testing.assert_allclose(a[f'layer{k}_grad_h_total'], expected[name][0], **TOL)\n"
        "    np.testing.assert_allclose(a[f'layer{k}_grad_c_total'], expected[name][1], **TOL)\n"
    )  # fmt: skip
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, LSTMVIZ_NATIVE="0", PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, str(script)], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
