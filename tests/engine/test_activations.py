"""The activation registry the cells share: Keras 3's functions by name, Keras 2's
hard_sigmoid, closed-form slopes against TensorFlow's derivatives, saturation by activation,
and an unknown name refused by name."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from lstmviz.core.errors import ModelError
from lstmviz.engine.cells.activations import activation
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.weights.model_spec import ACTIVATIONS

# points away from every kink (0, ±1, ±2.5, ±3, 6) so a one-sided slope cannot hide
X = np.array([-7.1, -4.2, -2.7, -2.2, -1.3, -0.6, -0.1, 0.2, 0.7, 1.4, 2.3, 2.8, 4.1, 6.6])


def test_keras2_hard_sigmoid_is_the_clipped_line():
    y = activation("hard_sigmoid_keras2").fn(tf.constant(X)).numpy()
    np.testing.assert_allclose(y, np.clip(0.2 * X + 0.5, 0.0, 1.0), atol=1e-12)
    # and it is not Keras 3's relu6(x + 3) / 6
    k3 = activation("hard_sigmoid").fn(tf.constant(X)).numpy()
    np.testing.assert_allclose(k3, np.clip(X + 3.0, 0.0, 6.0) / 6.0, atol=1e-7)
    assert np.abs(y - k3).max() > 0.05


def test_keras2_hard_sigmoid_matches_tf_keras():
    tf_keras = pytest.importorskip("tf_keras")
    expected = tf_keras.activations.hard_sigmoid(tf.constant(X, tf.float32)).numpy()
    ours = activation("hard_sigmoid_keras2").fn(tf.constant(X, tf.float32)).numpy()
    np.testing.assert_allclose(ours, expected, atol=1e-6)


@pytest.mark.parametrize("name", [n for n in ACTIVATIONS if n != "hard_sigmoid_keras2"])
def test_every_activation_is_keras_own_and_its_slope_is_its_derivative(name):
    act = activation(name)
    x = tf.constant(X)
    np.testing.assert_allclose(act.fn(x).numpy(), keras.activations.get(name)(x).numpy(),
                               atol=1e-12)  # fmt: skip
    if act.slope is None:
        return
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = act.fn(x)
    expected = tape.gradient(y, x).numpy()
    np.testing.assert_allclose(act.slope(x, y).numpy(), expected, rtol=1e-6, atol=1e-9,
                               err_msg=name)  # fmt: skip


def test_keras2_hard_sigmoid_slope():
    act = activation("hard_sigmoid_keras2")
    x = tf.constant(X)
    expected = np.where(np.abs(X) < 2.5, 0.2, 0.0)
    np.testing.assert_allclose(act.slope(x, act.fn(x)).numpy(), expected)


def test_saturation_is_the_flat_tails():
    x = tf.constant(X)

    def saturated(name):
        act = activation(name)
        return act.saturated(x, act.fn(x)).numpy()

    np.testing.assert_array_equal(saturated("hard_sigmoid"), np.abs(X) > 3)
    np.testing.assert_array_equal(saturated("hard_sigmoid_keras2"), np.abs(X) > 2.5)
    np.testing.assert_array_equal(saturated("relu"), X < 0)
    assert not saturated("linear").any()
    np.testing.assert_array_equal(saturated("tanh"), np.abs(np.tanh(X)) > 0.99)
    np.testing.assert_array_equal(saturated("sigmoid"), np.abs(1 / (1 + np.exp(-X)) - 0.5) > 0.49)
    # without a closed form: TensorFlow's slope, its size below 1% of the steepest
    np.testing.assert_array_equal(saturated("gelu"), X < -3)


def test_unknown_activation_is_named():
    with pytest.raises(ModelError, match="unknown activation 'wobbly'"):
        activation("wobbly")


def test_gate_saturation_flags_are_each_gates_own_whatever_shape_is_known():
    """The gates' saturation flags computed over all gates at once (`cells.saturations`) equal
    each gate's own `Activation.saturated`, in a function traced with no static shape (as a
    PyTorch program's directions are) and eagerly."""
    from lstmviz.core.schema import GATE_SATURATION_DIAGNOSIS
    from lstmviz.engine.cells.activations import SATURATION
    from lstmviz.engine.cells.any_cell import saturations

    acts = [activation(name) for name in ("sigmoid", "sigmoid", "tanh", "sigmoid")]
    rng = np.random.default_rng(3)
    pre = rng.normal(0.0, 4.0, (5, 2, 4 * 3)).astype(np.float32)  # T=5, B=2, H=3
    blocks = zip(acts, np.split(pre, 4, axis=-1), strict=True)
    gates = np.concatenate([a.fn(tf.constant(b)).numpy() for a, b in blocks], axis=-1)
    expected = [
        np.concatenate([a.saturated(None, tf.constant(g), margin).numpy() for a, g in
                        zip(acts, np.split(gates, 4, axis=-1), strict=True)], axis=-1)
        for margin in (SATURATION, GATE_SATURATION_DIAGNOSIS)
    ]  # fmt: skip
    assert 0 < expected[1].sum() < expected[1].size  # some saturated, some not
    unknown = tf.function(lambda g: saturations(acts, None, g),
                          input_signature=[tf.TensorSpec([None, None, None], tf.float32)])
    for got in (unknown(tf.constant(gates)), saturations(acts, None, tf.constant(gates))):
        for flags, want in zip(got, expected, strict=True):
            np.testing.assert_array_equal(flags.numpy(), want.astype(np.float32))
