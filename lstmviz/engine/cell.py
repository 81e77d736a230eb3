"""The one LSTM cell every mode uses, in Keras's layout, and the while-loop over a sequence.

Shapes: x [T, B, I], kernel [I, 4H], recurrent_kernel [H, 4H], bias [4H], h and c [B, H].
Gate order i, f, c (candidate), o.

The probe trick: `probe_h`/`probe_c` [T, B, H] are zeros added to c_t and h_t inside the loop.
The gradient of a loss with respect to a probe is the *total* derivative dL/dh_t (or dL/dc_t)
through the recurrence, which is what BPTT calls delta_t.

`lstm_sequence` carries its own backward pass (`tf.custom_gradient`): a reverse while-loop that
is exactly BPTT, with one small matmul per step; the weight gradients are then three large
matmuls over all steps at once. GradientTape sees an ordinary differentiable function: gradients
reach the probes, the initial state, x, and whatever produced the weights. Intermediates move
through TensorArrays or per-step slices of precomputed tensors, never through a gradient of
`tensor[t]` (a full-size scatter per step, quadratic in T).
"""

from __future__ import annotations

from lstmviz.engine.tfload import tf


def input_projection(x: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """x [T, B, I] -> x·kernel + bias [T, B, 4H], one matmul for all timesteps."""
    return tf.einsum("tbi,ig->tbg", x, kernel) + bias


def lstm_step(
    zx: tf.Tensor, h: tf.Tensor, c: tf.Tensor, recurrent_kernel: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """One step from the projected input zx [B, 4H] and the state (h, c) [B, H].

    Returns h_t, c_t, the sigmoid of all four gate pre-activations s [B, 4H] (the candidate's
    quarter unused) and the candidate g = tanh(.) [B, H].
    """
    z = zx + tf.matmul(h, recurrent_kernel)
    hidden = tf.shape(h)[1]
    s = tf.sigmoid(z)
    g = tf.tanh(z[:, 2 * hidden : 3 * hidden])
    i, f, _, o = tf.split(s, 4, axis=-1)
    c = f * c + i * g
    h = o * tf.tanh(c)
    return h, c, s, g


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
    produced them. With probes (both or neither) dL/dprobe is the total gradient at each state.
    """
    if probe_h is None:
        probe_h = probe_c = tf.zeros_like(tf.broadcast_to(h0, [tf.shape(x)[0], *h0.shape]))
    return _lstm_sequence(x, h0, c0, kernel, recurrent_kernel, bias, probe_h, probe_c)


@tf.custom_gradient
def _lstm_sequence(x, h0, c0, kernel, recurrent_kernel, bias, probe_h, probe_c):
    steps = tf.shape(x)[0]
    zx = input_projection(x, kernel, bias)
    hs, cs, ss, gs = (tf.TensorArray(x.dtype, size=steps) for _ in range(4))

    def forward(t, h, c, hs, cs, ss, gs):
        h, c, s, g = lstm_step(zx[t], h, c, recurrent_kernel)
        c = c + probe_c[t]
        h = h + probe_h[t]
        return t + 1, h, c, hs.write(t, h), cs.write(t, c), ss.write(t, s), gs.write(t, g)

    _, _, _, hs, cs, ss, gs = tf.while_loop(
        lambda t, *_: t < steps, forward, (tf.constant(0), h0, c0, hs, cs, ss, gs)
    )
    h_all, c_all, s_all, g_all = hs.stack(), cs.stack(), ss.stack(), gs.stack()

    def backward(dh_direct, dc_direct):
        """BPTT: dh_t = direct_t + dz_{t+1}·Uᵀ, dc_t = dh_t·o_t·(1-tanh²c_t) + dc_{t+1}·f_{t+1}.

        Returns gradients for (x, h0, c0, kernel, recurrent_kernel, bias, probe_h, probe_c);
        those for the probes are the total dL/dh_t and dL/dc_t.
        """
        c_prev_all = tf.concat([c0[None], c_all[:-1]], axis=0)
        dhs, dcs, dzs = (tf.TensorArray(x.dtype, size=steps) for _ in range(3))

        def step(t, dh_next, dc_next, dhs, dcs, dzs):
            i, f, _, o = tf.split(s_all[t], 4, axis=-1)
            g, c, c_prev = g_all[t], c_all[t], c_prev_all[t]
            tanh_c = tf.tanh(c)
            dh = dh_direct[t] + dh_next
            dc = dc_direct[t] + dc_next + dh * o * (1.0 - tanh_c * tanh_c)
            dz = tf.concat(
                [
                    dc * g * i * (1.0 - i),
                    dc * c_prev * f * (1.0 - f),
                    dc * i * (1.0 - g * g),
                    dh * tanh_c * o * (1.0 - o),
                ],
                axis=-1,
            )
            dh_prev = tf.matmul(dz, recurrent_kernel, transpose_b=True)
            return t - 1, dh_prev, dc * f, dhs.write(t, dh), dcs.write(t, dc), dzs.write(t, dz)

        _, dh0, dc0, dhs, dcs, dzs = tf.while_loop(
            lambda t, *_: t >= 0,
            step,
            (steps - 1, tf.zeros_like(h0), tf.zeros_like(c0), dhs, dcs, dzs),
        )
        dz_all = dzs.stack()
        h_prev_all = tf.concat([h0[None], h_all[:-1]], axis=0)
        return (
            tf.einsum("tbg,ig->tbi", dz_all, kernel),
            dh0,
            dc0,
            tf.einsum("tbi,tbg->ig", x, dz_all),
            tf.einsum("tbh,tbg->hg", h_prev_all, dz_all),
            tf.reduce_sum(dz_all, axis=[0, 1]),
            dhs.stack(),
            dcs.stack(),
        )

    return (h_all, c_all), backward
