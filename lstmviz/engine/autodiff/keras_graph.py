"""Model mode for any graph Keras runs: Keras runs the model, lstmviz runs its recurrent calls.

While a `GraphGradients` traces the model, every `LSTM`, `GRU` and `SimpleRNN` of Keras's own
cells inside it (a Bidirectional's halves, nested models and subclassed models' attributes
included) computes its steps through lstmviz's cells (`any_cell.cell_sequence`: the native kernels,
probed) in place of Keras's loop: the layer's `inner_loop` is replaced on the instance for the
time of the trace. Keras itself does everything else — the functional DAG or a subclassed
`call`, masks, `initial_state` and `return_state`, Bidirectional's merge, attention, any layer
between — so no graph semantics are rebuilt here. A recurrent layer of another cell runs in
Keras, "not traced".

A *call* is one run of one recurrent layer (one direction). A *direction* is a chain of calls
of one layer whose state passes from call to call (a decoder stepped token by token: its time
axis is its steps in call order); calls that do not chain (an encoder shared by two inputs) are
separate directions, `{layer}#{n}`. A call whose initial state is another direction's final
state (an encoder handing (h, c) to its decoder) *links* the two (`initial_from`): the gradient
crosses the hand-over inside the one tape, so the encoder's totals include what flows back from
the decoder. Arrays are time-major [T_k, B, ·], indexed by input position.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from lstmviz.engine.autodiff.forward import Direction, gate_activity, probed_direction
from lstmviz.engine.autodiff.gradients import (
    anchor_passes,
    gradient_sources,
    graph_last_axis_norm,
    graph_norms,
    graph_step_norm,
    named_gradients,
)
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.weights.model_spec import ACTIVATIONS, KERAS2_HARD_SIGMOID

CELL_KINDS = {"LSTMCell": "lstm", "GRUCell": "gru", "SimpleRNNCell": "simple_rnn"}
PER_STEP = ("h", "c", "grad_h_total", "grad_c_total", "grad_h_direct")
WEIGHTS = ("kernel", "recurrent_kernel", "bias")


@dataclass
class Traced:
    """A recurrent layer lstmviz runs: its direction's base name ("enc", "bi/forward"), cell
    kind and arguments as `any_cell.cell_sequence` takes them."""

    name: str
    cell: str
    args: dict
    share: int = 1  # a Bidirectional's halves run side by side


@dataclass
class Call:
    """One recorded run of a traced layer: the direction it computed, its input x [T, B, I]
    (watched: dL/dx is the input saliency), the initial and final states it took and gave."""

    layer: Traced
    direction: Direction
    x: tf.Tensor
    initial: list
    final: list
    chain: int = -1  # the direction (chain of calls) it belongs to
    variables: dict = field(default_factory=dict)  # the cell's weights by WEIGHTS key


@dataclass
class Chain:
    """One direction of the trace: its calls in order, its name, the direction its initial
    state came from (−1: none)."""

    name: str
    calls: list[int] = field(default_factory=list)
    initial_from: int = -1


@dataclass(frozen=True)
class GraphLayout:
    """What a traced forward found, for the trace's text and integer keys: per direction its
    name, cell, number of calls and `initial_from`."""

    names: tuple[str, ...]
    cells: tuple[str, ...]
    calls: tuple[int, ...]
    initial_from: tuple[int, ...]

    @classmethod
    def of(cls, found: list[Chain], calls: list[Call]) -> GraphLayout:
        return cls(tuple(c.name for c in found),
                   tuple(calls[c.calls[0]].layer.cell for c in found),
                   tuple(len(c.calls) for c in found),
                   tuple(c.initial_from for c in found))  # fmt: skip


def _activation_name(fn, keras2: bool) -> str | None:
    """A Keras activation function's name as `activations.py` knows it, or None."""
    import keras

    try:
        name = keras.activations.serialize(fn)
    except (ValueError, TypeError, AttributeError):
        return None
    if isinstance(name, dict):
        name = name.get("config") if name.get("class_name") == "function" else None
    if not isinstance(name, str) or name not in ACTIVATIONS:
        return None
    return KERAS2_HARD_SIGMOID if keras2 and name == "hard_sigmoid" else name


def traced_layers(model, keras2: bool = False) -> tuple[dict[int, Traced], list[str]]:
    """({id(layer): Traced} for every recurrent layer of `model` lstmviz runs, [names of the
    recurrent layers Keras runs untraced: another cell, an activation lstmviz lacks])."""
    import keras

    traced, untraced = {}, []
    layers = list(model._flatten_layers(include_self=False, recursive=True))
    halves = {}
    for layer in layers:
        if isinstance(layer, keras.layers.Bidirectional):
            halves[id(layer.forward_layer)] = f"{layer.name}/forward"
            halves[id(layer.backward_layer)] = f"{layer.name}/backward"
    for layer in layers:
        if not isinstance(layer, keras.layers.RNN):
            continue
        cell = layer.cell
        kind = CELL_KINDS.get(type(cell).__name__)
        module = type(cell).__module__
        name = halves.get(id(layer), layer.name)
        if kind is None or not module.startswith("keras."):
            untraced.append(name)
            continue
        args = {"activation": _activation_name(cell.activation, keras2),
                "go_backwards": bool(layer.go_backwards)}  # fmt: skip
        if kind != "simple_rnn":
            args["recurrent_activation"] = _activation_name(cell.recurrent_activation, keras2)
        if kind == "gru":
            args["reset_after"] = bool(cell.reset_after)
        if None in args.values():
            untraced.append(name)
            continue
        traced[id(layer)] = Traced(name, kind, args, 2 if id(layer) in halves else 1)
    return traced, untraced


class Recorder:
    """The calls of one forward pass, recorded on `tape` (inside its `with` block)."""

    def __init__(self, tape: tf.GradientTape):
        self.tape, self.calls = tape, []
        self.graph = tf.compat.v1.get_default_graph()  # Keras's shape inference runs elsewhere

    def run(self, layer, traced: Traced, sequences, initial_state, mask):
        """What `RNN.inner_loop` returns — (last output [B, H], outputs [B, T, H] in the order
        the cell read the sequence, final states) — computed by lstmviz's cell, probed."""
        cell = layer.cell
        if isinstance(mask, list | tuple):
            mask = mask[0]
        # float32 whatever the policy (mixed_float16: its float32 twin); Keras casts back
        x = tf.transpose(tf.cast(sequences, tf.float32), [1, 0, 2])  # [T, B, I]
        self.tape.watch(x)
        states = list(initial_state) if isinstance(initial_state, list | tuple) else [
            initial_state]  # fmt: skip
        states = [tf.cast(state, tf.float32) for state in states]
        weights, variables = {}, {}
        for key in WEIGHTS:  # read on the tape (a layer without a bias: none)
            variable = getattr(cell, key, None) if key != "bias" or cell.use_bias else None
            if variable is not None:
                variables[key] = variable
                weights[key] = tf.cast(tf.identity(tf.convert_to_tensor(variable)), tf.float32)
                self.tape.watch(weights[key])
        step_mask = None if mask is None else tf.transpose(tf.cast(mask, x.dtype))  # [T, B]
        direction = probed_direction(traced.name, traced.cell, traced.args, x, states[0],
                                     weights, step_mask, self.tape, traced.share,
                                     c0=states[1] if traced.cell == "lstm" else None)
        last = 0 if direction.backwards and direction.input_order else -1
        final = [direction.h[last]] + ([direction.c[last]] if direction.c is not None else [])
        if layer.return_sequences:
            h = direction.in_processing_order(direction.h)
            if layer.zero_output_for_mask and direction.mask is not None:
                h = h * direction.in_processing_order(direction.mask)[..., None]
            outputs = tf.transpose(h, [1, 0, 2])
        else:
            outputs = final[0][:, None, :]
        self.calls.append(Call(traced, direction, x, states, final, variables=variables))
        return final[0], outputs, final


@contextlib.contextmanager
def recording(model, traced: dict[int, Traced], recorder: Recorder):
    """Within: the traced layers of `model` run through `recorder` (their `inner_loop`
    replaced on the instance; restored after)."""
    import keras

    patched = []
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.RNN) and id(layer) in traced:
            info = traced[id(layer)]

            def inner_loop(sequences, initial_state, mask, training=False, _l=layer, _t=info):
                if tf.compat.v1.get_default_graph() is not recorder.graph:  # a shape inference
                    return type(_l).inner_loop(_l, sequences, initial_state, mask, training)
                return recorder.run(_l, _t, sequences, initial_state, mask)

            object.__setattr__(layer, "inner_loop", inner_loop)
            patched.append(layer)
    try:
        yield
    finally:
        for layer in patched:
            object.__delattr__(layer, "inner_loop")


def _source(tensor):
    """The tensor a state was handed on as: through Identity and same-type Cast ops."""
    while getattr(tensor, "op", None) is not None and tensor.op.type in ("Identity", "Cast"):
        tensor = tensor.op.inputs[0]
    return tensor


def chains(calls: list[Call]) -> list[Chain]:
    """The directions the calls make (see the module's docstring), in the order their first
    call ran; sets each call's `chain`."""
    found: list[Chain] = []
    finals: dict = {}  # the ref of a state a call gave -> (call index, position)
    for i, call in enumerate(calls):
        given = [finals.get(_source(state).ref()) for state in call.initial]
        sources = {g[0] for g in given if g is not None}
        same = len(sources) == 1 and None not in given and all(
            pos == n for n, (_, pos) in enumerate(given))  # fmt: skip
        before = calls[sources.pop()] if same else None
        if before is not None and before.layer is call.layer and not call.direction.backwards:
            call.chain = before.chain  # the same layer carries its state on: one direction
            found[call.chain].calls.append(i)
        else:
            call.chain = len(found)
            found.append(Chain(call.layer.name, [i]))
            linked = {calls[g[0]].chain for g in given if g is not None}
            if len(linked) == 1:
                found[call.chain].initial_from = linked.pop()
        for pos, state in enumerate(call.final):
            finals[state.ref()] = (i, pos)
    counts: dict[str, int] = {}
    for chain in found:
        counts[chain.name] = counts.get(chain.name, 0) + 1
    numbered: dict[str, int] = {}
    for chain in found:
        if counts[chain.name] > 1:
            n = numbered.get(chain.name, 0)
            numbered[chain.name] = n + 1
            chain.name = f"{chain.name}#{n}"
    return found


def call_gradients(value: tf.Tensor, tape: tf.GradientTape, calls: list[Call],
                   inputs: dict[str, int], penalized: bool = False) -> dict:  # fmt: skip
    """dL/d every call's probes, states, weights (`call{i}_grad_*`, by `gradients` names) and,
    for each model input in `inputs` (name -> the index of the first call it feeds), dL/d that
    call's x (`grad_input_{name}`). `penalized`: the loss holds weight regularizers' penalties,
    which read the layers' variables, not a call's weights: each layer's first call's weight
    gradients then take what dL/d the variables holds beyond its calls' (so that a layer's
    calls sum to Keras's own gradient of the variable)."""
    sources = {}
    layers: dict[int, list[int]] = {}  # a traced layer -> its calls
    for i, call in enumerate(calls):
        d = call.direction
        probes = d.probes if d.c is not None else None
        sources |= gradient_sources(probes, d.weights, d.h, prefix=f"call{i}_")
        if probes is None:
            sources[f"call{i}_grad_h_total"] = d.probes[0]
        layers.setdefault(id(call.layer), []).append(i)
    for name, i in inputs.items():
        sources[f"grad_input_{name}"] = calls[i].x
    if penalized:
        for ones in layers.values():
            sources[f"variables{ones[0]}"] = list(calls[ones[0]].variables.values())
    named = named_gradients(tape, value, sources)
    for ones in layers.values() if penalized else ():
        whole = named.pop(f"variables{ones[0]}")
        for key, grad in zip(calls[ones[0]].variables, whole, strict=True):
            parts = [named[f"call{i}_grad_{key}"] for i in ones]
            beyond = tf.cast(grad, tf.float32) - tf.add_n(parts)
            named[f"call{ones[0]}_grad_{key}"] = parts[0] + beyond
    return named


def chain_arrays(k: int, chain: Chain, calls: list[Call], named: dict) -> dict[str, tf.Tensor]:
    """Direction k's per-step arrays (its calls' joined in call order, each by input
    position), weight gradients (summed over its calls), gate activity and norms, under
    `layer{k}_` keys; `layer{k}_count` the unmasked (t, b) its gate means are over."""
    prefix, parts = f"layer{k}_", {}
    for i in chain.calls:
        d, got = calls[i].direction, {}
        for key in ("grad_h_total", "grad_c_total", "grad_h_direct"):
            if f"call{i}_{key}" in named:
                got[key] = d.in_input_order(named[f"call{i}_{key}"])
        got["h"] = d.in_input_order(d.h)
        if d.c is not None:
            got["c"] = d.in_input_order(d.c)
        for key in WEIGHTS:
            got["grad_" + key] = named[f"call{i}_grad_{key}"]
        gates = gate_activity(d)
        weight = (tf.ones(tf.shape(d.h)[:2], d.h.dtype) if d.mask is None
                  else tf.cast(d.mask, d.h.dtype))  # fmt: skip
        count = tf.reduce_sum(weight)
        got |= {key: value for key, value in gates.items()}
        got["count"] = count
        for key, value in got.items():
            parts.setdefault(key, []).append(value)
    out = {}
    for key, values in parts.items():
        if len(values) == 1:
            out[prefix + key] = values[0]
        elif key in PER_STEP:
            out[prefix + key] = tf.concat(values, 0)
        elif key in ("gates_mean", "gates_saturated"):
            out[prefix + key] = tf.concat(values, 1)
        elif key.startswith("grad_") or key == "count":
            out[prefix + key] = tf.add_n(values)
        else:  # per-unit means and saturated fractions, weighted by each call's count
            counts = parts["count"]
            total = tf.add_n([v * c for v, c in zip(values, counts, strict=True)])
            out[prefix + key] = tf.math.divide_no_nan(total, tf.add_n(counts))
    out |= graph_norms(out, prefix)
    return out


def saliency(grad_input: tf.Tensor) -> tf.Tensor:
    """[B, T] from dL/dx [T, B, E]: the norm over E."""
    return tf.transpose(graph_last_axis_norm(grad_input))


def first_calls(calls: list[Call], inputs: list) -> dict[int, int]:
    """{input position: index of the first call whose x depends on that model input} (the
    inputs given as the graph's tensors), by walking the graph back from each call's x."""
    wanted = {t.ref(): n for n, t in enumerate(inputs)}
    found: dict[int, int] = {}
    for i, call in enumerate(calls):
        seen, todo = set(), [call.x]
        while todo:
            tensor = todo.pop()
            if tensor.ref() in seen:
                continue
            seen.add(tensor.ref())
            if tensor.ref() in wanted:
                found.setdefault(wanted[tensor.ref()], i)
                continue
            todo.extend(getattr(tensor.op, "inputs", ()))
        if len(found) == len(inputs):
            break
    return found


def anchored_norms(tape, value, outputs: list, calls: list[Call], found: list[Chain],
                   anchors: tuple[int, ...] = ()) -> dict:  # fmt: skip
    """The error of one step followed back through the graph (docs/diagnosis.md): per
    direction k `layer{k}_anchor` [A] and, where an output has a time axis ([B, T, …]: a loss
    on every step), `layer{k}_anchor_norm_h` (and `_c`) [A, T_k], the norms of the gradient of
    the outputs' loss at that step alone with respect to the direction's states, by one more
    backward per anchor. `anchors` the steps of the outputs (every direction the same); ()
    one, each output's last step for forward directions and its first for backward ones (the
    anchor then the direction's own last or first position). Without such an output the
    totals are that gradient (the caller takes them)."""
    firsts = [calls[chain.calls[0]].direction.backwards for chain in found]
    lengths = [tf.add_n([tf.shape(calls[i].direction.h)[0] for i in chain.calls])
               for chain in found]  # fmt: skip
    out = {f"layer{k}_anchor": tf.stack([0 if first else n - 1])
           for k, (first, n) in enumerate(zip(firsts, lengths, strict=True))}  # fmt: skip
    # Keras's cross-entropies read a softmax's logits (`_keras_logits`), not its output: the
    # loss reaches the output through them
    steps = [getattr(o, "_keras_logits", o) for o in outputs
             if o.shape.rank is not None and o.shape.rank >= 3]  # fmt: skip
    if not steps:
        return out
    zero = tf.UnconnectedGradients.ZERO
    d_outputs = tape.gradient(value, steps, unconnected_gradients=zero)
    rows: dict[str, list] = {}
    for cotangents, ks in anchor_passes(d_outputs, anchors, firsts):
        directions = [calls[i].direction for k in ks for i in found[k].calls]
        probes = [p for d in directions for p in d.probes if p is not None]
        grads = iter(tape.gradient(steps, probes, output_gradients=cotangents,
                                   unconnected_gradients=zero))  # fmt: skip
        for k in ks:
            hs, cs = [], []
            for i in found[k].calls:
                d = calls[i].direction
                hs.append(graph_step_norm(d.in_input_order(next(grads))))
                if d.probes[1] is not None:
                    cs.append(graph_step_norm(d.in_input_order(next(grads))))
            rows.setdefault(f"layer{k}_anchor_norm_h", []).append(tf.concat(hs, 0))
            if cs:
                rows.setdefault(f"layer{k}_anchor_norm_c", []).append(tf.concat(cs, 0))
    if anchors:
        out = {f"layer{k}_anchor": tf.constant(anchors, tf.int32) for k in range(len(found))}
    return out | {key: tf.stack(values) for key, values in rows.items()}


def pad_rows(rows: list[np.ndarray]) -> np.ndarray:
    """[L, max T_k] from rows of lengths T_k, NaN after each row's end."""
    steps = max((len(row) for row in rows), default=0)
    out = np.full((len(rows), steps), np.nan, np.float32)
    for k, row in enumerate(rows):
        out[k, : len(row)] = row
    return out
