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

import json
import re
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from lstmviz.core.config import LOSSES, RunConfig, anchor_steps, anchors_text
from lstmviz.core.errors import ConfigError, ModelError, ref
from lstmviz.core.schema import CELL_GATES
from lstmviz.engine.autodiff.keras_graph import (
    GraphLayout,
    Recorder,
    anchored_norms,
    call_gradients,
    chain_arrays,
    chains,
    first_calls,
    pad_rows,
    recording,
    saliency,
    traced_layers,
)
from lstmviz.engine.autodiff.model_loss import CallableLoss, ModelLoss, keras_loss
from lstmviz.engine.modes.trace_arrays import NORMS, exact_norm
from lstmviz.engine.native.kernels import exact_norms, kernel_name
from lstmviz.engine.problem.graph_data import (
    GraphData,
    graph_data,
    load_graph_data,
    random_graph_data,
)
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.weights.formats.keras_config import compiled_loss, loss_label
from lstmviz.weights.model_spec import layer_table

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
    origin: object = None  # a tf_keras model this one is the Keras 3 twin of (`refresh`)

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
    outputs = list(getattr(model, "output_names", None) or []) if inputs else []
    if inputs and len(outputs) != len(model.outputs):
        outputs = [_name(t, n, "y") for n, t in enumerate(model.outputs)]
    if compiled is None:
        try:
            compiled = dict(model.get_compile_config() or {})
        except (AttributeError, ValueError, TypeError):
            compiled = {}
    source = source or f"keras.Model {name!r} (Keras 3, in memory)"
    return KerasGraph(model, source, inputs, outputs, compiled or {}, keras2)


def live_graph(model) -> KerasGraph:
    """A live model as a KerasGraph: a Keras 3 model itself; a tf_keras (Keras 2) one as its
    Keras 3 twin built from its `.h5` (`_legacy_h5`), computed as Keras 2 does, whose weights
    `refresh` copies from the live model before every run."""
    if not type(model).__module__.startswith("tf_keras"):
        return graph_of(model)
    if model in _TWINS:
        return _TWINS[model]
    import tempfile
    import warnings

    name = str(getattr(model, "name", "model"))
    with tempfile.TemporaryDirectory(prefix="lstmviz-") as folder:
        file = Path(folder) / "model.h5"
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "You are saving your model as an HDF5 file")
            model.save(file)
        graph = _legacy_h5(file)
    graph.source = f"keras.Model {name!r} (tf_keras, in memory), run by Keras"
    graph.origin = model
    _TWINS[model] = graph
    return graph


_TWINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tf_keras model -> its twin


def refresh(graph: KerasGraph) -> None:
    """Give a tf_keras model's Keras 3 twin the live model's current weights, layer by layer."""
    if graph.origin is None:
        return
    for layer in graph.origin.layers:
        values = layer.get_weights()
        if values:
            graph.model.get_layer(layer.name).set_weights(values)


def _name(tensor, n: int, stem: str) -> str:
    name = getattr(tensor, "name", None) or f"{stem}{n}"
    return str(name).split(":")[0].split("/")[0]


def load_graph(path: str | Path) -> KerasGraph:
    """The model of a `.keras` file loaded by Keras 3 (its compile config read apart, so a
    custom loss does not stop it), or of a full-model `.h5` (Keras 2, or Keras 3's legacy
    writer: `_legacy_h5`); ModelError naming the file when Keras cannot build it."""
    import keras

    from lstmviz.weights.formats.keras_files import read_keras_archive

    path = Path(path)
    try:
        if path.suffix.lower() in (".h5", ".hdf5"):
            return _legacy_h5(path)
        config, _ = read_keras_archive(path)
        model = keras.saving.load_model(path, compile=False, safe_mode=True)
    except ModelError:
        raise
    except Exception as exc:  # Keras raises many kinds for files it cannot load
        text = " ".join(str(exc).split())[:300]
        raise ModelError(f"{path}: Keras cannot load this model ({type(exc).__name__}: "
                         f"{text})") from None  # fmt: skip
    return graph_of(model, f"{path}: Keras 3 model (.keras), run by Keras",
                    config.get("compile_config") or {})  # fmt: skip


# Arguments Keras 2 wrote that no Keras 3 layer takes
_KERAS2_ONLY = ("time_major",)
_UNRECOGNIZED = re.compile(r"Unrecognized keyword arguments passed to (\w+): \{(.*)\}")


def _legacy_h5(path: Path) -> KerasGraph:
    """A full-model `.h5` built by Keras 3 from its config, the arguments Keras 2 wrote and
    Keras 3 refuses (`time_major`, …) left out, its weights loaded by Keras's legacy reader.
    A Keras 2 file computes as Keras 2 did (`KerasGraph.keras2`)."""
    import h5py
    from keras.src.legacy.saving import legacy_h5_format, saving_utils

    from lstmviz.weights.formats.keras_files import h5_text

    with h5py.File(path, "r") as f:
        config = json.loads(h5_text(f.attrs.get("model_config")) or "null")
        version = h5_text(f.attrs.get("keras_version")) or "2"
        training = h5_text(f.attrs.get("training_config"))
        if config is None:
            raise ModelError(f"{path}: holds weights only, no model config")
        text = json.dumps(config)
        if '"class_name": "Lambda"' in text:  # its code would run on loading
            raise ModelError(f"{path}: a Lambda layer holds Python code, which lstmviz does "
                             "not run")  # fmt: skip
        if '"time_major": true' in text:
            raise ModelError(f"{path}: a layer has time_major=True, which lstmviz does not run")
        for name in _KERAS2_ONLY:
            _drop(config, None, {name})
        for _ in range(20):  # each round drops the arguments Keras 3 named
            try:
                model = saving_utils.model_from_config(config)
                break
            except (ValueError, TypeError) as exc:
                said = " ".join(str(e) for e in (exc, exc.__cause__, exc.__context__) if e)
                found = _UNRECOGNIZED.search(said)
                if found is None:
                    raise
                keys = set(re.findall(r"'(\w+)'", found.group(2)))
                _drop(config, found.group(1), keys)
        else:
            raise ModelError(f"{path}: Keras 3 cannot build its config")
        weights = f.get("model_weights", f)
        legacy_h5_format.load_weights_from_hdf5_group(weights, model)
    keras2 = not version.lstrip().startswith(("3", "4", "5"))
    compiled = json.loads(training) if training else {}
    what = f"Keras {version} model ({path.suffix}), run by Keras"
    return graph_of(model, f"{path}: {what}", compiled, keras2=keras2)


def _drop(config, class_name: str | None, keys: set[str]) -> None:
    """Remove `keys` from the config of every layer of `class_name` (None: any) in a nested
    config."""
    if isinstance(config, dict):
        if class_name in (None, config.get("class_name")) and isinstance(config.get("config"),
                                                                          dict):  # fmt: skip
            for key in keys:
                config["config"].pop(key, None)
        for value in config.values():
            _drop(value, class_name, keys)
    elif isinstance(config, list):
        for value in config:
            _drop(value, class_name, keys)


# ---- losses ---------------------------------------------------------------------------------


def graph_losses(graph: KerasGraph, given) -> list:
    """One loss per output: `given` (a Keras loss name, a loss object or callable; a list or
    dict by output name), else the compiled ones with their `loss_weights`; ConfigError when
    an output has none."""
    count = max(len(graph.outputs), 1)
    if given is not None and not (isinstance(given, str) and given in LOSSES):
        entries = _per_output(given, graph.outputs, count)
        return [keras_loss(e) if isinstance(e, str) else CallableLoss(e) for e in entries]
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
        self.summaries: dict = {}  # the summary text by input shapes
        self._tracing: GraphLayout | None = None
        self._steps: dict[tuple[int, ...], object] = {}  # per anchors (docs/diagnosis.md)

    def __call__(self, xs: list, ys: list, structure, cancelled=bool, anchors=None):
        self._structure = structure
        xs = [tf.convert_to_tensor(x) for x in xs]
        ys = [tf.zeros([0]) if y is None else tf.convert_to_tensor(y) for y in ys]
        key = tuple(anchors or ())
        if key not in self._steps:
            self._steps[key] = tf.function(self._computing(key), reduce_retracing=True,
                                           autograph=False)  # fmt: skip
        step = self._steps[key].get_concrete_function(xs, ys)
        if self._tracing is not None:
            self._layouts[id(step)] = (step, self._tracing)
            self._tracing = None
        if cancelled():
            raise tf.errors.CancelledError(None, None, "model run cancelled")
        return step(xs, ys), self._layouts[id(step)][1]

    def _computing(self, anchors: tuple[int, ...]):
        """`_compute` for these anchors: a function of the tensors alone (what TensorFlow
        traces)."""
        return lambda xs, ys: self._compute(xs, ys, anchors)

    def _compute(self, xs, ys, anchors=()):
        import keras

        model = self.graph.model
        # persistent: the anchored passes differentiate again (in a graph, free otherwise)
        with tf.GradientTape(persistent=True) as tape:
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
        named = call_gradients(value, tape, calls, {names[n]: i for n, i in firsts.items()},
                               penalized=bool(penalty))  # fmt: skip
        out = {"loss": value, "loss_by_sample": per_sample}
        for n, y_pred in enumerate(outputs):
            out[f"y_pred{n}"] = y_pred
        for k, chain in enumerate(found):
            out |= chain_arrays(k, chain, calls, named)
        out |= anchored_norms(tape, value, outputs, calls, found, anchors)
        for n in sorted(firsts):
            grad = named[f"grad_input_{names[n]}"]
            out[f"grad_input_{names[n]}"] = grad
            out[f"saliency_{names[n]}"] = saliency(grad)
            call = calls[firsts[n]]
            if call.direction.mask is not None and n == min(firsts):
                out["mask"] = call.direction.in_input_order(call.direction.mask)
        self._tracing = GraphLayout.of(found, calls)
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


def graph_arrays(graph: KerasGraph, losses: list, data: GraphData, cancelled=bool,
                 anchors: list[int] | None = None) -> dict[str, np.ndarray]:  # fmt: skip
    """The trace arrays of one run (module docstring); `anchors` the output steps whose error
    alone is followed back (None: the default ones)."""
    gradients = compiled(graph, losses)
    named, layout = gradients(data.xs, data.ys, data.structure, cancelled, anchors)
    arrays = {key: np.asarray(value) for key, value in named.items()}
    arrays["loss"] = np.float32(arrays["loss"])
    arrays["loss_by_sample"] = np.asarray(arrays["loss_by_sample"], np.float32).reshape(-1)
    preds = [arrays.pop(f"y_pred{n}") for n in range(len(data.ys))]
    count = len(layout.names)
    rows = {key: [] for key in NORM_KEYS}
    anchored = {"h": [], "c": []}
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
        # the error of one step [A, T_k]: its own passes, or (a loss on one step) the totals
        for state, norm in (("h", "norm_h_total"), ("c", "norm_c_total")):
            anchored[state].append(arrays.pop(f"{prefix}anchor_norm_{state}", None))
            if anchored[state][-1] is None:
                anchored[state][-1] = rows[norm][-1][None]
        arrays[prefix + "cell"] = np.array(layout.cells[k])
        arrays[prefix + "gate_names"] = np.array(CELL_GATES[layout.cells[k]])
        arrays[prefix + "calls"] = np.int64(layout.calls[k])
        arrays[prefix + "initial_from"] = np.int64(layout.initial_from[k])
    for key, found in rows.items():
        arrays[f"{key}_by_layer"] = pad_rows(found)
    arrays["anchors_by_layer"] = np.stack([arrays.pop(f"layer{k}_anchor") for k in range(count)]
                                          ).astype(np.int64)  # fmt: skip
    for state, found in anchored.items():
        width = max(rows.shape[1] for rows in found)
        arrays[f"anchor_norm_{state}_by_layer"] = np.stack([pad_rows(list(rows) + [
            np.zeros(width)])[:-1] for rows in found])  # fmt: skip
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


def _run_arrays(graph, losses, data, cancelled, anchors=None):
    start = time.perf_counter()
    refresh(graph)
    arrays = graph_arrays(graph, losses, data, cancelled, anchors)
    arrays["model_seconds"] = np.float32(time.perf_counter() - start)
    return arrays


def graph_run(graph: KerasGraph, losses: list, data: GraphData, config: RunConfig,
              cancelled=bool, keep=bool):  # fmt: skip
    """Generator: a TraceUpdate when it starts, one when the gradients are in, then the
    GradientTrace. One unit of work: a cancel ends the run without a trace."""
    from lstmviz.engine.stopping import Units

    anchors = anchor_steps(config.anchors, data.output_steps())
    yield TraceUpdate(0, 1, f"{graph.name}: recurrent calls run by lstmviz, the graph by Keras")
    units, results = Units(1, cancelled, keep), []
    for _ in units:
        units.run(lambda: results.append(_run_arrays(graph, losses, data, cancelled, anchors)))
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
    """The model's layers (name, class, output shape, parameters, as a chain's summary), what
    lstmviz traced and Keras ran untraced, the inputs and outputs used and the loss; kept
    with the compiled computation."""
    gradients = compiled(graph, losses)
    key = tuple((name, np.shape(x)) for name, x in zip(data.input_names, data.xs, strict=True))
    if key in gradients.summaries:
        return gradients.summaries[key]
    rows = [("Layer", "Class", "Output shape", "Params")]
    for layer in getattr(graph.model, "layers", []):
        inner = getattr(layer, "layer", None) or getattr(layer, "forward_layer", None)
        cls = type(layer).__name__ + (f"({type(inner).__name__})" if inner is not None else "")
        try:
            outputs = layer.output if len(layer._inbound_nodes) == 1 else None
            outputs = outputs if isinstance(outputs, list | tuple | type(None)) else [outputs]
            shape = (f"{len(layer._inbound_nodes)} calls" if outputs is None
                     else ", ".join(str(tuple(o.shape)) for o in outputs))  # fmt: skip
        except (AttributeError, ValueError):  # a subclassed model's layers have no output
            shape = "?"
        rows.append((layer.name, cls, shape, f"{layer.count_params():,}"))
    lines = [f"Model {graph.name!r}: {graph.source}", *layer_table(rows)]
    lines.append(f"Total params: {graph.model.count_params():,}")
    traced = ", ".join(t.name for t in gradients.traced.values())
    lines.append(f"Traced by lstmviz: {traced}.")
    if gradients.untraced:
        lines.append(f"Run by Keras; not traced: {', '.join(gradients.untraced)}.")
    lines.append(f"Inputs: {data.shapes()}. Outputs: {', '.join(data.output_names)}. Loss: "
                 + ", ".join(getattr(loss, "name", "custom") for loss in losses) + ".")
    gradients.summaries[key] = "\n".join(lines)
    return gradients.summaries[key]


def run_graph(graph: KerasGraph, config: RunConfig, cancelled=bool, keep=bool):
    """Model mode's generator for a KerasGraph (data from config.inputs, else random)."""
    from dataclasses import replace

    losses = graph_losses(graph, None if config.loss in LOSSES else config.loss)
    if config.inputs:
        x, y = load_graph_data(config.inputs, config.targets, graph)
        data = graph_data(graph, losses, x, y, config.inputs)
        data.source = f"{config.inputs}: {data.shapes()}"
    else:
        data = random_graph_data(graph, losses, config.steps, config.batch, config.seed)
    config = data.sized(replace(config, mode="model", loss=getattr(losses[0], "name", "custom")))
    return graph_run(graph, losses, data, config, cancelled, keep)


def graph_trace(model, x=None, y=None, loss=None, anchors=None) -> GradientTrace:
    """`lstmviz.model_gradients` for a model lstmviz runs through Keras (a KerasGraph or a
    live keras.Model)."""
    graph = model if isinstance(model, KerasGraph) else live_graph(model)
    losses = graph_losses(graph, loss)
    if x is None:
        data = random_graph_data(graph, losses, 20, 8, 0)
    else:
        data = graph_data(graph, losses, x, y, "model_gradients")
    config = data.sized(RunConfig(mode="model", loss="mean_h", model=None,
                                  anchors=anchors_text(anchors)))  # fmt: skip
    *_, trace = graph_run(graph, losses, data, config)
    return trace
