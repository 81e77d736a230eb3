"""NumPy `.npz` recurrent weights, in Keras's layout or PyTorch's.

Keras's layout: one layer as arrays `kernel` [I, GH], `recurrent_kernel` [H, GH], `bias`; several
layers (a stack, run in the order the file lists them) as `<name>/kernel`,
`<name>/recurrent_kernel`, `<name>/bias` per layer; the halves of a Bidirectional are
`<name>/forward/...` and `<name>/backward/...` (the names model mode gives its directions). The
kind is told by the shapes: G = 4 (LSTM), 3 (GRU; bias [2, 3H] means reset_after=True), 1
(SimpleRNN, tanh).

PyTorch's layout: a state dict's keys (`weight_ih_l0`, …; see torch_files), or per layer
`<prefix>w_ih` [GH, I], `<prefix>w_hh` [GH, H], `<prefix>b_ih`, `<prefix>b_hh` [GH] (e.g.
`enc_w_ih`; the prefix, without a trailing `_`, `.` or `/`, is the layer's name), in the order
the file lists them or the one order in which they chain. A string array `nonlinearity` or
`<prefix>nonlinearity` ("tanh", "relu") gives an nn.RNN's.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np

from lstmviz.core.errors import WeightsError
from lstmviz.weights.formats.found import FoundLayer, numeric
from lstmviz.weights.formats.torch_files import (
    STATE_DICT_KEY,
    convert,
    set_nonlinearity,
    state_dict_layers,
)

_ARRAYS = ("kernel", "recurrent_kernel", "bias")
_KEY = re.compile(r"^(?:(?P<name>.+)/)?(?P<array>kernel|recurrent_kernel|bias)$")
_PREFIXED = re.compile(r"^(?P<prefix>.*?)(?P<array>w_ih|w_hh|b_ih|b_hh)$")


def npz_layers(path: Path) -> list[FoundLayer]:
    with np.load(path, allow_pickle=False) as data:
        if not hasattr(data, "files"):
            raise WeightsError("holds a single array, not kernel, recurrent_kernel and bias")
        settings = _texts(data)
        if any(STATE_DICT_KEY.match(key) for key in data.files):
            torch = {key: data[key] for key in data.files if STATE_DICT_KEY.match(key)}
            return state_dict_layers(torch, keeps_order=True, settings=settings)
        if any(_PREFIXED.match(key) for key in data.files):
            return _prefixed_layers(data, settings)
        groups: dict[str, dict[str, str]] = {}
        for key in data.files:
            match = _KEY.match(key)
            if match:
                groups.setdefault(match["name"] or "", {})[match["array"]] = key
        trace = "config_json" in data.files  # a trace: its one LSTM's weights, if any
        if trace and "kernel" not in data.files and "layer0_grad_kernel" in data.files:
            raise WeightsError("a model-mode trace holds no weights (only their gradients); "
                               "open the model file it ran")  # fmt: skip
        if set(groups) <= {""}:  # one unnamed layer: every array is needed
            missing = [name for name in _ARRAYS if name not in groups.get("", {})]
            if missing:
                found = ", ".join(data.files) or "nothing"
                raise WeightsError(f"missing {', '.join(missing)} (found: {found})")
        layers = []
        for position, (name, keys) in enumerate(groups.items()):
            layer = FoundLayer(name, order=(position,))
            missing = [array for array in _ARRAYS if array not in keys]
            if missing:
                layer.problem = f"missing {', '.join(f'{name}/{m}' for m in missing)}"
            else:
                layer.arrays = {array: numeric(key, data[key]) for array, key in keys.items()}
                kernel = layer.arrays["kernel"]
                if trace and kernel.ndim == 3:
                    layer.problem = (
                        f"a per-batch trace: {kernel.shape[0]} weight sets (kernel "
                        f"{list(kernel.shape)}); save one batch's kernel, recurrent_kernel and "
                        "bias with np.savez to load it"
                    )
            owner, _, last = name.rpartition("/")
            if owner and last in ("forward", "backward"):
                layer.owner, layer.direction = owner, last
                layer.note = f"{last} half of a Bidirectional"
            else:
                layer.owner = name
            layers.append(layer)
        return layers


def _texts(data) -> dict[str, str]:
    """The file's string arrays of one value (settings such as `nonlinearity`)."""
    texts = {}
    for key in data.files:
        value = data[key]
        if value.dtype.kind == "U" and value.size == 1:
            texts[key] = str(value.reshape(()))
    return texts


def _prefixed_layers(data, settings: dict[str, str]) -> list[FoundLayer]:
    """Layers named `<prefix>w_ih`, `<prefix>w_hh`, `<prefix>b_ih`, `<prefix>b_hh` (PyTorch's
    layout), in the order the file lists them, or the one order in which they chain (each
    layer's input width the hidden width of the one before) when the file's does not."""
    groups: dict[str, dict[str, np.ndarray]] = {}
    for key in data.files:
        match = _PREFIXED.match(key)
        if match:
            groups.setdefault(match["prefix"], {})[match["array"]] = numeric(key, data[key])
    layers = []
    for position, (prefix, parts) in enumerate(groups.items()):
        name = prefix.rstrip("_./")
        layer = FoundLayer(name, order=(position,), owner=name, pytorch=True)
        convert(layer, parts.get("w_ih"), parts.get("w_hh"), [parts.get("b_ih"), parts.get("b_hh")])
        if layer.problem:
            layer.problem = layer.problem.replace("weight_", f"{prefix}w_")
        set_nonlinearity(layer, settings, prefix)
        layers.append(layer)
    order = _chain_order(layers)
    for position, index in enumerate(order):
        layers[index].order = (position,)
    return [layers[index] for index in order]


def _chain_order(layers: list[FoundLayer]) -> list[int]:
    """Indices of `layers` in the file's order when it chains or nothing does; else the only
    order that chains (several small layers: every order is tried)."""
    widths = []
    for layer in layers:
        kernel, recurrent = (np.shape(layer.arrays.get(k)) for k in ("kernel", "recurrent_kernel"))
        widths.append((kernel[0], recurrent[0]) if len(kernel) == len(recurrent) == 2 else None)

    def chains(order) -> bool:
        pairs = [widths[i] for i in order]
        return None not in pairs and all(a[1] == b[0] for a, b in itertools.pairwise(pairs))

    in_file = list(range(len(layers)))
    if chains(in_file) or not 1 < len(layers) <= 6:
        return in_file
    found = [list(order) for order in itertools.permutations(in_file) if chains(order)]
    return found[0] if len(found) == 1 else in_file
