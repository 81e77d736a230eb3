"""Load an input sequence: `.npy`, or `.npz` with key `x`; returned time-major [T, B, I] float32."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from lstmviz import files
from lstmviz.errors import InputError


def _read(path: Path) -> np.ndarray:
    with open(path, "rb") as handle:
        data = np.load(handle, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            return data
        with data:
            if "x" not in data.files:
                found = ", ".join(data.files) or "nothing"
                raise InputError(f"{path}: no array 'x' in the .npz (found: {found})")
            return data["x"]


def load_inputs(path: str | os.PathLike, time_major: bool = False) -> np.ndarray:
    """Read x from `path` as time-major [T, B, I] float32.

    The file holds [B, T, I] (batch-major, as Keras users keep sequences) unless `time_major`.
    Raises InputError naming the file: missing, unreadable, not 3-D, empty, non-numeric, NaN/Inf.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if files.suffix_of(path, files.INPUTS) is None:
        raise InputError(
            f"{path}: unknown input format {path.suffix or '(no extension)'!r} "
            "(use .npy, or .npz with an array 'x')"
        )
    try:
        x = _read(path)
    except InputError:
        raise
    except Exception as exc:  # untrusted bytes: numpy and zipfile raise many types
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise InputError(f"{path}: not a readable {path.suffix} file ({detail})") from None
    python = "time_major=True in Python"
    layout = "[T, B, I]" if time_major else f"[B, T, I] (for [T, B, I]: --time-major, {python})"
    if x.dtype.kind not in "fiu":
        raise InputError(f"{path}: x has dtype {x.dtype}, not numbers")
    if x.ndim != 3 or 0 in x.shape:
        raise InputError(f"{path}: x must be a non-empty 3-D array {layout}, got {list(x.shape)}")
    x = x.astype(np.float32)
    if not np.all(np.isfinite(x)):
        count = int(np.size(x) - np.count_nonzero(np.isfinite(x)))
        raise InputError(f"{path}: x contains NaN or Inf ({count} of {x.size} values)")
    return np.ascontiguousarray(x if time_major else x.transpose(1, 0, 2))


def describe_inputs(path: str | os.PathLike, x: np.ndarray, time_major: bool) -> str:
    """One line for the trace's `inputs_source` and the GUI: file, layout, shape [T, B, I]."""
    layout = "time-major" if time_major else "batch-major"
    steps, batch, input_dim = (int(n) for n in x.shape)
    return f"{path}: {layout} file; x [T, B, I] = [{steps}, {batch}, {input_dim}]"
