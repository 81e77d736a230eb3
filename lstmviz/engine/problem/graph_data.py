"""Data for a model Keras runs (`graph_model`): checked, read from a file, or drawn.

Arrays are batch-major as Keras's `fit` takes them: one per input (a list in the model's input
order, or a dict by input name), targets one per output (`y` for one, a list or a dict by
output name). In an `.npz`: one array per input named as the input, or `x0`, `x1`, … in input
order, or `x` for one input; targets `y`, or `y_{output name}` for each of several outputs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from lstmviz.core.config import RunConfig
from lstmviz.core.errors import InputError, ref
from lstmviz.io.model_data import BINARY, ONE_HOT, SPARSE


@dataclass
class GraphData:
    """Checked data for one run: `xs` one array per input (input order), `ys` one per output
    (None where not given), how the model takes them (`structure`), and where they came
    from."""

    xs: list
    ys: list
    input_names: list[str]
    output_names: list[str]
    structure: object = "list"
    source: str = ""

    def shapes(self) -> str:
        """Each input's name and shape: "enc [64, 50], dec [64, 50]"."""
        return ", ".join(f"{name} {list(np.shape(x))}"
                         for name, x in zip(self.input_names, self.xs, strict=True))  # fmt: skip

    def output_steps(self) -> int:
        """The steps of the first target of a sequence ([B, T, …]; a loss on every step), else
        of the first input of a sequence: what anchors (docs/diagnosis.md) count on."""
        for value in [*self.ys, *self.xs]:
            if value is not None and np.ndim(value) >= 2:
                return int(np.shape(value)[1])
        return 1

    def sized(self, config: RunConfig) -> RunConfig:
        """`config` with B (and T, for a sequence) of the first input."""
        first = self.xs[0]
        steps = int(first.shape[1]) if first.ndim >= 2 else config.steps
        return replace(config, batch=int(first.shape[0]), steps=steps)


def random_graph_data(graph, losses: list, steps: int, batch: int,
                      seed: int) -> GraphData:  # fmt: skip
    """Seeded data of a functional model's input and output shapes: token ids in
    [1, vocabulary) for an input feeding an Embedding, N(0, 1) features otherwise; targets by
    each output's loss (class indices, one-hot rows, 0/1 labels or N(0, 1))."""
    rng = np.random.default_rng(seed)
    model = graph.model
    if not graph.inputs:
        raise InputError(f"{graph.source}: a subclassed model does not say what it takes; "
                         f"give its data ({ref('inputs', 'DATA.npz')})")  # fmt: skip
    vocab = _vocabularies(model)
    xs = []
    for n, tensor in enumerate(model.inputs):
        shape = [batch, *(steps if s is None else int(s) for s in tensor.shape[1:])]
        if n in vocab:
            xs.append(rng.integers(1, max(vocab[n], 2), shape).astype(np.int32))
        elif "int" in str(tensor.dtype):
            xs.append(rng.integers(0, 2, shape).astype(np.int32))
        else:
            xs.append(rng.standard_normal(shape).astype(np.float32))
    ys = []
    for tensor, loss in zip(model.outputs, losses, strict=False):
        shape = [batch, *(steps if s is None else int(s) for s in tensor.shape[1:])]
        width, lead = shape[-1], shape[:-1]
        name = getattr(loss, "name", "")
        if name in SPARSE:
            ys.append(rng.integers(0, width, lead).astype(np.int32))
        elif name in ONE_HOT:
            ys.append(np.eye(width, dtype=np.float32)[rng.integers(0, width, lead)])
        elif name in BINARY:
            ys.append(rng.integers(0, 2, shape).astype(np.float32))
        else:
            ys.append(rng.standard_normal(shape).astype(np.float32))
    data = GraphData(xs, ys, graph.inputs, graph.outputs, _structure(model))
    data.source = f"random data (seed {seed}): {data.shapes()}"
    return data


def _structure(model):
    """How the model takes its inputs: None (one array), a list of names (a dict), "list"."""
    struct = getattr(model, "_inputs_struct", None)
    if isinstance(struct, dict):
        return list(struct)
    return None if len(model.inputs) == 1 and not isinstance(struct, list | tuple) else "list"


def _vocabularies(model) -> dict[int, int]:
    """{input position: the input_dim of the Embedding it feeds directly}."""
    import keras

    wanted = {id(t): n for n, t in enumerate(model.inputs)}
    found = {}
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if not isinstance(layer, keras.layers.Embedding):
            continue
        for node in getattr(layer, "_inbound_nodes", []):
            for tensor in node.input_tensors:
                if id(tensor) in wanted:
                    found[wanted[id(tensor)]] = int(layer.input_dim)
    return found


def graph_data(graph, losses: list, x, y, where: str = "data") -> GraphData:
    """x and y as Keras's `fit` takes them (an array; a list in input order; a dict by input
    name) checked against the model, or InputError naming what the model wants."""
    names = graph.inputs
    if isinstance(x, dict):
        keys = names or list(x)
        missing = [name for name in keys if name not in x]
        if missing:
            raise InputError(f"{where}: no input named {', '.join(map(repr, missing))}; the "
                             f"model takes {_listed(names)}")  # fmt: skip
        xs, structure = [x[name] for name in keys], list(keys)
    elif isinstance(x, list | tuple):
        xs, structure = list(x), "list"
    else:
        xs, structure = [x], None if len(names) <= 1 else "list"
    if names and len(xs) != len(names):
        raise InputError(f"{where}: {len(xs)} input array{'s' * (len(xs) != 1)} given; the "
                         f"model takes {_listed(names)}")  # fmt: skip
    if names and structure is None and _structure(graph.model) is not None:
        structure = _structure(graph.model)
    input_names = names or [f"x{n}" for n in range(len(xs))]
    vocab = _vocabularies(graph.model) if names else {}
    xs = [_checked_input(graph, n, name, value, vocab.get(n), where)
          for n, (name, value) in enumerate(zip(input_names, xs, strict=True))]  # fmt: skip
    batch = xs[0].shape[0]
    outputs = graph.outputs or [f"y{n}" for n in range(len(losses))]
    ys = _targets(y, outputs, where)
    for name, value in zip(outputs, ys, strict=True):
        if value is not None and np.shape(value)[:1] != (batch,):
            raise InputError(f"{where}: y for {name!r} has {np.shape(value)[:1] or 0} samples "
                             f"but the inputs have {batch}")  # fmt: skip
    if any(value is None for value in ys) and not all(
            getattr(loss, "callable", False) for loss in losses):  # fmt: skip
        raise InputError(f"{where}: the loss needs targets y for every output "
                         f"({_listed(outputs)})")  # fmt: skip
    return GraphData(xs, ys, input_names, outputs, structure)


def _listed(names: list[str]) -> str:
    return ", ".join(map(repr, names)) if names else "its inputs"


def _checked_input(graph, n: int, name: str, value, vocabulary, where: str) -> np.ndarray:
    value = np.asarray(value)
    if value.dtype.kind not in "fiub" or value.ndim == 0:
        raise InputError(f"{where}: input {name!r} is not an array of numbers")
    inputs = getattr(graph.model, "inputs", None) if graph.inputs else None
    if inputs:
        expected = tuple(inputs[n].shape)
        if value.ndim != len(expected) or any(e is not None and e != s for e, s in zip(
                expected, value.shape, strict=False)):  # fmt: skip
            wanted = "(" + ", ".join("None" if e is None else str(e) for e in expected) + ")"
            raise InputError(f"{where}: input {name!r} has shape {list(value.shape)}, the "
                             f"model takes {wanted}")  # fmt: skip
    if vocabulary is not None:
        if value.dtype.kind == "f" and not np.all(value == np.round(value)):
            raise InputError(f"{where}: input {name!r} must hold integer token ids")
        if value.size and (value.max() >= vocabulary or value.min() < 0):
            raise InputError(f"{where}: input {name!r} holds token id {int(value.max())}, "
                             f"outside the vocabulary of {vocabulary}")  # fmt: skip
        return value.astype(np.int32)
    if value.dtype.kind == "f" and not np.isfinite(value).all():
        raise InputError(f"{where}: input {name!r} holds NaN or Inf")
    dtype = str(inputs[n].dtype) if inputs else "float32"
    return value.astype(np.int32 if "int" in dtype else np.float32)


def _targets(y, outputs: list[str], where: str) -> list:
    if y is None:
        return [None] * len(outputs)
    if isinstance(y, dict):
        missing = [name for name in outputs if name not in y]
        if missing:
            raise InputError(f"{where}: no targets for output {', '.join(map(repr, missing))}; "
                             f"the model's outputs are {_listed(outputs)}")  # fmt: skip
        y = [y[name] for name in outputs]
    elif not isinstance(y, list | tuple):
        y = [y]
    if len(y) != len(outputs):
        raise InputError(f"{where}: {len(y)} target arrays for {len(outputs)} outputs "
                         f"({_listed(outputs)})")  # fmt: skip
    out = []
    for value in y:
        value = np.asarray(value)
        out.append(value.astype(np.float32) if value.dtype.kind in "fb" else value)
    return out


def load_graph_data(path: str, targets: str | None, graph) -> tuple:
    """(x, y) from a data file for `graph`: an `.npz` with one array per input named as the
    input, or `x0`, `x1`, …, or `x` for one input; targets `y` or `y_{output name}` (or a
    `--targets` `.npy` for one output); an `.npy` is the one input."""
    from lstmviz.io.inputs import read_numpy

    if not str(path).endswith(".npz"):
        x = read_numpy(Path(path), ("x",))
        y = None if targets is None else read_numpy(Path(targets), ())
        return (x if not isinstance(x, dict) else x["x"]), y
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    names = graph.inputs
    if names and all(name in arrays for name in names):
        x = {name: arrays[name] for name in names}
    elif names and all(f"x{n}" in arrays for n in range(len(names))):
        x = [arrays[f"x{n}"] for n in range(len(names))]
    elif "x" in arrays and len(names) <= 1:
        x = arrays["x"]
    else:
        wanted = " or ".join(filter(None, [
            ", ".join(names), ", ".join(f"x{n}" for n in range(len(names))),
            "x" if len(names) <= 1 else ""]))  # fmt: skip
        raise InputError(f"{path}: its arrays ({', '.join(arrays)}) do not name the model's "
                         f"inputs; it wants {wanted}")  # fmt: skip
    outputs = graph.outputs
    if targets is not None:
        y = read_numpy(Path(targets), ())
    elif "y" in arrays and len(outputs) <= 1:
        y = arrays["y"]
    elif outputs and all(f"y_{name}" in arrays for name in outputs):
        y = {name: arrays[f"y_{name}"] for name in outputs}
    else:
        y = None
    return x, y
