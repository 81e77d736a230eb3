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
steps at batch B, memory like T·B·H, never T²·B·H; `tape.jacobian` of the T losses with pfor
is slower and holds the whole [T, T, B, H] Jacobian (bench/bench.py --modes connectivity).

Stopping: a long map (T in the thousands: minutes) runs in chunks of consecutive steps s, the
loop's carried deltas handed from one chunk to the next, each chunk about CHUNK_SECONDS of
work (paced by the time the previous ones took), and `cancelled()` is polled between chunks.
Every step runs the same operations on the same tensors whatever the chunks, so the map does
not depend on them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from lstmviz.engine.cells.lstm import input_projection, lstm_step
from lstmviz.engine.quiet_tensorflow import tf

CHUNK_SECONDS = 0.1  # the work between two polls of `cancelled`
FIRST_CHUNK = 4  # steps in the first chunk (it also traces the function: no pace known yet)

_SPEC = tf.TensorSpec
_MATRIX = _SPEC([None, None], tf.float32)
_SEQUENCE = _SPEC([None, None, None], tf.float32)


@tf.function(
    input_signature=(
        _SEQUENCE,  # x [T, B, I]
        _MATRIX,  # kernel [I, 4H]
        _SPEC([None], tf.float32),  # bias [4H]
    ),
    reduce_retracing=True,
)
def _projection(x, kernel, bias):
    return input_projection(x, kernel, bias)


@tf.function(
    input_signature=(
        _SEQUENCE,  # zx [n, B, 4H]: the projected inputs of steps s = lo .. lo+n-1
        _SEQUENCE,  # h_prev [n, B, H]: the states h_{s-1} those steps start from (h0 at s = 0)
        _SEQUENCE,  # c_prev [n, B, H]
        _SEQUENCE,  # direct [n, B, H]: ∂L_s/∂h_s
        _MATRIX,  # recurrent_kernel [H, 4H]
        _SEQUENCE,  # gh [T-lo-n, B, H]: dL_t/dh_{lo+n-1} through step lo+n, t = lo+n .. T-1
        _SEQUENCE,  # gc [T-lo-n, B, H]: the same for c
    ),
    reduce_retracing=True,
)
def _chunk(zx, h_prev, c_prev, direct, recurrent_kernel, gh, gc):
    """Steps s = lo+n-1 down to lo. Returns gh, gc [T-lo, B, H] (dL_t/dh_{lo-1}, dL_t/dc_{lo-1}
    through step lo, t = lo .. T-1: the next chunk's input) and columns [n, T-lo] (column
    lo+k of C, rows lo .. T-1)."""
    count, batch, hidden = tf.shape(zx)[0], tf.shape(zx)[1], tf.shape(zx)[2] // 4
    width = count + tf.shape(gh)[0]  # T - lo

    def unstack(values):
        return tf.TensorArray(tf.float32, size=count).unstack(values)

    zx, h_prev, c_prev, direct = (unstack(v) for v in (zx, h_prev, c_prev, direct))
    columns = tf.TensorArray(tf.float32, size=count)

    def body(k, gh, gc, columns):
        # gh, gc [T-1-s, B, H]: dL_t/dh_s, dL_t/dc_s through step s+1, for t = s+1 .. T-1.
        gh = tf.concat([direct.read(k)[None], gh], 0)  # rows t = s .. T-1
        gc = tf.concat([tf.zeros([1, batch, hidden]), gc], 0)
        # in float64: float32 squares of the vanishing entries (< 1e-19) would flush to zero
        wide = tf.cast(gh, tf.float64)
        norms = tf.cast(tf.sqrt(tf.reduce_sum(tf.square(wide), axis=[1, 2])), tf.float32)
        columns = columns.write(k, tf.concat([tf.zeros([k]), norms], 0))
        rows = width - k
        h_in, c_in = tf.tile(h_prev.read(k), [rows, 1]), tf.tile(c_prev.read(k), [rows, 1])
        with tf.GradientTape() as tape:
            tape.watch([h_in, c_in])
            h_out, c_out, _, _ = lstm_step(
                tf.tile(zx.read(k), [rows, 1]), h_in, c_in, recurrent_kernel
            )
        flat = [tf.reshape(g, [rows * batch, hidden]) for g in (gh, gc)]
        gh, gc = tape.gradient([h_out, c_out], [h_in, c_in], output_gradients=flat)
        shape = [rows, batch, hidden]
        return k - 1, tf.reshape(gh, shape), tf.reshape(gc, shape), columns

    _, gh, gc, columns = tf.while_loop(
        lambda k, *_: k >= 0,
        body,
        (count - 1, gh, gc, columns),
        shape_invariants=(
            tf.TensorShape([]),
            tf.TensorShape([None, None, None]),
            tf.TensorShape([None, None, None]),
            tf.TensorShape(None),
        ),
    )
    return gh, gc, columns.stack()


def connectivity(
    arrays: dict[str, np.ndarray], cancelled: Callable[[], bool] = bool
) -> np.ndarray | None:
    """C [T, T] from a taped run's arrays: x, h0, c0, the weights, h, c and grad_h_direct.
    None when `cancelled()` turned true (polled between chunks of about CHUNK_SECONDS)."""
    h, direct = arrays["h"], arrays["grad_h_direct"]
    steps, batch, hidden = h.shape
    zx = _projection(arrays["x"], arrays["kernel"], arrays["bias"])
    h_prev = np.concatenate([arrays["h0"][None], h[:-1]])
    c_prev = np.concatenate([arrays["c0"][None], arrays["c"][:-1]])
    result = np.zeros((steps, steps), np.float32)
    gh = gc = tf.zeros([0, batch, hidden])
    high, count = steps, FIRST_CHUNK
    while high > 0:
        if cancelled():
            return None
        low = max(high - count, 0)
        start = time.perf_counter()
        gh, gc, columns = _chunk(zx[low:high], h_prev[low:high], c_prev[low:high],
                                 direct[low:high], arrays["recurrent_kernel"], gh, gc)  # fmt: skip
        result[low:, low:high] = columns.numpy().T
        # step s backpropagates T-s rows: pace the next chunk by this one's rows per second
        # (the latest: a row costs more as the tiles grow, and the machine may get busier)
        seconds = max(time.perf_counter() - start, 1e-6)
        rate = _rows(steps, low, high) / seconds
        high, count = low, _steps_for(rate * CHUNK_SECONDS, steps, low)
    return result


def _rows(steps: int, low: int, high: int) -> int:
    """Σ (T - s) over s = low .. high-1: the rows steps low .. high-1 backpropagate."""
    return (high - low) * (2 * steps - low - high + 1) // 2


def _steps_for(budget: float, steps: int, high: int) -> int:
    """How many steps below `high` (s = high-1, high-2, …) backpropagate about `budget` rows
    (at least one)."""
    count = 1
    while count < high and _rows(steps, high - count - 1, high) <= budget:
        count += 1
    return count
