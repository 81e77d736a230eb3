"""A live Keras 3 model's weights, read from its variables where a Keras 3 weights file holds
them, without writing that file.

Keras's weights file (`model.save_weights`) holds each object's variables at `<path>/vars/<i>`,
the paths those of Keras's own saving walk. `LiveWeights` makes the same walk into Keras's
in-memory store, so it finds the same variables at the same paths and gives them to
`spec_from_config` as `Keras3Weights` gives a file's: the ModelSpec is the same, without the
file written and read back (several times faster: bench/bench_model.py). Imports Keras
only when made.
"""

from __future__ import annotations

import weakref

import numpy as np

from lstmviz.weights.formats.found import numeric
from lstmviz.weights.formats.keras_config import ConfigLayer
from lstmviz.weights.formats.keras_model import Keras3Weights

_VARS = "vars"  # the group a weights file holds an object's variables in


def _walk(model) -> dict[str, dict[str, object]]:
    """{path: {"0": variable, "1": …}} ("" the model's own path) as save_weights walks it."""
    from keras.src.saving import saving_lib  # the walk save_weights makes

    store = saving_lib.NpzIOStore(None, mode="w")  # in memory until closed: never closed
    saving_lib._save_state(model, weights_store=store, assets_store=None, inner_path="",
                           visited_saveables=set())  # fmt: skip
    return {("" if path == "__root__" else path): dict(values)
            for path, values in store.contents.items() if values}  # fmt: skip


# The last walk of each live model, kept while the model lives: (its variables' ids, walk).
_WALKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class LiveWeights(Keras3Weights):
    """The variables of a built Keras 3 `model` by their weights-file path: `take` and `tree`
    as `Keras3Weights` answers them for the file `model.save_weights` would write."""

    def __init__(self, model):
        # The walk, again only when the model holds other variables (a layer added, removed
        # or rebuilt): their paths follow from the model's objects, their values are read
        # anew on every use.
        held = tuple(map(id, model.variables))
        walked = _WALKS.get(model)
        if walked is None or walked[0] != held:
            walked = _WALKS[model] = (held, _walk(model))
        self.variables = walked[1]
        super().__init__(None)

    def take(self, layer: ConfigLayer, groups: tuple[str, ...], count: int) -> list[np.ndarray]:
        arrays = []
        for group_path in groups:
            group = f"{layer.where}/{group_path}"
            owner, _, last = group.rpartition("/")
            values = self.variables.get(owner, {}) if last == _VARS else {}
            for index in range(len(values)):
                if str(index) not in values:
                    break
                arrays.append(self._array(f"{group}/{index}", values[str(index)]))
        return arrays

    def tree(self, layer: ConfigLayer) -> dict[str, np.ndarray]:
        """Every array below the layer's path, by its path relative to the layer's group."""
        found = []
        for path, values in self.variables.items():
            if path != layer.where and not path.startswith(f"{layer.where}/"):
                continue
            below = path[len(layer.where) + 1 :]
            group = [*below.split("/"), _VARS] if below else [_VARS]
            found += [(len(group), group, key, value) for key, value in values.items()]
        # in the order Keras3Weights reads a file's: groups breadth first, names sorted
        return {"/".join([*group, key]): self._array("/".join([layer.where, *group, key]), value)
                for _, group, key, value in sorted(found, key=lambda item: item[:3])}  # fmt: skip

    @staticmethod
    def _array(name: str, value) -> np.ndarray:
        return numeric(name, _view(value))


# The tensors `_view` read, by the id of the view made of each, while that view lives.
_TENSORS: dict[int, tuple[weakref.ref, object]] = {}


def _view(variable) -> np.ndarray:
    """The variable's value as a read-only NumPy view of the tensor it is read into: with
    TensorFlow's backend `keras.ops.copy` reads it without copying the buffer, and a later
    assignment gives the variable a new buffer, so the view keeps these values. `tensor_of`
    gives that tensor back, so a run takes it without a copy either: copies of a large
    embedding were most of a later `model_gradients` call's time outside its graph."""
    from keras import ops

    tensor = ops.copy(variable)
    try:
        array = np.asarray(memoryview(tensor))
    except (TypeError, ValueError):  # another backend's array, or a dtype (bfloat16) the
        return ops.convert_to_numpy(tensor)  # buffer protocol does not carry
    key = id(array)
    _TENSORS[key] = (weakref.ref(array, lambda _, key=key: _TENSORS.pop(key, None)), tensor)
    return array


def tensor_of(array):
    """The tensor `array` is a `_view` of, or None when it is not one."""
    found = _TENSORS.get(id(array))
    return found[1] if found is not None and found[0]() is array else None
