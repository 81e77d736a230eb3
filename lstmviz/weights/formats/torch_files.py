"""PyTorch `nn.LSTM`, `nn.GRU` and `nn.RNN` state dicts: `.safetensors` (no code, no pickle),
`.pt` (needs torch), and the same keys in `.npz`.

Keys are `[prefix]weight_ih_l{k}[_reverse]` [GH, I], `weight_hh_l{k}` [GH, H], `bias_ih_l{k}`,
`bias_hh_l{k}` [GH]: G = 4 gates for nn.LSTM, 3 for nn.GRU, 1 for nn.RNN, which is how the
kind is told (the rows of weight_ih over the columns of weight_hh). Keras layout:

- LSTM: kernel = weight_ih.T, recurrent_kernel = weight_hh.T, bias = bias_ih + bias_hh; the
  gate order (i, f, g, o) is Keras's (i, f, c, o).
- GRU: PyTorch's gates r, z, n become Keras's z, r, h̃ (the blocks reordered); PyTorch's
  n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)) and h = (1 − z) ⊙ n + z ⊙ h_prev are Keras's
  GRU with reset_after=True, so bias [2, 3H] = [bias_ih, bias_hh] (reordered).
- RNN: kernel = weight_ih.T, recurrent_kernel = weight_hh.T, bias = bias_ih + bias_hh. Its
  `nonlinearity` is not in a state dict: tanh (PyTorch's default) unless the file says relu —
  the safetensors metadata or an `.npz` string array `nonlinearity` (for every nn.RNN) or
  `<prefix>nonlinearity` (for the module with that prefix, e.g. `rnn.nonlinearity`).

Layer names are `[prefix]l{k}[_reverse]`, e.g. `lstm.l0`. A `.pt` state dict keeps the order
its modules were registered in; `.safetensors` stores tensors sorted by name, so its modules are
ordered by name with numbers compared as numbers (`layers.2.` before `layers.10.`).
"""

from __future__ import annotations

import importlib.util
import json
import pickle
import re
from pathlib import Path

import numpy as np

from lstmviz.core.errors import WeightsError
from lstmviz.weights.formats.found import FoundLayer, numeric

KINDS_BY_GATES = {4: "lstm", 3: "gru", 1: "simple_rnn"}
NONLINEARITIES = ("tanh", "relu")  # nn.RNN's

STATE_DICT_KEY = re.compile(
    r"^(?P<prefix>(?:.*\.)?)(?P<kind>weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)"
    r"_l(?P<index>\d+)(?P<reverse>_reverse)?$"
)


def safetensors_layers(path: Path) -> list[FoundLayer]:
    from safetensors import safe_open

    arrays = {}
    with safe_open(str(path), framework="numpy") as f:
        metadata = f.metadata() or {}
        for key in f.keys():  # noqa: SIM118 (a safe_open handle is not a dict)
            if not STATE_DICT_KEY.match(key):
                continue
            dtype = f.get_slice(key).get_dtype()
            if dtype == "BF16":  # NumPy has no bfloat16: read the raw bytes
                arrays[key] = _bfloat16(path, key)
            elif dtype.startswith("F8"):
                raise WeightsError(f"{key} has dtype {dtype}, which lstmviz does not read")
            else:
                arrays[key] = f.get_tensor(key)
    # safetensors writes tensors sorted by name (and dtype), not in the state dict's order.
    return state_dict_layers(arrays, keeps_order=False, settings=metadata)


def _bfloat16(path: Path, key: str) -> np.ndarray:
    """The BF16 tensor `key` of a safetensors file as float32 (bfloat16 is float32's top 16
    bits). The layout: an 8-byte little-endian header length, the JSON header giving each
    tensor's shape and byte range, then the data (safe_open has checked the header)."""
    with open(path, "rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        entry = json.loads(handle.read(size))[key]
        start, end = entry["data_offsets"]
        handle.seek(8 + size + start)
        raw = np.frombuffer(handle.read(end - start), "<u2")
    count = int(np.prod(entry["shape"], dtype=np.int64))
    if raw.size != count:
        raise WeightsError(f"{key}: {raw.size} bfloat16 values for shape {entry['shape']}")
    return (raw.astype(np.uint32) << 16).view(np.float32).reshape(entry["shape"])


def pt_layers(path: Path) -> list[FoundLayer]:
    if importlib.util.find_spec("torch") is None:
        raise WeightsError(
            "reading .pt files needs PyTorch, which is not installed; install torch, or save the "
            "state dict with safetensors (safetensors.torch.save_file) and load the .safetensors"
        )
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise WeightsError(
            "holds pickled Python objects (a whole module saved with torch.save(model)?), "
            "which lstmviz does not load: unpickling runs code; save model.state_dict(), or "
            "the model with torch.jit.save or torch.export.save (.pt2)"
        ) from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise WeightsError(f"holds a {type(state).__name__}, not a state dict")
    return state_dict_layers(
        {
            key: value.detach().float().numpy()
            for key, value in state.items()
            if isinstance(key, str)
            and STATE_DICT_KEY.match(key)
            and isinstance(value, torch.Tensor)
        }
    )


def module_of(name: str) -> str:
    """The nn.LSTM module (its state dict prefix, e.g. "encoder.") of a layer `[prefix]l{k}`."""
    return re.sub(r"l\d+(_reverse)?$", "", name)


def by_numbers(prefix: str) -> tuple:
    """A sort key comparing the digit runs of `prefix` as numbers: "layers.2." before
    "layers.10.", as nn.ModuleList and numbered attributes register them."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", prefix))  # fmt: skip


def state_dict_layers(
    arrays: dict[str, np.ndarray], keeps_order: bool = True, settings: dict | None = None
) -> list[FoundLayer]:
    """Group nn.LSTM / nn.GRU / nn.RNN keys by layer and convert them to Keras's layout. Layers
    are ordered by module, then by index; modules in the order of `arrays` (a state dict's:
    the order they were registered in) when it `keeps_order`, else by name with numbers
    compared as numbers. `settings`: the file's text entries (`nonlinearity`)."""
    groups: dict[str, dict[str, np.ndarray]] = {}
    indices: dict[str, tuple[str, int]] = {}
    prefixes: list[str] = []
    for key, value in arrays.items():
        match = STATE_DICT_KEY.match(key)
        if match:
            name = f"{match['prefix']}l{match['index']}{match['reverse'] or ''}"
            groups.setdefault(name, {})[match["kind"]] = numeric(key, value)
            if match["prefix"] not in prefixes:
                prefixes.append(match["prefix"])
            indices[name] = (match["prefix"], int(match["index"]))
    if not keeps_order:
        prefixes.sort(key=by_numbers)
    orders = {name: (prefixes.index(prefix), k) for name, (prefix, k) in indices.items()}
    found = []
    for name, parts in groups.items():
        layer = FoundLayer(name, order=orders[name], pytorch=True)
        layer.owner = name.removesuffix("_reverse")
        if name.endswith("_reverse"):
            layer.note = "reverse direction (PyTorch runs it on the reversed sequence)"
            layer.direction = "backward"
        elif f"{name}_reverse" in groups:
            layer.direction = "forward"
        if "weight_hr" in parts:
            layer.problem = "it has proj_size (weight_hr), which lstmviz does not support"
        else:
            biases = [parts.get("bias_ih"), parts.get("bias_hh")]
            convert(layer, parts.get("weight_ih"), parts.get("weight_hh"), biases)
            set_nonlinearity(layer, settings, indices[name][0])
        found.append(layer)
    return found


def set_nonlinearity(layer: FoundLayer, settings: dict | None, prefix: str) -> None:
    """An nn.RNN layer's activation: the file's text entry `<prefix>nonlinearity` (its
    module's), else `nonlinearity` (every module's), else PyTorch's default tanh."""
    if layer.kind != "simple_rnn":
        return
    settings = settings or {}
    value = settings.get(f"{prefix}nonlinearity", settings.get("nonlinearity"))
    nonlinearity = str(value).strip().lower() if value is not None else "tanh"
    if nonlinearity not in NONLINEARITIES:
        layer.problem = f"nonlinearity {nonlinearity!r} is not tanh or relu"
    layer.args = {"activation": nonlinearity}
    said = ", as the file says" if value is not None else (
        ": PyTorch's default, a state dict does not hold it")  # fmt: skip
    note = f"nn.RNN nonlinearity {nonlinearity}{said}"
    layer.note = ", ".join(filter(None, [layer.note, note]))


def _gates(array: np.ndarray, order: list[int], hidden: int) -> np.ndarray:
    """`array` [GH, …] with its gate blocks (H rows each) in `order`."""
    return np.concatenate([array[g * hidden : (g + 1) * hidden] for g in order])


_KERAS_GATES = {"lstm": [0, 1, 2, 3], "gru": [1, 0, 2], "simple_rnn": [0]}  # PyTorch's blocks


def convert(layer: FoundLayer, w_ih, w_hh, biases: list) -> None:
    """Set `layer.kind` and its Keras-layout `arrays` from PyTorch's w_ih [GH, I], w_hh
    [GH, H] and biases [b_ih, b_hh] (either None when absent), or `layer.problem`."""
    if w_ih is None or w_hh is None:
        layer.problem = "weight_ih or weight_hh is missing"
        return
    hidden = w_hh.shape[1] if w_hh.ndim == 2 else 0
    gates = w_ih.shape[0] // hidden if hidden and w_ih.ndim == 2 else 0
    kind = KINDS_BY_GATES.get(gates)
    if kind is None or w_ih.shape[0] != gates * hidden or w_hh.shape[0] != gates * hidden:
        layer.problem = (
            f"weight_ih {list(w_ih.shape)} and weight_hh {list(w_hh.shape)} are not [GH, I] "
            "and [GH, H] with G = 4 (nn.LSTM), 3 (nn.GRU) or 1 (nn.RNN)"
        )
        return
    present = [b for b in biases if b is not None]
    if any(b.shape != (gates * hidden,) for b in present):
        shapes = ", ".join(str(list(b.shape)) for b in present)
        layer.problem = f"biases {shapes} are not [{gates * hidden}]"
        return
    order = _KERAS_GATES[kind]
    layer.kind = kind
    if kind == "gru":  # PyTorch's GRU keeps the recurrent bias inside r ⊙ (·)
        layer.args = {"reset_after": True}
    layer.arrays = {"kernel": _gates(w_ih, order, hidden).T,
                    "recurrent_kernel": _gates(w_hh, order, hidden).T}  # fmt: skip
    if not present:  # bias=False
        return
    full = [np.zeros(gates * hidden) if b is None else b.astype(np.float64) for b in biases]
    if kind == "gru":
        layer.arrays["bias"] = np.stack([_gates(b, order, hidden) for b in full])
    else:
        layer.arrays["bias"] = full[0] + full[1]
