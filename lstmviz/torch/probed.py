"""The backward recurrences of one recorded PyTorch recurrent call, in TensorFlow, for a call
PyTorch's own op ran (float64, no native library, another device; `fused` runs the others).

Given a `capture.Call` (the module's input, initial state and weights in Keras's layout) and the
gradient its outputs get — the direct ∂L/∂output [T, B, D·H], ∂L/∂h_n and ∂L/∂c_n [L·D, B, H]
PyTorch left there, and the chain's: dL/dh_0, dL/dc_0 of the later call of the same layer that
continues this one's state — `call_gradients` runs the module's layers again in lstmviz's
cells, each direction probed (`engine.cells.lstm`), on one tape, and differentiates the surrogate

    Σ output·∂L/∂output + Σ h_n·(∂L/∂h_n + chain h) + Σ c_n·(∂L/∂c_n + chain c)

— the vector-Jacobian product of the module with the whole cotangent, so every gradient below
equals the true loss's. Per direction (layer-major, forward first) it gives the model-mode
arrays (`engine.modes.model`'s names after `layer{k}_`; `grad_h_direct` without the chain's part:
that is the recurrence going on), `dx`: dL/d of the module's input [T, B, I], and dL/dh_0,
dL/dc_0 [L·D, B, H]. h_n is each sequence's state after its last step that ran (a mask [T, B]
marks the steps of sequences shorter than T; the backward direction reads each sequence from
its own end, as PyTorch's packed sequences do: reversed in time, its padding comes first and
carries the initial state over).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from lstmviz.engine.autodiff.forward import Direction, gate_activity
from lstmviz.engine.autodiff.gradients import (
    gradient_sources,
    graph_norms,
    named_gradients,
    watch_probes,
)
from lstmviz.engine.cells.any_cell import cell_activations, cell_sequence, saturations
from lstmviz.engine.cells.lstm import lstm_sequence
from lstmviz.engine.modes.trace_arrays import NORMS
from lstmviz.engine.quiet_tensorflow import tf

PER_DIRECTION = ("h", "c", "grad_h_total", "grad_c_total", "grad_h_direct", "grad_kernel",
                 "grad_recurrent_kernel", "grad_bias", "gates_mean", "gates_saturated",
                 "gates_unit_mean", "gates_saturated_diagnosis",
                 "norm_h_total", "norm_h_direct", "norm_c_total")  # fmt: skip

_COMPILED: dict[tuple, object] = {}


def call_gradients(
    call, d_out: np.ndarray, d_states: list[np.ndarray], d_chain: list[np.ndarray] | None = None
) -> tuple[list, np.ndarray, np.ndarray, np.ndarray | None]:
    """([one dict of NumPy arrays per direction], dx [T, B, I], dL/dh_0, dL/dc_0 [L·D, B, H]
    (None without c)) for `call` (capture.Call) under the direct gradients d_out [T, B, D·H]
    and d_states (∂L/∂h_n, and ∂L/∂c_n for an LSTM), and `d_chain` ([dL/dh_0, dL/dc_0] of the
    call continuing this one's state; None: no such call)."""
    lengths = call.layout.lengths()
    dtype = tf.as_dtype(call.x.dtype)
    key = (call.kind, call.activation, call.layers, call.directions, lengths is not None, dtype)
    if key not in _COMPILED:
        run = _stack(call.kind, call.activation, call.layers, call.directions)
        _COMPILED[key] = tf.function(run, reduce_retracing=True)
    mask = () if lengths is None else (_mask(lengths, call.layout.steps, call.x.dtype),)
    weights = [w[name] for w in call.weights for name in ("kernel", "recurrent_kernel", "bias")]
    c0 = call.c0 if call.c0 is not None else call.h0
    d_c = d_states[1] if len(d_states) > 1 else np.zeros_like(d_states[0])
    chain = [np.zeros_like(d_states[0])] * 2 if d_chain is None else list(d_chain)
    chain += [np.zeros_like(d_states[0])] * (2 - len(chain))
    named, dx, dh0, dc0 = _COMPILED[key](call.x, call.h0, c0, weights, d_out, d_states[0], d_c,
                                         chain[0], chain[1], *mask)  # fmt: skip
    directions = [{key: np.asarray(value) for key, value in one.items()} for one in named]
    return directions, np.asarray(dx), np.asarray(dh0), None if call.c0 is None else np.asarray(dc0)


def _mask(lengths: np.ndarray, steps: int, dtype) -> np.ndarray:
    return (np.arange(steps)[:, None] < lengths[None, :]).astype(dtype)


def _probes(tape, x, h0):
    if x.dtype == tf.float32:
        return watch_probes(tape, x, h0)
    shape = [tf.shape(x)[0], tf.shape(h0)[0], tf.shape(h0)[1]]
    probes = tf.zeros(shape, x.dtype), tf.zeros(shape, x.dtype)
    tape.watch(probes)
    return probes


def _last(mask, like):
    """[T, B, 1]: 1 at each sequence's last step that ran (processing order), else 0."""
    if mask is None:
        steps = tf.shape(like)[0]
        return tf.one_hot(steps - 1, steps, dtype=like.dtype)[:, None, None]
    after = tf.cumsum(mask, axis=0, reverse=True, exclusive=True)
    return (mask * tf.cast(tf.equal(after, 0), mask.dtype))[:, :, None]


def _in_float32(direction: Direction) -> Direction:
    """The direction with its gates and mask in float32, as `gate_activity` takes them."""
    if direction.gates.dtype == tf.float32:
        return direction
    mask = None if direction.mask is None else tf.cast(direction.mask, tf.float32)
    gates, saturated, diagnosis = (
        None if a is None else tf.cast(a, tf.float32)
        for a in (direction.gates, direction.saturated, direction.saturated_diagnosis))
    return replace(direction, mask=mask, gates=gates, saturated=saturated,
                   saturated_diagnosis=diagnosis)  # fmt: skip


def _norms(named: dict) -> dict:
    """The per-step norms [T] of a float64 run, in float64 (`graph_norms` is float32's)."""
    return {norm: tf.sqrt(tf.reduce_sum(tf.square(named[grad]), axis=[1, 2]))
            for grad, norm in NORMS.items() if grad in named}  # fmt: skip


def _direction(kind, args, xd, h0, c0, weights, probes, md, backwards) -> Direction:
    """One direction run by lstmviz's cell of `kind` (an LSTM from its own c0)."""
    if kind == "lstm":
        h, c, gates = lstm_sequence(xd, h0, c0, *weights.values(), *probes, mask=md,
                                    with_gates=True)  # fmt: skip
        saturated = saturations(cell_activations("lstm", args), None, gates)
    else:
        probes = (probes[0], None)
        run = cell_sequence(kind, args, xd, h0, weights, probes, md)
        h, c, gates = run.h, None, run.gates
        saturated = (run.saturated, run.saturated_diagnosis)
    return Direction("", kind, backwards, h, c, probes, weights, md, gates, *saturated)


def _stack(kind: str, activation: str, layers: int, directions: int):
    """The compiled computation of a module of `layers` layers of `directions` directions of
    the cell `kind`."""
    args = {"activation": activation}

    def compute(x, h0, c0, weights, d_out, d_h, d_c, chain_h, chain_c, mask=None):
        with tf.GradientTape() as tape:
            tape.watch(x)
            tape.watch([h0, c0])
            tape.watch(weights)
            value, surrogate, found, lasts = x, tf.zeros([], x.dtype), [], []
            for layer in range(layers):
                outputs = []
                for d in range(directions):
                    k = layer * directions + d
                    backwards = d == 1
                    xd = tf.reverse(value, [0]) if backwards else value
                    md = None
                    if mask is not None:
                        md = tf.reverse(mask, [0]) if backwards else mask
                    w = dict(zip(("kernel", "recurrent_kernel", "bias"),
                                 weights[3 * k : 3 * k + 3], strict=True))  # fmt: skip
                    probes = _probes(tape, xd, h0[k])
                    one = _direction(kind, args, xd, h0[k], c0[k], w, probes, md, backwards)
                    last = _last(md, one.h)
                    lasts.append(last)
                    surrogate += tf.reduce_sum(tf.reduce_sum(one.h * last, 0) *
                                               (d_h[k] + chain_h[k]))  # fmt: skip
                    if one.c is not None:
                        surrogate += tf.reduce_sum(tf.reduce_sum(one.c * last, 0) *
                                                   (d_c[k] + chain_c[k]))  # fmt: skip
                    found.append(one)
                    outputs.append(one.in_input_order(one.h))
                value = outputs[0] if directions == 1 else tf.concat(outputs, -1)
            surrogate += tf.reduce_sum(value * d_out)
        sources = {"dx": x, "dh0": h0, "dc0": c0}
        for k, direction in enumerate(found):
            probes = direction.probes if direction.c is not None else (direction.probes[0], None)
            sources |= gradient_sources(probes, direction.weights, direction.h, prefix=f"{k}_")
            if direction.c is None:
                sources.pop(f"{k}_grad_c_total")
        named = named_gradients(tape, surrogate, sources)
        out = []
        for k, direction in enumerate(found):
            order, one = direction.in_input_order, {}
            # the chain's part of ∂S/∂h_n is the recurrence going on, not a direct gradient
            named[f"{k}_grad_h_direct"] -= lasts[k] * chain_h[k]
            for key in ("grad_h_total", "grad_c_total", "grad_h_direct"):
                if f"{k}_{key}" in named:
                    one[key] = order(named[f"{k}_{key}"])
            for key in ("grad_kernel", "grad_recurrent_kernel", "grad_bias"):
                one[key] = named[f"{k}_{key}"]
            one["h"] = order(direction.h)
            if direction.c is not None:
                one["c"] = order(direction.c)
            one |= gate_activity(_in_float32(direction))
            one |= graph_norms(one) if x.dtype == tf.float32 else _norms(one)
            out.append(one)
        return out, named["dx"], named["dh0"], named["dc0"]

    return compute
