"""The gates panel's statistics the native kernels sum (gate_sums.h): the LSTM forward op's,
summed as it runs, and `LstmvizGateStats`'s pass over a direction's activations, each against
NumPy's float64 sums of the activations, masked (t, b) left out. Shapes with uneven blocks of
rows (and of steps) and a remainder of units past whole vectors (21: AVX2's 8 and AVX-512's 16
floats). Model mode takes an LSTM's statistics from its forward op, with no second pass."""

from __future__ import annotations

import numpy as np
import pytest

from lstmviz.engine.cells.activations import gate_stat_bounds
from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import tf

T, B, I, H = 6, 5, 3, 21


@pytest.fixture(autouse=True)
def _kernels():
    if kernels.library() is None:
        pytest.skip(kernels.status())


def numpy_sums(gates: np.ndarray, mask: np.ndarray, attrs: dict) -> tuple[np.ndarray, ...]:
    """(sums [T, 3, G], unit_sums [G·H]) of gates [T, B, G·H] in float64 over the (t, b) where
    mask [T, B] is 1; saturated where |y − centre| > bound in float32, as the kernels compare."""
    steps, batch, width = gates.shape
    count = len(attrs["centres"])
    y = gates.reshape(steps, batch, count, width // count)

    def per_gate(key):
        return np.asarray(attrs[key], np.float32)[:, None]

    off = np.abs(y - per_gate("centres"))
    flags = [y.astype(np.float64), off > per_gate("bounds"), off > per_gate("diagnosis_bounds")]
    sums = np.stack([np.einsum("tb,tbgh->tg", mask, f.astype(np.float64)) for f in flags], 1)
    return sums, np.einsum("tb,tbgh->gh", mask, flags[0]).reshape(-1)


def check(found, expected) -> None:
    sums, unit_sums = (np.asarray(a) for a in found)
    np.testing.assert_allclose(sums[:, 0], expected[0][:, 0], rtol=1e-6, atol=1e-5)
    np.testing.assert_array_equal(sums[:, 1:], expected[0][:, 1:])  # counts: exact
    np.testing.assert_allclose(unit_sums, expected[1], rtol=1e-6, atol=1e-5)


def test_the_lstm_forward_sums_its_gates_as_the_separate_pass_does():
    rng = np.random.default_rng(4)
    x = tf.constant(rng.normal(size=(T, B, I)), tf.float32)
    kernel, recurrent = (tf.constant(rng.normal(size=s) * 2, tf.float32)
                         for s in ((I, 4 * H), (H, 4 * H)))  # fmt: skip
    bias, h0 = tf.zeros([4 * H]), tf.constant(rng.normal(size=(B, H)) * 0.5, tf.float32)
    mask = np.ones((T, B), np.float32)
    mask[2:, 1] = mask[0, 3] = mask[4, :] = 0.0  # a row's end, one step, a whole step
    attrs = gate_stat_bounds(kernels.LSTM_ACTIVATIONS)

    @tf.function
    def run(mask):
        probes = tf.zeros([T, B, H]), tf.zeros([T, B, H])
        _, _, gates = kernels.sequence(x, h0, h0, kernel, recurrent, bias, *probes, mask,
                                      with_gates=True)  # fmt: skip
        separate = kernels.library().lstmviz_gate_stats(gates, [mask], **attrs)
        return gates, kernels.gate_sums(gates, attrs), separate

    gates, fused, separate = run(tf.constant(mask))
    expected = numpy_sums(gates.numpy(), mask, attrs)
    assert 0 < expected[0][:, 1].sum() < mask.sum() * 4 * H  # some saturated, not all
    check(fused, expected)
    check(separate, expected)


def test_the_separate_pass_sums_a_gru_s_gates():
    """Three gates (sigmoid, sigmoid, tanh), 7 steps: uneven blocks of steps, no mask."""
    rng = np.random.default_rng(6)
    steps = 7
    pre = rng.normal(size=(steps, 3, 3, H)) * 4
    gates = np.concatenate([1 / (1 + np.exp(-pre[:, :, :2])), np.tanh(pre[:, :, 2:])], axis=2)
    gates = gates.reshape(steps, 3, 3 * H).astype(np.float32)
    attrs = gate_stat_bounds(("sigmoid", "sigmoid", "tanh"))
    found = tf.function(lambda g: kernels.library().lstmviz_gate_stats(g, [], **attrs))(gates)
    check(found, numpy_sums(gates, np.ones((steps, 3)), attrs))


def test_model_mode_takes_an_lstm_s_statistics_from_its_forward():
    """A Bidirectional LSTM and a GRU: the graph sums the GRU's gates in a pass of their own,
    the LSTM's in their forward ops."""
    keras = pytest.importorskip("keras")
    import lstmviz
    from lstmviz.engine.autodiff.forward import flat_weights
    from lstmviz.engine.modes import model as engine

    engine._COMPILED.clear()
    keras.utils.set_random_seed(1)
    L = keras.layers
    model = keras.Sequential([keras.Input((4, 2)),
                              L.Bidirectional(L.LSTM(3, return_sequences=True)),
                              L.GRU(3), L.Dense(1)])  # fmt: skip
    model.compile(loss="mse")
    x, y = np.ones((2, 4, 2), np.float32), np.ones((2, 1), np.float32)
    trace = lstmviz.model_gradients(model, x, y)
    gradients = next(iter(engine._COMPILED.values()))
    graph = gradients.function().get_concrete_function(
        tf.constant(np.swapaxes(x, 0, 1)), tf.constant(y),
        [tf.constant(w) for w in flat_weights(gradients.spec)]).graph  # fmt: skip
    types = [op.type for op in graph.get_operations()]
    assert types.count("LstmvizSequenceForward") == 2 and types.count("LstmvizGateStats") == 1
    assert trace["layer0_gates_mean"].shape == (4, 4)
    engine._COMPILED.clear()
