"""Every cell of a recurrent direction, time-major and probed: GRU, SimpleRNN, LSTM of any
activation (tanh/sigmoid LSTMs run on `lstm.lstm_sequence`, the native kernels).

Shapes: x [T, B, I], h0 [B, H], kernel [I, G·H], recurrent_kernel [H, G·H] with G gate blocks
(LSTM 4: i, f, g, o; GRU 3: z, r, h̃; SimpleRNN 1), bias [G·H] (GRU with reset_after: [2, G·H],
row 0 the input bias, row 1 the recurrent one). Keras's equations:

- GRU, reset_after: z = σ(x W_z + b_z + h U_z + β_z), r likewise, h̃ = act(x W_h + b_h +
  r ⊙ (h U_h + β_h)); without reset_after (bias [3H]): h̃ = act(x W_h + b_h + (r ⊙ h) U_h).
  h_t = z ⊙ h_{t-1} + (1 − z) ⊙ h̃. σ is `recurrent_activation`, act is `activation`.
- SimpleRNN: h_t = act(x W + h U + b).
- LSTM: the gates i, f, o = σ(·), g = act(·), c_t = f c + i g, h_t = o act(c_t).

Probes and masks as in lstm.py: `probe` [T, B, H] is zeros whose gradient is the total
dL/dh_t; a step where the mask [T, B] is 0 carries h (and c) over. A backward direction is x
and the mask reversed by the caller.

A GRU on the CPU in float32 whose gate is sigmoid or a hard sigmoid and whose candidate is
tanh runs on the native kernels (`kernels.gru_sequence`, gru_kernels.cc: the forward and its
BPTT one op each, the input projection x W + b one matmul before them); so does a SimpleRNN
of tanh, relu or sigmoid (`kernels.rnn_sequence`). Other GRUs and SimpleRNNs whose
activations have a closed-form slope (activations.py) run in while
loops with their own backward pass (`tf.custom_gradient`), as the LSTM's: the forward loop
writes h and the pre-activations per step, the factors the backward needs are computed from them
for all steps at once after it, so a backward step is a few multiplications, one concat and one
matmul on the critical path (GRU without reset_after: two); the input projection
x W + b is one matmul for all steps before the loop (TensorFlow differentiates it), the
recurrent weight gradients one matmul over all steps after it. Anything else runs in one
while loop TensorFlow differentiates (`generic_sequence`: TensorArray reads, never `x[t]`,
whose gradient is a full-size scatter per step). Each returns the gates' pre-activations, from
which `CellRun` holds the activations and their saturation for the gates panel.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from lstmviz.core.schema import GATE_SATURATION_DIAGNOSIS
from lstmviz.engine.cells.activations import (
    BOUNDED,
    SATURATION,
    Activation,
    activation,
    hand_differentiable,
)
from lstmviz.engine.cells.lstm import _columns, input_projection, lstm_sequence
from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import tf


@dataclass
class CellRun:
    """One direction's run: h (and an LSTM's c) [T, B, H], the gates' activations and whether
    each is saturated (float 0/1) [T, B, G·H], not differentiated: `saturated` by the gates
    panel's margin, `saturated_diagnosis` by the diagnosis's (activations.py); and the mask
    the cell ran with ([T, B] of 0/1, or None). All in processing order (a backwards run: the
    sequence read from its end), or indexed by input position where `input_order` (the LSTM
    kernels read a backwards sequence from its end themselves)."""

    h: tf.Tensor
    c: tf.Tensor | None
    gates: tf.Tensor
    saturated: tf.Tensor
    saturated_diagnosis: tf.Tensor
    mask: tf.Tensor | None = None
    input_order: bool = False


def cell_activations(cell: str, args: dict) -> list[Activation]:
    """The activation of each gate block of `cell` (LSTM i, f, g, o; GRU z, r, h̃; SimpleRNN h)
    from the layer's args (Keras's defaults when absent)."""
    act = activation(args.get("activation") or "tanh")
    if cell == "simple_rnn":
        return [act]
    gate = activation(args.get("recurrent_activation") or "sigmoid")
    return [gate, gate, act, gate] if cell == "lstm" else [gate, gate, act]


def fast_lstm(args: dict) -> bool:
    """Whether an LSTM's activations are the native kernels' (tanh, sigmoid)."""
    return (args.get("activation") or "tanh", args.get("recurrent_activation") or "sigmoid") == (
        "tanh", "sigmoid")  # fmt: skip


def needs_read_probe(cell: str, args: dict) -> bool:
    """Whether the direction's h-probe is read as zeros (the generic loop adds it to h_t); the
    hand-written loops never read it, and accept `kernels.unread_probes`."""
    if cell == "lstm":
        return not fast_lstm(args)
    return not hand_differentiable(*(a.name for a in cell_activations(cell, args)))


# Plain Python over Python values (no tensor-dependent branches): AutoGraph, which a caller's
# tf.function would otherwise apply to every function called here, only costs tracing time.
@tf.autograph.experimental.do_not_convert
def cell_sequence(cell: str, args: dict, x, h0, weights: dict, probes, mask=None,
                  backwards: bool = False, share: int = 1, c0=None) -> CellRun:  # fmt: skip
    """Run one direction of `cell` over x [T, B, I] from h0 (and an LSTM's c0 [B, H], h0 when
    None: zeros in model mode unless a state is handed on) with `weights` (kernel,
    recurrent_kernel, bias: tensors); `probes` (probe_h, probe_c) [T, B, H] (probe_c only for
    an LSTM), in the order the run returns its arrays in (`CellRun`); `mask` [T, B] 0/1 or
    None. x and the mask by input position; `backwards` reads them from the end (Keras's
    go_backwards). `share`: how many directions run at once (a Bidirectional's two), each on
    its share of the native kernels' threads."""
    kernel, recurrent, bias = weights["kernel"], weights["recurrent_kernel"], weights["bias"]
    c0 = h0 if c0 is None else c0
    acts = cell_activations(cell, args)
    if mask is not None:  # exactly 0 or 1 from here on, never differentiated
        mask = tf.stop_gradient(tf.cast(tf.not_equal(mask, tf.zeros_like(mask)), x.dtype))
    if cell == "lstm" and fast_lstm(args):
        h, c, gates = lstm_sequence(x, h0, c0, kernel, recurrent, bias, *probes, mask=mask,
                                    with_gates=True, reverse=backwards, share=share)  # fmt: skip
        return CellRun(h, c, gates, *saturations(acts, None, gates), mask, input_order=backwards)
    gru_after = cell == "gru" and len(bias.shape) == 2
    native_gru = cell == "gru" and kernels.gru_native(acts[0].name, acts[2].name, x.dtype)
    native_rnn = cell == "simple_rnn" and kernels.rnn_native(acts[0].name, x.dtype)
    if backwards and not (native_gru or native_rnn):  # the loops run on the sequence reversed
        x = tf.reverse(x, [0])
        mask = None if mask is None else tf.reverse(mask, [0])
    zx = input_projection(x, kernel, bias[0] if gru_after else bias)
    order = {"reverse": backwards, "share": share}  # the native kernels' StepOrder
    if native_gru:
        h, gates = kernels.gru_sequence(zx, h0, recurrent, bias[1] if gru_after else None,
                                       probes[0], mask, acts[0].name, acts[2].name, **order)
        return CellRun(h, None, gates, *saturations(acts, None, gates), mask, backwards)
    if native_rnn:
        h, gates = kernels.rnn_sequence(zx, h0, recurrent, probes[0], mask, acts[0].name, **order)
        return CellRun(h, None, gates, *saturations(acts, None, gates), mask, backwards)
    c = gates = None
    if cell == "lstm" or not hand_differentiable(*(a.name for a in acts)):
        step = _STEPS[cell](acts, recurrent, bias[1] if gru_after else None, args)
        h, c, pre = generic_sequence(step, zx, h0, probes, mask, lstm=cell == "lstm", c0=c0)
    elif cell == "gru" and gru_after:
        h, pre, gates = _gru_loop(acts[2].name, acts[0].name, True)(
            zx, h0, recurrent, bias[1], probes[0], *_mask_args(mask))
    elif cell == "gru":
        h, pre, gates = _gru_loop(acts[2].name, acts[0].name, False)(
            zx, h0, recurrent, probes[0], *_mask_args(mask))
    else:
        h, pre, gates = _simple_rnn_loop(acts[0].name)(zx, h0, recurrent, probes[0],
                                                       *_mask_args(mask))  # fmt: skip
    pre = tf.stop_gradient(pre)
    if gates is None:
        blocks = tf.split(pre, len(acts), axis=-1)
        gates = tf.concat([a.fn(b) for a, b in zip(acts, blocks, strict=True)], axis=-1)
    gates = tf.stop_gradient(gates)
    return CellRun(h, c, gates, *saturations(acts, pre, gates), mask)


def _mask_args(mask) -> tuple:
    return () if mask is None else (mask,)


def _saturation(acts: list[Activation], pre, gates, margin: float = SATURATION) -> tf.Tensor:
    """[T, B, G·H] float 0/1: each gate's saturation (activations.py, tanh and sigmoid within
    `margin` of a bound) from its pre-activation (None: tanh and sigmoid, told by their values)
    and activation."""
    ys = tf.split(gates, len(acts), axis=-1)
    xs = [None] * len(acts) if pre is None else tf.split(pre, len(acts), axis=-1)
    flags = [a.saturated(x, y, margin) for a, x, y in zip(acts, xs, ys, strict=True)]
    return tf.stop_gradient(tf.cast(tf.concat(flags, axis=-1), gates.dtype))


def saturations(acts: list[Activation], pre, gates) -> tuple[tf.Tensor, tf.Tensor]:
    """(the gates panel's, the diagnosis's) `_saturation` of the gates [T, B, G·H] each.
    When every gate is tanh or sigmoid, both from one |y − centre| over all the gates at once
    (a [..., G, H] view, each gate's centre and half-width from `activations.BOUNDED`): the
    same flags, in a third of the passes over [T, B, G·H] that cutting the gates apart takes."""
    if not all(a.name in BOUNDED for a in acts):
        return (_saturation(acts, pre, gates),
                _saturation(acts, pre, gates, GATE_SATURATION_DIAGNOSIS))  # fmt: skip
    shape = tf.shape(gates)
    blocks = tf.reshape(gates, tf.concat([shape[:-1], [len(acts), -1]], axis=0))  # [..., G, H]

    def per_gate(values):  # one value per gate -> [G, 1]
        return tf.constant(values, gates.dtype)[:, None]

    distance = tf.abs(blocks - per_gate([BOUNDED[a.name][0] for a in acts]))
    return tuple(
        tf.stop_gradient(tf.reshape(tf.cast(
            distance > per_gate([BOUNDED[a.name][1] - margin for a in acts]), gates.dtype),
            shape))
        for margin in (SATURATION, GATE_SATURATION_DIAGNOSIS)
    )  # fmt: skip


# One step of each cell for the generic loop: (zx_t [B, G·H], h, c) -> (h_t, c_t, pre [B, G·H]).
def _lstm_step(acts, recurrent, _, args) -> Callable:
    def step(zx, h, c):
        pre = zx + tf.matmul(h, recurrent)
        zi, zf, zg, zo = tf.split(pre, 4, axis=1)
        i, f, g, o = (a.fn(z) for a, z in zip(acts, (zi, zf, zg, zo), strict=True))
        c = f * c + i * g
        return o * acts[2].fn(c), c, pre

    return step


def _gru_step(acts, recurrent, recurrent_bias, args) -> Callable:
    gate, act = acts[0], acts[2]

    def step(zx, h, c):
        xz, xr, xh = tf.split(zx, 3, axis=1)
        if recurrent_bias is not None:  # reset_after: r multiplies h U_h + β_h
            mz, mr, mh = tf.split(tf.matmul(h, recurrent) + recurrent_bias, 3, axis=1)
            az, ar = xz + mz, xr + mr
            r = gate.fn(ar)
            ah = xh + r * mh
        else:
            u_zr, u_h = tf.split(recurrent, [2 * h.shape[1], h.shape[1]], axis=1)
            mz, mr = tf.split(tf.matmul(h, u_zr), 2, axis=1)
            az, ar = xz + mz, xr + mr
            r = gate.fn(ar)
            ah = xh + tf.matmul(r * h, u_h)
        z, hh = gate.fn(az), act.fn(ah)
        return z * h + (1.0 - z) * hh, c, tf.concat([az, ar, ah], axis=1)

    return step


def _simple_rnn_step(acts, recurrent, _, args) -> Callable:
    def step(zx, h, c):
        pre = zx + tf.matmul(h, recurrent)
        return acts[0].fn(pre), c, pre

    return step


_STEPS = {"lstm": _lstm_step, "gru": _gru_step, "simple_rnn": _simple_rnn_step}


def generic_sequence(step: Callable, zx, h0, probes, mask, lstm: bool = False, c0=None):
    """A while loop TensorFlow differentiates: zx [T, B, G·H] (the input projection), h0 [B, H]
    (an LSTM's c0, h0 when None), probes (probe_h, probe_c) added to h_t (c_t) as they leave step t,
    mask [T, B] 0/1 or None. Returns h [T, B, H], c [T, B, H] or None, pre [T, B, G·H]."""
    steps = tf.shape(zx)[0]

    def unstacked(value):
        return tf.TensorArray(value.dtype, size=steps).unstack(value)

    def array():
        return tf.TensorArray(zx.dtype, size=steps)

    zxs, probe_h = unstacked(zx), unstacked(probes[0])
    probe_c = unstacked(probes[1]) if lstm else None
    masks = unstacked(mask[:, :, None] > 0) if mask is not None else None

    def body(t, h, c, hs, cs, pres):
        h_new, c_new, pre = step(zxs.read(t), h, c)
        if masks is not None:
            ran = masks.read(t)
            h_new = tf.where(ran, h_new, h)
            c_new = tf.where(ran, c_new, c) if lstm else c
        h_new = h_new + probe_h.read(t)
        if lstm:
            c_new = c_new + probe_c.read(t)
        return t + 1, h_new, c_new, hs.write(t, h_new), cs.write(t, c_new), pres.write(t, pre)

    _, _, _, hs, cs, pres = tf.while_loop(
        lambda t, *_: t < steps, body, (0, h0, h0 if c0 is None else c0, array(), array(),
                                        array())
    )
    return hs.stack(), cs.stack() if lstm else None, pres.stack()


def _mask_factors(mask):
    """(ran bool, share, keep) [T, B, 1] from a mask [T, B] of 0/1."""
    return mask[:, :, None] > 0, mask[:, :, None], 1.0 - mask[:, :, None]


def _unstacked(value) -> tf.TensorArray:
    return tf.TensorArray(value.dtype, size=tf.shape(value)[0]).unstack(value)


def _forward_loop(step, zx, h0, mask):
    """The forward while loop of the hand-written cells: `step(zx_t, h)` -> (h_t, the row
    [B, ·] the backward needs); a masked step keeps h. Returns h [T+1, B, H] (h0 first) and
    the rows [T, B, ·]. Only the critical path is in the loop: whatever the backward
    needs beyond it is computed from the rows for all steps at once afterwards."""
    steps = tf.shape(zx)[0]
    zxs = _unstacked(zx)
    ran = None if mask is None else _unstacked(mask[:, :, None] > 0)

    def forward(t, h, hs, rows):
        h_new, row = step(zxs.read(t), h)
        if ran is not None:
            h_new = tf.where(ran.read(t), h_new, h)
        return t + 1, h_new, hs.write(t + 1, h_new), rows.write(t, row)

    _, _, hs, rows = tf.while_loop(
        lambda t, *_: t < steps,
        forward,
        (0, h0, tf.TensorArray(zx.dtype, size=steps + 1).write(0, h0),
         tf.TensorArray(zx.dtype, size=steps)),
    )  # fmt: skip
    return hs.stack(), rows.stack()


def _backward_loop(step, dh_direct, factors, h0, keep=None):
    """The backward while loop: from the last step to the first, dh = dh_direct[t] + the
    gradient from step t+1; `step(dh, factors_t)` -> (the gradient to h_{t-1} through the
    cell, the row [B, ·] to keep); `keep` [T, B, 1] (1 - mask) passes dh straight to h_{t-1}
    at masked steps. Returns dL/dh0, every dh [T, B, H] (the total dL/dh_t) and the rows."""
    steps = tf.shape(dh_direct)[0]
    directs, parts = _unstacked(dh_direct), _unstacked(factors)
    keeps = None if keep is None else _unstacked(keep)

    def backward(t, dh_next, dhs, rows):
        dh = directs.read(t) + dh_next
        dh_prev, row = step(dh, parts.read(t))
        if keeps is not None:
            dh_prev += keeps.read(t) * dh
        return t - 1, dh_prev, dhs.write(t, dh), rows.write(t, row)

    def array():
        return tf.TensorArray(dh_direct.dtype, size=steps)

    _, dh0, dhs, rows = tf.while_loop(
        lambda t, *_: t >= 0, backward, (steps - 1, tf.zeros_like(h0), array(), array())
    )
    return dh0, dhs.stack(), rows.stack()


@functools.cache
def _gru_loop(act_name: str, gate_name: str, reset_after: bool) -> Callable:
    """The GRU's hand-written loops for these activations. Called as
    f(zx [T, B, 3H], h0, recurrent_kernel [H, 3H], (recurrent_bias [3H] with reset_after),
    probe [T, B, H], (mask [T, B])) -> (h [T, B, H], pre and gates [T, B, 3H]: the gates'
    pre-activations and activations z, r, h̃, not differentiated)."""
    act, gate = activation(act_name), activation(gate_name)

    def loops(zx, h0, recurrent, recurrent_bias, probe, mask):
        hidden = h0.shape[1] or tf.shape(h0)[1]
        u_zr, u_h = recurrent[:, : 2 * hidden], recurrent[:, 2 * hidden :]

        def step(zx_t, h):
            """h_t and its row: the pre-activations az, ar, ah (and h U_h + β_h). z and r go
            through their activation together."""
            x_zr, xh = zx_t[:, : 2 * hidden], zx_t[:, 2 * hidden :]
            if reset_after:
                m = tf.matmul(h, recurrent) + recurrent_bias
                a_zr, mh = x_zr + m[:, : 2 * hidden], m[:, 2 * hidden :]
                zr = gate.fn(a_zr)
                ah = xh + zr[:, hidden:] * mh
                row = [a_zr, ah, mh]
            else:
                a_zr = x_zr + tf.matmul(h, u_zr)
                zr = gate.fn(a_zr)
                ah = xh + tf.matmul(zr[:, hidden:] * h, u_h)
                row = [a_zr, ah]
            z, hh = zr[:, :hidden], act.fn(ah)
            return hh + z * (h - hh), tf.concat(row, axis=1)

        h_all, rows = _forward_loop(step, zx, h0, mask)
        pre = rows[:, :, : 3 * hidden]
        h_prev = h_all[:-1]
        # What a backward step needs, for all steps at once (the incoming gradient aside):
        # dL/d(az) = dh·a, dL/d(ah) = dh·b, dL/d(ar) = dh·b·(r's factor), and z (with a mask:
        # m·z + 1 - m, the share of dh that passes straight to h_{t-1}; a, b times m).
        az, ar, ah = (pre[:, :, k * hidden : (k + 1) * hidden] for k in range(3))
        z, r, hh = gate.fn(az), gate.fn(ar), act.fn(ah)
        gates = tf.concat([z, r, hh], axis=2)  # the gates panel's activations
        a = (h_prev - hh) * gate.slope(az, z)
        b = (1.0 - z) * act.slope(ah, hh)
        if mask is not None:
            _, share, keep = _mask_factors(mask)
            a, b, z = a * share, b * share, z * share + keep
        if reset_after:  # r's factor: (h U_h + β_h)·σ'(ar)
            r_factor = rows[:, :, 3 * hidden :] * gate.slope(ar, r)
            factors = tf.concat([a, b * r_factor, b * r, z], axis=2)
        else:  # r's factor: h_{t-1}·σ'(ar), after dL/d(r ⊙ h) = dh·b·U_hᵀ
            r_factor = h_prev * gate.slope(ar, r)
            factors = tf.concat([a, b, r_factor, r, z], axis=2)

        def backward(dh_direct, _dpre, _dgates):
            """BPTT; the gradients of zx, h0, the recurrent kernel (and bias), the probe (the
            total dL/dh_t) and None for the mask."""
            u_t = tf.transpose(recurrent if reset_after else u_zr)
            u_h_t = None if reset_after else tf.transpose(u_h)

            def step_after(dh, packed):
                scale, z_t = packed[:, : 3 * hidden], packed[:, 3 * hidden :]
                dm = tf.concat([dh, dh, dh], axis=1) * scale  # d(h U + β) = [gz, gr, gh·r]
                return dh * z_t + tf.matmul(dm, u_t), dm

            def step_before(dh, packed):
                a_t, b_t, rf_t, r_t, z_t = _columns(packed, hidden, 5)
                gz, gh = dh * a_t, dh * b_t
                drh = tf.matmul(gh, u_h_t)  # dL/d(r ⊙ h_{t-1})
                dzr = tf.concat([gz, drh * rf_t], axis=1)
                return dh * z_t + drh * r_t + tf.matmul(dzr, u_t), tf.concat([dzr, gh], 1)

            # (z already holds the share of dh a masked step passes on)
            dh0, dh, rows_back = _backward_loop(step_after if reset_after else step_before,
                                                dh_direct, factors, h0)  # fmt: skip
            if reset_after:
                dm = rows_back  # [gz, gr, gh·r]; dzx's last block is gh = dh·b
                dzx = tf.concat([dm[:, :, : 2 * hidden], dh * b], axis=2)
                grads = (dzx, dh0, tf.einsum("tbh,tbg->hg", h_prev, dm),
                         tf.reduce_sum(dm, [0, 1]), dh)  # fmt: skip
            else:
                dzx = rows_back  # [gz, gr, gh]
                du_zr = tf.einsum("tbh,tbg->hg", h_prev, dzx[:, :, : 2 * hidden])
                du_h = tf.einsum("tbh,tbg->hg", r * h_prev, dzx[:, :, 2 * hidden :])
                grads = (dzx, dh0, tf.concat([du_zr, du_h], axis=1), dh)
            return grads if mask is None else (*grads, None)

        return (h_all[1:], pre, gates), backward

    if reset_after:

        @tf.custom_gradient
        def run(zx, h0, recurrent, recurrent_bias, probe, mask=None):
            return loops(zx, h0, recurrent, recurrent_bias, probe, mask)

    else:

        @tf.custom_gradient
        def run(zx, h0, recurrent, probe, mask=None):
            return loops(zx, h0, recurrent, None, probe, mask)

    return run


@functools.cache
def _simple_rnn_loop(act_name: str) -> Callable:
    """SimpleRNN's hand-written loops for this activation: f(zx [T, B, H], h0, recurrent_kernel
    [H, H], probe [T, B, H], (mask [T, B])) -> (h [T, B, H], pre and act(pre) [T, B, H])."""
    act = activation(act_name)

    @tf.custom_gradient
    def run(zx, h0, recurrent, probe, mask=None):
        def step(zx_t, h):
            pre = zx_t + tf.matmul(h, recurrent)
            return act.fn(pre), pre

        h_all, pre = _forward_loop(step, zx, h0, mask)
        gates = act.fn(pre)
        slope = act.slope(pre, gates)  # act' at every step (times m_t with a mask)
        keep = None
        if mask is not None:
            _, share, keep = _mask_factors(mask)
            slope *= share

        def backward(dh_direct, _dpre, _dgates):
            u_t = tf.transpose(recurrent)

            def step(dh, slope_t):
                g = dh * slope_t
                return tf.matmul(g, u_t), g

            dh0, dh, g = _backward_loop(step, dh_direct, slope, h0, keep)
            grads = (g, dh0, tf.einsum("tbh,tbg->hg", h_all[:-1], g), dh)
            return grads if mask is None else (*grads, None)

        return (h_all[1:], pre, gates), backward

    return run
