"""The taped engine against independent computations: NumPy BPTT, an unrolled tape, Keras, FD."""

import numpy as np
import pytest

from lstmviz.core.errors import InputError
from lstmviz.engine.autodiff.gradients import HiddenLoss, compiled_step
from lstmviz.engine.modes.taped import taped_gradients
from lstmviz.weights import random_weights
from tests.helpers.references.mode_references import taped_case as make_case
from tests.helpers.references.reference import assert_close, np_bptt, np_forward, np_loss

LOSSES = ["mean_h", "last_mse", "seq_mse"]
T, B, I, H = 9, 3, 4, 5


@pytest.mark.parametrize("loss", LOSSES)
def test_total_gradients_match_numpy_bptt(rng, loss):
    x, w, target, h0, c0 = make_case(rng, loss)
    trace = taped_gradients(x, w, loss=loss, target=target, h0=h0, c0=c0)
    h, _, _ = np_forward(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0)
    value, direct = np_loss(loss, h, target)
    ref = np_bptt(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0, direct)
    assert float(trace.loss) == pytest.approx(value, rel=1e-5)
    assert_close(trace.h, ref["h"], what="h")
    assert_close(trace.c, ref["c"], what="c")
    assert_close(trace.grad_h_direct, direct, what="direct")
    assert_close(trace.grad_h_total, ref["dh"], what="dL/dh")
    assert_close(trace.grad_c_total, ref["dc"], what="dL/dc")
    assert_close(trace.grad_kernel, ref["dkernel"], what="dkernel")
    assert_close(trace.grad_recurrent_kernel, ref["drecurrent"], what="drecurrent")
    assert_close(trace.grad_bias, ref["dbias"], what="dbias")
    assert_close(trace.grad_h0, ref["dh0"], what="dh0")
    assert_close(trace.grad_c0, ref["dc0"], what="dc0")
    expected_norm = np.sqrt((ref["dh"] ** 2).sum(axis=(1, 2)))
    assert_close(trace.norm_h_total, expected_norm, what="norm")


@pytest.mark.parametrize("loss", LOSSES)
def test_total_gradients_match_unrolled_tape(rng, loss):
    """An eager Python loop; the gradient at each watched intermediate h_t is the total one."""
    import tensorflow as tf

    x, w, target, h0, c0 = make_case(rng, loss)
    kernel, rec, bias = (tf.constant(a) for a in (w.kernel, w.recurrent_kernel, w.bias))
    with tf.GradientTape(persistent=True) as tape:
        h, c = tf.constant(h0), tf.constant(c0)
        tape.watch([h, c])  # eager tapes record only what depends on watched tensors
        hs, cs = [], []
        for t in range(T):
            z = tf.matmul(x[t], kernel) + tf.matmul(h, rec) + bias
            zi, zf, zg, zo = tf.split(z, 4, axis=1)
            c = tf.sigmoid(zf) * c + tf.sigmoid(zi) * tf.tanh(zg)
            h = tf.sigmoid(zo) * tf.tanh(c)
            hs.append(h)
            cs.append(c)
        stacked = tf.stack(hs)
        if loss == "mean_h":
            value = tf.reduce_mean(stacked)
        elif loss == "last_mse":
            value = tf.reduce_mean((hs[-1] - target) ** 2)
        else:
            value = tf.reduce_mean((stacked - target) ** 2)
    dh = np.stack([g.numpy() for g in tape.gradient(value, hs)])
    dc = np.stack([g.numpy() for g in tape.gradient(value, cs)])
    trace = taped_gradients(x, w, loss=loss, target=target, h0=h0, c0=c0)
    np.testing.assert_allclose(trace.grad_h_total, dh, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(trace.grad_c_total, dc, rtol=1e-4, atol=1e-7)


def _keras_lstm(w, h0=None):
    import keras

    layer = keras.layers.LSTM(w.hidden, return_sequences=True)
    layer.build((None, None, w.input_dim))
    layer.set_weights([w.kernel, w.recurrent_kernel, w.bias])
    return layer


def test_forward_equals_keras(rng):
    import tensorflow as tf

    x, w, _, h0, c0 = make_case(rng, "mean_h")
    layer = _keras_lstm(w)
    keras_h = layer(tf.transpose(x, [1, 0, 2]), initial_state=[h0, c0]).numpy()
    trace = taped_gradients(x, w, h0=h0, c0=c0)
    np.testing.assert_allclose(trace.h, keras_h.transpose(1, 0, 2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("loss", LOSSES)
def test_weight_gradients_equal_keras(rng, loss):
    import tensorflow as tf

    x, w, target, _, _ = make_case(rng, loss, random_state=False)
    layer = _keras_lstm(w)
    with tf.GradientTape() as tape:
        h = tf.transpose(layer(tf.transpose(x, [1, 0, 2])), [1, 0, 2])
        if loss == "mean_h":
            value = tf.reduce_mean(h)
        elif loss == "last_mse":
            value = tf.reduce_mean((h[-1] - target) ** 2)
        else:
            value = tf.reduce_mean((h - target) ** 2)
    grads = tape.gradient(value, layer.trainable_weights)
    trace = taped_gradients(x, w, loss=loss, target=target)
    for key, g in zip(["grad_kernel", "grad_recurrent_kernel", "grad_bias"], grads, strict=True):
        np.testing.assert_allclose(trace[key], g.numpy(), rtol=1e-4, atol=1e-7, err_msg=key)


def test_finite_differences(rng):
    """Central differences of a float64 NumPy forward pass on a tiny case."""
    x, w, target, h0, c0 = make_case(rng, "seq_mse", steps=4)
    trace = taped_gradients(x, w, loss="seq_mse", target=target, h0=h0, c0=c0)

    def loss_of(kernel=w.kernel, recurrent=w.recurrent_kernel, bias=w.bias, h=h0, c=c0):
        hs, _, _ = np_forward(x, kernel, recurrent, bias, h, c)
        return np_loss("seq_mse", hs, target)[0]

    eps = 1e-5
    checks = [("grad_kernel", "kernel"), ("grad_recurrent_kernel", "recurrent"), ("grad_c0", "c")]
    base = {"kernel": w.kernel, "recurrent": w.recurrent_kernel, "c": c0}
    for key, arg in checks:
        for index in [(0, 0), (1, 3), (2, 4)]:
            plus, minus = (base[arg].astype(np.float64).copy() for _ in range(2))
            plus[index] += eps
            minus[index] -= eps
            fd = (loss_of(**{arg: plus}) - loss_of(**{arg: minus})) / (2 * eps)
            assert trace[key][index] == pytest.approx(fd, rel=2e-3, abs=1e-7), (key, index)


def test_last_mse_direct_is_zero_before_last_step_but_total_is_not(rng):
    x, w, target, _, _ = make_case(rng, "last_mse")
    trace = taped_gradients(x, w, loss="last_mse", target=target)
    assert np.all(trace.grad_h_direct[:-1] == 0)
    assert np.all(trace.norm_h_direct[:-1] == 0)
    assert np.all(trace.norm_h_total[:-1] > 0)
    np.testing.assert_array_equal(trace.grad_h_direct[-1], trace.grad_h_total[-1])


def test_one_trace_serves_every_length(rng):
    """Compiled once per (B, I, H): any T reuses it; another batch size has its own."""
    fn = compiled_step(HiddenLoss("mean_h"), B, I, H)
    w = random_weights(I, H, rng)
    for steps in (1, 2, 17, 40):
        taped_gradients(rng.standard_normal((steps, B, I)), w)
    assert fn.experimental_get_tracing_count() == 1
    taped_gradients(rng.standard_normal((5, B + 2, I)), w)
    taped_gradients(rng.standard_normal((9, B + 2, I)), w)
    assert fn.experimental_get_tracing_count() == 1
    assert compiled_step(HiddenLoss("mean_h"), B + 2, I, H).experimental_get_tracing_count() == 1


def test_single_step(rng):
    x, w, target, h0, c0 = make_case(rng, "seq_mse", steps=1)
    trace = taped_gradients(x, w, loss="seq_mse", target=target, h0=h0, c0=c0)
    h, _, _ = np_forward(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0)
    ref = np_bptt(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0, np_loss("seq_mse", h, target)[1])
    assert_close(trace.grad_h_total, ref["dh"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"x": np.zeros((4, 2))}, "time-major"),
        ({"x": np.zeros((4, 2, I + 1))}, "input size"),
        ({"h0": np.zeros((3, H))}, "h0 must have shape"),
        ({"loss": "last_mse"}, "needs a target"),
        ({"loss": "seq_mse", "target": np.zeros((2, H))}, "target for 'seq_mse'"),
        ({"loss": "nope"}, "unknown loss"),
    ],
)
def test_bad_inputs_name_the_problem(rng, kwargs, message):
    w = random_weights(I, H, rng)
    args = {"x": np.zeros((4, 2, I)), "weights": w} | kwargs
    with pytest.raises(InputError, match=message):
        taped_gradients(**args)


@pytest.mark.parametrize("use_function", [False, True])
def test_sequence_gradients_reach_variables_and_inputs(rng, use_function):
    """Weights and state as tf.Variables, eager and compiled: the gradients for kernel and x
    equal an unrolled eager loop's."""
    import tensorflow as tf

    from lstmviz.engine.cells.lstm import lstm_sequence

    x, w, _, h0, c0 = make_case(rng, "mean_h")
    kernel = tf.Variable(w.kernel)
    rec, bias, h0v = tf.constant(w.recurrent_kernel), tf.constant(w.bias), tf.Variable(h0)
    xt = tf.constant(x)

    def ours():
        with tf.GradientTape() as tape:
            tape.watch(xt)
            h, _ = lstm_sequence(xt, h0v, tf.constant(c0), kernel, rec, bias)
            value = tf.reduce_sum(tf.sin(h))
        return tape.gradient(value, [kernel, xt, h0v])

    got = tf.function(ours)() if use_function else ours()
    with tf.GradientTape() as tape:
        tape.watch(xt)
        h, c, hs = h0v, tf.constant(c0), []
        for t in range(T):
            z = tf.matmul(xt[t], kernel) + tf.matmul(h, rec) + bias
            zi, zf, zg, zo = tf.split(z, 4, axis=1)
            c = tf.sigmoid(zf) * c + tf.sigmoid(zi) * tf.tanh(zg)
            h = tf.sigmoid(zo) * tf.tanh(c)
            hs.append(h)
        value = tf.reduce_sum(tf.sin(tf.stack(hs)))
    expected = tape.gradient(value, [kernel, xt, h0v])
    for name, a, b in zip(["kernel", "x", "h0"], got, expected, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


def test_the_progress_of_a_taped_run_with_its_map_says_the_map_is_under_way():
    """The map takes T²/2 backward steps, far longer than the run at large T: the update after
    the run does not say "done" while it is computed."""
    from lstmviz.core.config import RunConfig
    from lstmviz.engine.modes.taped import run_taped
    from lstmviz.io.trace import TraceUpdate

    with_map = RunConfig(steps=6, batch=2, hidden=3, connectivity=True)
    messages = [u.message for u in run_taped(with_map) if isinstance(u, TraceUpdate)]
    assert messages[-1] == "computing the connectivity map…"
    plain = [u.message for u in run_taped(RunConfig(steps=6, batch=2, hidden=3))
             if isinstance(u, TraceUpdate)]  # fmt: skip
    assert plain[-1] == "done"
