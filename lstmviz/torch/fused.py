"""A recorded call's layers on lstmviz's native kernels, each forward run once.

A float32 `nn.LSTM`, `nn.GRU` or `nn.RNN` (or cell) on the CPU, with the native library loaded
(`runs`), is not run by PyTorch during `capture`: `forward(call)` runs every layer and
direction of it on the native forward ops (one compiled function; a bidirectional layer's two
directions side by side), hands its outputs on as PyTorch tensors sharing TensorFlow's buffers
(DLPack: no copies) and keeps in `call.saved` what the backward ops take — each layer's input,
each direction's h, c, gates (a GRU's h·U_h + β_h too) — and the gate summaries the forward
computed. Once PyTorch's backward left the direct gradients at those outputs, `backward` calls
the backward ops directly, top layer first, as their registered gradient functions
(`kernels._sequence_gradient`, `_gru_gradient`, `_rnn_gradient`) do. Direction k's direct
gradient is its part of ∂L/∂output (top layer) or of the layer above's dL/d input, plus ∂L/∂h_n
(and ∂L/∂c_n) at its last step that ran; the chain's dL/dh_0 (dL/dc_0) of a later call that
continues this one's state joins it there, as the recurrence going on, not as direct gradient.
The ops give the totals dL/dh_t, dL/dc_t (what `probed.call_gradients`' probes give), the weight
gradients, dL/dh_0 (dL/dc_0) and dL/d input; a GRU's and a SimpleRNN's input projection
zx = x·kernel + b is differentiated here (two matmuls). Everything else (float64, no library,
other devices) runs on PyTorch's ops and `probed.call_gradients`, which compute the same.

Shapes: x [T, B, I] (time-major), h0, c0, h_n, c_n [L·D, B, H], the output [T, B, D·H] (a
batch_first module's [B, T, D·H]), weights in Keras's layout (`capture.keras_weights`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lstmviz.engine.autodiff.forward import Direction, _side_by_side, gate_activity
from lstmviz.engine.cells.any_cell import cell_activations, saturations
from lstmviz.engine.cells.lstm import input_projection
from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.torch.chains import SUMS

_FORWARD: dict[tuple, _Compiled] = {}
_BACKWARD: dict[tuple, _Compiled] = {}


@dataclass
class Saved:
    """What `forward` keeps of a call for `backward`: its arguments (TensorFlow), each layer
    above the first's input [T, B, D·H], per direction (layer-major, forward first) the
    tensors its backward op takes (h, c, gates, a GRU's recurrent_h) and its gate summaries."""

    key: tuple
    x: tf.Tensor
    h0: tf.Tensor
    c0: tf.Tensor
    weights: list
    mask: tuple
    inputs: list
    directions: list
    stats: list


def runs(call) -> bool:
    """Whether `call` (capture.Call, before it ran) runs on the native kernels here; else
    PyTorch runs it (and raises its own errors for shapes that do not fit)."""
    if kernels.library() is None or call.x.dtype != np.float32:
        return False
    if call.source.device.type != "cpu" or any(t.device.type != "cpu" for t in call.hx):
        return False
    if call.kind == "gru" and not kernels.gru_native("sigmoid", "tanh", tf.float32):
        return False
    if call.kind == "simple_rnn" and not kernels.rnn_native(call.activation, tf.float32):
        return False
    rows = (call.layers * call.directions, call.layout.batch, call.hidden)
    states = [call.h0] + ([] if call.c0 is None else [call.c0])
    weights = [value for one in call.weights for value in one.values()]
    return (call.x.shape[2] == call.module.input_size and all(s.shape == rows for s in states)
            and all(a.dtype == np.float32 for a in states + weights))  # fmt: skip


def forward(call, cache: list) -> list[torch.Tensor]:
    """Run `call` on the native kernels: its outputs as the module returns them (the output in
    the module's layout, or a PackedSequence's data; h_n (, c_n)), a cell's h′ (, c′) [B, H];
    `call.saved` holds what `backward` takes. `cache`: the module's weights in TensorFlow,
    kept for its next call (`_tf_weights`)."""
    lengths = call.layout.lengths()
    masked = lengths is not None
    share = _side_by_side() if call.directions == 2 else 1
    key = (call.kind, call.activation, call.layers, call.directions, masked, share)
    if key not in _FORWARD:
        _FORWARD[key] = _Compiled(_forward(*key))
    x = _tf(torch.from_numpy(call.x))
    h0 = _tf(torch.from_numpy(call.h0))
    c0 = h0 if call.c0 is None else _tf(torch.from_numpy(call.c0))
    weights = _tf_weights(call, cache)
    mask = () if not masked else (tf.constant(_mask(lengths, call.layout.steps)),)
    out, h_n, c_n, inputs, directions, stats = _FORWARD[key](x, h0, c0, weights, *mask)
    call.saved = Saved(key, x, h0, c0, weights, mask, inputs, directions, stats)
    states = [_torch(h_n)] + ([] if call.kind != "lstm" else [_torch(c_n)])
    if call.cell:
        return [s[0] for s in states]
    # batch_first: a view of the time-major output, as PyTorch's own op returns it
    return [call.layout.from_time(_torch(out)), *states]


def backward(call, given: list, chain: list | None, weights: bool = True, dx: bool = True):
    """(one dict of NumPy arrays per direction, dL/dx [T, B, I], dL/dh_0 (, dL/dc_0)
    [L·D, B, H] or None) of a call `forward` ran, from the gradients PyTorch `given` its outputs
    (`call.outputs`' order; None where the loss does not reach one) and `chain` ([dL/dh_0,
    dL/dc_0] of the call continuing its state; None: none). The three gradients are PyTorch
    tensors. `weights=False`: without the weight gradients (the error of one step needs none;
    the LSTM op then skips their products); `dx=False`: dL/dx None, its product skipped."""
    saved: Saved = call.saved
    lstm = call.kind == "lstm"
    if call.cell:  # a cell's outputs are its states
        d_out, states = None, [None if g is None else g[None] for g in given]
    else:
        d_out, states = given[0], list(given[1:])
        if d_out is not None and call.layout.rows is not None:
            d_out = call.layout.to_time(d_out)  # padded, time-major
    parts = _parts(d_out, states, chain, lstm)
    batch_major = call.layout.batch_first and call.layout.rows is None and not call.cell
    if batch_major and d_out is not None and d_out.transpose(0, 1).is_contiguous():
        parts[0], batch_major = d_out.transpose(0, 1), False  # a time-major array's view
    named, d_x, dh0, dc0 = _compiled_backward(saved.key, batch_major, parts, weights, dx)(
        saved.x, saved.h0, saved.c0, saved.weights, saved.inputs, saved.directions,
        [_tf(p) for p in parts if p is not None], saved.mask)  # fmt: skip
    results = [_row(saved, k, {name: np.asarray(value) for name, value in one.items()}, lstm)
               for k, one in enumerate(named)]  # fmt: skip
    return results, _torch(d_x) if dx else None, _torch(dh0), _torch(dc0) if lstm else None


def _parts(d_out, states: list, chain: list | None, lstm: bool) -> list:
    """What a backward is given, in `_backward`'s order: [d_out, d_h, d_c, chain_h, chain_c]
    (None where absent)."""
    chain = [None, None] if chain is None else [*chain, None]
    return [d_out, states[0], states[1] if lstm else None, chain[0], chain[1] if lstm else None]


def _compiled_backward(key: tuple, batch_major: bool, parts: list, weights: bool,
                       dx: bool = True) -> _Compiled:  # fmt: skip
    """The compiled backward of a module (`Saved.key`) for the `parts` given, made once."""
    full = (*key, batch_major, tuple(p is not None for p in parts), weights, dx)
    if full not in _BACKWARD:
        _BACKWARD[full] = _Compiled(_backward(*full))
    return _BACKWARD[full]


def _row(saved: Saved, k: int, values: dict, lstm: bool) -> dict[str, np.ndarray]:
    """Direction k's arrays: `values` (its gradients, NumPy), with its h (, c) and gate
    summaries from the forward."""
    row = dict(values)
    row["h"] = np.asarray(saved.directions[k][0])
    if lstm:
        row["c"] = np.asarray(saved.directions[k][1])
    return row | {name: np.asarray(value) for name, value in saved.stats[k].items()}


def joins(before, call) -> bool:
    """Whether `call`, continuing the state of `before`, can have one backward with it
    (`backward_run`): both ran on the native kernels as one sequence of the same module
    (one direction per layer, every sequence at full length)."""
    if before.saved is None or call.saved is None or call.saved.key != before.saved.key:
        return False
    return call.directions == 1 and call.layout.rows is None and before.layout.rows is None


def backward_run(calls: list, given: list, chain: list | None, weights: bool = True,
                 dx: bool = True):  # fmt: skip
    """`backward` of a run of calls that `joins` one to the next, as one sequence: the ops run
    once over all their steps (a decoder stepping its LSTM once per token: one backward of T
    steps, not T of one). `given` per call as for `backward`; every call's final state but the
    last's must have had no gradient from PyTorch (it only goes on into the next call), else
    the caller runs them one by one. Returns, per call, its directions and dL/dx [T_n, B, I]
    (None without `dx`; the weight gradients of the whole run in the last call's rows, missing
    from the others), and dL/dh_0 (, dL/dc_0) of the run's first call."""
    lstm = calls[0].kind == "lstm"
    saved = [call.saved for call in calls]
    outputs = []
    for call, grads in zip(calls, given, strict=True):
        value = grads[0]  # a cell's h′, a module's output: the direct gradient of its steps
        if value is not None and not call.cell:
            value = call.layout.to_time(value)
        elif value is not None:
            value = value[None]
        outputs.append(value)
    steps = [int(s.x.shape[0]) for s in saved]
    if all(v is None for v in outputs):
        d_out = None
    else:
        like = next(v for v in outputs if v is not None)
        d_out = torch.cat([like.new_zeros(n, *like.shape[1:]) if v is None else v
                           for v, n in zip(outputs, steps, strict=True)])  # fmt: skip
    last = given[-1]
    states = [None, last[1] if lstm else None] if calls[-1].cell else list(last[1:]) + [None]
    parts = _parts(d_out, states, chain, lstm)
    first = saved[0]

    def joined(values):
        return tf.concat(values, 0)

    inputs = [joined([s.inputs[k] for s in saved]) for k in range(len(first.inputs))]
    kept = [tuple(joined([s.directions[k][j] for s in saved]) for j in range(len(one)))
            for k, one in enumerate(first.directions)]  # fmt: skip
    named, d_x, dh0, dc0 = _compiled_backward(first.key, False, parts, weights, dx)(
        joined([s.x for s in saved]), first.h0, first.c0, first.weights, inputs, kept,
        [_tf(p) for p in parts if p is not None], ())  # fmt: skip
    named = [{name: np.asarray(value) for name, value in one.items()} for one in named]
    d_x = _torch(d_x) if dx else None
    results, dxs, at = [], [], 0
    for n, one in enumerate(saved):
        end = at + steps[n]
        rows = []
        for k, whole in enumerate(named):
            values = {name: value[at:end] for name, value in whole.items() if name not in SUMS}
            if n == len(saved) - 1:
                values |= {name: whole[name] for name in SUMS if name in whole}
            rows.append(_row(one, k, values, lstm))
        results.append(rows)
        dxs.append(None if d_x is None else d_x[at:end])
        at = end
    return results, dxs, _torch(dh0), _torch(dc0) if lstm else None


class _Compiled:
    """`run` compiled once for arguments of any shape (one trace: every dimension free; the
    nesting of the arguments is fixed by the function's key) and called with little Python:
    a decoder step calls two functions for a millisecond of work each."""

    def __init__(self, run):
        self.run = run
        self.concrete = None
        self.flat_call = None
        self.pack = None

    def __call__(self, *args):
        flat = tf.nest.flatten(args)
        if self.concrete is None:
            specs = tf.nest.map_structure(
                lambda t: tf.TensorSpec([None] * t.shape.rank, t.dtype), args)  # fmt: skip
            self.concrete = tf.function(self.run, autograph=False).get_concrete_function(*specs)
            # A ConcreteFunction's call binds its arguments in Python (~0.5 ms); its atomic
            # function takes the flat tensors (~0.1 ms). Without one: the public call.
            atomic = getattr(self.concrete, "_inference_function", None)
            if not self.concrete.captured_inputs and hasattr(atomic, "call_flat"):
                self.flat_call = atomic.call_flat
        if self.flat_call is None:
            return self.concrete(*args)
        outputs = self.flat_call(*flat)
        if self.pack is None:  # TensorFlow's packing checks types at every call (~0.2 ms)
            structure = self.concrete.structured_outputs
            self.pack = _packer(structure)
            expected = tf.nest.pack_sequence_as(structure, outputs)
            if not _same(self.pack(outputs), expected):
                self.pack = lambda flat: tf.nest.pack_sequence_as(structure, flat)
        return self.pack(outputs)


def _packer(structure):
    """flat outputs -> `structure` (nested tuples, lists and dicts, tf.nest's order: a dict by
    sorted keys), as a function made once."""
    count = 0

    def build(part):
        nonlocal count
        if isinstance(part, dict):
            keys = sorted(part)
            inner = [build(part[k]) for k in keys]
            return lambda flat: {k: f(flat) for k, f in zip(keys, inner, strict=True)}
        if type(part) in (list, tuple):
            inner = [build(p) for p in part]
            kind = type(part)
            return lambda flat: kind(f(flat) for f in inner)
        at = count
        count += 1
        return lambda flat: flat[at]

    return build(structure)


def _same(a, b) -> bool:
    """Whether two nests hold the same objects in the same places."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if type(a) in (list, tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a is b


def _tf(tensor: torch.Tensor) -> tf.Tensor:
    """A CPU tensor as TensorFlow's, sharing its buffer; a copy when it is not contiguous or
    not on the 64-byte boundary TensorFlow's kernels require (PyTorch allocates on one)."""
    tensor = tensor.detach()
    if not tensor.is_contiguous() or tensor.data_ptr() % 64:
        tensor = tensor.clone(memory_format=torch.contiguous_format)
    return tf.experimental.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(tensor))


def _torch(tensor: tf.Tensor) -> torch.Tensor:
    return torch.from_dlpack(tf.experimental.dlpack.to_dlpack(tensor))


def _tf_weights(call, cache: list) -> list:
    """The call's weights as TensorFlow's [kernel, recurrent_kernel, bias per direction];
    `cache` ([] or the list of an earlier call of the same weights) keeps them for the next."""
    if not cache or cache[0] is not call.weights:
        cache[:] = [call.weights, [tf.constant(w[name]) for w in call.weights
                                   for name in ("kernel", "recurrent_kernel", "bias")]]  # fmt: skip
    return cache[1]


def _mask(lengths: np.ndarray, steps: int) -> np.ndarray:
    return (np.arange(steps)[:, None] < lengths[None, :]).astype(np.float32)


def _last(mask, steps, batch, backwards: bool):
    """[B] int32: each sequence's last step that ran, by input position (a backward direction
    runs from the end: its first that ran)."""
    if mask is None:
        return tf.fill([batch], 0 if backwards else steps - 1)
    ran = tf.cumsum(mask, axis=0, exclusive=True, reverse=not backwards)  # steps after it
    return tf.argmax(mask * tf.cast(tf.equal(ran, 0), mask.dtype), 0, output_type=tf.int32)


def _steps(index):
    """[B, 2]: (index[b], b), the indices of one step of each sequence in a [T, B, H] array."""
    return tf.stack([index, tf.range(tf.shape(index)[0], dtype=index.dtype)], 1)


def _forward(kind: str, activation: str, layers: int, directions: int, masked: bool,
             share: int):  # fmt: skip
    """The compiled forward of a module: (x, h0, c0, weights, (mask)) -> (output, h_n, c_n,
    [each layer above the first's input], [per direction its tensors], [per direction its gate
    summaries])."""
    acts = cell_activations(kind, {"activation": activation})
    names = tuple(a.name for a in acts)
    library = kernels.library()

    def run(x, h0, c0, weights, mask=None):
        steps, batch = tf.shape(x)[0], tf.shape(x)[1]
        value, inputs, found, stats, h_n, c_n = x, [], [], [], [], []
        for layer in range(layers):
            if layer:
                inputs.append(value)
            outputs = []
            for d in range(directions):
                k = layer * directions + d
                kernel, recurrent, bias = weights[3 * k : 3 * k + 3]
                order = {"reverse": d == 1, "share": share}
                probe = tf.raw_ops.Empty(shape=tf.stack([steps, batch, tf.shape(h0)[2]]),
                                         dtype=tf.float32)  # never read  # fmt: skip
                masks = [] if mask is None else [mask]
                if kind == "lstm":
                    h, c, gates = kernels.sequence(value, h0[k], c0[k], kernel, recurrent, bias,
                                                  probe, probe, mask, with_gates=True,
                                                  read_probes=False, **order)  # fmt: skip
                    kept = (h, c, gates)
                elif kind == "gru":
                    zx = input_projection(value, kernel, bias[0])
                    h, gates, recurrent_h = library.lstmviz_gru_forward(
                        zx, h0[k], recurrent, [bias[1]], probe, masks, reset_after=True,
                        gate="sigmoid", activation="tanh", **order)  # fmt: skip
                    c, kept = None, (h, gates, recurrent_h)
                else:
                    zx = input_projection(value, kernel, bias)
                    h, gates = library.lstmviz_rnn_forward(
                        zx, h0[k], recurrent, probe, masks, activation=activation,
                        **order)  # fmt: skip
                    c, kept = None, (h, gates)
                # the saturation flags, where the native gate statistics do not apply (relu)
                saturated = (None, None) if kind == "lstm" or activation == "tanh" else (
                    saturations(acts, None, gates))  # fmt: skip
                one = Direction("", kind, d == 1, h, c, (), {}, mask, gates, *saturated,
                                activations=names, input_order=True)  # fmt: skip
                stats.append(gate_activity(one))
                index = _last(mask, steps, batch, d == 1)
                h_n.append(tf.gather_nd(h, _steps(index)))
                if c is not None:
                    c_n.append(tf.gather_nd(c, _steps(index)))
                found.append(kept)
                outputs.append(h)
            value = outputs[0] if directions == 1 else tf.concat(outputs, -1)
        return value, tf.stack(h_n), tf.stack(c_n) if c_n else h0, inputs, found, stats

    return run


def _backward(kind: str, activation: str, layers: int, directions: int, masked: bool, share: int,
              batch_major: bool, present: tuple[bool, ...], weight_grads: bool = True,
              input_grads: bool = True):  # fmt: skip
    """The compiled backward of a module: (x, h0, c0, weights, inputs, kept, [the `present`
    ones of d_out, d_h, d_c, chain_h, chain_c], (mask)) -> ([per direction its gradients], dx,
    dh0, dc0); without the weight gradients unless `weight_grads`, and dx empty unless
    `input_grads` (then the ops skip their products: nothing reads those outputs)."""
    library = kernels.library()

    def run(x, h0, c0, weights, inputs, kept, given, mask):
        mask = mask[0] if mask else None
        masks = [] if mask is None else [mask]
        parts = iter(given)
        d_out, d_h, d_c, chain_h, chain_c = (next(parts) if p else None for p in present)
        steps, batch = tf.shape(x)[0], tf.shape(x)[1]
        hidden = tf.shape(h0)[2]
        above = d_out  # dL/d(this layer's output) [T, B, D·H]
        if batch_major and above is not None:
            above = tf.transpose(above, [1, 0, 2])
        named: list = [None] * (layers * directions)
        dh0, dc0 = [None] * len(named), [None] * len(named)
        dx = None
        for layer in range(layers - 1, -1, -1):
            value = x if layer == 0 else inputs[layer - 1]
            dx = None
            for d in range(directions):
                k = layer * directions + d
                kernel, recurrent, bias = weights[3 * k : 3 * k + 3]
                order = {"reverse": d == 1, "share": share}
                h = kept[k][0]
                shape = tf.shape(h)
                index = _last(mask, steps, batch, d == 1)
                where = _steps(index)  # each sequence's last step
                direct = above
                if direct is not None and directions == 2:
                    direct = above[:, :, d * hidden : (d + 1) * hidden]
                if d_h is not None:
                    direct = tf.scatter_nd(where, d_h[k], shape) if direct is None else (
                        tf.tensor_scatter_nd_add(direct, where, d_h[k]))  # fmt: skip
                given_h = direct
                if chain_h is not None:  # the recurrence going on: no direct gradient
                    given_h = tf.scatter_nd(where, chain_h[k], shape) if direct is None else (
                        tf.tensor_scatter_nd_add(direct, where, chain_h[k]))  # fmt: skip
                dh_given = [] if given_h is None else [given_h]
                if direct is None:
                    direct = tf.zeros_like(h)
                one = {"grad_h_direct": direct}
                if kind == "lstm":
                    _, c, gates = kept[k]
                    ends = [p[k] for p in (d_c, chain_c) if p is not None]
                    dc_given = [] if not ends else [tf.scatter_nd(where, tf.add_n(ends), shape)]
                    _, dh, dc, dh0[k], dc0[k], dk, dr, db, norms, dxd = (
                        library.lstmviz_sequence_backward(
                            value, recurrent, h0[k], c0[k], h, c, gates, dh_given, dc_given,
                            masks, kernel, **order))  # fmt: skip
                    one |= {"grad_c_total": dc, "norm_c_total": norms[:, 1]}
                    direct_norm = norms[:, 2]
                else:
                    if kind == "gru":
                        _, gates, recurrent_h = kept[k]
                        dzx, dh, dh0[k], dr, d_rbias, norms = library.lstmviz_gru_backward(
                            recurrent, h0[k], h, gates, recurrent_h, dh_given, masks,
                            reset_after=True, gate="sigmoid", activation="tanh",
                            **order)  # fmt: skip
                    else:
                        _, gates = kept[k]
                        dzx, dh, dh0[k], dr, norms = library.lstmviz_rnn_backward(
                            recurrent, h0[k], h, gates, dh_given, masks, activation=activation,
                            **order)  # fmt: skip
                    # the input projection zx = x·kernel + b
                    flat_x = tf.reshape(value, [-1, tf.shape(value)[2]])
                    flat_dz = tf.reshape(dzx, [-1, tf.shape(dzx)[2]])
                    dk = tf.matmul(flat_x, flat_dz, transpose_a=True)
                    db = tf.reduce_sum(flat_dz, 0)
                    if kind == "gru":
                        db = tf.stack([db, d_rbias])
                    dxd = tf.reshape(tf.matmul(flat_dz, kernel, transpose_b=True),
                                     tf.shape(value))  # fmt: skip
                    direct_norm = norms[:, 1]
                if chain_h is not None:  # the op's norm is of the direct gradient and chain's
                    direct_norm = library.lstmviz_step_norms(direct)
                one |= {"grad_h_total": dh, "norm_h_total": norms[:, 0],
                        "norm_h_direct": direct_norm}  # fmt: skip
                if weight_grads:  # else not returned: the LSTM op then skips their products
                    one |= {"grad_kernel": dk, "grad_recurrent_kernel": dr, "grad_bias": db}
                named[k] = one
                if layer or input_grads:  # else unread: pruned (the LSTM op skips its product)
                    dx = dxd if dx is None else dx + dxd
            above = dx
        dc_all = tf.stack(dc0) if kind == "lstm" else tf.zeros([0])
        return named, dx if input_grads else tf.zeros([0]), tf.stack(dh0), dc_all

    return run
