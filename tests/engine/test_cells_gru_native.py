"""The native GRU and SimpleRNN kernels (gru_kernels.cc) against independent computations:
Keras 3 layers and their tape.gradient (y_pred, loss, weight gradients) with an unrolled loop
over Keras's cells (total dL/dh_t), tf_keras (Keras 2's hard_sigmoid), and float64 finite
differences of a NumPy forward; reset_after both ways, masks, go_backwards, Bidirectionals.
Each test asserts the kernels ran (it would fail on a silent fall-back to the while-loops), and
the while-loops, which run where the kernels do not, are checked against Keras on the same
model."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from lstmviz.engine.cells.any_cell import cell_sequence
from lstmviz.engine.modes import model as model_module
from lstmviz.engine.modes.model import model_gradients
from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import tf
from tests.helpers.references.cell_reference import (
    check_trace,
    finite_differences,
    numpy_direction,
    spec_of,
)
from tests.helpers.references.reference import interrupted_outcome

L = keras.layers


@pytest.fixture(autouse=True)
def kernels_built():
    if kernels.library() is None:
        pytest.skip(kernels.status())


@pytest.fixture
def counted(monkeypatch):
    """The activations of every direction the native forwards ran, GRU (gate, candidate) and
    SimpleRNN (activation,) (compiled models made afresh)."""
    calls = []

    def counted_run(run, take: slice):
        def counting(*args, **kwargs):
            calls.append(args[take])
            return run(*args, **kwargs)

        return counting

    monkeypatch.setattr(kernels, "gru_sequence", counted_run(kernels.gru_sequence, slice(-2, None)))
    monkeypatch.setattr(kernels, "rnn_sequence", counted_run(kernels.rnn_sequence, slice(-1, None)))
    monkeypatch.setattr(model_module, "_COMPILED", {})
    return calls


def _model(gate: str):
    """Embedding(mask_zero) → Bidirectional(GRU, reset_after) → GRU(reset_after=False,
    go_backwards) → Dense, and its data (sample 0 padded: masked steps)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.Input((5,), dtype="int32"),
        L.Embedding(20, 3, mask_zero=True, name="emb"),
        L.Bidirectional(L.GRU(4, return_sequences=True, recurrent_activation=gate), name="bi"),
        L.GRU(4, reset_after=False, go_backwards=True, recurrent_activation=gate, name="top"),
        L.Dense(1, activation="sigmoid", name="head"),
    ], name=f"native_{gate}")  # fmt: skip
    rng = np.random.default_rng(1)
    model.set_weights([0.7 * rng.standard_normal(w.shape) for w in model.get_weights()])
    x = rng.integers(1, 20, (3, 5)).astype(np.int32)
    x[0, 3:] = 0
    y = rng.integers(0, 2, (3, 1)).astype(np.float32)
    return model, x, y


@pytest.mark.parametrize("gate", ["sigmoid", "hard_sigmoid"])
def test_native_gru_model_matches_keras(counted, gate):
    model, x, y = _model(gate)
    arrays = model_gradients(spec_of(model, "binary_crossentropy"), x, y).arrays
    check_trace(model, arrays, x, y, "binary_crossentropy")
    assert counted == [(gate, "tanh")] * 3


@pytest.mark.parametrize("cell", ["gru", "simple_rnn"])
def test_while_loop_models_match_keras(counted, monkeypatch, cell):
    """Without the kernels (as LSTMVIZ_NATIVE=0) the while-loops compute the same models."""
    monkeypatch.setattr(kernels, "library", lambda: None)
    model, x, y = _model("sigmoid") if cell == "gru" else _rnn_model()
    loss = "binary_crossentropy" if cell == "gru" else "mse"
    check_trace(model, model_gradients(spec_of(model, loss), x, y).arrays, x, y, loss)
    assert not counted


def _weights(rng, units: int, inputs: int, reset_after: bool) -> dict:
    bias_shape = (2, 3 * units) if reset_after else (3 * units,)
    return {"kernel": rng.standard_normal((inputs, 3 * units)),
            "recurrent_kernel": rng.standard_normal((units, 3 * units)),
            "bias": rng.standard_normal(bias_shape)}  # fmt: skip


def _check_total_gradient(cell: str, args: dict, weights: dict, x, backwards: bool = False):
    """dL/dh_t of the kernels (float32) for L = Σ h ⊙ w against float64 central differences
    of the NumPy forward, with a mask that skips steps of two samples; and h itself. With
    `backwards` the kernel reads x from its end (go_backwards), every array by input
    position: the NumPy forward runs on the reversed sequence, flipped back."""
    rng = np.random.default_rng(10)
    steps, batch = x.shape[:2]
    units = weights["recurrent_kernel"].shape[0]
    w_out = rng.standard_normal((steps, batch, units))
    mask = np.ones((steps, batch), bool)
    mask[2, 1] = mask[0, 2] = False
    probe = tf.zeros([steps, batch, units])
    with tf.GradientTape() as tape:
        tape.watch(probe)
        run = cell_sequence(cell, args, tf.constant(x, tf.float32), tf.zeros([batch, units]),
                            {k: tf.constant(v, tf.float32) for k, v in weights.items()},
                            (probe, None), tf.constant(mask, tf.float32), backwards)  # fmt: skip
        loss = tf.reduce_sum(run.h * w_out)
    assert run.input_order == backwards  # the native kernels read it so
    ours = tape.gradient(loss, probe).numpy()

    def order(a):  # input position <-> the order the NumPy forward runs in
        return a[::-1] if backwards else a

    h = numpy_direction(cell, args, order(x), weights, order(mask))
    np.testing.assert_allclose(run.h.numpy(), order(h), atol=2e-5)
    expected = finite_differences(cell, args, order(x), weights, order(mask), order(w_out))
    np.testing.assert_allclose(ours, order(expected), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("gate", ["sigmoid", "hard_sigmoid", "hard_sigmoid_keras2"])
@pytest.mark.parametrize("reset_after", [True, False])
def test_native_gru_total_gradient_finite_differences(counted, gate, reset_after):
    """Read backwards, as a go_backwards direction is (the kernel reads x from its end)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 3, 2))
    args = {"reset_after": reset_after, "recurrent_activation": gate}
    _check_total_gradient("gru", args, _weights(rng, 4, 2, reset_after), x, backwards=True)
    assert counted == [(gate, "tanh")]


@pytest.mark.parametrize("reset_after", [True, False])
def test_native_gru_keras2_hard_sigmoid_matches_tf_keras(counted, reset_after):
    """Keras 2's hard_sigmoid gate (clip(0.2·x + 0.5, 0, 1)): h and the weight gradients
    against a tf_keras GRU and its tape.gradient, with a mask."""
    import tf_keras

    rng = np.random.default_rng(8)
    steps, batch, inputs, units = 5, 3, 2, 4
    layer = tf_keras.layers.GRU(units, return_sequences=True, reset_after=reset_after,
                                recurrent_activation="hard_sigmoid")  # fmt: skip
    layer.build((batch, steps, inputs))
    layer.set_weights([2.0 * rng.standard_normal(w.shape) for w in layer.get_weights()])
    x = rng.standard_normal((batch, steps, inputs)).astype(np.float32)
    mask = np.ones((batch, steps), bool)
    mask[1, 3:] = False
    w_out = rng.standard_normal((batch, steps, units)).astype(np.float32)
    with tf.GradientTape() as tape:
        h_keras = layer(x, mask=tf.constant(mask))
        loss = tf.reduce_sum(h_keras * w_out)
    expected = [g.numpy() for g in tape.gradient(loss, layer.trainable_weights)]
    weights = [tf.constant(w) for w in layer.get_weights()]
    with tf.GradientTape() as tape:
        tape.watch(weights)
        run = cell_sequence(
            "gru", {"reset_after": reset_after, "recurrent_activation": "hard_sigmoid_keras2"},
            tf.transpose(x, [1, 0, 2]), tf.zeros([batch, units]),
            dict(zip(("kernel", "recurrent_kernel", "bias"), weights, strict=True)),
            (tf.zeros([steps, batch, units]), None), tf.constant(mask.T, tf.float32))  # fmt: skip
        h = tf.transpose(run.h, [1, 0, 2])
        ours_loss = tf.reduce_sum(h * w_out)
    assert len(counted) == 1 and counted[0][0] == "hard_sigmoid_keras2"
    # tf_keras zeroes nothing here (return_sequences without zero_output_for_mask): the
    # masked steps repeat the last h, as the kernels' carried state does
    np.testing.assert_allclose(h.numpy(), h_keras.numpy(), atol=2e-6)
    np.testing.assert_allclose(float(ours_loss), float(loss), rtol=1e-5)
    for ours, theirs in zip(tape.gradient(ours_loss, weights), expected, strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs, atol=5e-5)
    # saturation told from the values: a hard sigmoid is flat exactly where it is 0 or 1
    z, r = run.gates.numpy()[..., :units], run.gates.numpy()[..., units : 2 * units]
    flat = np.concatenate([(z <= 0) | (z >= 1), (r <= 0) | (r >= 1)], axis=-1)
    assert flat.any()
    np.testing.assert_array_equal(run.saturated.numpy()[..., : 2 * units], flat)


def test_interrupt_stops_a_running_gru_op():
    """`interrupt.interrupt()` stops the GRU's forward too ("GRU run interrupted")."""
    steps, hidden = 1_000_000, 4  # long enough to outlast one 5 ms interrupt interval
    zx, h0 = tf.ones((steps, 1, 3 * hidden)), tf.zeros((1, hidden))
    recurrent, probe = tf.fill((hidden, 3 * hidden), 0.1), tf.zeros((steps, 1, hidden))
    outcome = interrupted_outcome(lambda: kernels.gru_sequence(
        zx, h0, recurrent, None, probe, None, "sigmoid", "tanh"))  # fmt: skip
    assert "GRU run interrupted" in outcome


def _rnn_model():
    """Masking → Bidirectional(SimpleRNN relu, go_backwards half) → SimpleRNN(tanh) → Dense,
    and its data (sample 1 padded)."""
    keras.utils.set_random_seed(2)
    model = keras.Sequential([
        keras.Input((5, 2)),
        L.Masking(0.0),
        L.Bidirectional(L.SimpleRNN(4, activation="relu", return_sequences=True), name="bi"),
        L.SimpleRNN(4, name="top"),
        L.Dense(2, name="head"),
    ], name="native_simple_rnn")  # fmt: skip
    rng = np.random.default_rng(3)
    model.set_weights([0.7 * rng.standard_normal(w.shape) for w in model.get_weights()])
    x = rng.standard_normal((3, 5, 2)).astype(np.float32)
    x[1, 3:] = 0.0
    return model, x, rng.standard_normal((3, 2)).astype(np.float32)


def test_native_simple_rnn_model_matches_keras(counted):
    model, x, y = _rnn_model()
    arrays = model_gradients(spec_of(model, "mse"), x, y).arrays
    check_trace(model, arrays, x, y, "mse")
    assert counted == [("relu",), ("relu",), ("tanh",)]
    assert 0 < arrays["layer0_gates_saturated"].mean() < 1  # relu's flat tail, from its values


@pytest.mark.parametrize("activation", ["tanh", "relu", "sigmoid"])
@pytest.mark.parametrize("backwards", [False, True], ids=["forwards", "backwards"])
def test_native_simple_rnn_total_gradient_finite_differences(counted, activation, backwards):
    rng = np.random.default_rng(9)
    weights = {"kernel": rng.standard_normal((2, 4)),
               "recurrent_kernel": 0.8 * rng.standard_normal((4, 4)),
               "bias": rng.standard_normal(4)}  # fmt: skip
    x = rng.standard_normal((5, 3, 2))
    _check_total_gradient("simple_rnn", {"activation": activation}, weights, x, backwards)
    assert counted == [(activation,)]
