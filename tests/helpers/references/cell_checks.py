"""The engine's cells checked against tests/helpers/references/cell_reference.py: its total dL/dh_t
in float64 against central differences of the NumPy forward (`finite_difference_check`), on
Keras models given random weights (`randomized`)."""

from __future__ import annotations

import numpy as np

from lstmviz.engine.cells.any_cell import cell_sequence
from lstmviz.engine.quiet_tensorflow import tf
from tests.helpers.references.cell_reference import finite_differences


def randomized(model, seed: int):
    """`model` with random weights (0.5 · N(0, 1)), drawn from `seed`."""
    rng = np.random.default_rng(seed)
    model.set_weights([0.5 * rng.standard_normal(w.shape) for w in model.get_weights()])
    return model


def _probe_gradient(cell, args, x, weights, w_out, mask):
    """The engine's total dL/dh_t [T, B, H] in float64 for L = sum(h ⊙ w_out)."""
    xt = tf.constant(x)
    tensors = {k: tf.constant(v) for k, v in weights.items()}
    steps, batch = x.shape[:2]
    units = weights["recurrent_kernel"].shape[0]
    probes = tuple(tf.zeros([steps, batch, units], tf.float64) for _ in range(2))
    with tf.GradientTape() as tape:
        tape.watch(probes)
        run = cell_sequence(cell, args, xt, tf.zeros([batch, units], tf.float64), tensors,
                            probes if cell == "lstm" else (probes[0], None),
                            None if mask is None else tf.constant(mask, tf.float64))
        loss = tf.reduce_sum(run.h * w_out)
    return tape.gradient(loss, probes[0]).numpy()


def finite_difference_check(cell, args, weights, seed):
    """dL/dh_t of the engine (float64) against central differences of the NumPy forward, with
    a mask that skips a step of one sample."""
    rng = np.random.default_rng(seed)
    steps, batch, inputs = 5, 2, 2
    units = weights["recurrent_kernel"].shape[0]
    x = rng.standard_normal((steps, batch, inputs))
    w_out = rng.standard_normal((steps, batch, units))
    mask = np.ones((steps, batch), bool)
    mask[2, 1] = False
    ours = _probe_gradient(cell, args, x, weights, w_out, mask)
    expected = finite_differences(cell, args, x, weights, mask, w_out)
    np.testing.assert_allclose(ours, expected, rtol=1e-6, atol=1e-8)
