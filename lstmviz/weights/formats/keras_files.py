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
import re
import zipfile
from pathlib import Path

import h5py
import numpy as np

from lstmviz.core.errors import WeightsError
from lstmviz.weights.formats.found import MAX_VALUES, FoundLayer, numeric

_MAX_DEPTH = 32
_MAX_GROUPS = 100_000  # hard links can make cycles: stop walking somewhere
_ARRAY_NAMES = ("kernel", "recurrent_kernel", "bias")
_CELL_GROUP = re.compile(r"^(lstm|gru|simple_rnn)_cell")  # Keras 2's group of a layer's cell


def read_keras_archive(path: Path) -> tuple[dict, bytes]:
    """The config (parsed `config.json`) and the bytes of `model.weights.h5` of a `.keras` file."""
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
        if not isinstance(config, dict):
            raise WeightsError("config.json does not hold a model config")
        return config, archive.read("model.weights.h5")


def keras_zip_layers(path: Path) -> list[FoundLayer]:
    """LSTM layers of a `.keras` model archive."""
    config, data = read_keras_archive(path)
    with h5py.File(io.BytesIO(data), "r") as weights:
        return keras3_layers(weights, lstm_configs(config))


def h5_layers(path: Path) -> list[FoundLayer]:
    """LSTM layers of a Keras 3 `.weights.h5` file or a legacy Keras `.h5` file."""
    with h5py.File(path, "r") as f:
        if "layers" in f or "vars" in f:
            return keras3_layers(f, {})
        if "model_weights" in f or "layer_names" in f.attrs:
            config = f.attrs.get("model_config")
            configs = lstm_configs(json.loads(h5_text(config))) if config is not None else {}
            root = h5_child(f, "model_weights")
            return legacy_layers(f if root is None else root, configs)
    raise WeightsError("an HDF5 file, but not one Keras wrote (no 'layers' or 'model_weights')")


def lstm_configs(tree) -> dict[str, dict]:
    """Layer name -> config of every `LSTM` in a Keras config tree, at any depth; a
    Bidirectional's halves also as `<its name>/forward` and `<its name>/backward`: Keras 2
    names the inner LSTM (`lstm`) otherwise than the halves' weights (`forward_lstm`)."""
    found: dict[str, dict] = {}

    def walk(node) -> None:
        if isinstance(node, dict):
            config = node.get("config")
            name = config.get("name") if isinstance(config, dict) else None
            if node.get("class_name") == "LSTM" and isinstance(name, str):
                found[name] = config
            if node.get("class_name") == "Bidirectional" and isinstance(name, str):
                halves = [config.get("layer"), config.get("backward_layer") or config.get("layer")]
                for direction, half in zip(("forward", "backward"), halves, strict=True):
                    if isinstance(half, dict) and isinstance(half.get("config"), dict):
                        found[f"{name}/{direction}"] = half["config"]
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
    for path, group in h5_groups(root):
        cell = h5_child(group, "cell")
        variables = h5_child(cell, "vars") if cell is not None else None
        if variables is None:
            continue
        name = _vars_name(group) or path
        arrays = []
        for index in range(len(variables)):
            dataset = h5_child(variables, str(index), h5py.Dataset)
            if dataset is None:
                break
            arrays.append(numeric(f"{path}/cell/vars/{index}", dataset))
        layer = FoundLayer(name, aliases=(path,))
        # A Bidirectional keeps its halves in `forward_layer` / `backward_layer`.
        parent, _, last = path.rpartition("/")
        halves = ("forward_layer", "backward_layer")
        owner_group = (root[parent] if parent else root) if last in halves else group
        layer.direction = last.partition("_")[0] if owner_group is not group else ""
        layer.owner = (_vars_name(owner_group) or parent) if layer.direction else name
        layer.note = _direction(layer.direction)
        # Keras writes the groups in the order the model runs its layers, and a fresh HDF5
        # file places objects in the order they are created: the address is that order.
        layer.order = (h5py.h5o.get_info(owner_group.id).addr,)
        if len(arrays) in (2, 3) and len(arrays) == len(variables):
            layer.arrays = dict(zip(_ARRAY_NAMES, arrays, strict=False))
            layer.problem = _config_problem(name, configs, layer.owner, layer.direction)
            layer.note = layer.note or _reversed(_layer_config(name, configs))
        else:
            layer.problem = f"its cell has {len(variables)} variables; an LSTM cell has 3"
        found.append(layer)
    return found


def _vars_name(group: h5py.Group) -> str | None:
    """The layer name Keras 3 keeps in `<group>/vars.attrs["name"]`, if any."""
    own_vars = h5_child(group, "vars")
    return h5_text(own_vars.attrs.get("name")) if own_vars is not None else None


def legacy_layers(root: h5py.Group, configs: dict[str, dict]) -> list[FoundLayer]:
    """Groups holding `kernel` and `recurrent_kernel` datasets in the legacy h5 layout.

    Keras 2 `CuDNNLSTM` groups (bias [8H]) are converted to `LSTM` weights, `CuDNNGRU` groups
    (bias [6H]) to `GRU(reset_after=True)` weights.
    """
    found = []
    halves = _halves(configs)
    order = [h5_text(n) for n in root.attrs.get("layer_names", [])] or list(root)
    for position, top_name in enumerate(order):
        top = h5_child(root, top_name) if isinstance(top_name, str) and top_name in root else None
        if top is None:
            continue
        weight_names = [h5_text(n) or "" for n in top.attrs.get("weight_names", [])]
        cells = []
        for path, group in h5_groups(top, top_name):
            names = {key.split(":")[0]: key for key in group}
            if "kernel" in names and "recurrent_kernel" in names:
                cells.append((path, group, names))
        for path, group, names in cells:
            parts = [p for p in path.split("/") if not _CELL_GROUP.match(p)]
            name = parts[-1]
            arrays = {}
            for key in _ARRAY_NAMES:
                dataset = h5_child(group, names[key], h5py.Dataset) if key in names else None
                if dataset is not None:
                    arrays[key] = numeric(f"{path}/{key}", dataset)
            layer = FoundLayer(name, arrays, aliases=(path,))
            # Keras 2 names a Bidirectional's halves forward_<name> and backward_<name>, in
            # the wrapper's group (a layer of its own sits in a group of its own name); Keras 3
            # keeps a backward_layer's own name, which the wrapper's config gives.
            owner, direction = halves.get(name, ("", ""))
            if not (direction and len(parts) > 1 and parts[-2] == owner):
                inside = len(parts) > 1 and parts[-2] != name
                direction = name.partition("_")[0] if inside else ""
                direction = direction if direction in ("forward", "backward") else ""
                owner = parts[-2] if direction else name
            layer.direction, layer.owner = direction, owner
            layer.note = _direction(direction)
            cudnn = next((kind for kind in _GATES if is_cudnn(arrays, kind)), "")
            if cudnn:
                layer.arrays = dict(zip(_ARRAY_NAMES, cudnn_to_keras(**arrays), strict=True))
                layer.kind = cudnn
                layer.args = {"reset_after": True} if cudnn == "gru" else {}
                name = "CuDNNLSTM" if cudnn == "lstm" else "CuDNNGRU"
                layer.note = ", ".join(filter(None, [layer.note, f"Keras 2 {name}"]))
            owner = layer.owner if layer.direction else ""
            key = name if name in configs else top_name
            layer.problem = _config_problem(key, configs, owner, layer.direction)
            if not layer.direction:
                reverse = _reversed(_layer_config(key, configs))
                layer.note = ", ".join(filter(None, [layer.note, reverse]))
            # weight_names lists the layer's arrays, by path below `top`, in the model's order.
            kernel_name = f"{path[len(top_name) + 1 :]}/{names['kernel']}"
            within = weight_names.index(kernel_name) if kernel_name in weight_names else 0
            layer.order = (position, within)
            found.append(layer)
    return found


_GATES = {"lstm": 4, "gru": 3}


def is_cudnn(arrays: dict[str, np.ndarray], kind: str = "lstm") -> bool:
    """Keras 2 CuDNNLSTM / CuDNNGRU weights: kernel [I, GH], recurrent_kernel [H, GH], bias
    [2GH] (G = 4 gates for an LSTM, 3 for a GRU)."""
    gates = _GATES.get(kind, 0)
    k, r, b = (np.shape(arrays.get(key, ())) for key in _ARRAY_NAMES)
    return (gates > 0 and len(r) == 2 and r[1] == gates * r[0] and len(k) == 2 and k[1] == r[1]
            and b == (2 * gates * r[0],))  # fmt: skip


def cudnn_to_keras(
    kernel: np.ndarray, recurrent_kernel: np.ndarray, bias: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keras 2 `CuDNNLSTM` / `CuDNNGRU` weights as `LSTM` / `GRU(reset_after=True)` weights
    (Keras 2's own conversion, in NumPy); the gates keep their order (LSTM i, f, c, o; GRU
    z, r, h̃).

    The cuDNN layers hand cuDNN each gate's block of `kernel` [I, H] and `recurrent_kernel`
    [H, H] flattened row by row, which cuDNN reads as the [H, I] matrix W and the [H, H] matrix
    R of W x + R h; the Keras layers compute x @ kernel, so their blocks are W.T and R.T.
    `bias` [2GH] holds the input biases, then the recurrent biases: an LSTM adds them, a GRU
    keeps them as its [2, 3H] bias (row 0 input, row 1 recurrent), as reset_after=True does.
    """
    inputs, hidden = kernel.shape[0], recurrent_kernel.shape[0]
    gates = recurrent_kernel.shape[1] // hidden
    blocks = [slice(g * hidden, (g + 1) * hidden) for g in range(gates)]
    keras_kernel = np.concatenate([kernel[:, b].reshape(hidden, inputs).T for b in blocks], axis=1)
    keras_recurrent = np.concatenate([recurrent_kernel[:, b].T for b in blocks], axis=1)
    half = gates * hidden
    if gates == 4:
        keras_bias = bias[:half].astype(np.float64) + bias[half:]
    else:
        keras_bias = np.stack([bias[:half], bias[half:]])
    return keras_kernel, keras_recurrent, keras_bias


def h5_groups(root: h5py.Group, prefix: str = ""):
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
            child = h5_child(group, key)
            if child is not None:
                stack.append((f"{path}/{key}" if path else key, child, depth + 1))
    raise WeightsError(f"more than {_MAX_GROUPS} groups (or a cycle of links)")


def h5_child(group: h5py.Group, key: str, kind=h5py.Group):
    """group[key] if it is a hard link to a `kind` object (no soft or external links)."""
    if not isinstance(group.get(key, getlink=True), h5py.HardLink):
        return None
    child = group[key]
    return child if isinstance(child, kind) else None


def h5_text(value) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return h5_text(value.item())
    return value if isinstance(value, str) else None


def _direction(direction: str) -> str:
    """The note of a Bidirectional's half whose direction is `direction` ("" otherwise)."""
    if direction == "backward":
        return "backward half of a Bidirectional (Keras runs it on the reversed sequence)"
    return "forward half of a Bidirectional" if direction == "forward" else ""


def _halves(configs: dict[str, dict]) -> dict[str, tuple[str, str]]:
    """Name of an LSTM inside a Bidirectional -> (the wrapper's name, "forward"/"backward"),
    from the `<wrapper>/<direction>` entries of `lstm_configs`. Halves that share a name in
    the config (Keras 2 without a backward_layer) are left out: their weights' names say it."""
    named: dict[str, list[tuple[str, str]]] = {}
    for key, config in configs.items():
        owner, _, direction = key.rpartition("/")
        if owner and direction in ("forward", "backward") and isinstance(config.get("name"), str):
            named.setdefault(config["name"], []).append((owner, direction))
    return {name: pairs[0] for name, pairs in named.items() if len(pairs) == 1}


def _activation(value) -> str:
    if isinstance(value, dict):  # a serialised function
        value = value.get("config", value.get("class_name"))
    return str(value)


def _layer_config(
    name: str, configs: dict[str, dict], owner: str = "", direction: str = ""
) -> dict | None:
    """The LSTM config of a layer found in the weights (see `lstm_configs`), or None. A half
    of a Bidirectional (`direction`) is looked up by its wrapper's name (`owner`) first."""
    return (
        configs.get(f"{owner}/{direction}")
        or configs.get(name)
        or configs.get(name.replace("backward_", "forward_", 1))
    )


def _reversed(config: dict | None) -> str:
    """The note of an LSTM with go_backwards (lstmviz runs it forward in time), or ""."""
    if isinstance(config, dict) and config.get("go_backwards") is True:
        return "go_backwards: Keras runs it on the reversed sequence"
    return ""


def _config_problem(
    name: str, configs: dict[str, dict], owner: str = "", direction: str = ""
) -> str:
    """Why the layer's config does not match lstmviz's cell (tanh, sigmoid), or ""."""
    config = _layer_config(name, configs, owner, direction)
    if config is None:
        return ""
    wanted = {"activation": "tanh", "recurrent_activation": "sigmoid"}
    for key, value in wanted.items():
        actual = _activation(config.get(key, value))
        if actual != value:
            return (f"it uses {key}={actual!r}; this mode's cell has {key}={value!r} "
                    "(model mode, --mode model, runs it)")  # fmt: skip
    return ""
