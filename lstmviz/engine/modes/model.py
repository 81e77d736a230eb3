"""Model mode: the gradient flow of a user's whole model under its own loss, every recurrent
direction (LSTM, GRU, SimpleRNN).

One tape over the model's forward (`autodiff.forward.ModelForward`) gives, per direction k
(forward before backward, in model order: the trace's `layer_names`; its cell in
`layer{k}_cell`): h (an LSTM's c), the total dL/dh_t (dL/dc_t) from the probes, the direct
partial through the direction's output, the weight gradients and the gates' activity (under
`layer{k}_gate_names`); and dL/d(input of the first recurrent layer) (the embedding vectors,
for token ids): the input saliency. A direction without a cell state has a NaN row of
`norm_c_total_by_layer`. Every per-timestep array is indexed by input position t. The loss is
the model's compiled Keras loss (or the one given), the mean over the batch as Keras reports
it (over the unmasked steps of a sequence output); a stack of LSTM layers without a head takes
a loss on its top output h: mean_h, last_mse or seq_mse.

`model_gradients` is the API; `run_model` the generator the CLI and the GUI drive.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import fields, replace
from pathlib import Path

import numpy as np

from lstmviz.core.config import (
    LOSSES,
    RunConfig,
    anchor_steps,
    anchors_text,
    check_fits,
    in_python_terms,
)
from lstmviz.core.errors import ConfigError, GraphModel, InputError, ref
from lstmviz.engine.autodiff.forward import ModelForward, flat_weights, gate_activity, with_shapes
from lstmviz.engine.autodiff.gradients import (
    anchor_passes,
    gradient_sources,
    graph_last_axis_norm,
    graph_norms,
    graph_step_norm,
    named_gradients,
)
from lstmviz.engine.autodiff.model_loss import ModelLoss, keras_loss
from lstmviz.engine.modes.trace_arrays import NORMS, exact_norm
from lstmviz.engine.native.kernels import exact_norms, kernel_name
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.engine.stopping import Units
from lstmviz.io.files import torch_program
from lstmviz.io.model_data import SPARSE, check_data, load_data, random_data
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.weights.formats.keras_config import loss_name
from lstmviz.weights.model_spec import RECURRENT, LayerSpec, ModelSpec, shape_text

NORM_KEYS = ("norm_h_total", "norm_h_direct", "norm_c_total")


def resolve_loss(spec: ModelSpec, given: str | None) -> ModelLoss:
    """The file's compiled loss when it has one, else `given`. A model without a head (a stack
    of LSTM layers, or a model whose last layer is an LSTM) may take a hidden-state loss on its
    output (default mean_h); a model with a head needs a Keras loss: ConfigError without one."""
    if spec.loss is not None and not spec.stack:
        # another name Keras takes for the compiled loss ("mse") is that loss
        if given and given not in LOSSES and loss_name(given) != spec.loss:  # default mean_h
            raise ConfigError("loss", f"{spec.source}: the model is compiled with {spec.loss}; "
                              f"{ref('loss')} is for a model without a compiled loss (or with "
                              "one lstmviz does not know)")  # fmt: skip
        return ModelLoss(spec.loss, tuple(sorted(spec.loss_args.items())))
    if spec.stack or spec.layers[-1].kind in RECURRENT:
        name = given or "mean_h"
        return ModelLoss(name, hidden=True) if name in LOSSES else keras_loss(name)
    if not given or given in LOSSES:
        # mean_h is also what nothing given defaults to; last_mse and seq_mse were chosen
        last = spec.layers[-1].class_name
        why = (f"{given} is a loss on the output of a model ending in an LSTM, this one ends "
               f"in {last}; " if given and given != "mean_h" else "")  # fmt: skip
        raise ConfigError(
            "loss",
            f"{spec.source}: {spec.no_loss}; {why}give {ref('loss')} with a Keras "
            "loss name (e.g. binary_crossentropy, sparse_categorical_crossentropy, mse)",
        )
    return keras_loss(given)


class ModelGradients:
    """The compiled forward + backward of one model under one loss, reusable with new weights
    (a training run records many times with one). Call with x, y (batch-major) and the
    weights in `weight_names` order; returns the named tensors (see `model_arrays`)."""

    def __init__(self, spec: ModelSpec, loss: ModelLoss):
        self.spec, self.loss = spec, loss
        self.forward = ModelForward(spec)
        self.names = spec.lstm_directions()
        # autograph=False: the computation is written in TensorFlow ops (its loops are Python
        # loops over layers, or explicit while loops); converting its code would be most of
        # the first call's time (bench/bench_model.py)
        self._steps: dict[tuple[int, ...], Callable] = {}  # per anchors (docs/diagnosis.md)
        self._keras_weights = {layer.name: layer.weights for layer in spec.layers
                               if layer.kind == "keras"}  # what those layers hold  # fmt: skip

    def load_keras_weights(self, spec: ModelSpec) -> None:
        """Give the layers Keras runs the weights of `spec` (a model of the same structure):
        the compiled function reads their variables. Layers whose weights are the same values
        are left as they are."""
        from lstmviz.weights.live.keras_rebuild import load_layer_weights

        for layer in spec.layers:
            if layer.name not in self._keras_weights:
                continue
            held = self._keras_weights[layer.name]
            if held is not None and all(np.array_equal(held[k], v)
                                        for k, v in layer.weights.items()):  # fmt: skip
                continue
            load_layer_weights(self.forward.keras[layer.name], layer)
            self._keras_weights[layer.name] = layer.weights

    def forget_keras_weights(self) -> None:
        """Say that the layers Keras runs were given other weights (assigned directly): the
        next `load_keras_weights` loads every one of them."""
        self._keras_weights = dict.fromkeys(self._keras_weights)

    def __call__(self, x, y, weights=None, cancelled=bool, anchors=None) -> dict[str, tf.Tensor]:
        """x and y batch-major as Keras takes them (NumPy); weights in `weight_names` order
        (the spec's own when None). The first call of a shape traces the graph (seconds for a
        big model); `cancelled()` is asked once that is done, before the computation (which
        raises tf.errors.CancelledError then: the native kernels would not see a cancel that
        came before they started). `anchors`: the steps whose error alone is followed back
        (None: the last, the first for backward directions; `anchored_norms`)."""
        weights = flat_weights(self.spec) if weights is None else weights
        y = tf.zeros([0]) if y is None else tf.convert_to_tensor(y)
        x = tf.convert_to_tensor(np.ascontiguousarray(np.swapaxes(np.asarray(x), 0, 1)))
        weights = [_tensor(w) for w in weights]
        step = self.function(anchors).get_concrete_function(x, y, weights)
        if cancelled():
            raise tf.errors.CancelledError(None, None, "model run cancelled")
        return step(x, y, weights)

    def function(self, anchors=None):
        """The tf.function of (x, y, weights) for these anchors (None: the default ones), made
        once each."""
        key = tuple(anchors or ())
        if key not in self._steps:
            self._steps[key] = tf.function(lambda x, y, weights: self._compute(
                x, y, weights, key), reduce_retracing=True, autograph=False)  # fmt: skip
        return self._steps[key]

    def _compute(self, x, y, weights, anchors=()):
        # persistent: the anchored passes differentiate again (in a graph this costs nothing
        # where they do not: what no output needs is never computed)
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(weights)
            forward = self.forward(x, weights, tape)
            per_sample, value = self.loss(y, forward.output, forward.mask)
            value += forward.penalty  # as Keras's loss: the compiled one and the penalties
        sources = {}
        for k, direction in enumerate(forward.directions):
            probes = direction.probes if direction.c is not None else None
            sources |= gradient_sources(probes, direction.weights, direction.h,
                                        prefix=f"layer{k}_")  # fmt: skip
            if probes is None:  # no cell state: the total gradient at h only
                sources[f"layer{k}_grad_h_total"] = direction.probes[0]
        if forward.first_input is not None:
            sources["grad_input"] = forward.first_input
        named = named_gradients(tape, value, sources)
        out = {"loss": value, "loss_by_sample": per_sample, "y_pred": forward.output}
        norms = {key: [] for key in NORM_KEYS}
        for k, direction in enumerate(forward.directions):
            prefix = f"layer{k}_"
            order = direction.in_input_order
            for key in ("grad_h_total", "grad_c_total", "grad_h_direct"):
                if prefix + key in named:
                    out[prefix + key] = order(named[prefix + key])
            for key in ("grad_kernel", "grad_recurrent_kernel", "grad_bias"):
                out[prefix + key] = named[prefix + key]
            out[prefix + "h"] = order(direction.h)
            if direction.c is not None:
                out[prefix + "c"] = order(direction.c)
            out |= {prefix + key: value for key, value in gate_activity(direction).items()}
            found = graph_norms(out, prefix)
            for key in NORM_KEYS:  # a cell without c: a NaN row of norm_c_total
                norms[key].append(found.get(prefix + key, tf.fill(tf.shape(x)[:1], np.nan)))
        for key, rows in norms.items():
            out[f"{key}_by_layer"] = tf.stack(rows)
        out |= anchored_norms(tape, value, forward.output, forward.directions, out, anchors)
        if "grad_input" in named:
            out["grad_input"] = named["grad_input"]
            # [B, T]: float32 squares of a vanishing gradient (< 1e-19) would flush to 0
            out["saliency"] = tf.transpose(graph_last_axis_norm(named["grad_input"]))
        if forward.input_mask is not None:
            out["mask"] = forward.input_mask
        return out


def anchored_norms(tape, value, output, directions: list, out: dict,
                   anchors: tuple[int, ...] = ()) -> dict[str, tf.Tensor]:  # fmt: skip
    """The error of one step followed back (docs/diagnosis.md, "The error of one step"): per
    direction k the norms of ∂L_{t*}/∂h_s and ∂L_{t*}/∂c_s over s [T] (NaN for no c), L_{t*}
    the loss at the anchor step t* alone: `anchor_norm_h_by_layer`, `anchor_norm_c_by_layer`
    [L, A, T] and `anchors_by_layer` [L, A] (input positions). `anchors` the A steps (every
    direction the same ones); () one, the last step for a forward direction and the first for
    a backward one. An output without a time axis (a loss on one step): the totals, already
    computed, whatever `anchors` says. An output [B, T, …]: one more backward per anchor, of
    the output with the loss's gradient there kept at step t* alone."""
    rows_h, rows_c = out["norm_h_total_by_layer"], out["norm_c_total_by_layer"]
    steps = tf.shape(rows_h)[1]
    firsts = [d.backwards for d in directions]
    default = tf.stack([0 if f else steps - 1 for f in firsts])[:, None]
    per_step = output.shape.rank is not None and output.shape.rank >= 3 and directions
    if not per_step:
        return {"anchors_by_layer": default, "anchor_norm_h_by_layer": rows_h[:, None],
                "anchor_norm_c_by_layer": rows_c[:, None]}  # fmt: skip
    # a cross-entropy of Keras reads a softmax's logits (`_keras_logits`), not its output
    output = getattr(output, "_keras_logits", output)
    d_output = tape.gradient(value, output, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    h_rows, c_rows = [[] for _ in directions], [[] for _ in directions]
    for (cotangent,), ks in anchor_passes([d_output], anchors, firsts):
        probes = [p for k in ks for p in directions[k].probes if p is not None]
        grads = iter(tape.gradient(output, probes, output_gradients=cotangent,
                                   unconnected_gradients=tf.UnconnectedGradients.ZERO))
        for k in ks:
            d = directions[k]
            h_rows[k].append(graph_step_norm(d.in_input_order(next(grads))))
            c_rows[k].append(graph_step_norm(d.in_input_order(next(grads))) if (
                d.probes[1] is not None) else tf.fill(tf.shape(h_rows[k][-1]),
                                                      np.float32(np.nan)))  # fmt: skip
    given = tf.tile(tf.constant(anchors, tf.int32)[None], [len(directions), 1]) if anchors else (
        default)  # fmt: skip
    return {"anchors_by_layer": given,
            "anchor_norm_h_by_layer": tf.stack([tf.stack(rows) for rows in h_rows]),
            "anchor_norm_c_by_layer": tf.stack([tf.stack(rows) for rows in c_rows])}  # fmt: skip


def _tensor(weight) -> tf.Tensor:
    """A weight as a tensor: the one a live model's variable was read into (no copy), or a
    copy of the array."""
    from lstmviz.weights.live.keras_live import tensor_of

    tensor = tensor_of(weight)
    return tf.convert_to_tensor(weight) if tensor is None else tensor


def structure_key(spec: ModelSpec, loss: ModelLoss) -> tuple:
    """What a compiled `ModelGradients` depends on: every field of every layer (kind, class,
    arguments, input and output shapes, the names, shapes and dtypes of its weights in order:
    not their values), the model's own fields but its name and source text, the loss, and
    the LSTM kernel the graph is built with (native or while-loops)."""

    def text(value) -> str:  # nested arguments as one hashable text (NumPy values whole)
        return json.dumps(value, sort_keys=True,
                          default=lambda v: v.tolist() if hasattr(v, "tolist") else repr(v))

    def field(layer: LayerSpec, name: str) -> str:
        value = getattr(layer, name)
        if name == "weights":  # names, shapes and dtypes in order, not the values
            value = [(key, list(array.shape), str(array.dtype)) for key, array in value.items()]
        return text(value)

    layers = tuple(tuple(field(layer, item.name) for item in fields(layer))
                   for layer in spec.layers)  # fmt: skip
    model = tuple(text(getattr(spec, item.name)) for item in fields(spec)
                  if item.name not in ("name", "source", "layers"))  # fmt: skip
    return layers, model, loss, kernel_name()


_COMPILED: dict[tuple, ModelGradients] = {}
_KEPT = 4  # compiled models kept, the most recently used


def compiled(spec: ModelSpec, loss: ModelLoss) -> ModelGradients:
    """The compiled ModelGradients of `spec`'s structure under `loss` (`structure_key`), made
    on first use and kept (the `_KEPT` most recently used), its layers of kind "keras" holding
    `spec`'s weights. The other weights are arguments of every call (`flat_weights(spec)`)."""
    key = structure_key(spec, loss)
    gradients = _COMPILED.pop(key, None)
    if gradients is None:
        gradients = ModelGradients(spec, loss)
    else:
        gradients.load_keras_weights(spec)
    _COMPILED[key] = gradients  # the most recent last
    while len(_COMPILED) > _KEPT:
        del _COMPILED[next(iter(_COMPILED))]
    return gradients


def model_arrays(
    spec: ModelSpec, loss: ModelLoss, x: np.ndarray, y, cancelled: Callable[[], bool] = bool,
    anchors: list[int] | None = None,
) -> dict[str, np.ndarray]:
    """The trace arrays of one run (docs/model-mode.md) for checked x, y (batch-major);
    `anchors` the steps whose error alone is followed back (None: the default ones)."""
    named = compiled(spec, loss)(x, y, flat_weights(spec), cancelled=cancelled,
                                 anchors=anchors)  # fmt: skip
    return named_arrays(spec, named, x, y)


def named_arrays(spec: ModelSpec, named: dict, x: np.ndarray, y) -> dict[str, np.ndarray]:
    """The trace arrays from a `ModelGradients` result for x, y (batch-major): NumPy views of
    the tensors, plus the layer names, x time-major, y, the model summary, the kernel that ran
    and `nonfinite_steps`."""
    arrays = {key: np.asarray(value) for key, value in named.items()}
    arrays["loss"] = np.float32(arrays["loss"])
    if not exact_norms():  # TensorFlow's float32 norms: redo the steps squares over/underflow
        for grad, norm in NORMS.items():
            rows = arrays[f"{norm}_by_layer"]  # [L, T]
            arrays[f"{norm}_by_layer"] = np.stack(  # NaN rows (no c) stay as they are
                [exact_norm(row, arrays[f"layer{k}_{grad}"]) if f"layer{k}_{grad}" in arrays
                 else row for k, row in enumerate(rows)]  # fmt: skip
            )
    if "mask" in arrays:
        arrays["mask"] = arrays["mask"] > 0
    arrays["layer_names"] = np.array(spec.lstm_directions())
    cells = spec.cells()
    for k, direction in enumerate(spec.directions()):
        arrays[f"layer{k}_cell"] = np.array(direction.cell)
        arrays[f"layer{k}_gate_names"] = np.array(direction.gates)
    arrays["x"] = np.ascontiguousarray(np.swapaxes(x, 0, 1))  # time-major [T, B(, I)]
    if y is not None:
        arrays["y"] = np.asarray(y)
    arrays["model_summary"] = np.array(spec.summary())
    arrays["lstm_kernel"] = np.array(kernel_name())
    bad = np.zeros(arrays["x"].shape[0], bool)
    lstm = np.array([cell == "lstm" for cell in cells])
    for key in (f"{k}_by_layer" for k in NORM_KEYS):
        rows = arrays[key][lstm] if key == "norm_c_total_by_layer" else arrays[key]
        bad |= ~np.isfinite(rows).all(axis=0)
    arrays["nonfinite_steps"] = np.flatnonzero(bad)
    return arrays


# How a run's targets are given: by the data file or the targets file
GIVE_Y = f"in the .npz, or {ref('targets', 'Y.npy')}"


def prepare(spec: ModelSpec, config: RunConfig, x=None, y=None, where: str = "data",
            give_y: str = GIVE_Y):  # fmt: skip
    """(loss, x, y, data description) for a run of `spec`: x and y checked (given or read from
    config.inputs / config.targets), or seeded random data of the model's input shape.
    `where` names the data in messages, `give_y` how its caller gives targets."""
    loss = resolve_loss(spec, config.loss)
    spec = with_shapes(spec)
    source = ""
    if x is None and config.inputs:
        x, y, source = load_data(config.inputs, config.targets)
        where = config.inputs + (f" (y: {config.targets})" if config.targets else "")
    elif x is None and config.targets:
        raise ConfigError("targets", f"give the inputs too ({ref('inputs', 'X.npy')})")
    if x is None:
        check_fits(model_bytes(spec, spec.input_shape[0] or config.steps, config.batch),
                   f"T={spec.input_shape[0] or config.steps} B={config.batch}",
                   f"{ref('steps')} or {ref('batch')}")  # fmt: skip
        width = (spec.output_shape or (1,))[-1] or 1
        x, y = random_data(spec, loss.name, config.steps, config.batch, config.seed, width)
        if loss.hidden and loss.name == "mean_h":
            y = None
        elif loss.hidden and loss.name == "last_mse":
            y = y[:, -1] if y.ndim == 3 else y
        source = f"random data (seed {config.seed}): x {list(x.shape)}"
    x, y = check_data(spec, x, y, where)
    if y is not None:
        y = _check_targets(spec, loss, x, y, where)
    if y is None and not (loss.hidden and loss.name == "mean_h"):
        raise InputError(f"{where}: the loss {loss.name} needs targets y ({give_y})")
    return loss, x, y, source


def model_bytes(spec: ModelSpec, steps: int, batch: int) -> int:
    """Rough peak memory of a model run on B sequences of T steps: each recurrent direction's
    states, gates and gradients, about (I + 30·H) floats per step and sequence (as
    `RunConfig.estimated_bytes`), and the inputs (drawn in float64, kept in float32)."""
    per_step = sum(w.input_dim + 30 * w.hidden
                   for layer in spec.lstm_layers() for w in layer.directions())  # fmt: skip
    features = 1 if spec.tokens else spec.input_shape[1]
    return steps * batch * (4 * per_step + 12 * features)


def _check_targets(spec: ModelSpec, loss: ModelLoss, x, y, where: str) -> np.ndarray:
    """y in the shape `loss` takes for the model's output, or InputError: the output's own
    shape, or without its last axis (or with a last axis of 1) for sparse losses; a stack's
    last_mse takes the last step's output [B, W]. As Keras's fit, y without the output's last
    axis of 1 ([B] for an output [B, 1]) is taken as that axis."""
    output = [x.shape[1] if s is None else s for s in (spec.output_shape or ())]
    batch = x.shape[0]
    if loss.hidden:
        wanted = {"last_mse": [(batch, output[-1])], "seq_mse": [(batch, *output)]}
    elif loss.name in SPARSE:
        wanted = {loss.name: [(batch, *output[:-1]), (batch, *output[:-1], 1)]}
    else:
        wanted = {loss.name: [(batch, *output)]}
    shapes = wanted.get(loss.name)
    if shapes and len(shapes) == 1 and output and output[-1] == 1 and y.shape == shapes[0][:-1]:
        y = y[..., None]
    if shapes and tuple(y.shape) not in shapes:
        expected = " or ".join(str(list(shape)) for shape in shapes)
        raise InputError(
            f"{where}: y has shape {list(y.shape)}, but {loss.name} on the model's output "
            f"{shape_text((None, *(spec.output_shape or ())))} takes {expected}"
        )
    return y


def _config(config: RunConfig, x: np.ndarray, spec: ModelSpec, loss: ModelLoss) -> RunConfig:
    hidden = spec.lstm_layers()[0].directions()[0].hidden
    width = 1 if x.ndim == 2 else int(x.shape[2])
    return replace(config, mode="model", steps=int(x.shape[1]), batch=int(x.shape[0]),
                   input_dim=width, hidden=hidden, loss=loss.name)  # fmt: skip


def run_model(
    config: RunConfig, cancelled: Callable[[], bool] = bool, keep: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Generator: a TraceUpdate when it starts, one when the gradients are in, then the
    GradientTrace. Bad files or data raise before anything runs. The run is one unit of work:
    a cancel before or during it ends the run without a trace."""
    if not config.model:
        raise ConfigError("model", f"model mode needs a model file: {ref('model', 'FILE')}")
    if config.module:  # a PyTorch state dict and its module's class (--module)
        from lstmviz.torch.checkpoints import run_checkpoint

        return run_checkpoint(config, cancelled, keep)
    if torch_program(config.model):  # TorchScript, torch.export: PyTorch runs them
        from lstmviz.torch.programs import run_program

        return run_program(config, cancelled, keep)
    try:
        spec = _load(config.model)
    except GraphModel:  # not one chain: Keras runs the graph, lstmviz its recurrent calls
        from lstmviz.engine.modes.graph_model import load_graph, run_graph

        return run_graph(_load(config.model, load_graph), config, cancelled, keep)
    loss, x, y, source = prepare(spec, config)
    if config.inputs:  # all of it at once (random data was checked before it was drawn)
        batch, steps = np.shape(x)[:2]
        check_fits(model_bytes(spec, steps, batch), f"T={steps} B={batch} of {config.inputs}",
                   "the samples or their length")  # fmt: skip
    return _run(spec, loss, x, y, _config(config, x, spec, loss), source, cancelled, keep)


_LOADED: dict[Callable, tuple[tuple, object]] = {}  # per loader: the last file and its model


def _load(path: str, load: Callable | None = None):
    """The model `load` reads from `path` (lstmviz's own reader by default: a ModelSpec), the
    same object again while the file is unchanged: not read (a graph: not built and traced by
    Keras) again for every run."""
    if load is None:
        from lstmviz.weights.model_files import load_model as load
    try:
        info = Path(path).stat()
        key = (str(Path(path).resolve()), info.st_mtime_ns, info.st_size)
    except OSError:
        return load(path)  # names the problem
    if _LOADED.get(load, (None,))[0] != key:
        _LOADED[load] = (key, load(path))
    return _LOADED[load][1]


def _run(spec, loss, x, y, config, source, cancelled=bool, keep=bool):
    directions = spec.lstm_directions()
    yield TraceUpdate(0, 1, f"{spec.name}: {len(directions)} recurrent directions, loss "
                      f"{loss.name}")  # fmt: skip
    units, results = Units(1, cancelled, keep), []
    start = time.perf_counter()
    anchors = anchor_steps(config.anchors, int(np.shape(x)[1]))
    for _ in units:
        units.run(lambda: results.append(model_arrays(spec, loss, x, y, cancelled, anchors)))
    if not results:
        return
    arrays = results[0]
    arrays["model_seconds"] = np.float32(time.perf_counter() - start)
    arrays["model_source"] = np.array(spec.source)
    if source:
        arrays["inputs_source"] = np.array(source)
    rows = {f"{k}_by_layer": arrays[f"{k}_by_layer"] for k in NORM_KEYS}
    yield TraceUpdate(1, 1, "done", rows)
    yield GradientTrace("model", config, arrays)


def model_gradients(model_or_path, x=None, y=None, loss: str | None = None,
                    anchors=None) -> GradientTrace:  # fmt: skip
    """The gradient flow of a whole model under its loss: `model_or_path` a model file
    (`.keras`, Keras 2 `.h5`, a weights-only stack) or a live `keras.Model`; x, y batch-major as
    Keras takes them (seeded random data of the model's shapes when None); `loss` the loss when
    the model has none compiled (a Keras loss name; mean_h/last_mse/seq_mse for a stack).
    Returns a GradientTrace with the model-mode keys (docs/model-mode.md).

    The compiled computation is kept and reused across calls, whatever the weights' values
    (a model trained between calls, another model of the same structure): it is built anew
    (about a second for a big model) when the model's structure changes (a layer added,
    removed, renamed or configured otherwise, a weight of another shape or dtype, another
    input shape), when the loss changes (another loss or its arguments), and on the first
    call with x or y of a new shape (another batch size or sequence length: TensorFlow
    traces again). The four most recently used are kept.

    `anchors`, where the loss enters at every step: the steps whose error alone is followed
    back (docs/diagnosis.md) — a list of input positions, or "every:K"; None: the last step
    (the first for backward directions)."""
    from lstmviz.weights.model_files import load_model, spec_from_keras

    try:
        if isinstance(model_or_path, ModelSpec):
            spec = model_or_path
        elif isinstance(model_or_path, str | Path):
            spec = load_model(model_or_path)
        elif _known_graph(model_or_path):
            raise GraphModel("a graph")
        else:
            spec = spec_from_keras(model_or_path)
    except GraphModel:  # not one chain: Keras runs the graph, lstmviz its recurrent calls
        from lstmviz.engine.modes.graph_model import graph_trace, load_graph

        _known_graph(model_or_path, add=True)

        graph = load_graph(model_or_path) if isinstance(model_or_path, str | Path) else (
            model_or_path)  # fmt: skip
        try:
            return graph_trace(graph, x, y, loss, anchors)
        except (ConfigError, InputError) as exc:
            raise in_python_terms(exc) from None
    config = RunConfig(mode="model", loss=loss or "mean_h", model=None,
                       anchors=anchors_text(anchors))  # fmt: skip
    if x is None and y is not None:
        raise InputError("y given without x")
    try:
        prepared = prepare(spec, config, x, y, where="model_gradients", give_y=ref("y"))
    except (ConfigError, InputError) as exc:
        raise in_python_terms(exc) from None
    model_loss, x, y, source = prepared
    try:
        *_, trace = _run(spec, model_loss, x, y, _config(config, x, spec, model_loss), source)
    except ConfigError as exc:  # the anchors, checked against the data's length
        raise in_python_terms(exc) from None
    return trace


_GRAPHS: weakref.WeakSet = weakref.WeakSet()  # live models found to be graphs


def _known_graph(model, add: bool = False) -> bool:
    """Whether a live model was found to be a graph before (its config is not read again at
    every call); `add` records it."""
    try:
        if add:
            _GRAPHS.add(model)
        return model in _GRAPHS
    except TypeError:  # not weakly referable (a path)
        return False
