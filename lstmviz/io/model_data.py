"""Data for model mode (NumPy only): read x and y, check them against the model, or draw them.

Arrays are batch-major, as Keras takes them: x [B, T] integer token ids for a model that starts
with an Embedding, [B, T, I] features otherwise; y as the model's output ([B, ...]). Files:
`.npz` with `x` (and `y`), or `.npy` holding x, with y from a second `.npy` (`--targets`).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from lstmviz.core.errors import InputError
from lstmviz.io import files
from lstmviz.io.inputs import TRACE_KEY, beyond_float32, read_numpy
from lstmviz.weights.model_spec import ModelSpec, shape_text

# Losses whose targets are class indices, one-hot rows, or 0/1 labels.
SPARSE = ("sparse_categorical_crossentropy", "sparse_categorical_hinge")
ONE_HOT = ("categorical_crossentropy", "categorical_hinge", "categorical_focal_crossentropy",
           "kl_divergence", "kld", "kullback_leibler_divergence", "poisson")  # fmt: skip
BINARY = ("binary_crossentropy", "binary_focal_crossentropy", "hinge", "squared_hinge")


def _read(path: Path, what: str, keys: tuple[str, ...] = ("x",)) -> np.ndarray | dict:
    """The array of an `.npy`, or the arrays `keys` (and y) of an `.npz`: InputError naming
    the file when it cannot be read (`inputs.read_numpy`)."""
    if files.suffix_of(path, files.INPUTS) is None and not files.missing(path):
        raise InputError(f"{path}: {what} must be .npz (x, y) or .npy")
    return read_numpy(path, keys, optional=("y", TRACE_KEY))


def load_data(
    path: str | os.PathLike, targets: str | os.PathLike | None = None
) -> tuple[np.ndarray, np.ndarray | None, str]:
    """x, y (None when the files hold none) and one line saying where they came from. A
    trace's x is time-major ([T, B] or [T, B, I]): it comes batch-major as any x."""
    path = Path(path)
    data = _read(path, "data")
    x, y = (data["x"], data.get("y")) if isinstance(data, dict) else (data, None)
    trace = isinstance(data, dict) and TRACE_KEY in data
    if trace and x.ndim >= 2:
        x = np.swapaxes(x, 0, 1)
    described = f"{path}: x {list(x.shape)}" + (" (a trace's x, batch-major)" if trace else "")
    if targets is not None:
        if y is not None:
            raise InputError(f"{path} already holds y; give one or the other", field="targets")
        y = _read(Path(targets), "targets", keys=())
        if isinstance(y, dict):
            raise InputError(f"{targets}: targets must be one .npy array")
        described += f", y from {targets}"
    if y is not None:
        described += f", y {list(y.shape)}"
    return x, y, described


def check_data(spec: ModelSpec, x, y, where: str = "data") -> tuple[np.ndarray, np.ndarray | None]:
    """x and y as the model takes them (int32 ids or float32 features; y float32 or int), or
    InputError naming the problem: wrong rank or width (with the shape expected), token ids
    outside the vocabulary (the largest id and the vocabulary size), NaN or Inf, a batch
    size that differs between x and y."""
    x = _array(x, "x", where)
    expected = (None, *spec.input_shape)
    if x.ndim != len(expected) or any(
        e is not None and e != s for e, s in zip(expected, x.shape, strict=False)
    ):
        # [B, T] ids for a weights-only file: its Embedding and head have no config to run by
        stack = ("; a weights-only file runs its LSTMs alone, with no Embedding or head: "
                 "save the whole model (model.save('m.keras'))")
        raise InputError(
            f"{where}: x has shape {list(x.shape)}, the model takes {shape_text(expected)}"
            + (" token ids" if spec.tokens else "") + (stack if spec.stack and x.ndim == 2 else "")
        )  # fmt: skip
    if 0 in x.shape:
        raise InputError(f"{where}: x is empty ({list(x.shape)})")
    if spec.tokens:
        if x.dtype.kind not in "iu" and not (x.dtype.kind == "f" and np.all(x == np.round(x))):
            raise InputError(f"{where}: x must hold integer token ids, got {x.dtype}")
        largest, vocabulary = int(x.max()), spec.vocabulary
        if largest >= vocabulary or x.min() < 0:
            bad = largest if largest >= vocabulary else int(x.min())
            raise InputError(
                f"{where}: token id {bad} is outside the vocabulary of {vocabulary} "
                f"(ids 0…{vocabulary - 1}) of layer {spec.layers[1].name!r}"
            )
        x = x.astype(np.int32)
    else:
        if x.dtype.kind not in "fiu":
            raise InputError(f"{where}: x has dtype {x.dtype}, not numbers")
        if (largest := beyond_float32(x)) is not None:
            raise InputError(f"{where}: x holds {largest:.3g}, beyond float32's range (±3.4e38)")
        x = x.astype(np.float32)
        if not np.isfinite(x).all():
            raise InputError(f"{where}: x holds NaN or Inf")
    if y is not None:
        y = _array(y, "y", where)
        if y.dtype.kind not in "fiub":
            raise InputError(f"{where}: y has dtype {y.dtype}, not numbers")
        if y.ndim == 0:
            raise InputError(f"{where}: y is a single number, not one target per sample")
        if y.shape[:1] != x.shape[:1] and x.ndim >= 2 and y.shape[0] == x.shape[1]:
            raise InputError(
                f"{where}: x looks time-major [T, B, …] = {list(x.shape)}, as y has "
                f"{y.shape[0]} samples, x's second axis; model mode takes x batch-major "
                f"[B, T, …], as Keras does: np.swapaxes(x, 0, 1) (or, for x as given, y of "
                f"{x.shape[0]} samples)"
            )
        if y.shape[:1] != x.shape[:1]:
            raise InputError(
                f"{where}: y has {y.shape[0] if y.ndim else 0} samples but x has {x.shape[0]}"
            )
        if y.dtype.kind == "f" and not np.isfinite(y).all():
            raise InputError(f"{where}: y holds NaN or Inf")
        if (largest := beyond_float32(y)) is not None:
            raise InputError(f"{where}: y holds {largest:.3g}, beyond float32's range (±3.4e38)")
        if y.dtype.kind in "fb":  # the model computes in float32 (ids stay integers)
            y = y.astype(np.float32)
    return np.ascontiguousarray(x), y


def _array(value, name: str, where: str) -> np.ndarray:
    """`value` as a NumPy array, or InputError: a path, nested lists of different lengths."""
    if isinstance(value, str | os.PathLike):
        raise InputError(f"{where}: {name} is a path ({value}), not an array: np.load it first")
    try:
        return np.asarray(value)
    except ValueError:
        raise InputError(f"{where}: {name} is not an array (rows of different lengths?)") from None


def random_data(
    spec: ModelSpec, loss: str, steps: int, batch: int, seed: int, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded x of the model's input shape (T from the model, else `steps`) and y for `loss`:
    token ids in [1, vocabulary) or x ~ N(0, 1); y for an output of `width` units per step
    ([B, width] or [B, T, width]): class indices for sparse losses, one-hot rows, 0/1 labels
    for binary ones, N(0, 1) otherwise."""
    rng = np.random.default_rng(seed)
    steps = spec.input_shape[0] or steps
    if spec.tokens:
        x = rng.integers(1, max(spec.vocabulary, 2), (batch, steps)).astype(np.int32)
    else:
        x = rng.standard_normal((batch, steps, spec.input_shape[1])).astype(np.float32)
    output = spec.output_shape or (steps, width)
    lead = (batch, *(steps if s is None else s for s in output[:-1]))
    if loss in SPARSE:
        y = rng.integers(0, width, lead).astype(np.int32)
    elif loss in ONE_HOT:
        y = np.eye(width, dtype=np.float32)[rng.integers(0, width, lead)]
    elif loss in BINARY:
        y = rng.integers(0, 2, (*lead, width)).astype(np.float32)
    else:
        y = rng.standard_normal((*lead, width)).astype(np.float32)
    return x, y
