"""The one LSTM cell every mode uses, in Keras's layout, and the while-loop over a sequence.

Shapes: x [T, B, I], kernel [I, 4H], recurrent_kernel [H, 4H], bias [4H], h and c [B, H].
Gate order i, f, c (candidate), o.

The probe trick: `probe_h`/`probe_c` [T, B, H] are zeros added to c_t and h_t inside the loop.
The gradient of a loss with respect to a probe is the *total* derivative dL/dh_t (or dL/dc_t)
through the recurrence, which is what BPTT calls delta_t. They are read through a TensorArray:
slicing `probe[t]` inside the loop makes the backward pass quadratic in T.
"""

from __future__ import annotations

from lstmviz.engine.tfload import tf


def input_projection(x: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """x [T, B, I] -> x·kernel + bias [T, B, 4H], one matmul for all timesteps."""
    return tf.einsum("tbi,ig->tbg", x, kernel) + bias


def lstm_step(
    zx: tf.Tensor,
    h: tf.Tensor,
    c: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    probe_h: tf.Tensor | None = None,
    probe_c: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """One step from the projected input zx [B, 4H] and the state (h, c) [B, H]."""
    z = zx + tf.matmul(h, recurrent_kernel)
    i, f, g, o = tf.split(z, 4, axis=-1)
    c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
    if probe_c is not None:
        c = c + probe_c
    h = tf.sigmoid(o) * tf.tanh(c)
    if probe_h is not None:
        h = h + probe_h
    return h, c


def lstm_sequence(
    x: tf.Tensor,
    h0: tf.Tensor,
    c0: tf.Tensor,
    kernel: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    bias: tf.Tensor,
    probe_h: tf.Tensor | None = None,
    probe_c: tf.Tensor | None = None,
) -> tuple[tf.Tensor, tf.Tensor]:
    """Run the cell over x [T, B, I] with tf.while_loop; return every h_t and c_t, [T, B, H].

    The last state is `h[-1], c[-1]`. Weights enter as tensors, so gradients reach whatever
    produced them. With probes (both or neither), dL/dprobe is the total gradient at each state.
    """
    steps = tf.shape(x)[0]
    zx = tf.TensorArray(x.dtype, size=steps).unstack(input_projection(x, kernel, bias))
    probes = None
    if probe_h is not None:
        probes = (
            tf.TensorArray(x.dtype, size=steps).unstack(probe_h),
            tf.TensorArray(x.dtype, size=steps).unstack(probe_c),
        )
    hs = tf.TensorArray(x.dtype, size=steps)
    cs = tf.TensorArray(x.dtype, size=steps)

    def body(t, h, c, hs, cs):
        ph, pc = (probes[0].read(t), probes[1].read(t)) if probes else (None, None)
        h, c = lstm_step(zx.read(t), h, c, recurrent_kernel, ph, pc)
        return t + 1, h, c, hs.write(t, h), cs.write(t, c)

    _, _, _, hs, cs = tf.while_loop(lambda t, *_: t < steps, body, (tf.constant(0), h0, c0, hs, cs))
    return hs.stack(), cs.stack()
