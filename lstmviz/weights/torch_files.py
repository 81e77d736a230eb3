"""PyTorch `nn.LSTM` state dicts: `.safetensors` (no code, no pickle) and `.pt` (needs torch).

Keys are `[prefix]weight_ih_l{k}[_reverse]` [4H, I], `weight_hh_l{k}` [4H, H], `bias_ih_l{k}`,
`bias_hh_l{k}` [4H]. Keras layout: kernel = weight_ih.T, recurrent_kernel = weight_hh.T,
bias = bias_ih + bias_hh; the gate order (i, f, g, o) is Keras's (i, f, c, o). Layer names are
`[prefix]l{k}[_reverse]`, e.g. `lstm.l0`. A `.pt` state dict keeps the order its modules were
registered in; `.safetensors` stores tensors sorted by name, so its modules are ordered by name
with numbers compared as numbers (`layers.2.` before `layers.10.`).
"""

from __future__ import annotations

import importlib.util
import json
import pickle
import re
from pathlib import Path

import numpy as np

from lstmviz.errors import WeightsError
from lstmviz.weights.found import FoundLayer, numeric

_KEY = re.compile(
    r"^(?P<prefix>(?:.*\.)?)(?P<kind>weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)"
    r"_l(?P<index>\d+)(?P<reverse>_reverse)?$"
)


def safetensors_layers(path: Path) -> list[FoundLayer]:
    from safetensors import safe_open

    arrays = {}
    with safe_open(str(path), framework="numpy") as f:
        for key in f.keys():  # noqa: SIM118 (a safe_open handle is not a dict)
            if not _KEY.match(key):
                continue
            dtype = f.get_slice(key).get_dtype()
            if dtype == "BF16":  # NumPy has no bfloat16: read the raw bytes
                arrays[key] = _bfloat16(path, key)
            elif dtype.startswith("F8"):
                raise WeightsError(f"{key} has dtype {dtype}, which lstmviz does not read")
            else:
                arrays[key] = f.get_tensor(key)
    # safetensors writes tensors sorted by name (and dtype), not in the state dict's order.
    return state_dict_layers(arrays, keeps_order=False)


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
            if isinstance(key, str) and _KEY.match(key) and isinstance(value, torch.Tensor)
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


def state_dict_layers(arrays: dict[str, np.ndarray], keeps_order: bool = True) -> list[FoundLayer]:
    """Group nn.LSTM keys by layer and convert them to Keras's layout. Layers are ordered by
    module, then by index; modules in the order of `arrays` (a state dict's: the order they
    were registered in) when it `keeps_order`, else by name with numbers compared as numbers."""
    groups: dict[str, dict[str, np.ndarray]] = {}
    indices: dict[str, tuple[str, int]] = {}
    prefixes: list[str] = []
    for key, value in arrays.items():
        match = _KEY.match(key)
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
        layer = FoundLayer(name, order=orders[name])
        layer.owner = name.removesuffix("_reverse")
        if name.endswith("_reverse"):
            layer.note = "reverse direction (PyTorch runs it on the reversed sequence)"
            layer.direction = "backward"
        elif f"{name}_reverse" in groups:
            layer.direction = "forward"
        if "weight_hr" in parts:
            layer.problem = "it has proj_size (weight_hr), which lstmviz does not support"
        elif "weight_ih" not in parts or "weight_hh" not in parts:
            layer.problem = "weight_ih or weight_hh is missing"
        else:
            layer.arrays = {
                "kernel": parts["weight_ih"].T,
                "recurrent_kernel": parts["weight_hh"].T,
            }
            biases = [parts[k].astype(np.float64) for k in ("bias_ih", "bias_hh") if k in parts]
            if len({b.shape for b in biases}) > 1:
                layer.problem = "bias_ih and bias_hh have different shapes"
            elif biases:
                layer.arrays["bias"] = sum(biases)
        found.append(layer)
    return found
