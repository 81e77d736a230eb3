"""A whole model as plain data: `LayerSpec` per layer, `ModelSpec` for the chain (NumPy only).

Shapes leave out the batch: a layer's `output_shape` is (T, W) for a sequence of width W, (W,)
for one vector per sample, and the model's input is (T,) token ids or (T, I) features; T is None
when the model takes any length. Weights are float32 in Keras's layout, by kind:

- lstm: `kernel` [I, 4H], `recurrent_kernel` [H, 4H], `bias` [4H] (absent when use_bias is off);
  gates i, f, c, o.
- gru: `kernel` [I, 3H], `recurrent_kernel` [H, 3H], `bias` [3H] (`reset_after` False) or
  [2, 3H] (`reset_after` True: row 0 the input bias, row 1 the recurrent one); gates z, r, h̃.
- simple_rnn: `kernel` [I, H], `recurrent_kernel` [H, H], `bias` [H].
- bidirectional: the same three per half, `forward/kernel` … `backward/bias`; args `cell` names
  the halves' kind ("lstm", "gru", "simple_rnn"; absent: "lstm").
- batch_normalization: `gamma`, `beta`, `moving_mean`, `moving_variance` [W] (gamma/beta absent
  without scale/center), on the last axis, inference.

Activations (args `activation`, `recurrent_activation`) are Keras's names, computed as Keras 3
defines them, except "hard_sigmoid_keras2": Keras 2's clip(0.2·x + 0.5, 0, 1), which the file
readers write for a `hard_sigmoid` saved by Keras 2 (Keras 3's is relu6(x + 3) / 6).
- embedding: `embeddings` [V, E].
- dense, time_distributed_dense: `kernel` [W, units], `bias` [units] (absent without a bias).
- keras: the layer's arrays under the paths Keras 3 stores them (`vars/0`, `cell/vars/1`, …),
  in the file's dtypes.
- input, masking, identity, activation: none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lstmviz.core.errors import ModelError
from lstmviz.core.schema import CELL_CLASSES, CELL_GATES
from lstmviz.weights.lstm_weights import LSTMWeights

KINDS = (
    "input",  # the model's input: output_shape (T,) token ids or (T, I)
    "embedding",  # args: input_dim, output_dim, mask_zero
    "masking",  # args: mask_value
    "identity",  # Dropout and the like: identity at inference
    "lstm",  # args: units, return_sequences, go_backwards, use_bias, zero_output_for_mask,
    #          activation, recurrent_activation, …
    "gru",  # the lstm's args, and reset_after
    "simple_rnn",  # the lstm's args but recurrent_activation
    "bidirectional",  # args: merge_mode, return_sequences, forward {…}, backward {…}
    "dense",  # args: units, activation, use_bias (on the last axis)
    "time_distributed_dense",  # the same on every timestep
    "activation",  # args: activation
    "batch_normalization",  # args: epsilon (inference: the moving statistics)
    "flatten",  # (T, W) -> (T·W,)
    "keras",  # a layer only Keras runs: args config, module, registered_name, call
)
RECURRENT = ("lstm", "gru", "simple_rnn", "bidirectional")
CELLS = ("lstm", "gru", "simple_rnn")  # the kinds of a direction (a Bidirectional's args "cell")
# Keras's activation names (keras.activations) and Keras 2's hard_sigmoid (see above)
KERAS2_HARD_SIGMOID = "hard_sigmoid_keras2"  # Keras 2's hard_sigmoid (module docstring)
ACTIVATIONS = (
    "linear", "tanh", "sigmoid", "hard_sigmoid", KERAS2_HARD_SIGMOID, "relu", "relu6",
    "leaky_relu", "elu", "selu", "celu", "gelu", "softplus", "softsign", "exponential", "swish",
    "silu", "hard_silu", "hard_swish", "mish", "log_sigmoid", "hard_tanh", "tanh_shrink",
    "soft_shrink", "hard_shrink", "squareplus", "sparse_plus", "sparse_sigmoid", "softmax",
    "log_softmax", "sparsemax",
)  # fmt: skip
ACROSS_UNITS = ("softmax", "log_softmax", "sparsemax")  # activations that mix the units
# Keras's recurrent layers: one of kind "keras" runs in Keras, its steps not in the panels
KERAS_RECURRENT = ("RNN", "SimpleRNN", "GRU", "LSTM", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D")
SEQUENCE_KINDS = ("masking", *RECURRENT, "time_distributed_dense")  # take (T, W)
MERGE_MODES = ("concat", "sum", "mul", "ave")

Shape = tuple  # of int | None


@dataclass(frozen=True)
class LayerSpec:
    """One layer: what it is, its arguments and weights, its shapes (without the batch)."""

    name: str
    kind: str
    class_name: str
    args: dict = field(default_factory=dict)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    input_shape: Shape | None = None
    output_shape: Shape | None = None
    params: int = 0

    def __repr__(self) -> str:
        """Name, class, output shape and parameters; not the weights' values."""
        shape = "?" if self.output_shape is None else shape_text((None, *self.output_shape))
        return (f"LayerSpec({self.name!r}, {class_text(self)}, output {shape}, "
                f"{self.params:,} params)")  # fmt: skip

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ModelError(f"layer {self.name!r}: unknown kind {self.kind!r}")
        # A layer Keras runs keeps the file's dtypes (Keras loads them into its variables).
        dtype = None if self.kind == "keras" else np.float32
        weights = {k: np.ascontiguousarray(v, dtype=dtype) for k, v in self.weights.items()}
        object.__setattr__(self, "weights", weights)

    @property
    def label(self) -> str:
        """`'name' (Class)`, for messages."""
        return f"{self.name!r} ({self.class_name})"

    @property
    def cell(self) -> str | None:
        """The cell kind of a recurrent layer's directions ("lstm", "gru", "simple_rnn")."""
        if self.kind == "bidirectional":
            return str(self.args.get("cell") or "lstm")
        return self.kind if self.kind in CELLS else None

    def directions(self) -> list[DirectionSpec]:
        """The recurrent directions of this layer: [one] for a cell layer, a Bidirectional's
        [name/forward, name/backward]; [] for other kinds. A missing bias is absent from
        `weights` (the engine uses zeros and still shows its gradient)."""
        if self.kind in CELLS:
            return [DirectionSpec(self.name, self.kind, self.weights, self.args)]
        if self.kind != "bidirectional":
            return []
        out = []
        for half in ("forward", "backward"):
            weights = {k.split("/", 1)[1]: v for k, v in self.weights.items()
                       if k.startswith(half + "/")}  # fmt: skip
            args = {"go_backwards": half == "backward", **(self.args.get(half) or {})}
            out.append(DirectionSpec(f"{self.name}/{half}", self.cell, weights, args))
        return out


@dataclass(frozen=True)
class DirectionSpec:
    """One recurrent direction: its name ("bi/forward", "top"), cell kind, weights (`kernel`,
    `recurrent_kernel`, `bias` when the layer has one; Keras's layout) and the layer's (or the
    half's) args: activation, recurrent_activation, go_backwards, reset_after, …"""

    name: str
    cell: str
    weights: dict
    args: dict

    @property
    def hidden(self) -> int:
        return int(self.weights["recurrent_kernel"].shape[0])

    @property
    def input_dim(self) -> int:
        return int(self.weights["kernel"].shape[0])

    @property
    def gates(self) -> tuple[str, ...]:
        return CELL_GATES[self.cell]

    @property
    def activations(self) -> tuple[str, str]:
        """(activation, recurrent_activation), Keras's defaults when not given."""
        default = "sigmoid" if self.cell != "simple_rnn" else None
        return (str(self.args.get("activation") or "tanh"),
                str(self.args.get("recurrent_activation") or default))  # fmt: skip

    def lstm_weights(self) -> LSTMWeights:
        """An LSTM direction's weights (a missing bias: zeros)."""
        recurrent = self.weights["recurrent_kernel"]
        bias = self.weights.get("bias", np.zeros(recurrent.shape[1], np.float32))
        return LSTMWeights(self.weights["kernel"], recurrent, bias)


@dataclass(frozen=True)
class ModelSpec:
    """A model as a chain of layers; `layers[0]` is its input. Checked when made (`check`).

    `source`: one line naming the file (or live model) and its format. `loss`: the compiled
    loss as a Keras loss name (e.g. "binary_crossentropy") or None; `loss_args`: its keyword
    arguments (e.g. {"from_logits": True}, and the compile's `reduction`/`loss_weight` when
    not Keras's defaults). `stack`: LSTM layers read from a weights-only file, with no head
    (the loss goes on the top layer's h). `unknown_loss`: the name of a compiled loss that is
    not a Keras loss (a custom one), when `loss` is None for that reason.
    """

    name: str
    source: str
    layers: tuple[LayerSpec, ...]
    loss: str | None = None
    loss_args: dict = field(default_factory=dict)
    stack: bool = False
    unknown_loss: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(self.layers))
        self.check()

    @property
    def no_loss(self) -> str:
        """Why a model with a head has no loss lstmviz computes (when `loss` is None)."""
        if self.unknown_loss:
            return (f"the model's compiled loss {self.unknown_loss!r} is not a Keras loss "
                    "lstmviz knows")  # fmt: skip
        return "the model has no compiled loss"

    @property
    def input_shape(self) -> Shape:
        """(T,) token ids or (T, I) features; T is None for any length."""
        return self.layers[0].output_shape

    @property
    def tokens(self) -> bool:
        """Whether the model takes token ids (it starts with an Embedding)."""
        return len(self.layers) > 1 and self.layers[1].kind == "embedding"

    @property
    def vocabulary(self) -> int | None:
        """The Embedding's input_dim for a model of token ids, else None."""
        return int(self.layers[1].args["input_dim"]) if self.tokens else None

    @property
    def output_shape(self) -> Shape | None:
        return self.layers[-1].output_shape

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)

    def lstm_layers(self) -> list[LayerSpec]:
        """The recurrent layers (of any cell), in model order."""
        return [layer for layer in self.layers if layer.kind in RECURRENT]

    def lstm_directions(self) -> list[str]:
        """One name per LSTM direction in model order, forward before backward: e.g.
        ["bi/forward", "bi/backward", "top"] (a trace's `layer_names`)."""
        return [d.name for d in self.directions()]

    def directions(self) -> list[DirectionSpec]:
        """Every recurrent direction, in `lstm_directions` order."""
        return [d for layer in self.lstm_layers() for d in layer.directions()]

    def cells(self) -> list[str]:
        """The cell kind of each direction, in `lstm_directions` order (a trace's
        `layer{k}_cell`)."""
        return [d.cell for d in self.directions()]

    def __repr__(self) -> str:
        """The summary table, as `model.summary()` shows a Keras model (the weights are many)."""
        return self.summary()

    def summary(self) -> str:
        """A table of the layers (name, class, output shape, parameters) and the totals."""
        rows = [("Layer", "Class", "Output shape", "Params")]
        for layer in self.layers:
            shape = "?" if layer.output_shape is None else shape_text((None, *layer.output_shape))
            rows.append((layer.name, class_text(layer), shape, f"{layer.params:,}"))
        lines = [f"Model {self.name!r}: {self.source}", *layer_table(rows)]
        lines.append(f"Total params: {self.params:,}")
        what = (
            f"token ids {shape_text((None, *self.input_shape))}, vocabulary {self.vocabulary}"
            if self.tokens
            else f"features {shape_text((None, *self.input_shape))}"
        )
        if self.stack:
            loss = "none (a stack of recurrent layers without a head)"
        elif self.loss is None:
            loss = f"{self.unknown_loss} (not a Keras loss)" if self.unknown_loss else (
                "none in the file")
        else:
            args = ", ".join(f"{k}={v!r}" for k, v in self.loss_args.items())
            loss = f"{self.loss}({args})" if args else self.loss
            if any(layer.args.get("regularizers") for layer in self.layers):
                loss += " + the layers' regularization penalties"
        lines.append(f"Input: {what}. Loss: {loss}.")
        return "\n".join(lines)

    def check(self) -> None:
        """Raise ModelError unless the layers form a chain lstmviz runs: an input first, at
        least one LSTM, each layer taking what the one before gives (rank and width)."""
        layers = self.layers
        if not layers or layers[0].kind != "input":
            raise ModelError("the first layer must be the model's input")
        if any(layer.kind == "input" for layer in layers[1:]):
            raise ModelError("only the first layer can be an input")
        if not self.lstm_layers():
            found = ", ".join(f"{layer.label}" for layer in layers[1:]) or "no layers"
            raise ModelError(f"no recurrent layer lstmviz traces in the model ({found})")
        shape = layers[0].output_shape
        if shape is None or len(shape) not in (1, 2):
            raise ModelError(f"the input shape {shape} is neither (T,) token ids nor (T, I)")
        for index, (before, layer) in enumerate(zip(layers, layers[1:], strict=False), 1):
            if layer.kind == "embedding" and index != 1:
                raise ModelError(f"layer {layer.label}: an Embedding must come first")
            given = before.output_shape
            known = layer.input_shape is not None and given is not None
            if known and not _same_shape(layer.input_shape, given):
                raise ModelError(
                    f"layer {layer.label} takes {shape_text(layer.input_shape)} but "
                    f"{before.label} gives {shape_text(given)}"
                )
            received = given if given is not None else layer.input_shape
            if received is None or layer.kind == "keras":
                continue
            _check_layer(layer, received, before)


def layer_table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    """Rows (layer, class, output shape, parameters; a header first) as the summary's lines:
    columns padded, the parameters right-aligned, a rule under the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = []
    for n, row in enumerate(rows):
        cells = [row[i].ljust(widths[i]) for i in range(3)] + [row[3].rjust(widths[3])]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("-" * len(lines[-1]))
    return lines


def infer_output_shape(kind: str, args: dict, weights: dict, input_shape: Shape) -> Shape:
    """The output shape of a layer of `kind` given its input shape (both without the batch);
    the layer's input must already fit (see ModelSpec.check)."""
    if kind == "embedding":
        return (*input_shape, int(args["output_dim"]))
    if kind in ("dense", "time_distributed_dense"):
        return (*input_shape[:-1], int(weights["kernel"].shape[1]))
    if kind in RECURRENT:
        width = _recurrent_width(kind, args, weights)
        return (input_shape[0], width) if args.get("return_sequences") else (width,)
    if kind in ("masking", "identity", "activation", "input", "batch_normalization"):
        return tuple(input_shape)
    if kind == "flatten":  # (T, W) -> (T·W,); a vector stays one
        return (None if None in input_shape else int(np.prod(input_shape)),)
    raise ModelError(f"the output shape of a {kind!r} layer is not known without Keras")


def _recurrent_width(kind: str, args: dict, weights: dict) -> int:
    if kind != "bidirectional":
        return int(weights["recurrent_kernel"].shape[0])
    forward = int(weights["forward/recurrent_kernel"].shape[0])
    backward = int(weights["backward/recurrent_kernel"].shape[0])
    return forward + backward if args.get("merge_mode") == "concat" else forward


def _check_layer(layer: LayerSpec, received: Shape, before: LayerSpec) -> None:
    """Raise ModelError unless `layer` (not of kind keras) can take `received` from `before`."""
    kind, w = layer.kind, layer.weights
    gives = f"{before.label} gives {shape_text(received)}"
    if kind == "embedding":
        if len(received) != 1:
            raise ModelError(f"layer {layer.label} takes token ids (T,) but {gives}")
        if w["embeddings"].shape != (layer.args["input_dim"], layer.args["output_dim"]):
            raise ModelError(
                f"layer {layer.label}: embeddings {list(w['embeddings'].shape)} do not match "
                f"input_dim={layer.args['input_dim']}, output_dim={layer.args['output_dim']}"
            )
    elif before.kind == "input" and len(received) == 1:
        raise ModelError(
            f"layer {layer.label} gets token ids {shape_text(received)} from the input, but no "
            "Embedding comes first"
        )
    elif kind in SEQUENCE_KINDS and len(received) != 2:
        raise ModelError(f"layer {layer.label} needs a sequence (T, W) but {gives}")
    widths = {
        **{cell: ("kernel",) for cell in CELLS},
        "batch_normalization": ("moving_mean",),
        "bidirectional": ("forward/kernel", "backward/kernel"),
        "dense": ("kernel",),
        "time_distributed_dense": ("kernel",),
    }.get(kind, ())
    for key in widths:
        if received[-1] is not None and w[key].shape[0] != received[-1]:
            raise ModelError(
                f"layer {layer.label} takes inputs of width {w[key].shape[0]} "
                f"({key} {list(w[key].shape)}) but {gives}"
            )
    for direction in layer.directions():
        _check_direction(layer, direction)
    if kind == "bidirectional":
        merge = layer.args.get("merge_mode")
        units = [w[f"{d}/recurrent_kernel"].shape[0] for d in ("forward", "backward")]
        if merge not in MERGE_MODES:
            raise ModelError(f"layer {layer.label}: merge_mode {merge!r} is not supported")
        if merge != "concat" and units[0] != units[1]:
            raise ModelError(f"layer {layer.label}: merge_mode {merge!r} needs equal units")
    expected = infer_output_shape(kind, layer.args, w, received)
    if layer.output_shape is not None and not _same_shape(layer.output_shape, expected):
        raise ModelError(
            f"layer {layer.label}: output shape {shape_text(layer.output_shape)} does not "
            f"follow from its input {shape_text(received)} (expected {shape_text(expected)})"
        )


def _check_direction(layer: LayerSpec, d: DirectionSpec) -> None:
    """Raise ModelError unless the direction's weights fit its cell (G gate blocks of H units:
    kernel [I, G·H], recurrent_kernel [H, G·H], bias [G·H], GRU's with reset_after [2, G·H])
    and its activations are Keras's."""
    if d.cell not in CELLS:
        raise ModelError(f"layer {layer.label}: unknown cell {d.cell!r}")
    where = f"layer {layer.label}" + (f" ({d.name.rsplit('/', 1)[1]})" if "/" in d.name else "")
    w, gates = d.weights, len(d.gates)
    shapes = {k: list(np.shape(w[k])) for k in ("kernel", "recurrent_kernel", "bias") if k in w}
    units = shapes["recurrent_kernel"][0]
    wanted = {"kernel": [shapes["kernel"][0], gates * units],
              "recurrent_kernel": [units, gates * units], "bias": [gates * units]}  # fmt: skip
    if d.cell == "gru" and d.args.get("reset_after"):
        wanted["bias"] = [2, gates * units]
    wrong = [f"{k} {shape} (expected {wanted[k]})" for k, shape in shapes.items()
             if shape != wanted[k]]  # fmt: skip
    if wrong:
        raise ModelError(f"{where}: {CELL_CLASSES[d.cell]} weights of {units} units do not fit: "
                         f"{', '.join(wrong)}")  # fmt: skip
    for key, name in zip(("activation", "recurrent_activation"), d.activations, strict=True):
        if d.cell == "simple_rnn" and key == "recurrent_activation":
            continue
        if name not in ACTIVATIONS:
            raise ModelError(f"{where}: unknown {key} {name!r} (not a Keras activation)")


def _same_shape(a: Shape, b: Shape) -> bool:
    """Equal shapes, where None (any length) matches any size."""
    if len(a) != len(b):
        return False
    return all(x is None or y is None or x == y for x, y in zip(a, b, strict=True))


def shape_text(shape: Shape) -> str:
    """(None, 7, 4) as Keras prints it."""
    inner = ", ".join("None" if s is None else str(s) for s in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def class_text(layer: LayerSpec) -> str:
    """The layer's class as the summary shows it: "Bidirectional(LSTM)" for a wrapper;
    "GRU (run by Keras; not traced)" for a recurrent layer whose gradients are not in the panels."""
    if layer.kind == "keras":
        serialized = layer.args.get("serialized") or {}
        inner = (serialized.get("config") or {}).get("layer")
        text = layer.class_name
        if isinstance(inner, dict) and inner.get("class_name"):
            text += f"({inner['class_name']})"
        if _untraced_recurrent(serialized) or (
            isinstance(inner, dict) and _untraced_recurrent(inner)
        ):
            text += " (run by Keras; not traced)"
        return text
    inner = layer.args.get("layer_class")
    if not inner and layer.kind == "bidirectional":  # its halves' cell
        inner = CELL_CLASSES.get(layer.cell or "lstm")
    text = f"{layer.class_name}({inner})" if inner else layer.class_name
    if layer.kind in RECURRENT:
        return text + cell_note(layer.args.get("forward", layer.args))
    return text


def activation_text(name: str) -> str:
    """An activation's name for people: "Keras 2 hard_sigmoid" for Keras 2's definition."""
    return "Keras 2 hard_sigmoid" if name == KERAS2_HARD_SIGMOID else name


def cell_note(args: dict) -> str:
    """" (relu, sigmoid)" naming a recurrent layer's activations when they are not Keras's
    defaults (tanh; sigmoid), with "reset_after=False" for such a GRU; "" otherwise."""
    names = [args.get(key) for key in ("activation", "recurrent_activation") if key in args]
    parts = [", ".join(map(activation_text, names))] if names[:2] not in (
        ["tanh", "sigmoid"], ["tanh"]) else []  # fmt: skip
    if args.get("reset_after") is False:
        parts.append("reset_after=False")
    return f" ({'; '.join(parts)})" if parts else ""


def _untraced_recurrent(serialized: dict) -> bool:
    """Whether a serialized Keras layer ({"module", "class_name", …}) is a built-in recurrent
    one."""
    module = str(serialized.get("module") or "keras.layers")
    return module.startswith("keras") and serialized.get("class_name") in KERAS_RECURRENT
