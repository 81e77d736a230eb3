"""Model mode for a model lstmviz's own reader does not take as one chain (several inputs or
outputs, encoder–decoders, attention, shared layers, subclassed models): Keras runs it, lstmviz
its recurrent calls (`keras_graph`).

`KerasGraph` is such a model with what a run needs: its inputs and outputs by name, its compiled
losses. Data come batch-major as Keras's `fit` takes them: one array per input (a list in the
model's input order, or a dict by input name; in a `.npz`, one array per input named as the
input, or `x0`, `x1`, … in input order, or `x` for one input), targets `y` for one output or
`y_{output name}` for several. The trace has model mode's keys, each direction its own length
(`layer{k}_calls`, `layer{k}_initial_from`), and for a model of several inputs `x_{name}`,
`grad_input_{name}` and `saliency_{name}` per input that reaches a recurrent layer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lstmviz.core.config import LOSSES, RunConfig
from lstmviz.core.errors import ConfigError, InputError, ModelError, ref
from lstmviz.core.schema import CELL_GATES
from lstmviz.engine.arrays import NORMS, exact_norm
from lstmviz.engine.keras_graph import (
    GraphLayout,
    Recorder,
    call_gradients,
    chain_arrays,
    chains,
    first_calls,
    pad_rows,
    recording,
    saliency,
    traced_layers,
)
from lstmviz.engine.native import exact_norms, kernel_name
from lstmviz.engine.tfload import tf
from lstmviz.io.model_data import BINARY, ONE_HOT, SPARSE
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.weights.keras_config import compiled_loss, loss_label

NORM_KEYS = ("norm_h_total", "norm_h_direct", "norm_c_total")


@dataclass
class KerasGraph:
    """A Keras 3 model lstmviz runs through Keras: `inputs` and `outputs` by name (each
    output's shape without the batch), the compile config's `loss` and `loss_weights` (as
    saved), `keras2`: computed as Keras 2 did (its hard_sigmoid, its clipped
    cross-entropies)."""

    model: object
    source: str
    inputs: list[str]
    outputs: list[str]
    compiled: dict = field(default_factory=dict)
    keras2: bool = False
    losses_given: object = None  # a live model's loss objects (model.loss), when compiled

    @property
    def name(self) -> str:
        return str(getattr(self.model, "name", type(self.model).__name__))


def graph_of(model, source: str | None = None, compiled: dict | None = None,
             keras2: bool = False) -> KerasGraph:  # fmt: skip
    """A live Keras 3 model (functional, Sequential or subclassed) as a KerasGraph."""
    name = str(getattr(model, "name", type(model).__name__))
    functional = bool(getattr(model, "_functional", None) is not None or hasattr(
        model, "_inputs_struct"))  # fmt: skip
    inputs = [_name(t, n, "x") for n, t in enumerate(model.inputs)] if functional and getattr(
        model, "inputs", None) else []  # fmt: skip
    outputs = [_name(t, n, "y") for n, t in enumerate(model.outputs)] if inputs else []
    if compiled is None:
        try:
            compiled = dict(model.get_compile_config() or {})
        except (AttributeError, ValueError, TypeError):
            compiled = {}
    source = source or f"keras.Model {name!r} (Keras 3, in memory)"
    given = getattr(model, "loss", None) if getattr(model, "compiled", False) else None
    return KerasGraph(model, source, inputs, outputs, compiled or {}, keras2, given)


def _name(tensor, n: int, stem: str) -> str:
    name = getattr(tensor, "name", None) or f"{stem}{n}"
    return str(name).split(":")[0].split("/")[0]


def load_graph(path: str | Path) -> KerasGraph:
    """The model of a `.keras` file loaded by Keras 3 (its compile config read apart, so a
    custom loss does not stop it), or ModelError naming the file."""
    import keras

    from lstmviz.weights.keras_files import read_keras_archive

    path = Path(path)
    try:
        config, _ = read_keras_archive(path)
        model = keras.saving.load_model(path, compile=False)
    except Exception as exc:  # Keras raises many kinds for files it cannot load
        text = " ".join(str(exc).split())[:300]
        raise ModelError(f"{path}: Keras cannot load this model ({type(exc).__name__}: "
                         f"{text})") from None  # fmt: skip
    return graph_of(model, f"{path}: Keras 3 model (.keras), run by Keras",
                    config.get("compile_config") or {})  # fmt: skip


# ---- losses ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class CallableLoss:
    """A loss given as a callable (y_true, y_pred) -> scalar (a Keras loss object too): its
    per-sample values are its value on each sample alone."""

    fn: object
    name: str = "custom"
    hidden: bool = False

    def __call__(self, y, y_pred, mask):
        value = tf.cast(self.fn(y, y_pred), tf.float32)
        per_sample = tf.stack([tf.cast(self.fn(y[b:b + 1], y_pred[b:b + 1]), tf.float32)
                               for b in range(int(y_pred.shape[0]))])  # fmt: skip
        return per_sample, value


def graph_losses(graph: KerasGraph, given) -> list:
    """One loss per output: `given` (a Keras loss name, a loss object or callable; a list or
    dict by output name), else the compiled ones with their `loss_weights`; ConfigError when
    an output has none."""
    from lstmviz.engine.model import ModelLoss, _keras_loss

    count = max(len(graph.outputs), 1)
    if given is not None and not (isinstance(given, str) and given in LOSSES):
        entries = _per_output(given, graph.outputs, count)
        return [_keras_loss(e) if isinstance(e, str) else CallableLoss(e) for e in entries]
    compiled = graph.compiled or {}
    entries = _per_output(compiled.get("loss"), graph.outputs, count)
    weights = _per_output(compiled.get("loss_weights"), graph.outputs, count)
    losses = []
    for n, (entry, weight) in enumerate(zip(entries, weights, strict=True)):
        name, args = compiled_loss(entry, weight)
        if name is None:
            output = graph.outputs[n] if n < len(graph.outputs) else "the output"
            what = (f"its compiled loss {loss_label(entry)!r} is not a Keras loss lstmviz knows"
                    if loss_label(entry) else "it has no compiled loss")  # fmt: skip
            raise ConfigError("loss", f"{graph.source}: output {output!r}: {what}; give "
                              f"{ref('loss')} with a Keras loss name (e.g. "
                              "sparse_categorical_crossentropy, mse)")  # fmt: skip
        losses.append(ModelLoss(name, tuple(sorted(args.items()))))
    return losses


def _per_output(value, names: list[str], count: int) -> list:
    """A compile argument as one entry per output: a list in output order, a dict by output
    name, or one value for every output."""
    if isinstance(value, list | tuple) and len(value) == count and count > 1:
        return list(value)
    if isinstance(value, dict) and names and set(value) <= set(names) and (
            "class_name" not in value):  # fmt: skip
        return [value.get(name) for name in names]
    return [value] * count


# ---- the compiled computation ---------------------------------------------------------------


class GraphGradients:
    """The compiled forward + backward of a KerasGraph under its losses. Call with the flat
    inputs and targets (batch-major NumPy); returns (named tensors, the layout)."""

    def __init__(self, graph: KerasGraph, losses: list):
        self.graph, self.losses = graph, losses
        self.traced, self.untraced = traced_layers(graph.model, graph.keras2)
        if not self.traced:
            raise ModelError(f"{graph.source}: no recurrent layer lstmviz traces in the model"
                             + (f" ({', '.join(self.untraced)} run by Keras: another cell)"
                                if self.untraced else ""))  # fmt: skip
        self._layouts: dict = {}
        self._tracing: GraphLayout | None = None
        self._step = tf.function(self._compute, reduce_retracing=True, autograph=False)

    def __call__(self, xs: list, ys: list, structure, cancelled=bool):
        self._structure = structure
        xs = [tf.convert_to_tensor(x) for x in xs]
        ys = [tf.zeros([0]) if y is None else tf.convert_to_tensor(y) for y in ys]
        step = self._step.get_concrete_function(xs, ys)
        if self._tracing is not None:
            self._layouts[id(step)] = (step, self._tracing)
            self._tracing = None
        if cancelled():
            raise tf.errors.CancelledError(None, None, "model run cancelled")
        return step(xs, ys), self._layouts[id(step)][1]

    def _compute(self, xs, ys):
        import keras

        model = self.graph.model
        with tf.GradientTape() as tape:
            recorder = Recorder(tape)
            with recording(model, self.traced, recorder):
                outputs = model(_packed(self._structure, xs), training=False)
            outputs = keras.tree.flatten(outputs)
            per_sample, value = 0.0, 0.0
            for loss, y, y_pred in zip(self.losses, ys, outputs, strict=False):
                mask = getattr(y_pred, "_keras_mask", None)
                mask = None if mask is None else tf.transpose(tf.cast(mask, tf.float32))
                if self.graph.keras2:  # Keras 2 clipped probabilities, never read logits
                    y_pred = tf.identity(y_pred)
                sample, total = loss(y, y_pred, mask)
                per_sample, value = per_sample + sample, value + total
            penalty = [tf.cast(v, tf.float32) for v in model.losses]
            if penalty:
                value += tf.add_n(penalty)
        calls = recorder.calls
        found = chains(calls)
        firsts = first_calls(calls, xs)
        names = self._input_names(len(xs))
        named = call_gradients(value, tape, calls, {names[n]: i for n, i in firsts.items()})
        out = {"loss": value, "loss_by_sample": per_sample}
        for n, y_pred in enumerate(outputs):
            out[f"y_pred{n}"] = y_pred
        for k, chain in enumerate(found):
            out |= chain_arrays(k, chain, calls, named)
        for n in sorted(firsts):
            grad = named[f"grad_input_{names[n]}"]
            out[f"grad_input_{names[n]}"] = grad
            out[f"saliency_{names[n]}"] = saliency(grad)
            call = calls[firsts[n]]
            if call.direction.mask is not None and n == min(firsts):
                out["mask"] = call.direction.in_input_order(call.direction.mask)
        self._tracing = GraphLayout.of(found, calls, {n: names[n] for n in firsts})
        return out

    def _input_names(self, count: int) -> list[str]:
        names = self.graph.inputs
        return names if len(names) == count else [f"x{n}" for n in range(count)]


def _packed(structure, xs):
    """The inputs as the model takes them: `structure` a list of names (a dict), "list",
    or None (one array)."""
    if structure is None:
        return xs[0]
    if isinstance(structure, list):
        return dict(zip(structure, xs, strict=True))
    return list(xs)


_COMPILED: dict[tuple, GraphGradients] = {}


def compiled(graph: KerasGraph, losses: list) -> GraphGradients:
    """The GraphGradients of this model object under these losses, kept (the two most
    recently used): a live model trained between calls reads its variables anew."""
    key = (id(graph.model), tuple(map(repr, losses)), graph.keras2, kernel_name())
    found = _COMPILED.pop(key, None)
    if found is None or found.graph.model is not graph.model:
        found = GraphGradients(graph, losses)
    _COMPILED[key] = found
    while len(_COMPILED) > 2:
        del _COMPILED[next(iter(_COMPILED))]
    return found


def graph_arrays(graph: KerasGraph, losses: list, data: GraphData,
                 cancelled=bool) -> dict[str, np.ndarray]:  # fmt: skip
    """The trace arrays of one run (module docstring)."""
    gradients = compiled(graph, losses)
    named, layout = gradients(data.xs, data.ys, data.structure, cancelled)
    arrays = {key: np.asarray(value) for key, value in named.items()}
    arrays["loss"] = np.float32(arrays["loss"])
    arrays["loss_by_sample"] = np.asarray(arrays["loss_by_sample"], np.float32).reshape(-1)
    preds = [arrays.pop(f"y_pred{n}") for n in range(len(data.ys))]
    count = len(layout.names)
    rows = {key: [] for key in NORM_KEYS}
    for k in range(count):
        prefix = f"layer{k}_"
        arrays.pop(prefix + "count", None)
        for grad, norm in NORMS.items():
            if prefix + grad not in arrays:
                continue
            row = arrays.pop(prefix + norm)
            if not exact_norms():
                row = exact_norm(row, arrays[prefix + grad])
            rows[norm].append(row)
        if prefix + "c" not in arrays:  # no cell state: a NaN row
            rows["norm_c_total"].append(np.full(len(arrays[prefix + "h"]), np.nan, np.float32))
        arrays[prefix + "cell"] = np.array(layout.cells[k])
        arrays[prefix + "gate_names"] = np.array(CELL_GATES[layout.cells[k]])
        arrays[prefix + "calls"] = np.int64(layout.calls[k])
        arrays[prefix + "initial_from"] = np.int64(layout.initial_from[k])
    for key, found in rows.items():
        arrays[f"{key}_by_layer"] = pad_rows(found)
    arrays["layer_names"] = np.array(layout.names)
    if "mask" in arrays:
        arrays["mask"] = arrays["mask"] > 0
    _inputs(arrays, data, layout)
    if len(preds) == 1 and data.ys[0] is not None:
        arrays["y"], arrays["y_pred"] = np.asarray(data.ys[0]), preds[0]
    elif len(preds) == 1:
        arrays["y_pred"] = preds[0]
    else:
        for name, y, pred in zip(data.output_names, data.ys, preds, strict=True):
            arrays[f"y_pred_{name}"] = pred
            if y is not None:
                arrays[f"y_{name}"] = np.asarray(y)
    arrays["lstm_kernel"] = np.array(kernel_name())
    bad = np.zeros(arrays["norm_h_total_by_layer"].shape[1], bool)
    lstm = np.array([cell == "lstm" for cell in layout.cells])
    for key in (f"{k}_by_layer" for k in NORM_KEYS):
        values = arrays[key][lstm] if key == "norm_c_total_by_layer" else arrays[key]
        bad |= ~(np.isfinite(values) | np.isnan(values) & _padding(arrays, values, lstm, key)
                 ).all(axis=0)  # fmt: skip
    arrays["nonfinite_steps"] = np.flatnonzero(bad)
    return arrays


def _padding(arrays, values, lstm, key) -> np.ndarray:
    """True where a [L, T] summary's entry is past its direction's own length."""
    lengths = np.array([len(arrays[f"layer{k}_h"]) for k in range(len(lstm))])
    if key == "norm_c_total_by_layer":
        lengths = lengths[lstm]
    return np.arange(values.shape[1])[None, :] >= lengths[:, None]


def _inputs(arrays: dict, data: GraphData, layout) -> None:
    """`x` (time-major) for a model of one sequence input whose saliency it matches, else
    `x_{name}` per input; one input's `grad_input_*`/`saliency_*` as `grad_input`/`saliency`."""
    names = data.input_names
    single = len(names) == 1
    for name, x in zip(names, data.xs, strict=True):
        x = np.asarray(x)
        sal = arrays.get(f"saliency_{name}")
        sequence = x.ndim >= 2 and sal is not None and x.shape[1] == sal.shape[1]
        if single and sequence:
            arrays["x"] = np.ascontiguousarray(np.swapaxes(x, 0, 1))
            arrays["grad_input"] = arrays.pop(f"grad_input_{name}")
            arrays["saliency"] = arrays.pop(f"saliency_{name}")
        else:
            arrays[f"x_{name}"] = np.ascontiguousarray(np.swapaxes(x, 0, 1) if sequence else x)


# ---- data -----------------------------------------------------------------------------------


@dataclass
class GraphData:
    """Checked data for one run: `xs` one array per input (input order), `ys` one per output
    (None where not given), how the model takes them (`structure`), and where they came
    from."""

    xs: list
    ys: list
    input_names: list[str]
    output_names: list[str]
    structure: object = "list"
    source: str = ""


def _run_arrays(graph, losses, data, cancelled):
    start = time.perf_counter()
    arrays = graph_arrays(graph, losses, data, cancelled)
    arrays["model_seconds"] = np.float32(time.perf_counter() - start)
    return arrays


def graph_run(graph: KerasGraph, losses: list, data: GraphData, config: RunConfig,
              cancelled=bool, keep=bool):  # fmt: skip
    """Generator: a TraceUpdate when it starts, one when the gradients are in, then the
    GradientTrace. One unit of work: a cancel ends the run without a trace."""
    from lstmviz.engine.stopping import Units

    yield TraceUpdate(0, 1, f"{graph.name}: recurrent calls run by lstmviz, the graph by Keras")
    units, results = Units(1, cancelled, keep), []
    for _ in units:
        units.run(lambda: results.append(_run_arrays(graph, losses, data, cancelled)))
    if not results:
        return
    arrays = results[0]
    arrays["model_source"] = np.array(graph.source)
    arrays["model_summary"] = np.array(summary(graph, losses, data))
    if data.source:
        arrays["inputs_source"] = np.array(data.source)
    rows = {f"{k}_by_layer": arrays[f"{k}_by_layer"] for k in NORM_KEYS}
    yield TraceUpdate(1, 1, "done", rows)
    yield GradientTrace("model", config, arrays)


def summary(graph: KerasGraph, losses: list, data: GraphData) -> str:
    """The model's layers (Keras's own summary), what lstmviz traced, the inputs and outputs
    used and the loss."""
    import io

    text = io.StringIO()
    try:
        graph.model.summary(print_fn=lambda line, *a, **k: text.write(line + "\n"),
                            line_length=100)  # fmt: skip
    except Exception:  # a subclassed model Keras cannot summarise
        text.write(f"Model {graph.name!r} ({type(graph.model).__name__})\n")
    lines = [f"Model {graph.name!r}: {graph.source}", text.getvalue().rstrip()]
    gradients = compiled(graph, losses)
    traced = ", ".join(t.name for t in gradients.traced.values())
    lines.append(f"Traced by lstmviz: {traced}.")
    if gradients.untraced:
        lines.append(f"Run by Keras; not traced: {', '.join(gradients.untraced)}.")
    shapes = ", ".join(f"{name} {list(np.shape(x))}" for name, x in zip(
        data.input_names, data.xs, strict=True))  # fmt: skip
    lines.append(f"Inputs: {shapes}. Outputs: {', '.join(data.output_names)}. Loss: "
                 + ", ".join(getattr(loss, "name", "custom") for loss in losses) + ".")
    return "\n".join(lines)


def random_graph_data(graph: KerasGraph, losses: list, steps: int, batch: int,
                      seed: int) -> GraphData:  # fmt: skip
    """Seeded data of a functional model's input and output shapes: token ids in
    [1, vocabulary) for an input feeding an Embedding, N(0, 1) features otherwise; targets by
    each output's loss (class indices, one-hot rows, 0/1 labels or N(0, 1))."""
    rng = np.random.default_rng(seed)
    model = graph.model
    if not graph.inputs:
        raise InputError(f"{graph.source}: a subclassed model does not say what it takes; "
                         f"give its data ({ref('inputs', 'DATA.npz')})")  # fmt: skip
    vocab = _vocabularies(model)
    xs = []
    for n, tensor in enumerate(model.inputs):
        shape = [batch, *(steps if s is None else int(s) for s in tensor.shape[1:])]
        if n in vocab:
            xs.append(rng.integers(1, max(vocab[n], 2), shape).astype(np.int32))
        elif "int" in str(tensor.dtype):
            xs.append(rng.integers(0, 2, shape).astype(np.int32))
        else:
            xs.append(rng.standard_normal(shape).astype(np.float32))
    ys = []
    for tensor, loss in zip(model.outputs, losses, strict=False):
        shape = [batch, *(steps if s is None else int(s) for s in tensor.shape[1:])]
        width, lead = shape[-1], shape[:-1]
        name = getattr(loss, "name", "")
        if name in SPARSE:
            ys.append(rng.integers(0, width, lead).astype(np.int32))
        elif name in ONE_HOT:
            ys.append(np.eye(width, dtype=np.float32)[rng.integers(0, width, lead)])
        elif name in BINARY:
            ys.append(rng.integers(0, 2, shape).astype(np.float32))
        else:
            ys.append(rng.standard_normal(shape).astype(np.float32))
    described = ", ".join(f"{name} {list(x.shape)}" for name, x in zip(graph.inputs, xs,
                                                                         strict=True))  # fmt: skip
    return GraphData(xs, ys, graph.inputs, graph.outputs, _structure(model),
                     f"random data (seed {seed}): {described}")  # fmt: skip


def _structure(model):
    """How the model takes its inputs: None (one array), a list of names (a dict), "list"."""
    struct = getattr(model, "_inputs_struct", None)
    if isinstance(struct, dict):
        return list(struct)
    return None if len(model.inputs) == 1 and not isinstance(struct, list | tuple) else "list"


def _vocabularies(model) -> dict[int, int]:
    """{input position: the input_dim of the Embedding it feeds directly}."""
    import keras

    wanted = {id(t): n for n, t in enumerate(model.inputs)}
    found = {}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if not isinstance(layer, keras.layers.Embedding):
            continue
        for node in getattr(layer, "_inbound_nodes", []):
            for tensor in node.input_tensors:
                if id(tensor) in wanted:
                    found[wanted[id(tensor)]] = int(layer.input_dim)
    return found


def graph_data(graph: KerasGraph, losses: list, x, y, where: str = "data") -> GraphData:
    """x and y as Keras's `fit` takes them (an array; a list in input order; a dict by input
    name) checked against the model, or InputError naming what the model wants."""
    names = graph.inputs
    if isinstance(x, dict):
        keys = names or list(x)
        missing = [name for name in keys if name not in x]
        if missing:
            raise InputError(f"{where}: no input named {', '.join(map(repr, missing))}; the "
                             f"model takes {_listed(names)}")  # fmt: skip
        xs, structure = [x[name] for name in keys], list(keys)
    elif isinstance(x, list | tuple):
        xs, structure = list(x), "list"
    else:
        xs, structure = [x], None if len(names) <= 1 else "list"
    if names and len(xs) != len(names):
        raise InputError(f"{where}: {len(xs)} input array{'s' * (len(xs) != 1)} given; the "
                         f"model takes {_listed(names)}")  # fmt: skip
    if names and structure is None and _structure(graph.model) is not None:
        structure = _structure(graph.model)
    input_names = names or [f"x{n}" for n in range(len(xs))]
    vocab = _vocabularies(graph.model) if names else {}
    xs = [_checked_input(graph, n, name, value, vocab.get(n), where)
          for n, (name, value) in enumerate(zip(input_names, xs, strict=True))]  # fmt: skip
    batch = xs[0].shape[0]
    outputs = graph.outputs or [f"y{n}" for n in range(len(losses))]
    ys = _targets(y, outputs, where)
    for name, value in zip(outputs, ys, strict=True):
        if value is not None and np.shape(value)[:1] != (batch,):
            raise InputError(f"{where}: y for {name!r} has {np.shape(value)[:1] or 0} samples "
                             f"but the inputs have {batch}")  # fmt: skip
    if any(value is None for value in ys) and not all(
            isinstance(loss, CallableLoss) for loss in losses):  # fmt: skip
        raise InputError(f"{where}: the loss needs targets y for every output "
                         f"({_listed(outputs)})")  # fmt: skip
    return GraphData(xs, ys, input_names, outputs, structure)


def _listed(names: list[str]) -> str:
    return ", ".join(map(repr, names)) if names else "its inputs"


def _checked_input(graph, n: int, name: str, value, vocabulary, where: str) -> np.ndarray:
    value = np.asarray(value)
    if value.dtype.kind not in "fiub" or value.ndim == 0:
        raise InputError(f"{where}: input {name!r} is not an array of numbers")
    inputs = getattr(graph.model, "inputs", None) if graph.inputs else None
    if inputs:
        expected = tuple(inputs[n].shape)
        if value.ndim != len(expected) or any(e is not None and e != s for e, s in zip(
                expected, value.shape, strict=False)):  # fmt: skip
            wanted = "(" + ", ".join("None" if e is None else str(e) for e in expected) + ")"
            raise InputError(f"{where}: input {name!r} has shape {list(value.shape)}, the "
                             f"model takes {wanted}")  # fmt: skip
    if vocabulary is not None:
        if value.dtype.kind == "f" and not np.all(value == np.round(value)):
            raise InputError(f"{where}: input {name!r} must hold integer token ids")
        if value.size and (value.max() >= vocabulary or value.min() < 0):
            raise InputError(f"{where}: input {name!r} holds token id {int(value.max())}, "
                             f"outside the vocabulary of {vocabulary}")  # fmt: skip
        return value.astype(np.int32)
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise InputError(f"{where}: input {name!r} holds NaN or Inf")
    dtype = str(inputs[n].dtype) if inputs else "float32"
    return value.astype(np.int32 if "int" in dtype else np.float32)


def _targets(y, outputs: list[str], where: str) -> list:
    if y is None:
        return [None] * len(outputs)
    if isinstance(y, dict):
        missing = [name for name in outputs if name not in y]
        if missing:
            raise InputError(f"{where}: no targets for output {', '.join(map(repr, missing))}; "
                             f"the model's outputs are {_listed(outputs)}")  # fmt: skip
        y = [y[name] for name in outputs]
    elif not isinstance(y, list | tuple):
        y = [y]
    if len(y) != len(outputs):
        raise InputError(f"{where}: {len(y)} target arrays for {len(outputs)} outputs "
                         f"({_listed(outputs)})")  # fmt: skip
    out = []
    for value in y:
        value = np.asarray(value)
        out.append(value.astype(np.float32) if value.dtype.kind in "fb" else value)
    return out


def load_graph_data(path: str, targets: str | None, graph: KerasGraph) -> tuple:
    """(x, y) from a data file for `graph`: an `.npz` with one array per input named as the
    input, or `x0`, `x1`, …, or `x` for one input; targets `y` or `y_{output name}` (or a
    `--targets` `.npy` for one output); an `.npy` is the one input."""
    from lstmviz.io.inputs import read_numpy

    if not str(path).endswith(".npz"):
        x = read_numpy(Path(path), ("x",))
        y = None if targets is None else read_numpy(Path(targets), ())
        return (x if not isinstance(x, dict) else x["x"]), y
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    names = graph.inputs
    if names and all(name in arrays for name in names):
        x = {name: arrays[name] for name in names}
    elif names and all(f"x{n}" in arrays for n in range(len(names))):
        x = [arrays[f"x{n}"] for n in range(len(names))]
    elif "x" in arrays and len(names) <= 1:
        x = arrays["x"]
    else:
        wanted = " or ".join(filter(None, [
            ", ".join(names), ", ".join(f"x{n}" for n in range(len(names))),
            "x" if len(names) <= 1 else ""]))  # fmt: skip
        raise InputError(f"{path}: its arrays ({', '.join(arrays)}) do not name the model's "
                         f"inputs; it wants {wanted}")  # fmt: skip
    outputs = graph.outputs
    if targets is not None:
        y = read_numpy(Path(targets), ())
    elif "y" in arrays and len(outputs) <= 1:
        y = arrays["y"]
    elif outputs and all(f"y_{name}" in arrays for name in outputs):
        y = {name: arrays[f"y_{name}"] for name in outputs}
    else:
        y = None
    return x, y


def run_graph(graph: KerasGraph, config: RunConfig, cancelled=bool, keep=bool):
    """Model mode's generator for a KerasGraph (data from config.inputs, else random)."""
    from dataclasses import replace

    losses = graph_losses(graph, None if config.loss in LOSSES else config.loss)
    if config.inputs:
        x, y = load_graph_data(config.inputs, config.targets, graph)
        data = graph_data(graph, losses, x, y, config.inputs)
        data.source = f"{config.inputs}: " + ", ".join(
            f"{name} {list(np.shape(v))}" for name, v in zip(data.input_names, data.xs,
                                                             strict=True))  # fmt: skip
    else:
        data = random_graph_data(graph, losses, config.steps, config.batch, config.seed)
    first = data.xs[0]
    config = replace(config, mode="model", batch=int(first.shape[0]),
                     steps=int(first.shape[1]) if first.ndim >= 2 else config.steps,
                     loss=getattr(losses[0], "name", "custom"))  # fmt: skip
    return graph_run(graph, losses, data, config, cancelled, keep)


def graph_trace(model, x=None, y=None, loss=None) -> GradientTrace:
    """`lstmviz.model_gradients` for a model lstmviz runs through Keras (a KerasGraph or a
    live keras.Model)."""
    graph = model if isinstance(model, KerasGraph) else graph_of(model)
    losses = graph_losses(graph, loss)
    if x is None:
        data = random_graph_data(graph, losses, 20, 8, 0)
    else:
        data = graph_data(graph, losses, x, y, "model_gradients")
    config = RunConfig(mode="model", loss="mean_h", model=None)
    first = data.xs[0]
    from dataclasses import replace

    config = replace(config, batch=int(first.shape[0]),
                     steps=int(first.shape[1]) if first.ndim >= 2 else config.steps)  # fmt: skip
    *_, trace = graph_run(graph, losses, data, config)
    return trace
