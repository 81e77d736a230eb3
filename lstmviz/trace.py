"""GradientTrace, the unit of data: NumPy arrays plus the RunConfig, saved as `.npz` without pickle.

Key names and shapes are listed in the README ("Trace keys"). Arrays are time-major:
states and gradients are [T, B, H], inputs [T, B, I], per-timestep norms [T].
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lstmviz.atomic import atomic_write
from lstmviz.config import RunConfig
from lstmviz.errors import TraceError

FORMAT_VERSION = 1
_META_KEYS = ("mode", "config_json", "format_version")
_SAVED_KINDS = "fiubU"  # numbers, booleans, text: nothing that needs pickle


def step_norm(g: np.ndarray) -> np.ndarray:
    """L2 norm over batch and units for every timestep: [..., T, B, H] -> [..., T] (float32)."""
    g = np.asarray(g)
    # Accumulate in float64: float32 squares overflow for exploding gradients (|g| > 1e19).
    return np.sqrt(np.einsum("...ij,...ij->...", g, g, dtype=np.float64)).astype(np.float32)


@dataclass
class TraceUpdate:
    """A partial result an engine yields while it runs (one pass, batch or training step).

    `done`/`total` count units of work; `arrays` holds whatever the panels can already draw,
    keyed like the final trace. Rows that fill in live use the final key with the rows done so
    far: `norm_h_total_by_pass` / `norm_h_truncated_by_pass` [passes done, Tp],
    `norm_h_total_by_batch` [batches done, T], `norm_h_total_by_step` [steps done, T] and
    `loss_by_step` [steps done]. Per-timestep curves use `norm_h_total` etc. [T].
    """

    done: int
    total: int
    message: str = ""
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class GradientTrace:
    """Everything a plot needs: `arrays` (NumPy, keys as in the README) and the RunConfig.

    Arrays are reachable as attributes too: `trace.grad_h_total`.
    """

    mode: str
    config: RunConfig
    arrays: dict[str, np.ndarray]

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(f"GradientTrace has no array {name!r}")

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    def __contains__(self, key: str) -> bool:
        return key in self.arrays

    def keys(self) -> list[str]:
        return sorted(self.arrays)

    def save(self, path: str | os.PathLike) -> Path:
        """Write to `path` atomically (temporary file, then rename). Returns the path."""
        path = Path(path)
        payload: dict[str, Any] = {}
        for key, value in self.arrays.items():
            value = np.asarray(value)
            if value.dtype.kind not in _SAVED_KINDS:
                raise TraceError(f"{path}: array {key!r} has unsupported dtype {value.dtype}")
            payload[key] = value
        payload["mode"] = np.array(self.mode)
        payload["config_json"] = np.array(self.config.to_json())
        payload["format_version"] = np.array(FORMAT_VERSION, dtype=np.int32)
        with atomic_write(path) as handle:
            np.savez(handle, **payload)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> GradientTrace:
        """Read a trace written by `save`. Raises TraceError naming the file and the problem."""
        path = Path(path)
        if not path.is_file():
            raise TraceError(f"{path}: no such trace file")
        try:
            with np.load(path, allow_pickle=False) as data:
                missing = [k for k in ("mode", "config_json") if k not in data.files]
                if missing:
                    raise TraceError(f"{path}: not an lstmviz trace (missing {', '.join(missing)})")
                mode = str(data["mode"])
                config = RunConfig.from_json(str(data["config_json"]))
                arrays = {k: data[k] for k in data.files if k not in _META_KEYS}
        except TraceError:
            raise
        except (zipfile.BadZipFile, EOFError, OSError) as exc:
            raise TraceError(f"{path}: not a readable .npz file ({exc})") from None
        except ValueError as exc:  # pickled object arrays, bad headers, bad JSON
            raise TraceError(f"{path}: corrupt or foreign trace ({exc})") from None
        except (json.JSONDecodeError, TypeError) as exc:
            raise TraceError(f"{path}: config_json is not valid ({exc})") from None
        for key, value in arrays.items():
            if value.dtype.kind not in _SAVED_KINDS:
                raise TraceError(f"{path}: array {key!r} has unsupported dtype {value.dtype}")
        return cls(mode=mode, config=config, arrays=arrays)
