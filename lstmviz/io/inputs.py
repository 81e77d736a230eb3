"""Load an input sequence: `.npy`, or `.npz` with key `x`; returned time-major [T, B, I] float32."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from lstmviz.core.errors import InputError
from lstmviz.io import files

FLOAT32_MAX = float(np.finfo(np.float32).max)
TRACE_KEY = "config_json"  # the array every trace `.npz` holds (its RunConfig as JSON)


def read_numpy(
    path: str | os.PathLike, keys: tuple[str, ...] = ("x",), optional: tuple[str, ...] = ()
) -> np.ndarray | dict[str, np.ndarray]:
    """The array in an `.npy`, or {name: array} for `keys` (all needed) and `optional` (when
    present) of an `.npz`, read whatever the name's suffix (an `.npz` saved as `.npy` reads
    as an `.npz`). No pickle. Raises InputError starting with the path: missing, a folder,
    empty, corrupt (also a damaged member), another kind of file (what it is), a key missing
    (with the names found)."""
    path = Path(path)
    if problem := files.missing(path):
        raise InputError(f"{path}: {problem}")
    try:
        with open(path, "rb") as handle:
            data = np.load(handle, allow_pickle=False)
            if not isinstance(data, np.lib.npyio.NpzFile):
                return data
            with data:
                absent = [key for key in keys if key not in data.files]
                if absent:
                    found = ", ".join(data.files) or "nothing"
                    names = " or ".join(repr(key) for key in absent)
                    raise InputError(f"{path}: no array {names} in the .npz (found: {found})")
                return {key: data[key] for key in (*keys, *optional) if key in data.files}
    except InputError:
        raise
    except Exception as exc:  # untrusted bytes: numpy, zipfile and zlib raise many types
        what = f"{path.suffix} file" if path.suffix else "NumPy file"
        raise InputError(f"{path}: not a readable {what}{files.unreadable(path, exc)}") from None


def beyond_float32(array: np.ndarray) -> float | None:
    """The largest |value| of `array` when some finite value is too large for float32 (it
    would turn into Inf there), else None."""
    if array.dtype.kind != "f" or array.dtype.itemsize <= 4 or not array.size:
        return None
    largest = float(np.max(np.abs(np.where(np.isfinite(array), array, 0.0))))
    return largest if largest > FLOAT32_MAX else None


def load_inputs(path: str | os.PathLike, time_major: bool = False) -> np.ndarray:
    """Read x from `path` as time-major [T, B, I] float32.

    The file holds [B, T, I] (batch-major, as Keras users keep sequences) unless `time_major`
    or it is a trace (it holds TRACE_KEY), whose x is time-major whatever `time_major` says.
    Raises InputError naming the file: missing, unreadable, not 3-D, empty, non-numeric, NaN/Inf.
    """
    if not isinstance(path, str | os.PathLike):
        raise InputError(f"an inputs file's path, not a {type(path).__name__}: an array in "
                         "memory goes to the engines directly, time-major [T, B, I]")  # fmt: skip
    path = Path(path)
    if files.suffix_of(path, files.INPUTS) is None and not files.missing(path):
        raise InputError(
            f"{path}: unknown input format {path.suffix or '(no extension)'!r} "
            "(use .npy, or .npz with an array 'x')"
        )
    data = read_numpy(path, optional=(TRACE_KEY,))
    x = data["x"] if isinstance(data, dict) else data
    python = "time_major=True in Python"
    # A trace keeps x time-major: read as batch-major, T and B would swap unnoticed.
    time_major = time_major or (isinstance(data, dict) and TRACE_KEY in data)
    layout = "[T, B, I]" if time_major else f"[B, T, I] (for [T, B, I]: --time-major, {python})"
    if x.dtype.kind not in "fiu":
        raise InputError(f"{path}: x has dtype {x.dtype}, not numbers")
    if x.ndim != 3 or 0 in x.shape:
        raise InputError(f"{path}: x must be a non-empty 3-D array {layout}, got {list(x.shape)}")
    if (largest := beyond_float32(x)) is not None:
        raise InputError(f"{path}: x holds {largest:.3g}, beyond float32's range (±3.4e38)")
    x = x.astype(np.float32)
    if not np.all(np.isfinite(x)):
        count = int(np.size(x) - np.count_nonzero(np.isfinite(x)))
        raise InputError(f"{path}: x contains NaN or Inf ({count} of {x.size} values)")
    return np.ascontiguousarray(x if time_major else x.transpose(1, 0, 2))


def describe_inputs(path: str | os.PathLike, x: np.ndarray, time_major: bool) -> str:
    """One line for the trace's `inputs_source` and the GUI: file, layout, shape [T, B, I]."""
    layout = "time-major" if time_major else "batch-major"
    if files.kind(path) == "trace":
        layout = "trace's x, time-major"
    steps, batch, input_dim = (int(n) for n in x.shape)
    return f"{path}: {layout} file; x [T, B, I] = [{steps}, {batch}, {input_dim}]"


def describe_training(path: str | os.PathLike, shape: tuple[int, ...],
                      names: list[str] | None) -> str:  # fmt: skip
    """One line on what training reads from the inputs file `path` (as
    `engine.problem.tasks.read_task_file` does): `shape` is the shape of its x as stored, `names`
    the arrays of an .npz (None: an .npy of series [N, T+1, I], y one step ahead of x)."""
    dims = ", ".join(str(int(n)) for n in shape)
    if names is None:
        count, length = int(shape[0]), int(shape[1]) - 1
        if length < 1:
            return f"{path}: series [N, T+1, I] = [{dims}]: too short to train on (T+1 < 2)"
        return (f"{path}: series [N, T+1, I] = [{dims}]: {count} sequences of T={length}, "
                "y one step ahead")  # fmt: skip
    if "y" not in names:
        return f"{path}: x [N, T, I] = [{dims}]; no y: training needs x and y"
    return f"{path}: x [N, T, I] = [{dims}] with y"
