"""The one LSTM cell every mode uses, in Keras's layout, and the loop over a sequence.

Shapes: x [T, B, I], kernel [I, 4H], recurrent_kernel [H, 4H], bias [4H], h and c [B, H].
Gate order i, f, c (candidate), o.

The probe trick: `probe_h`/`probe_c` [T, B, H] are zeros added to c_t and h_t inside the loop.
The gradient of a loss with respect to a probe is the *total* derivative dL/dh_t (or dL/dc_t)
through the recurrence, which is what BPTT calls delta_t.

Masking, as Keras does it: with a mask [T, B] of 0/1, a step where m_t[b] = 0 carries the state
over unchanged and a step where it is 1 runs the cell. With ĥ_t, ĉ_t = cell(x_t, h_{t-1},
c_{t-1}): c_t = m_t·ĉ_t + (1-m_t)·c_{t-1} + probe_c[t], h_t = m_t·ĥ_t + (1-m_t)·h_{t-1} +
probe_h[t]. So the probes sit at the states as they leave step t, and their gradients are the
total dL/dh_t, dL/dc_t of those states. What a layer *outputs* at masked steps (the carried h or
zeros) is the caller's choice; a backward direction (`go_backwards`) is x and the mask reversed
in time by the caller.

`lstm_sequence` runs the native CPU kernels when they are built (`kernels.py`: the forward and its
BPTT as one op each), and otherwise the TensorFlow while-loops below, which compute the same;
tests/engine/test_cell_backends.py checks both against NumPy BPTT, tests/engine/test_mask.py with
masks (and against Keras's masked LSTM).

The while-loop version carries its own backward pass (`tf.custom_gradient`): a reverse
while-loop that is exactly BPTT. The forward loop stores, per step, the factors the backward
needs (all that does not depend on the incoming gradient) packed in one tensor, so a backward
step is a few multiplications, one concat and one matmul on the critical path; the weight
gradients accumulate in the same loop. Intermediates move through TensorArrays (writes and reads
share buffers); the custom backward never differentiates a read or a `tensor[t]` slice (whose
gradient is a full-size scatter per step, quadratic in T). Why, and how to measure it:
docs/performance.md and bench/bench.py (LSTMVIZ_NATIVE=0 runs these loops).
"""

from __future__ import annotations

from collections.abc import Callable

from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import tf


def input_projection(x: tf.Tensor, kernel: tf.Tensor, bias: tf.Tensor) -> tf.Tensor:
    """x [T, B, I] -> x·kernel + bias [T, B, G·H] (a cell's G gate blocks of H units), one
    matmul for all timesteps."""
    return tf.einsum("tbi,ig->tbg", x, kernel) + bias


def _columns(a: tf.Tensor, width, count: int) -> list[tf.Tensor]:
    """a [B, count·width] -> count blocks [B, width] by strided slices. On the loops' critical
    path these cost less than tf.split (bench/bench.py, LSTMVIZ_NATIVE=0), but differentiating
    them costs more (a full-size scatter per block), so only code that is never differentiated
    uses them."""
    return [a[:, k * width : (k + 1) * width] for k in range(count)]


def _split_gates(z: tf.Tensor) -> list[tf.Tensor]:
    """z [B, 4H] -> the four gate blocks [B, H]; its gradient is one concat."""
    return tf.split(z, 4, axis=1)


def lstm_step(
    zx: tf.Tensor,
    h: tf.Tensor,
    c: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    gates: Callable[[tf.Tensor], list[tf.Tensor]] = _split_gates,
) -> tuple[tf.Tensor, tf.Tensor, tuple[tf.Tensor, ...], tf.Tensor]:
    """One step from the projected input zx [B, 4H] and the state (h, c) [B, H].

    Returns h_t, c_t, the gate activations (i, f, g, o) [B, H] each (g = tanh of the
    candidate, the others sigmoids) and tanh(c_t). `gates` cuts z [B, 4H] into its four
    blocks (tf.split by default, the cheap one to differentiate).
    """
    zi, zf, zg, zo = gates(zx + tf.matmul(h, recurrent_kernel))
    i, f, g, o = tf.sigmoid(zi), tf.sigmoid(zf), tf.tanh(zg), tf.sigmoid(zo)
    c = f * c + i * g
    tanh_c = tf.tanh(c)
    return o * tanh_c, c, (i, f, g, o), tanh_c


def lstm_sequence(
    x: tf.Tensor,
    h0: tf.Tensor,
    c0: tf.Tensor,
    kernel: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    bias: tf.Tensor,
    probe_h: tf.Tensor | None = None,
    probe_c: tf.Tensor | None = None,
    mask: tf.Tensor | None = None,
    *,
    with_gates: bool = False,
    reverse: bool = False,
    share: int = 1,
) -> tuple[tf.Tensor, ...]:
    """Run the cell over x [T, B, I]; return every h_t and c_t, [T, B, H].

    The last state is `h[-1], c[-1]`. Weights enter as tensors, so gradients reach whatever
    produced them. With probes (both or neither) dL/dprobe is the total gradient at each state.
    `mask` [T, B], bool or 0/1 in x's dtype, carries the state over where it is 0 (see the
    module docstring); None runs every step. Nothing is differentiated with respect to it.
    With `with_gates`, also the gate activations [T, B, 4H]: i, f, g, o as the cell computed
    them at each step from x_t and h_{t-1} (at masked steps too), not differentiated; the
    native kernels have them anyway, the while-loops compute them after the loop.
    With `reverse` the cell reads x from its last step to its first (Keras's go_backwards),
    every array (x, the probes and the mask in, h, c and the gates out) indexed by input
    position: the native kernels read them so, the while-loops run on reversed copies.
    `share`: how many directions run at once (the native kernels' `share`).
    """
    on_native = kernels.library() is not None and x.dtype == tf.float32
    unread = [kernels.unread(probe) for probe in (probe_h, probe_c)]
    if any(unread) and not (on_native and all(unread)):
        raise ValueError("probes from kernels.unread_probes are for the native kernels, both")
    read_probes = not all(unread)
    if probe_h is None and on_native:
        probe_h, probe_c = kernels.unread_probes(x, h0)
        read_probes = False
    elif probe_h is None:
        probe_h = probe_c = tf.zeros_like(tf.broadcast_to(h0, [tf.shape(x)[0], *h0.shape]))
    masks = []
    if mask is not None:  # exactly 0 or 1 from here on: nonzero means the step runs
        # (not_equal, not a cast to bool: casting numbers to bool logs a oneDNN error line on
        # some CPUs)
        mask = tf.stop_gradient(tf.cast(tf.not_equal(mask, tf.zeros_like(mask)), x.dtype))
        tf.debugging.assert_equal(
            tf.shape(mask), tf.shape(x)[:2], message="the mask must be [T, B] as x is [T, B, I]"
        )
        masks.append(mask)
    if on_native:
        args = (x, h0, c0, kernel, recurrent_kernel, bias, probe_h, probe_c, *masks)
        return kernels.sequence(*args, with_gates=with_gates, read_probes=read_probes,
                               reverse=reverse, share=share)  # fmt: skip

    def order(value):  # between input position and processing order
        return tf.reverse(value, [0]) if reverse else value

    x, probe_h, probe_c, *masks = map(order, (x, probe_h, probe_c, *masks))
    h, c = _lstm_sequence(x, h0, c0, kernel, recurrent_kernel, bias, probe_h, probe_c, *masks)
    if not with_gates:
        return order(h), order(c)
    gates = _gate_activations(x, h, h0, kernel, recurrent_kernel, bias)
    return order(h), order(c), order(gates)


def _gate_activations(x, h, h0, kernel, recurrent_kernel, bias) -> tf.Tensor:
    """[T, B, 4H]: the gate activations i, f, g, o of every step, from x_t and h_{t-1} (h0
    first), not differentiated."""
    h_prev = tf.concat([h0[None], h[:-1]], axis=0)
    z = input_projection(x, kernel, bias) + tf.einsum("tbh,hg->tbg", h_prev, recurrent_kernel)
    zi, zf, zg, zo = tf.split(z, 4, axis=-1)
    gates = tf.concat([tf.sigmoid(zi), tf.sigmoid(zf), tf.tanh(zg), tf.sigmoid(zo)], axis=-1)
    return tf.stop_gradient(gates)


@tf.custom_gradient
def _lstm_sequence(x, h0, c0, kernel, recurrent_kernel, bias, probe_h, probe_c, mask=None):
    """The while-loops: `lstm_sequence`'s arguments, the mask absent or [T, B] of 0/1 in x's
    dtype. Without a mask the loops hold no mask arithmetic at all."""
    steps, batch = tf.shape(x)[0], tf.shape(x)[1]
    if mask is not None:  # [T, B, 1], to broadcast over units
        ran, share, keep = mask[:, :, None] > 0, mask[:, :, None], 1.0 - mask[:, :, None]
    # The bias rides along as a row of the kernel against a column of ones: x1·k1 = x·W + b,
    # and x1ᵀ·dz gives the kernel and bias gradients in one matmul.
    x1 = tf.concat([x, tf.ones([steps, batch, 1], x.dtype)], axis=2)  # [T, B, I+1]
    k1 = tf.concat([kernel, bias[None]], axis=0)  # [I+1, 4H]

    def array(size=steps):
        return tf.TensorArray(x.dtype, size=size)

    hidden = h0.shape[1] or tf.shape(h0)[1]  # static when the caller fixed H

    # hs[t], cs[t] hold the state *before* step t (index 0: h0, c0), so hs[1:] is h_all.
    # factors[t] [B, 6H] packs what a backward step needs and the incoming gradient does not
    # change: the dz/dc (dz/dh for the output gate) of each gate, g·i(1-i), c_prev·f(1-f),
    # i(1-g²), tanh(c)·o(1-o), then f and dc/dh = o(1-tanh²c). One write and one read per step
    # instead of six of each is most of what a step saves (bench/bench.py). With a mask
    # they are multiplied by m_t, the cell's share of the gradient (none at masked steps).
    def forward(t, h, c, hs, cs, factors):
        h_prev, c_prev = h, c
        h, c, (i, f, g, o), tanh_c = lstm_step(
            tf.matmul(x1[t], k1), h, c, recurrent_kernel, lambda z: _columns(z, hidden, 4)
        )
        if mask is not None:  # a masked step passes on the state it was given
            ran_t = ran[t]
            h, c = tf.where(ran_t, h, h_prev), tf.where(ran_t, c, c_prev)
        c = c + probe_c[t]
        h = h + probe_h[t]
        packed = tf.concat(
            [
                g * i * (1.0 - i),
                c_prev * f * (1.0 - f),
                i * (1.0 - g * g),
                tanh_c * o * (1.0 - o),
                f,
                o * (1.0 - tanh_c * tanh_c),
            ],
            axis=1,
        )
        if mask is not None:
            packed *= share[t]
        return t + 1, h, c, hs.write(t + 1, h), cs.write(t + 1, c), factors.write(t, packed)

    _, _, _, hs, cs, factors = tf.while_loop(
        lambda t, *_: t < steps,
        forward,
        (0, h0, c0, array(steps + 1).write(0, h0), array(steps + 1).write(0, c0), array()),
    )
    h_all, c_all = hs.stack(), cs.stack()  # [T+1, B, H], initial state first

    def backward(dh_direct, dc_direct):
        """BPTT: dh_t = direct_t + dz_{t+1}·Uᵀ, dc_t = dh_t·o_t·(1-tanh²c_t) + dc_{t+1}·f_{t+1}.

        With a mask the cell gets m_t·dh_t, m_t·dc_t (the factors hold m_t) and the carried
        state passes (1-m_t)·dh_t and (1-m_t)·a_t straight to step t-1, where a_t is dL/dc_t
        other than through h_t (dc_t = a_t + m_t·dh_t·o_t·(1-tanh²ĉ_t)).

        Returns gradients for (x, h0, c0, kernel, recurrent_kernel, bias, probe_h, probe_c,
        and None for the mask when there is one); those for the probes are the total dL/dh_t
        and dL/dc_t.
        """
        u_t = tf.transpose(recurrent_kernel)  # [4H, H]: a plain matmul is faster than transpose_b

        def step(t, dh_next, dc_next, dk1, du, dhs, dcs, dzs):
            packed = factors.read(t)
            dz_dc, (f, dc_dh) = (
                packed[:, : 4 * hidden],
                _columns(packed[:, 4 * hidden :], hidden, 2),
            )
            dh = dh_direct[t] + dh_next
            carried = dc_direct[t] + dc_next  # a_t
            dc = carried + dh * dc_dh
            dz = tf.concat([dc, dc, dc, dh], axis=1) * dz_dc
            dh_next, dc_next = tf.matmul(dz, u_t), dc * f
            if mask is not None:
                keep_t = keep[t]
                dh_next += keep_t * dh
                dc_next += keep_t * carried
            dk1 += tf.matmul(x1[t], dz, transpose_a=True)
            du += tf.matmul(hs.read(t), dz, transpose_a=True)
            return (
                t - 1,
                dh_next,
                dc_next,
                dk1,
                du,
                dhs.write(t, dh),
                dcs.write(t, dc),
                dzs.write(t, dz),
            )

        _, dh0, dc0, dk1, du, dhs, dcs, dzs = tf.while_loop(
            lambda t, *_: t >= 0,
            step,
            (
                steps - 1,
                tf.zeros_like(h0),
                tf.zeros_like(c0),
                tf.zeros_like(k1),
                tf.zeros_like(recurrent_kernel),
                array(),
                array(),
                array(),
            ),
        )
        # Only when a caller asks for dL/dx (pruned from compiled graphs otherwise).
        dx = tf.einsum("tbg,ig->tbi", dzs.stack(), kernel)
        grads = (dx, dh0, dc0, dk1[:-1], du, dk1[-1], dhs.stack(), dcs.stack())
        return grads if mask is None else (*grads, None)

    return (h_all[1:], c_all[1:]), backward
