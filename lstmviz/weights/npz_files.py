"""NumPy `.npz` LSTM weights in Keras's layout.

One layer: arrays `kernel` [I, 4H], `recurrent_kernel` [H, 4H], `bias` [4H]. Several layers (a
stack, run in the order the file lists them): `<name>/kernel`, `<name>/recurrent_kernel`,
`<name>/bias` per layer; the halves of a Bidirectional are `<name>/forward/...` and
`<name>/backward/...` (the names model mode gives its LSTM directions).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from lstmviz.errors import WeightsError
from lstmviz.weights.found import FoundLayer, numeric

_ARRAYS = ("kernel", "recurrent_kernel", "bias")
_KEY = re.compile(r"^(?:(?P<name>.+)/)?(?P<array>kernel|recurrent_kernel|bias)$")


def npz_layers(path: Path) -> list[FoundLayer]:
    with np.load(path, allow_pickle=False) as data:
        if not hasattr(data, "files"):
            raise WeightsError("holds a single array, not kernel, recurrent_kernel and bias")
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
