"""A whole model from a file or a live Keras model: `load_model(path)`, `spec_from_keras(model)`.

- `.keras` (Keras 3) and full-model `.h5`/`.hdf5` (Keras 2, or Keras 3's legacy writer): the
  config and weights are read with json and h5py, without Keras, so files Keras 3 refuses (a
  Keras 2 `time_major` argument, `batch_input_shape`) load too.
- Weights-only files (`.weights.h5`, `.h5` without a config, `.npz`, PyTorch `nn.LSTM`,
  `nn.GRU`, `nn.RNN` state dicts in `.safetensors`/`.pt`/`.npz`): their recurrent layers (the
  kind told by the shapes; Keras's default activations, an nn.RNN's as the file says or tanh) as
  a *stack* in the order the model ran them (each returns sequences; a Bidirectional's halves
  concatenate), with no head.

Every problem is a ModelError whose one-line message starts with the file (or model) it is about.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import tempfile
import warnings
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np

from lstmviz.core.errors import GraphModel, LstmvizError, ModelError, WeightsError
from lstmviz.weights.formats.found import FoundLayer, class_of, found_kind
from lstmviz.weights.formats.keras_config import config_model
from lstmviz.weights.formats.keras_files import h5_child, h5_text, read_keras_archive
from lstmviz.weights.formats.keras_model import Keras3Weights, LegacyWeights, spec_from_config
from lstmviz.weights.formats.torch_files import module_of
from lstmviz.weights.loaders import checked, file_format, layer_reader, one_line, read_file
from lstmviz.weights.model_spec import LayerSpec, ModelSpec, infer_output_shape

_KERAS_HDF5 = (".h5", ".hdf5", ".weights.h5")


def load_model(path: str | os.PathLike) -> ModelSpec:
    """The model in `path` as a ModelSpec (see the module's docstring for the formats).

    Raises ModelError naming the file: missing, unknown extension, unreadable or truncated, an
    unsupported layer (its name and class), several inputs or outputs, a branching graph, no
    LSTM, layers that do not chain, NaN or Inf in the weights.
    """
    path = Path(path)
    suffix, label = file_format(path, ModelError, noun="model")
    if suffix == ".keras":
        spec = read_file(path, label, lambda: _keras_file(path), ModelError)
    elif suffix in _KERAS_HDF5:
        spec = read_file(path, label, lambda: _hdf5_file(path, label), ModelError)
    else:
        spec = read_file(path, label, lambda: _stack(path, label, suffix), ModelError)
    _check_finite(spec, str(path))
    return spec


def spec_from_keras(model) -> ModelSpec:
    """A live model as a ModelSpec: a Keras 3 `keras.Model` (Sequential or Functional, built),
    or a `tf_keras` (Keras 2) one. Imports Keras only when called."""
    name = str(getattr(model, "name", type(model).__name__))
    where = f"keras.Model {name!r}"
    if type(model).__module__.startswith("tf_keras"):
        with tempfile.TemporaryDirectory(prefix="lstmviz-") as folder:
            file = Path(folder) / "model.h5"
            with warnings.catch_warnings():
                # tf_keras calls .h5 legacy; the file is lstmviz's, read once and deleted
                warnings.filterwarnings("ignore", "You are saving your model as an HDF5 file")
                _call(where, lambda: model.save(file))
            try:
                spec = load_model(file)
            except ModelError as exc:  # a GraphModel stays one
                raise type(exc)(str(exc).replace(str(file), where, 1)) from None
        return replace(spec, source=f"{where} (tf_keras, in memory)")
    import keras

    if not isinstance(model, keras.Model):
        raise ModelError(f"expected a keras.Model, got a {type(model).__name__}")
    from keras.src.models.functional import Functional

    if not isinstance(model, keras.Sequential | Functional):  # its `call` is Python
        raise GraphModel(f"{where}: a subclassed model (class {type(model).__name__})")
    if not model.built:
        raise ModelError(f"{where}: not built yet; give it a keras.Input or call it once")
    from lstmviz.weights.live.keras_live import LiveWeights

    tree = _call(where, lambda: keras.saving.serialize_keras_object(model))

    def read() -> ModelSpec:
        # the variables themselves, where the file model.save_weights writes would hold them
        spec = spec_from_config(
            config_model(tree, keras3=True),
            LiveWeights(model),
            f"{where} (Keras 3, in memory)",
            live_compile_config(model),
            keras2=False,
        )
        _check_finite(spec, where)
        return spec

    return _call(where, read)


def live_compile_config(model) -> dict:
    """The compile config of a live Keras 3 model (what its file would hold), its loss's
    arguments completed from the loss object: Keras leaves some out of the loss's config
    (Huber's `delta`), which a file of the model therefore loses, but the model in memory
    still has them."""
    compiled = dict(model.get_compile_config() or {})
    loss, arguments = compiled.get("loss"), getattr(model.loss, "_fn_kwargs", None)
    if isinstance(loss, dict) and isinstance(loss.get("config"), dict) and isinstance(
        arguments, dict
    ):
        compiled["loss"] = {**loss, "config": {**loss["config"], **arguments}}
    return compiled


def _keras_file(path: Path) -> ModelSpec:
    config, data = read_keras_archive(path)
    with h5py.File(io.BytesIO(data), "r") as root:
        compiled = config.get("compile_config")
        model = config_model(config, keras3=True)
        return spec_from_config(
            model, Keras3Weights(root), f"{path}: Keras 3 model (.keras)", compiled, keras2=False
        )


def _hdf5_file(path: Path, label: str) -> ModelSpec:
    with h5py.File(path, "r") as f:
        config = h5_text(f.attrs.get("model_config"))
        if config is None:
            return _stack(path, label, ".h5")
        version = h5_text(f.attrs.get("keras_version")) or "2"
        training = h5_text(f.attrs.get("training_config"))
        compiled = json.loads(training) if training else None
        root = h5_child(f, "model_weights")
        model = config_model(json.loads(config), keras3=False)
        source = f"{path}: Keras {version} model ({path.suffix})"
        weights = LegacyWeights(f if root is None else root)
        # Keras before 3 (tf_keras too) defined hard_sigmoid as clip(0.2x + 0.5, 0, 1)
        keras2 = not version.lstrip().startswith(("3", "4", "5"))
        return spec_from_config(model, weights, source, compiled, keras2=keras2)


def _stack(path: Path, label: str, suffix: str) -> ModelSpec:
    """The LSTM layers of a weights-only file, chained in the order the model ran them."""
    found = layer_reader(suffix)(path)
    if not found:
        raise ModelError("no LSTM layer inside")
    owners: dict[str, list[FoundLayer]] = {}
    for layer in sorted(found, key=lambda f: f.order):
        owners.setdefault(layer.owner or layer.name, []).append(layer)
    layers = []
    for owner, parts in owners.items():
        name = owner or "lstm"
        directions = {part.direction: part for part in parts}
        if len(directions) != len(parts) or set(directions) not in ({""}, {"forward", "backward"}):
            halves = ", ".join(repr(part.name) for part in parts)
            raise ModelError(f"layer {name!r}: {halves} do not make one LSTM or Bidirectional")
        layers.append(_stack_layer(name, directions))
    order = ""
    if suffix == ".safetensors":
        layers, order = _module_order(layers)
    first = layers[0].weights.get("kernel", layers[0].weights.get("forward/kernel"))
    inputs = (None, int(first.shape[0]))
    chained = [LayerSpec("input", "input", "InputLayer", {"dtype": "float32"}, {}, None, inputs)]
    for layer in layers:
        shape = chained[-1].output_shape
        if (width := _width_in(layer)) != shape[-1]:
            # Taken as concat, a Bidirectional gives twice what sum, mul or ave would.
            merged = chained[-1].kind == "bidirectional" and 2 * width == shape[-1]
            raise ModelError(
                f"the layers do not chain: {layer.label} takes inputs of width {width}, but "
                f"{chained[-1].label} gives width {shape[-1]}"
                + (" (a weights-only file does not store merge_mode: lstmviz concatenates the "
                   "halves; load the whole model for sum, mul or ave)" if merged else "")
            )  # fmt: skip
        output = infer_output_shape(layer.kind, layer.args, layer.weights, shape)
        chained.append(replace(layer, input_shape=shape, output_shape=output))
    count = len(layers)
    classes = "/".join(dict.fromkeys(layer.args.get("layer_class", layer.class_name)
                                     for layer in layers))  # fmt: skip
    source = f"{path}: {label}, weights only: a stack of {count} {classes} layer{'s' * (count > 1)}"
    notes = dict.fromkeys(part.note for part in found if "nonlinearity" in part.note)
    source += "".join(f" ({note})" for note in (order, *notes) if note)
    return ModelSpec(path.name.split(".")[0], source, tuple(chained), stack=True)


def _module_order(layers: list[LayerSpec]) -> tuple[list[LayerSpec], str]:
    """The layers of a .safetensors state dict with its modules (nn.LSTM, nn.GRU, nn.RNN) in
    the order a model ran them, and a note saying how that order was chosen ("" for one module).

    safetensors stores tensors sorted by name, so the order the modules were registered in
    is lost. Names alike but for their numbers (nn.ModuleList's `layers.0.`, `layers.1.`, …)
    keep the order of their numbers (`layers` comes in that order); other names are stacked
    in the one order in which their sizes chain, or refused when there are several."""
    modules: dict[str, list[LayerSpec]] = {}
    for layer in layers:
        modules.setdefault(module_of(layer.name), []).append(layer)
    names = list(modules)
    listed = ", ".join(map(repr, names))
    if len(names) < 2:
        return layers, ""
    if len({re.sub(r"\d+", "#", name) for name in names}) == 1:
        return layers, f"modules in the order of their numbers: {listed}"
    ins = {name: _width_in(parts[0]) for name, parts in modules.items()}
    outs = {name: _width_out(parts[-1]) for name, parts in modules.items()}
    chaining = [
        order for order in itertools.permutations(names)
        if all(outs[a] == ins[b] for a, b in itertools.pairwise(order))
    ] if len(names) <= _MAX_PERMUTED else []  # fmt: skip
    if len(chaining) == 1:
        ordered = ", ".join(map(repr, chaining[0]))
        note = f"modules in the only order their sizes chain: {ordered}"
        return [layer for name in chaining[0] for layer in modules[name]], note
    if not chaining and len(names) <= _MAX_PERMUTED:
        return layers, ""  # no order chains: the caller says where the widths differ
    raise ModelError(
        f"modules {listed}: .safetensors does not store the order they run in and "
        f"their sizes do not settle it; use one with --weights FILE --layer NAME (e.g. "
        f"{layers[0].name!r}), or save the state dict with torch.save (.pt keeps the order)"
    )


# Orders of named modules tried for a .safetensors stack (8! = 40320 at most).
_MAX_PERMUTED = 8


def _width_in(layer: LayerSpec) -> int:
    return int(layer.weights[_kernel_key(layer)].shape[0])


def _width_out(layer: LayerSpec) -> int:
    shape = infer_output_shape(layer.kind, layer.args, layer.weights, (None, _width_in(layer)))
    return int(shape[-1])


def _kernel_key(layer: LayerSpec) -> str:
    return "forward/kernel" if layer.kind == "bidirectional" else "kernel"


def _stack_layer(name: str, directions: dict[str, FoundLayer]) -> LayerSpec:
    """One layer of a stack: an LSTM, GRU or SimpleRNN, or a Bidirectional (merge concat) of
    two halves of one kind, with Keras's defaults where the file says nothing."""
    args_of, weights, params = {}, {}, 0
    for direction in sorted(directions, key=("", "forward", "backward").index):
        part = directions[direction]
        args_of[direction], arrays = _stack_cell(part, direction)
        prefix = f"{direction}/" if direction else ""
        weights.update({prefix + key: value for key, value in arrays.items()})
        params += sum(int(a.size) for a in arrays.values())
    classes = {class_of(part) for part in directions.values()}
    if len(classes) > 1:
        raise ModelError(f"layer {name!r}: its halves are {' and '.join(sorted(classes))}")
    class_name = classes.pop()
    if "" in args_of:
        kind = found_kind(directions[""])
        return LayerSpec(name, kind, class_name, args_of[""], weights, params=params)
    forward = args_of["forward"]
    args = {
        "merge_mode": "concat",
        "return_sequences": True,
        "units": forward["units"],
        "layer_class": class_name,
        "cell": found_kind(directions["forward"]),
        "forward": forward,
        "backward": args_of["backward"],
    }
    return LayerSpec(name, "bidirectional", "Bidirectional", args, weights, params=params)


def _stack_cell(part: FoundLayer, direction: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(args, Keras-layout weights) of one direction of a stack's layer, or a ModelError."""
    kind = found_kind(part)
    try:
        if kind == "lstm":  # the LSTM check the single-layer modes make
            checked(part)
        elif part.problem:
            raise WeightsError(part.problem)
    except LstmvizError as exc:
        raise ModelError(f"layer {part.name or 'lstm'!r}: {one_line(exc)}") from None
    arrays = dict(part.arrays)  # ModelSpec.check checks the shapes against the cell
    if "kernel" not in arrays or "recurrent_kernel" not in arrays:
        raise ModelError(f"layer {part.name or kind!r}: kernel or recurrent_kernel is missing")
    bias = arrays.get("bias")
    reset_after = bool(part.args.get("reset_after", bias is None or np.ndim(bias) == 2))
    args = {
        "units": int(np.shape(arrays["recurrent_kernel"])[0]),
        "return_sequences": True,
        "go_backwards": direction == "backward",
        "use_bias": bias is not None,
        "zero_output_for_mask": bool(direction),
        "activation": part.args.get("activation", "tanh"),
    }
    if kind != "simple_rnn":
        args["recurrent_activation"] = "sigmoid"
    if kind == "gru":
        args["reset_after"] = reset_after
    args["cudnn"] = "CuDNN" in part.note
    return args, arrays


def _check_finite(spec: ModelSpec, where: str) -> None:
    for layer in spec.layers:
        bad = [key for key, value in layer.weights.items() if not np.all(np.isfinite(value))]
        if bad:
            verb = "contain" if len(bad) > 1 else "contains"
            raise ModelError(f"{where}: layer {layer.name!r}: {', '.join(bad)} {verb} NaN or Inf")


def _call(where: str, action):
    """`action()`, with any failure as one line of ModelError naming the live model."""
    try:
        return action()
    except ModelError as exc:
        text = str(exc)
        raise type(exc)(text if text.startswith(where) else f"{where}: {text}") from None
    except Exception as exc:  # Keras raises many types for models it cannot serialise
        raise ModelError(f"{where}: {one_line(f'{type(exc).__name__}: {exc}')}") from None
