"""A Keras model's config and weights file as a ModelSpec: each layer's kind, arguments and
weights (NumPy and h5py only; no Keras, no code from the file).

Weights come from Keras 3's layout (`layers/<class>[_n]/…/vars/<i>`, `Keras3Weights`) or the
legacy HDF5 layout (`model_weights/<layer>` with its `weight_names`, `LegacyWeights`).
"""

from __future__ import annotations

import h5py
import numpy as np

from lstmviz.core.errors import GraphModel, ModelError
from lstmviz.weights.formats.found import numeric
from lstmviz.weights.formats.keras_config import (
    ConfigLayer,
    ConfigModel,
    compiled_loss,
    keras_own,
    loss_label,
)
from lstmviz.weights.formats.keras_files import (
    cudnn_to_keras,
    h5_child,
    h5_groups,
    h5_text,
    is_cudnn,
)
from lstmviz.weights.model_spec import (
    ACTIVATIONS,
    KERAS2_HARD_SIGMOID,
    LayerSpec,
    ModelSpec,
    infer_output_shape,
)

IDENTITY = (
    "Dropout",
    "SpatialDropout1D",
    "GaussianNoise",
    "GaussianDropout",
    "AlphaDropout",
    "ActivityRegularization",
    "Identity",
)
# Keras's recurrent layers lstmviz computes, by the kind of their cell (Keras 2's cuDNN layers
# are the same cells: tanh and sigmoid, always a bias, GRU with reset_after=True).
CELL_CLASSES = {
    "LSTM": "lstm",
    "CuDNNLSTM": "lstm",
    "GRU": "gru",
    "CuDNNGRU": "gru",
    "SimpleRNN": "simple_rnn",
}
CUDNN_CLASSES = ("CuDNNLSTM", "CuDNNGRU")
RNN_CELLS = {"LSTMCell": "LSTM", "GRUCell": "GRU", "SimpleRNNCell": "SimpleRNN"}  # in RNN(cell)
KERAS_CELLS = (*RNN_CELLS, "StackedRNNCells")  # the cells Keras itself has
_RNN_ARGS = ("return_sequences", "return_state", "go_backwards", "time_major",
             "zero_output_for_mask")  # fmt: skip
CODE_LAYERS = ("Lambda", "TFOpLambda", "SlicingOpLambda")  # their config holds Python code


class Keras3Weights:
    """A Keras 3 weights file: a layer's arrays are the datasets `<where>/<group>/<i>`."""

    def __init__(self, root: h5py.Group):
        self.root = root

    def take(self, layer: ConfigLayer, groups: tuple[str, ...], count: int) -> list[np.ndarray]:
        arrays = []
        for group_path in groups:
            group = self._group(f"{layer.where}/{group_path}")
            if group is None:
                continue
            for index in range(len(group)):
                dataset = h5_child(group, str(index), h5py.Dataset)
                if dataset is None:
                    break
                arrays.append(numeric(f"{layer.where}/{group_path}/{index}", dataset))
        return arrays

    def tree(self, layer: ConfigLayer) -> dict[str, np.ndarray]:
        """Every array below the layer's group, by its path relative to the group."""
        group = self._group(layer.where)
        if group is None:
            return {}
        found = {}
        for path, sub in h5_groups(group):
            for key in sub:
                dataset = h5_child(sub, key, h5py.Dataset)
                if dataset is not None:
                    name = f"{path}/{key}" if path else key
                    found[name] = numeric(f"{layer.where}/{name}", dataset)
        return found

    def _group(self, path: str) -> h5py.Group | None:
        group = self.root
        for part in path.split("/"):
            group = h5_child(group, part) if group is not None else None
        return group


class LegacyWeights:
    """A legacy HDF5 weights group: each layer's arrays, in order, named by `weight_names`.

    A nested model's layers share their model's group and take their arrays in turn.
    """

    def __init__(self, root: h5py.Group):
        self.root = root
        self.left: dict[str, list[np.ndarray]] = {}

    def take(self, layer: ConfigLayer, groups: tuple[str, ...], count: int) -> list[np.ndarray]:
        if layer.where not in self.left:
            self.left[layer.where] = self._arrays(layer.where)
        arrays = self.left[layer.where]
        taken, self.left[layer.where] = arrays[:count], arrays[count:]
        return taken

    def _arrays(self, name: str) -> list[np.ndarray]:
        group = h5_child(self.root, name)
        if group is None:
            return []
        arrays = []
        for weight in group.attrs.get("weight_names", []):
            path = h5_text(weight) or ""
            dataset = group
            for part in path.split("/"):
                dataset = h5_child(dataset, part, h5py.Group | h5py.Dataset) if dataset else None
            if not isinstance(dataset, h5py.Dataset):
                raise ModelError(f"layer {name!r}: weight {path!r} is missing")
            arrays.append(numeric(f"{name}/{path}", dataset))
        return arrays

    def unused(self) -> list[str]:
        return [name for name, arrays in self.left.items() if arrays]


def spec_from_config(
    model: ConfigModel,
    weights: Keras3Weights | LegacyWeights,
    source: str,
    compiled: dict | None,
    keras2: bool,
) -> ModelSpec:
    """The ModelSpec of a parsed config. Layers only Keras runs (kind "keras") are allowed
    with Keras 3 weights; `keras2` marks a Keras 2 file (its hard_sigmoid differs).
    `compiled`: the compile config (Keras 3) or training config (Keras 2), or None."""
    allow_keras = isinstance(weights, Keras3Weights)
    inputs = LayerSpec(
        "input", "input", "InputLayer", {"dtype": model.input_dtype}, {}, None, model.input_shape
    )
    layers = [inputs]
    for index, layer in enumerate(model.layers):
        after = model.layers[index + 1].input_hint if index + 1 < len(model.layers) else None
        build = _Builder(layer, weights, layers[-1].output_shape, after, allow_keras, keras2)
        layers.append(build.spec())
    if isinstance(weights, LegacyWeights) and weights.unused():
        names = ", ".join(repr(n) for n in weights.unused())
        raise ModelError(f"layers {names} hold more weight arrays than their config describes")
    compiled = compiled if isinstance(compiled, dict) else {}
    loss, loss_args = compiled_loss(compiled.get("loss"), compiled.get("loss_weights"))
    unknown = "" if loss else loss_label(compiled.get("loss"))
    mixed = sorted({p for p in map(_policy, model.layers) if p.startswith("mixed_")})
    if mixed:  # lstmviz's forward and its LSTM kernels are float32 throughout
        source += f", {' and '.join(mixed)} layers computed in float32"
    return ModelSpec(model.name, source, tuple(layers), loss, loss_args, unknown_loss=unknown)


def _float32(config):
    """`config` (a layer's, with the layers it wraps) with its mixed precision dtype policies
    float32: lstmviz's forward is float32, and a layer Keras runs in float16 would hand the
    next layer float16 tensors."""
    if isinstance(config, list):
        return [_float32(item) for item in config]
    if not isinstance(config, dict):
        return config
    out = {key: _float32(value) for key, value in config.items()}
    policy = out.get("dtype")
    if isinstance(policy, str) and policy.startswith("mixed_"):
        out["dtype"] = "float32"
    elif isinstance(policy, dict) and str((policy.get("config") or {}).get("name")).startswith(
        "mixed_"
    ):
        out["dtype"] = {**policy, "config": {**policy["config"], "name": "float32"}}
    return out


def _policy(layer: ConfigLayer) -> str:
    """The name of a layer's dtype policy ("float32", "mixed_float16", …), "" when it has none:
    Keras 3 saves a DTypePolicy object, Keras 2 a Policy object or its name."""
    value = layer.config.get("dtype") if isinstance(layer.config, dict) else None
    if isinstance(value, dict):
        value = (value.get("config") or {}).get("name")
    return value if isinstance(value, str) else ""


class _Builder:
    """Turns one ConfigLayer into a LayerSpec (kind, args, weights, shapes)."""

    def __init__(self, layer, weights, received, after, allow_keras: bool, keras2: bool):
        self.layer, self.store, self.keras2 = layer, weights, keras2
        self.received = layer.input_hint if layer.input_hint is not None else received
        self.after, self.allow_keras = after, allow_keras
        self.label = f"layer {layer.name!r} ({layer.class_name})"
        self.params = 0

    def spec(self) -> LayerSpec:
        cls, config = self.layer.class_name, self.layer.config
        if not isinstance(config, dict):
            raise ModelError(f"{self.label} has no config")
        cls, config = _cell_layer(cls, config)
        if cls in CELL_CLASSES:
            try:
                kind, (args, weights) = CELL_CLASSES[cls], self._recurrent(config, cls)
            except _Unsupported as exc:
                return self._keras(self.layer.config, str(exc))
            cls = self.layer.class_name
            if cls == "RNN":
                args["layer_class"] = _inner(self.layer.config, "cell")[0]
        elif cls == "Bidirectional":
            try:
                kind, args, weights = "bidirectional", *self._bidirectional(config)
            except _Unsupported as exc:
                return self._keras(config, str(exc))
        elif cls == "Embedding":
            kind, args, weights = "embedding", *self._embedding(config)
        elif cls == "Masking":
            kind, args, weights = "masking", {"mask_value": float(config.get("mask_value", 0))}, {}
        elif cls in IDENTITY:
            kind, args, weights = "identity", {}, {}
        elif cls == "Dense":
            kind, args, weights = "dense", *self._dense(config, ("vars",))
        elif cls == "TimeDistributed" and _inner(config)[0] == "Dense":
            args, weights = self._dense(_inner(config)[1], ("layer/vars",))
            kind, args = "time_distributed_dense", {**args, "layer_class": "Dense"}
        elif cls == "TimeDistributed" and _inner(config)[0] in IDENTITY:
            kind, args, weights = "identity", {"layer_class": _inner(config)[0]}, {}
        elif cls == "Activation":
            kind, args, weights = "activation", {"activation": self._act(config, "activation")}, {}
        elif cls == "BatchNormalization":
            try:
                kind, args, weights = "batch_normalization", *self._batch_normalization(config)
            except _Unsupported as exc:
                return self._keras(config, str(exc))
        elif cls == "Flatten":
            channels_first = config.get("data_format") == "channels_first"
            kind, args, weights = "flatten", {"channels_first": channels_first}, {}
        elif cls == "TimeDistributed":
            return self._keras(config, f"TimeDistributed({_inner(config)[0]})")
        else:
            return self._keras(config)
        found = {key: value for key, value in _regularizers(cls, config).items()
                 if key.endswith("output") or key in weights}  # fmt: skip
        if found:
            args = {**args, "regularizers": found}
        shape = self.received
        output = infer_output_shape(kind, args, weights, shape) if _fits(kind, shape) else None
        return LayerSpec(self.layer.name, kind, cls, args, weights, shape, output, self.params)

    def _take(self, groups: tuple[str, ...], count: int) -> list[np.ndarray]:
        arrays = self.store.take(self.layer, groups, count)
        if len(arrays) != count:
            raise ModelError(
                f"{self.label}: its config needs {count} weight arrays, the file has {len(arrays)}"
            )
        self.params += sum(int(a.size) for a in arrays)
        return arrays

    def _recurrent(self, config: dict, cls: str, group: str = "cell/vars", bidirectional=False):
        """(args, weights) of an LSTM, GRU or SimpleRNN (`cls`; a Bidirectional's half when
        `bidirectional`), its weights in Keras's layout (Keras 2 cuDNN layers converted)."""
        kind = CELL_CLASSES[cls]
        args = self._cell_args(config, cls)
        if bidirectional:  # Keras makes a Bidirectional's halves output zeros at masked steps
            args["zero_output_for_mask"] = args["return_sequences"]
        count = 3 if args["use_bias"] else 2
        names = ("kernel", "recurrent_kernel", "bias")[:count]
        arrays = dict(zip(names, self._take((group,), count), strict=True))
        if cls in CUDNN_CLASSES or is_cudnn(arrays, kind):
            if not is_cudnn(arrays, kind):
                raise ModelError(f"{self._half(cls)}: weights {_shapes(arrays)} are not {cls}'s")
            arrays = dict(zip(arrays, cudnn_to_keras(**arrays), strict=True))
        return args, arrays  # ModelSpec.check checks the shapes against the cell

    def _half(self, cls: str) -> str:
        """The layer's label, naming the class inside a wrapper."""
        return f"{self.label}{'' if cls == self.layer.class_name else f' ({cls} inside)'}"

    def _cell_args(self, config: dict, cls: str) -> dict:
        """The arguments of a recurrent layer (see weights/model_spec.py's KINDS); _Unsupported for
        an activation that is not Keras's (a custom function: Keras may run the layer)."""
        label, kind = self._half(cls), CELL_CLASSES[cls]
        if config.get("return_state"):  # its states go on to another layer: Keras runs that
            raise GraphModel(f"{label} has return_state=True")
        if config.get("time_major"):
            raise ModelError(f"{label} has time_major=True, which lstmviz does not run")
        if not isinstance(config.get("units"), int):
            raise ModelError(f"{label} has no units")
        cudnn = cls in CUDNN_CLASSES
        args = {
            "units": int(config["units"]),
            "return_sequences": bool(config.get("return_sequences", False)),
            "go_backwards": bool(config.get("go_backwards", False)),
            "use_bias": cudnn or bool(config.get("use_bias", True)),
            "zero_output_for_mask": bool(config.get("zero_output_for_mask", False)),
            "activation": "tanh" if cudnn else self._cell_act(config, "activation"),
        }
        if kind != "simple_rnn":
            args["recurrent_activation"] = (
                "sigmoid" if cudnn else self._cell_act(config, "recurrent_activation")
            )
        if kind == "gru":  # a Keras 2 config from before the argument existed: False
            args["reset_after"] = cudnn or bool(config.get("reset_after", not self.keras2))
        args["cudnn"] = cudnn
        return args

    def _batch_normalization(self, config: dict):
        """(args, weights) of a BatchNormalization at inference, on the last axis."""
        axis = config.get("axis", -1)
        axis = axis[0] if isinstance(axis, list) and len(axis) == 1 else axis
        rank = None if self.received is None else len(self.received) + 1  # with the batch
        if not isinstance(axis, int) or (axis != -1 and axis != (rank or 0) - 1):
            raise _Unsupported(f"axis={axis!r}; lstmviz normalizes the last axis")
        for flag in ("renorm", "virtual_batch_size"):
            if config.get(flag):
                raise _Unsupported(f"{flag}={config[flag]!r}")
        scale, center = bool(config.get("scale", True)), bool(config.get("center", True))
        names = ["gamma"] * scale + ["beta"] * center + ["moving_mean", "moving_variance"]
        weights = dict(zip(names, self._take(("vars",), len(names)), strict=True))
        width = weights["moving_mean"].shape
        if any(value.shape != width or value.ndim != 1 for value in weights.values()):
            raise ModelError(f"{self.label}: weights {_shapes(weights)} are not one vector each")
        epsilon = config.get("epsilon", 1e-3)
        if not isinstance(epsilon, int | float) or epsilon < 0:
            raise ModelError(f"{self.label} has epsilon={epsilon!r}")
        return {"epsilon": float(epsilon), "center": center, "scale": scale}, weights

    def _bidirectional(self, config: dict):
        inner_cls, inner = _cell_layer(*_inner(config))
        if inner_cls not in CELL_CLASSES:
            raise _Unsupported(f"Bidirectional({inner_cls})")
        merge = config.get("merge_mode", "concat")
        if merge is None:  # its halves go on apart: Keras runs the graph
            raise GraphModel(f"{self.label} has merge_mode=None (two outputs)")
        if merge not in ("concat", "sum", "mul", "ave"):
            raise ModelError(f"{self.label} has merge_mode={merge!r}; lstmviz runs concat, "
                             "sum, mul, ave and None")  # fmt: skip
        back_cls, back = _cell_layer(*_inner(config, "backward_layer"))
        if back is None:  # Keras 2 leaves it out: the forward layer, run the other way
            back_cls = inner_cls
            back = {**inner, "go_backwards": not inner.get("go_backwards", False)}
        elif CELL_CLASSES.get(back_cls) != CELL_CLASSES[inner_cls]:
            raise _Unsupported(f"Bidirectional({inner_cls}, backward {back_cls})")
        forward, fw = self._recurrent(inner, inner_cls, "forward_layer/cell/vars", True)
        backward, bw = self._recurrent(back, back_cls, "backward_layer/cell/vars", True)
        weights = {f"forward/{k}": v for k, v in fw.items()}
        weights.update({f"backward/{k}": v for k, v in bw.items()})
        args = {
            "merge_mode": merge,
            "return_sequences": forward["return_sequences"],
            "units": forward["units"],
            "layer_class": inner_cls,
            "cell": CELL_CLASSES[inner_cls],
            "forward": forward,
            "backward": backward,
        }
        return args, weights

    def _embedding(self, config: dict):
        for key in ("input_dim", "output_dim"):
            if not isinstance(config.get(key), int):
                raise ModelError(f"{self.label} has no {key}")
        args = {
            "input_dim": int(config["input_dim"]),
            "output_dim": int(config["output_dim"]),
            "mask_zero": bool(config.get("mask_zero", False)),
        }
        (embeddings,) = self._take(("vars",), 1)
        return args, {"embeddings": embeddings}

    def _dense(self, config: dict, groups: tuple[str, ...]):
        if not isinstance(config.get("units"), int):
            raise ModelError(f"{self.label} has no units")
        args = {
            "units": int(config["units"]),
            "activation": self._act(config, "activation", "linear"),
            "use_bias": bool(config.get("use_bias", True)),
        }
        arrays = self._take(groups, 2 if args["use_bias"] else 1)
        weights = dict(zip(("kernel", "bias"), arrays, strict=False))
        if weights["kernel"].ndim != 2 or weights["kernel"].shape[1] != args["units"]:
            raise ModelError(
                f"{self.label}: kernel {list(weights['kernel'].shape)} does not match "
                f"units={args['units']}"
            )
        return args, weights

    def _act(self, config: dict, key: str, default: str = "linear", error=ModelError) -> str:
        """The activation `config[key]` names, as the ModelSpec names it (Keras 2's
        hard_sigmoid: KERAS2_HARD_SIGMOID); `error` for one lstmviz does not compute."""
        name = _activation(config.get(key) or default)
        if name not in ACTIVATIONS or name == KERAS2_HARD_SIGMOID:
            raise error(f"{self.label} uses {key} {name!r}, not a built-in Keras activation")
        return KERAS2_HARD_SIGMOID if self.keras2 and name == "hard_sigmoid" else name

    def _cell_act(self, config: dict, key: str) -> str:
        """A recurrent layer's activation; _Unsupported (Keras may run the layer) for one
        lstmviz does not compute."""
        default = "sigmoid" if key == "recurrent_activation" else "tanh"
        try:
            return self._act(config, key, default, _Unsupported)
        except _Unsupported as exc:  # the wrapper's message names the layer
            raise _Unsupported(str(exc).replace(f"{self.label} uses ", "")) from None

    def _keras(self, config: dict, what: str = "") -> LayerSpec:
        """A layer lstmviz does not model, for Keras to run; an error unless allowed."""
        layer = self.layer
        if layer.class_name in CODE_LAYERS:
            raise ModelError(f"{self.label} holds Python code, which lstmviz does not run")
        if str(layer.module).startswith("keras.src.ops"):
            raise GraphModel(f"{self.label} is a Keras operation, not a layer; lstmviz's own "
                             "reader runs layers")
        cell_cls = _inner(config, "cell")[0]
        custom = cell_cls and (cell_cls not in KERAS_CELLS or not keras_own(config["cell"]))
        if custom and not self.allow_keras:  # (Keras 3 runs one registered in this process)
            raise ModelError(f"{self.label} has a custom cell {cell_cls!r}, whose code a file "
                             "does not hold; lstmviz runs Keras's own cells")  # fmt: skip
        if not (self.allow_keras and layer.builtin):
            detail = f" ({what})" if what else "" if layer.builtin else " (a custom layer)"
            hint = "" if self.allow_keras else "; a Keras 3 .keras file can run it through Keras"
            raise ModelError(f"{self.label}{detail} is not supported{hint}")
        weights = self.store.tree(layer)
        serialized = {
            "module": layer.module or "keras.layers",
            "class_name": layer.class_name,
            "config": _float32(config),
            "registered_name": layer.registered_name,
        }
        args = {"serialized": serialized, "call": layer.call}
        params = sum(int(a.size) for a in weights.values())
        return LayerSpec(
            layer.name, "keras", layer.class_name, args, weights, self.received, self.after, params
        )


class _Unsupported(ModelError):
    """A wrapper around a layer lstmviz does not model (the spec falls back to kind keras)."""


_WEIGHT_REGULARIZERS = {
    "kernel_regularizer": "kernel",
    "recurrent_regularizer": "recurrent_kernel",
    "bias_regularizer": "bias",
    "embeddings_regularizer": "embeddings",
    "gamma_regularizer": "gamma",
    "beta_regularizer": "beta",
}


def _regularizers(cls: str, config: dict) -> dict:
    """A layer's regularizers (Keras configs) by what they penalise: a weight's key (a
    Bidirectional's halves' as "forward/kernel", "backward/kernel"), "output" for the layer's
    activity regularizer ("forward/output", "backward/output" for its halves')."""
    found = {"output": config["activity_regularizer"]} if config.get("activity_regularizer") else {}
    if cls == "Bidirectional":
        forward = _inner(config)[1] or {}
        backward = _inner(config, "backward_layer")[1] or forward  # Keras 2: the forward's
        parts = [("forward/", forward), ("backward/", backward)]
    else:
        parts = [("", (_inner(config)[1] or {}) if cls == "TimeDistributed" else config)]
    for prefix, part in parts:
        found.update({prefix + weight: part[key] for key, weight in _WEIGHT_REGULARIZERS.items()
                      if part.get(key)})  # fmt: skip
        if prefix and part.get("activity_regularizer"):  # a Bidirectional's half's
            found[prefix + "output"] = part["activity_regularizer"]
    return found


def _inner(config: dict, key: str = "layer") -> tuple[str | None, dict | None]:
    """(class_name, config) of a wrapper's inner layer."""
    inner = config.get(key)
    if not isinstance(inner, dict) or not isinstance(inner.get("config"), dict):
        return None, None
    return inner.get("class_name"), inner["config"]


def _activation(value) -> str:
    if isinstance(value, dict):  # Keras 3 writes a function as {"class_name": "function", …}
        value = value.get("config") if value.get("class_name") == "function" else None
    return value if isinstance(value, str) else repr(value)


def _cell_layer(cls: str | None, config: dict | None) -> tuple[str | None, dict | None]:
    """(class, config) of a recurrent layer: RNN(LSTMCell | GRUCell | SimpleRNNCell) as the
    LSTM, GRU or SimpleRNN it is (the cell's arguments and the RNN's); others as given."""
    cell_cls, cell = _inner(config, "cell") if cls == "RNN" and config else (None, None)
    if cell_cls not in RNN_CELLS:
        return cls, config
    return RNN_CELLS[cell_cls], {**cell, **{k: v for k, v in config.items() if k in _RNN_ARGS}}


def _shapes(arrays: dict) -> str:
    return ", ".join(f"{key} {list(value.shape)}" for key, value in arrays.items())


def _fits(kind: str, shape) -> bool:
    """Whether infer_output_shape applies (else ModelSpec.check names the mismatch)."""
    if shape is None:
        return False
    if kind == "embedding":
        return len(shape) == 1
    if kind in ("lstm", "gru", "simple_rnn", "bidirectional", "time_distributed_dense"):
        return len(shape) == 2
    return True
