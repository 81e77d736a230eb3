"""Keras files read with zipfile, json and h5py only: no model is built, no code from the file runs.

- `.keras` (Keras 3): a zip holding `config.json` and `model.weights.h5`.
- `.weights.h5` (Keras 3, `model.save_weights`): groups `layers/<class>[_n]/...`; an LSTM has
  `cell/vars/0..2` (kernel, recurrent kernel, bias) and its name in `vars.attrs["name"]`.
- legacy `.h5` (`model.save("m.h5")`): `model_weights/<layer>/.../kernel`, `recurrent_kernel`,
  `bias`, with the model's config as JSON in the file's attributes.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import h5py
import numpy as np

from lstmviz.errors import WeightsError
from lstmviz.weights.found import MAX_VALUES, FoundLayer, numeric

_MAX_DEPTH = 32
_MAX_GROUPS = 100_000  # hard links can make cycles: stop walking somewhere
_ARRAY_NAMES = ("kernel", "recurrent_kernel", "bias")


def keras_zip_layers(path: Path) -> list[FoundLayer]:
    """LSTM layers of a `.keras` model archive."""
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: info for info in archive.infolist()}
        if "config.json" not in members:
            raise WeightsError("not a Keras model archive (no config.json inside)")
        if "model.weights.h5" not in members:
            if "model.weights.npz" in members:
                raise WeightsError(
                    "weights are stored as model.weights.npz, which lstmviz does not read; "
                    "re-save the model with Keras's default (h5) weights"
                )
            raise WeightsError("no model.weights.h5 inside the archive")
        if members["model.weights.h5"].file_size > 4 * MAX_VALUES:
            raise WeightsError("model.weights.h5 is larger than lstmviz reads")
        config = json.loads(archive.read("config.json"))
        data = archive.read("model.weights.h5")
    with h5py.File(io.BytesIO(data), "r") as weights:
        return keras3_layers(weights, lstm_configs(config))


def h5_layers(path: Path) -> list[FoundLayer]:
    """LSTM layers of a Keras 3 `.weights.h5` file or a legacy Keras `.h5` file."""
    with h5py.File(path, "r") as f:
        if "layers" in f or "vars" in f:
            return keras3_layers(f, {})
        if "model_weights" in f or "layer_names" in f.attrs:
            config = f.attrs.get("model_config")
            configs = lstm_configs(json.loads(_text(config))) if config is not None else {}
            root = _child(f, "model_weights")
            return legacy_layers(f if root is None else root, configs)
    raise WeightsError("an HDF5 file, but not one Keras wrote (no 'layers' or 'model_weights')")


def lstm_configs(tree) -> dict[str, dict]:
    """Layer name -> config of every `LSTM` in a Keras config tree, at any depth."""
    found: dict[str, dict] = {}

    def walk(node) -> None:
        if isinstance(node, dict):
            config = node.get("config")
            name = config.get("name") if isinstance(config, dict) else None
            if node.get("class_name") == "LSTM" and isinstance(name, str):
                found[name] = config
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tree)
    return found


def keras3_layers(root: h5py.Group, configs: dict[str, dict]) -> list[FoundLayer]:
    """Every group with `cell/vars` (an RNN layer's cell) in Keras 3's weights layout."""
    found = []
    for path, group in _groups(root):
        cell = _child(group, "cell")
        variables = _child(cell, "vars") if cell is not None else None
        if variables is None:
            continue
        own_vars = _child(group, "vars")
        name = (_text(own_vars.attrs.get("name")) if own_vars is not None else None) or path
        arrays = []
        for index in range(len(variables)):
            dataset = _child(variables, str(index), h5py.Dataset)
            if dataset is None:
                break
            arrays.append(numeric(f"{path}/cell/vars/{index}", dataset))
        layer = FoundLayer(name, aliases=(path,), note=_direction(path))
        if len(arrays) in (2, 3) and len(arrays) == len(variables):
            layer.arrays = dict(zip(_ARRAY_NAMES, arrays, strict=False))
            layer.problem = _config_problem(name, configs)
        else:
            layer.problem = f"its cell has {len(variables)} variables; an LSTM cell has 3"
        found.append(layer)
    return found


def legacy_layers(root: h5py.Group, configs: dict[str, dict]) -> list[FoundLayer]:
    """Groups holding `kernel` and `recurrent_kernel` datasets in the legacy h5 layout."""
    found = []
    order = [_text(n) for n in root.attrs.get("layer_names", [])] or list(root)
    for top_name in order:
        top = _child(root, top_name) if isinstance(top_name, str) and top_name in root else None
        if top is None:
            continue
        cells = []
        for path, group in _groups(top, top_name):
            names = {key.split(":")[0]: key for key in group}
            if "kernel" in names and "recurrent_kernel" in names:
                cells.append((path, group, names))
        for path, group, names in cells:
            name = [p for p in path.split("/") if not p.startswith("lstm_cell")][-1]
            arrays = {}
            for key in _ARRAY_NAMES:
                dataset = _child(group, names[key], h5py.Dataset) if key in names else None
                if dataset is not None:
                    arrays[key] = numeric(f"{path}/{key}", dataset)
            layer = FoundLayer(name, arrays, aliases=(path,), note=_direction(path))
            layer.problem = _config_problem(name if name in configs else top_name, configs)
            found.append(layer)
    return found


def _groups(root: h5py.Group, prefix: str = ""):
    """(path, group) for `root` and every group below it, following hard links only."""
    stack = [(prefix, root, 0)]
    for _ in range(_MAX_GROUPS):
        if not stack:
            return
        path, group, depth = stack.pop(0)
        yield path, group
        if depth >= _MAX_DEPTH:
            continue
        for key in group:
            child = _child(group, key)
            if child is not None:
                stack.append((f"{path}/{key}" if path else key, child, depth + 1))
    raise WeightsError(f"more than {_MAX_GROUPS} groups (or a cycle of links)")


def _child(group: h5py.Group, key: str, kind=h5py.Group):
    """group[key] if it is a hard link to a `kind` object (no soft or external links)."""
    if not isinstance(group.get(key, getlink=True), h5py.HardLink):
        return None
    child = group[key]
    return child if isinstance(child, kind) else None


def _text(value) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return _text(value.item())
    return value if isinstance(value, str) else None


def _direction(path: str) -> str:
    if "backward" in path:
        return "backward half of a Bidirectional (Keras runs it on the reversed sequence)"
    return "forward half of a Bidirectional" if "forward" in path else ""


def _activation(value) -> str:
    if isinstance(value, dict):  # a serialised function
        value = value.get("config", value.get("class_name"))
    return str(value)


def _config_problem(name: str, configs: dict[str, dict]) -> str:
    """Why the layer's config does not match lstmviz's cell (tanh, sigmoid), or ""."""
    config = configs.get(name) or configs.get(name.replace("backward_", "forward_", 1))
    if config is None:
        return ""
    wanted = {"activation": "tanh", "recurrent_activation": "sigmoid"}
    for key, value in wanted.items():
        actual = _activation(config.get(key, value))
        if actual != value:
            return f"it uses {key}={actual!r}; lstmviz's cell has {key}={value!r}"
    return ""
