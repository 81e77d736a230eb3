"""The connectivity map C[t, s] = ‖∂L_t/∂h_s‖: how much the loss at step t reaches back to h_s.

L_t is the part of the loss at step t, so that L = Σ_t L_t:
- seq_mse: the step-t term of the mean, Σ_{b,j} (h[t,b,j] - target[t,b,j])² / (T·B·H);
- mean_h:  Σ_{b,j} h[t,b,j] / (T·B·H);
- last_mse: L_{T-1} = L and L_t = 0 for t < T-1 (only the last row is non-zero);
- training tasks: the read-out loss of step t (the last row only when the read-out reads the
  last step). ∂L_t/∂h_s is the total derivative through the recurrence; the norm is the L2 norm
  over batch and units; C is zero above the diagonal (s > t) and its diagonal is the direct
  partial ‖∂L_t/∂h_t‖.

Each L_t depends on h_t alone, so the direct partials `grad_h_direct[t]` of the whole loss are
exactly ∂L_t/∂h_t: the map needs the forward states and those partials only.

Cost: one reverse while-loop carries the deltas of every L_t with t ≥ s at once, stacked along
the batch dimension, and at step s backpropagates them through the cell (re-run on the tiled
state, so `lstm_step` is reused and differentiated by TensorFlow). Work grows like T²/2 backward
steps at batch B, memory like T·B·H, never T²·B·H. Measured on the 2-core CPU (I=8): T=100 B=16
H=32 0.17 s (a taped run 0.09 s); T=200 B=32 H=64 1.9 s (taped 0.33 s). `tape.jacobian` of the T
losses with pfor took 0.35 s and 2.8 s there and holds the whole [T, T, B, H] Jacobian.
"""

from __future__ import annotations

import numpy as np

from lstmviz.engine.cell import input_projection, lstm_step
from lstmviz.engine.tfload import tf

_SPEC = tf.TensorSpec
_MATRIX = _SPEC([None, None], tf.float32)
_SEQUENCE = _SPEC([None, None, None], tf.float32)


@tf.function(
    input_signature=(
        _SEQUENCE,  # x [T, B, I]
        _MATRIX,  # h0 [B, H]
        _MATRIX,  # c0 [B, H]
        _MATRIX,  # kernel [I, 4H]
        _MATRIX,  # recurrent_kernel [H, 4H]
        _SPEC([None], tf.float32),  # bias [4H]
        _SEQUENCE,  # h [T, B, H]
        _SEQUENCE,  # c [T, B, H]
        _SEQUENCE,  # direct ∂L_t/∂h_t [T, B, H]
    ),
    reduce_retracing=True,
)
def _connectivity(x, h0, c0, kernel, recurrent_kernel, bias, h, c, direct):
    steps, batch, hidden = tf.shape(h)[0], tf.shape(h)[1], tf.shape(h)[2]

    def unstack(values):
        return tf.TensorArray(tf.float32, size=steps).unstack(values)

    zx = unstack(input_projection(x, kernel, bias))
    h_prev = unstack(tf.concat([h0[None], h[:-1]], 0))
    c_prev = unstack(tf.concat([c0[None], c[:-1]], 0))
    direct = unstack(direct)
    columns = tf.TensorArray(tf.float32, size=steps)

    def body(s, gh, gc, columns):
        # gh, gc [T-1-s, B, H]: dL_t/dh_s, dL_t/dc_s through step s+1, for t = s+1 .. T-1.
        gh = tf.concat([direct.read(s)[None], gh], 0)  # rows t = s .. T-1
        gc = tf.concat([tf.zeros([1, batch, hidden]), gc], 0)
        # in float64: float32 squares of the vanishing entries (< 1e-19) would flush to zero
        wide = tf.cast(gh, tf.float64)
        norms = tf.cast(tf.sqrt(tf.reduce_sum(tf.square(wide), axis=[1, 2])), tf.float32)
        columns = columns.write(s, tf.concat([tf.zeros([s]), norms], 0))
        rows = steps - s
        h_in, c_in = tf.tile(h_prev.read(s), [rows, 1]), tf.tile(c_prev.read(s), [rows, 1])
        with tf.GradientTape() as tape:
            tape.watch([h_in, c_in])
            h_out, c_out, _, _ = lstm_step(
                tf.tile(zx.read(s), [rows, 1]), h_in, c_in, recurrent_kernel
            )
        flat = [tf.reshape(g, [rows * batch, hidden]) for g in (gh, gc)]
        gh, gc = tape.gradient([h_out, c_out], [h_in, c_in], output_gradients=flat)
        shape = [rows, batch, hidden]
        return s - 1, tf.reshape(gh, shape), tf.reshape(gc, shape), columns

    empty = tf.zeros([0, batch, hidden])
    _, _, _, columns = tf.while_loop(
        lambda s, *_: s >= 0,
        body,
        (steps - 1, empty, empty, columns),
        shape_invariants=(
            tf.TensorShape([]),
            tf.TensorShape([None, None, None]),
            tf.TensorShape([None, None, None]),
            tf.TensorShape(None),
        ),
    )
    return tf.transpose(columns.stack())  # columns[s, t] -> C[t, s]


def connectivity(arrays: dict[str, np.ndarray]) -> np.ndarray:
    """C [T, T] from a taped run's arrays: x, h0, c0, the weights, h, c and grad_h_direct."""
    keys = ("x", "h0", "c0", "kernel", "recurrent_kernel", "bias", "h", "c", "grad_h_direct")
    return _connectivity(*(arrays[key] for key in keys)).numpy()
