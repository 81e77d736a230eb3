"""Keras model configs as a chain of layers, from the JSON alone (no Keras needed).

Reads Keras 3's `config.json` (and `serialize_keras_object(model)`) and Keras 2's `model_config`
attribute: Sequential and single-chain Functional models, nested models flattened in place. Also
the compiled loss (Keras 3 `compile_config`, Keras 2 `training_config`) as a Keras loss name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lstmviz.core.errors import GraphModel, ModelError

MODELS = ("Sequential", "Functional", "Model")
X = "__x__"  # stands for the layer's input in a recorded call (ConfigLayer.call)


@dataclass
class ConfigLayer:
    """One layer of the chain as the config describes it.

    `where` locates its weights: Keras 3, its path in the weights file (`layers/lstm_1`);
    Keras 2, the name of the group holding them (a nested model's layers share their model's
    group, in order). `builtin`: a layer class Keras itself provides. `call`: how a
    Keras 3 functional model calls it, {"args": [...], "kwargs": {...}} with X for the input.
    `input_hint`: the input shape Keras recorded for it (without the batch), if any. `module`
    and `registered_name`: as the config gives them (for keras.layers.deserialize).
    """

    name: str
    class_name: str
    config: dict
    where: str
    builtin: bool = True
    call: dict | None = None
    input_hint: tuple | None = None
    module: str | None = None
    registered_name: str | None = None


@dataclass
class ConfigModel:
    """The chain: `input_shape` without the batch, `layers` without InputLayers."""

    name: str
    input_shape: tuple | None
    input_dtype: str | None
    layers: list[ConfigLayer] = field(default_factory=list)


def config_model(tree: dict, keras3: bool) -> ConfigModel:
    """The chain of layers of a Sequential or Functional model's serialised config."""
    if not isinstance(tree, dict):
        raise ModelError("the model config is not a JSON object")
    class_name, config = tree.get("class_name"), tree.get("config")
    if class_name not in MODELS or not isinstance(config, dict | list):
        raise GraphModel(
            f"a model of class {class_name!r}: lstmviz reads Sequential and Functional models "
            "(not subclassed ones)"
        )
    name = config.get("name", "model") if isinstance(config, dict) else "model"
    model = ConfigModel(str(name), None, None)
    _flatten(model, class_name, config, "" if keras3 else None, keras3, "")
    if model.input_shape is None:
        raise ModelError("the model has no input shape (it was never built or called)")
    return model


def _flatten(
    model: ConfigModel, class_name: str, config, where: str | None, keras3: bool, prefix: str
) -> None:
    """Append the layers of a (nested) model to `model.layers`, in the order they run.

    `where`: Keras 3, the model's path in the weights file ("" at the top); Keras 2, None at
    the top, else the group holding the nested model's weights. `prefix`: "" at the top, else
    the nested models' names ("sub/"), put before a layer's name that is already taken.
    """
    top = not prefix
    if class_name == "Sequential":
        items = config if isinstance(config, list) else config.get("layers")
        if not isinstance(items, list):
            raise ModelError("a Sequential config without a list of layers")
        chain = [(_item(entry), None, None) for entry in items]
        input_items = [item for item, _, _ in chain if item[0] == "InputLayer"]
        chain = [link for link in chain if link[0][0] != "InputLayer"]
        counted = [item for item, _, _ in chain]  # Sequential's weights skip the InputLayer
        build = config.get("build_input_shape") if isinstance(config, dict) else None
    else:
        input_items, chain = _functional_chain(config)
        counted = [_item(entry) for entry in config["layers"]]  # InputLayers included
        build = None
    if top:
        # Where Keras kept the input shape: an InputLayer, the first layer's arguments (Keras 2
        # `batch_input_shape`), the Sequential's build shape, the first layer's build config.
        first = input_items[0] if input_items else chain[0][0] if chain else None
        config = first[2] if first and isinstance(first[2], dict) else {}
        shape = (
            _batch_shape(config)
            or _shape(build)
            or (_shape(_build_shape(first[3])) if first else None)
        )
        model.input_shape = tuple(shape[1:]) if shape else None
        model.input_dtype = _dtype(config.get("dtype"))
    paths = _store_paths(counted) if keras3 else {}
    for (cls, name, cfg, entry), call, hint in chain:
        if keras3:
            here = f"{where}/{paths[name]}" if where else paths[name]
        else:
            here = where if where is not None else name
        if cls in MODELS and isinstance(cfg, dict | list):
            _flatten(model, cls, cfg, here, keras3, f"{prefix}{name}/")
            continue
        taken = {layer.name for layer in model.layers}
        module, registered = entry.get("module"), entry.get("registered_name")
        builtin = keras_own(entry)
        hint = hint or _shape(_build_shape(entry))
        model.layers.append(
            ConfigLayer(
                name if name not in taken else f"{prefix}{name}",
                cls,
                cfg,
                here,
                builtin,
                call,
                tuple(hint[1:]) if hint else None,
                module,
                registered,
            )
        )


def keras_own(entry: dict) -> bool:
    """Whether a serialized layer ({"module", "class_name", "registered_name", …}) is one of
    Keras's own classes: Keras 3 names their module "keras.layers" and a registered custom
    class "package>Class"; Keras 2 names no module."""
    module, registered = entry.get("module"), entry.get("registered_name")
    return module in (None, "keras.layers") and (registered is None or ">" not in str(registered))


def _item(entry) -> tuple[str, str, dict, dict]:
    """(class_name, name, config, entry) of a layer entry, or a ModelError."""
    if not isinstance(entry, dict) or not isinstance(entry.get("class_name"), str):
        raise ModelError("a layer entry without a class_name")
    config = entry.get("config")
    if not isinstance(config, dict | list):
        raise ModelError(f"layer of class {entry['class_name']!r} has no config")
    name = entry.get("name") or (config.get("name") if isinstance(config, dict) else None)
    return entry["class_name"], str(name or entry["class_name"].lower()), config, entry


def _functional_chain(config: dict):
    """(input items, [(item, call, input hint)] in order) of a single-chain functional model."""
    items = config.get("layers")
    if not isinstance(items, list):
        raise ModelError("a Functional config without a list of layers")
    by_name = {}
    for entry in items:
        item = _item(entry)
        by_name[item[1]] = item
    inputs, outputs = _triples(config.get("input_layers")), _triples(config.get("output_layers"))
    if len(inputs) != 1:
        raise GraphModel(f"the model has {len(inputs)} inputs")
    if len(outputs) != 1:
        raise GraphModel(f"the model has {len(outputs)} outputs")
    parent, calls, feeds, masks = {}, {}, {}, set()
    for cls, name, _, entry in by_name.values():
        nodes = entry.get("inbound_nodes") or []
        if cls == "InputLayer":
            continue
        if len(nodes) != 1:
            what = "is not connected" if not nodes else f"is called {len(nodes)} times"
            raise GraphModel(f"layer {name!r} ({cls}) {what}")
        sources, calls[name], mask_sources = _node(nodes[0], name, cls)
        feeds[name] = {source[0] for source in sources}
        masks.update(mask_sources)
        if len({source[0] for source in sources}) != 1:
            names = ", ".join(sorted({repr(source[0]) for source in sources}))
            raise GraphModel(
                f"layer {name!r} ({cls}) takes the outputs of {names}: a branching graph"
            )
        source = sources[0]
        if source[2] != 0:
            raise GraphModel(
                f"layer {name!r} ({cls}) takes output {source[2]} of {source[0]!r} "
                "(e.g. a state from return_state)"
            )
        parent[name] = source
    chain, name, seen = [], outputs[0][0], set()
    while name != inputs[0][0]:
        if name in seen or name not in by_name or name not in parent:
            raise ModelError(f"layer {name!r} is not connected to the model's input")
        seen.add(name)
        chain.append(name)
        name = parent[name][0]
    chain.reverse()
    # Keras 3 records the ops computing a Masking layer's mask (NotEqual, Any) and passes
    # the mask explicitly: they are Keras's standard mask, not a branch of the model.
    mask_ops, todo = set(), [m for m in masks if m not in seen]
    while todo:
        op = todo.pop()
        if op not in mask_ops and op in by_name and op != inputs[0][0] and op not in seen:
            mask_ops.add(op)
            todo.extend(feeds.get(op, ()))
    left = [n for n in by_name if n not in seen | mask_ops and n != inputs[0][0]]
    if left:
        names = ", ".join(repr(n) for n in left)
        raise GraphModel(
            f"layers {names} are off the chain from input to output: a branching graph"
        )
    hints = {name: parent[name][3] for name in chain}
    input_item = by_name.get(inputs[0][0])
    if input_item is None or input_item[0] != "InputLayer":
        raise ModelError(f"the model's input {inputs[0][0]!r} is not an InputLayer")
    return [input_item], [(by_name[n], calls[n], hints[n]) for n in chain]


def _triples(value) -> list:
    """input_layers / output_layers as a list of [name, node, tensor] (Keras 3 writes a single
    one unwrapped)."""
    if isinstance(value, list) and len(value) == 3 and isinstance(value[0], str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, list) and v for v in value):
        return value
    if isinstance(value, dict):  # Keras 3: named inputs/outputs
        return [v for v in value.values() if isinstance(v, list)]
    raise ModelError("the model config lists no input or output layers")


def _node(node, name: str, cls: str):
    """(sources [(layer, node, tensor, shape)], call, mask sources) of one inbound node.

    Keras 3 writes {"args": [...], "kwargs": {...}} with tensors as `__keras_tensor__` objects;
    Keras 2 a list [[layer, node, tensor, kwargs], ...]. An explicit `mask` is left out: the
    layer gets the mask Keras computes itself.
    """
    sources: list = []
    masks: set = set()
    if isinstance(node, dict):

        def replace(value, found):
            if isinstance(value, dict) and value.get("class_name") == "__keras_tensor__":
                config = value.get("config") or {}
                history = config.get("keras_history") or [None, 0, 0]
                found.append((*history[:3], _shape(config.get("shape"))))
                return X
            if isinstance(value, dict):
                return {k: replace(v, found) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [replace(v, found) for v in value]
            return value

        kwargs = dict(node.get("kwargs") or {})
        mask_tensors: list = []
        replace(kwargs.pop("mask", None), mask_tensors)
        masks = {source[0] for source in mask_tensors}
        kwargs.pop("training", None)
        call = {"args": replace(node.get("args", []), sources), "kwargs": replace(kwargs, sources)}
    elif isinstance(node, list):
        for inbound in node:
            if not isinstance(inbound, list) or len(inbound) < 3:
                raise ModelError(f"layer {name!r} ({cls}): an inbound node lstmviz cannot read")
            kwargs = inbound[3] if len(inbound) > 3 and isinstance(inbound[3], dict) else {}
            extra = sorted(set(kwargs) - {"training", "mask"})
            if extra:
                raise GraphModel(
                    f"layer {name!r} ({cls}) is called with {', '.join(extra)}"
                )
            sources.append((*inbound[:3], None))
        call = None
    else:
        raise ModelError(f"layer {name!r} ({cls}): an inbound node lstmviz cannot read")
    if not sources or not all(isinstance(s[0], str) for s in sources):
        raise ModelError(f"layer {name!r} ({cls}) has no input")
    return sources, call, masks


def _store_paths(items: list) -> dict[str, str]:
    """Layer name -> its group under `layers/` in a Keras 3 weights file: the class name in
    snake case, numbered from the second of a class on (Keras's own naming)."""
    used: dict[str, int] = {}
    paths = {}
    for cls, name, _, _ in items:
        base = snake_case(cls)
        used[base] = used.get(base, -1) + 1
        paths[name] = f"layers/{base}_{used[base]}" if used[base] else f"layers/{base}"
    return paths


def snake_case(name: str) -> str:
    """A class name as Keras names its weights group: "SpatialDropout1D" -> "spatial_dropout1d"."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def _batch_shape(config) -> list | None:
    if not isinstance(config, dict):
        return None
    return _shape(config.get("batch_shape") or config.get("batch_input_shape"))


def _build_shape(entry: dict):
    build = entry.get("build_config")
    return build.get("input_shape") if isinstance(build, dict) else None


def _shape(value) -> list | None:
    """A shape with its batch, as a list of int | None, or None when `value` is not one."""
    if not isinstance(value, list | tuple) or not value:
        return None
    if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in value):
        return None
    return list(value)


def _dtype(value) -> str | None:
    if isinstance(value, dict):  # Keras 3: a DTypePolicy
        value = (value.get("config") or {}).get("name")
    return value if isinstance(value, str) else None


# ---- the compiled loss --------------------------------------------------------------------

LOSSES = (
    "binary_crossentropy",
    "binary_focal_crossentropy",
    "categorical_crossentropy",
    "categorical_focal_crossentropy",
    "sparse_categorical_crossentropy",
    "mean_squared_error",
    "mean_absolute_error",
    "mean_absolute_percentage_error",
    "mean_squared_logarithmic_error",
    "hinge",
    "squared_hinge",
    "categorical_hinge",
    "huber",
    "log_cosh",
    "kl_divergence",
    "poisson",
    "cosine_similarity",
)
_ALIASES = {
    "mse": "mean_squared_error",
    "mae": "mean_absolute_error",
    "mape": "mean_absolute_percentage_error",
    "msle": "mean_squared_logarithmic_error",
    "kld": "kl_divergence",
    "kullback_leibler_divergence": "kl_divergence",
    "logcosh": "log_cosh",
    "huber_loss": "huber",
    "bce": "binary_crossentropy",
}
# Arguments of a loss object that are not arguments of the loss function (a reduction "sum",
# the one that is not Keras's mean, is kept: `ModelLoss` applies it).
_NOT_ARGS = {"name", "dtype", "fn"}


def loss_name(name) -> str | None:
    """A Keras loss name, by any name Keras takes for it ("mse", "MSE", "MeanSquaredError" ->
    "mean_squared_error"), or None for one Keras lacks."""
    if not isinstance(name, str):
        return None
    key = snake_case(name)  # Keras's class names and their upper-case aliases ("BCE") too
    key = _ALIASES.get(key, key)
    return key if key in LOSSES else None


def compiled_loss(value, weights=None) -> tuple[str | None, dict]:
    """(Keras loss name, keyword arguments) of a compiled loss as a config stores it: a name,
    a serialised loss object or function, or a list/dict of one (a model with one output).
    `weights`: the compile's `loss_weights` (a number, or a list/dict of one), kept in the
    arguments as `loss_weight` when not 1; a reduction "sum" is kept as `reduction`."""
    name, args = _compiled_loss(value)
    weight = _single(weights)
    if name is not None and isinstance(weight, int | float) and weight != 1:
        args["loss_weight"] = float(weight)
    return name, args


def loss_label(value) -> str:
    """How a compiled loss lstmviz does not know names itself ("my_loss"), or "" when the
    config has none."""
    value = _single(value)
    if isinstance(value, dict):
        config = value.get("config")
        named = config if isinstance(config, str) else (config or {}).get("name")
        value = named or value.get("registered_name") or value.get("class_name")
    return value if isinstance(value, str) else ""


def _single(value):
    if isinstance(value, list | tuple) and len(value) == 1:
        return _single(value[0])
    if isinstance(value, dict) and "class_name" not in value and len(value) == 1:
        return _single(next(iter(value.values())))
    return value


def _compiled_loss(value) -> tuple[str | None, dict]:
    value = _single(value)
    if isinstance(value, str):
        return loss_name(value), {}
    if isinstance(value, dict):
        cls, config = value.get("class_name"), value.get("config")
        if cls == "function":  # Keras 3: a loss function by name
            return loss_name(config), {}
        if isinstance(cls, str) and isinstance(config, dict):
            name = loss_name(cls) or loss_name(config.get("fn"))
            if name is None:
                return None, {}
            args = {k: v for k, v in config.items() if k not in _NOT_ARGS}
            if args.get("reduction") != "sum":
                args.pop("reduction", None)
            return name, args
    return None, {}
