"""GradientTrace, the unit of data: NumPy arrays plus the RunConfig, saved as `.npz` without pickle.

Every key, its dimensions and role are in `lstmviz.core.schema`. Arrays are time-major:
states and gradients are [T, B, H], inputs [T, B, I], per-timestep norms [T].
"""

from __future__ import annotations

import difflib
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lstmviz.core import modes, schema
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import ConfigError, TraceError
from lstmviz.core.shapes import array_groups
from lstmviz.io import files
from lstmviz.io.absolute_paths import absolute_config
from lstmviz.io.atomic import atomic_write

FORMAT_VERSION = 1
# Methods a notebook user reaches for to draw a trace; `lstmviz.plot` is the one there is.
_DRAWING = frozenset({"plot", "show", "draw", "display"})
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
    under the final trace's keys: rows that fill in live (role `rows` in `lstmviz.core.schema`,
    e.g. `norm_h_total_by_pass` [passes done, Tp]) hold the rows done so far.
    """

    done: int
    total: int
    message: str = ""
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class GradientTrace:
    """Everything a plot needs: `arrays` (NumPy, keys as `lstmviz.core.schema` lists them) and the
    RunConfig.

    Arrays are reachable as attributes and items too: `trace.grad_h_total`,
    `trace["grad_h_total"]`; `keys()` (also iterating over the trace) lists them. States and
    gradients are time-major [T, B, H], per-timestep norms [T]; every key's shape:
    docs/traces.md. `repr(trace)` lists the keys grouped by shape.
    """

    mode: str
    config: RunConfig
    arrays: dict[str, np.ndarray]

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        if name.startswith("__"):  # copy, pickle and IPython probe for these
            raise AttributeError(name)
        if name in _DRAWING:
            raise AttributeError(f"GradientTrace has no method {name!r}: lstmviz.plot(trace) "
                                 "draws the panels")  # fmt: skip
        raise AttributeError(f"GradientTrace has no array {name!r}{_suggest(name, arrays)}")

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self.arrays[key]
        except KeyError:
            raise KeyError(f"no array {key!r}{_suggest(key, self.arrays)}") from None

    def __contains__(self, key: str) -> bool:
        return key in self.arrays

    def __iter__(self):
        return iter(self.keys())

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {k for k in self.arrays if k.isidentifier()})

    def __repr__(self) -> str:
        """The mode, the loss and the keys grouped by shape; values only of scalars and of
        text lists (`layer_names`)."""
        groups, shown = array_groups(self.arrays)
        scalars = [f"{key}={_scalar_text(value)}" if value.ndim == 0
                   else f"{key}={[str(v) for v in value]}" for key, value in shown]  # fmt: skip
        # a training run on a task trains under the task's loss, not the config's `loss`
        tasked = modes.find(self.mode).trains and not self.config.model
        loss = self.config.task_loss() if tasked else self.config.loss
        lines = [f"GradientTrace(mode={self.mode!r}, loss={loss!r}, "
                 f"{len(self.arrays)} arrays)"]  # fmt: skip
        for shape, keys in groups.items():
            lines += _wrap(f"  {shape}: ", keys)
        return "\n".join(lines + (_wrap("  ", scalars) if scalars else []))

    def _repr_html_(self) -> str:
        """What Jupyter shows: the summary line, ‖dL/dh_t‖'s extremes, the arrays by shape."""
        from lstmviz.notebook.html import trace_html

        return trace_html(self)

    def keys(self) -> list[str]:
        return sorted(self.arrays)

    @property
    def diagnosis(self):
        """Per direction: how far back the gradient reaches, its decay per step, trend and a
        verdict (`lstmviz.analysis.diagnosis.Diagnosis`; `.to_dict()` the JSON contract,
        docs/diagnosis.md). Computed on every access, with NumPy."""
        from lstmviz.analysis.diagnosis import diagnose

        return diagnose(self)

    def save(self, path: str | os.PathLike) -> Path:
        """Write to `path` (which must end in `.npz`, as lstmviz knows a trace) atomically
        (temporary file, then rename). Returns the path."""
        path = files.check_suffix(path, "GradientTrace.save", files.TRACES, "trace files")
        payload: dict[str, Any] = {}
        for key, value in self.arrays.items():
            value = np.asarray(value)
            if value.dtype.kind not in _SAVED_KINDS:
                raise TraceError(f"{path}: array {key!r} has unsupported dtype {value.dtype}")
            payload[key] = value
        try:
            self.check()  # never write a trace that would not open again
        except TraceError as exc:
            raise TraceError(f"{path}: {exc}") from None
        payload["mode"] = np.array(self.mode)
        # files by their whole paths: the trace opens from any working folder
        payload["config_json"] = np.array(absolute_config(self.config).to_json())
        payload["format_version"] = np.array(FORMAT_VERSION, dtype=np.int32)
        try:
            with atomic_write(path) as handle:
                np.savez(handle, **payload)
        except OSError as exc:  # name the file asked for, not the temporary one
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> GradientTrace:
        """Read a trace written by `save`. Raises TraceError naming the file and the problem:
        not a zip/.npz, truncated or corrupt members, pickled (object) arrays, a missing or
        garbled `mode`/`config_json`, a newer format, or arrays whose shapes disagree
        (`check`). Never executes code from the file."""
        path = Path(path)
        if not path.is_file():
            what = "is a folder, not a trace file" if path.is_dir() else "no such trace file"
            raise TraceError(f"{path}: {what}")
        if files.suffix_of(path, files.RECORDINGS):
            raise TraceError(f"{path}: a recording, not a trace: read it with "
                             "lstmviz.load_recording")  # fmt: skip
        try:
            data = _read_npz(path)
        except TraceError:
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as exc:
            raise TraceError(f"{path}: not a readable .npz file ({exc})") from None
        except Exception as exc:  # noqa: BLE001 - any damage inside the container
            # pickled object arrays, bad headers, truncated members, lying sizes, flags of
            # encryption or unknown compression, bad CRCs: all mean a damaged or foreign file
            raise TraceError(f"{path}: corrupt or foreign trace ({exc})") from None
        missing = [k for k in ("mode", "config_json") if k not in data]
        if missing:
            raise TraceError(f"{path}: not an lstmviz trace (missing {', '.join(missing)})")
        mode = _text(path, data, "mode")
        if mode not in modes.names():
            known = ", ".join(modes.names())
            raise TraceError(f"{path}: unknown mode {mode!r} (expected one of {known})")
        version = data.get("format_version")
        if version is not None:
            if version.shape != () or version.dtype.kind not in "iu":
                raise TraceError(f"{path}: format_version must be an integer scalar")
            if int(version) > FORMAT_VERSION:
                raise TraceError(
                    f"{path}: written by a newer lstmviz (format {int(version)}, this version "
                    f"reads up to {FORMAT_VERSION})"
                )
        config = _config(path, _text(path, data, "config_json"))
        arrays = {k: v for k, v in data.items() if k not in schema.META_KEYS}
        for key, value in arrays.items():
            if value.dtype.kind not in _SAVED_KINDS:
                raise TraceError(f"{path}: array {key!r} has unsupported dtype {value.dtype}")
        trace = cls(mode=mode, config=config, arrays=schema.migrate(mode, arrays))
        try:
            trace.check()
        except TraceError as exc:
            raise TraceError(f"{path}: {exc}") from None
        return trace

    def _check_gate_widths(self, sizes: dict[str, tuple[int, str]]) -> None:
        """A model direction's weight gradients are G·H wide, G the gate blocks of its cell
        (`layer{k}_cell`; an LSTM when a trace has no such key)."""
        for symbol, (width, key) in sizes.items():
            index = symbol[1:]
            if symbol[:1] != "W" or not index.isdigit() or f"H{index}" not in sizes:
                continue
            cell = str(self.arrays.get(f"layer{index}_cell", "lstm"))
            gates = len(schema.CELL_GATES.get(cell, ()))
            units = sizes[f"H{index}"][0]
            if gates and width != gates * units:
                raise TraceError(
                    f"array {key!r} is {width} wide along its gates (W{index}) but a {cell} "
                    f"direction of {units} units has {gates}·H{index} = {gates * units}"
                )

    def check(self) -> GradientTrace:
        """Raise TraceError when the arrays cannot belong together; return self when they can.

        Every key must be one `lstmviz.core.schema` knows, with a dtype and a rank it allows,
        and one consistent size for every dimension symbol across the keys (T, B, I, H, P, Tp,
        N, S, each layer's width…); step lists must hold steps of the run.
        """
        lead = modes.find(self.mode).lead
        sizes: dict[str, tuple[int, str]] = {}  # symbol -> (size, key that fixed it)
        for key in sorted(self.arrays, key=schema.order):
            value, found = self.arrays[key], schema.lookup(key, self.mode)
            if found is None:
                raise TraceError(f"array {key!r} is not a trace key lstmviz knows")
            kinds = found[0].kinds + ("iub" if found[0].kinds == "f" else "")
            value = np.asarray(value)
            if value.dtype.kind not in kinds and found[0].role != schema.STEPS:
                what = {"U": "text", "iu": "integer", "b": "boolean"}.get(kinds, "numeric")
                raise TraceError(f"array {key!r} must be {what}, got dtype {value.dtype}")
            allowed = schema.shapes(key, self.mode, lead)
            if allowed is None:
                continue
            dims = next((d for d in allowed if len(d) == value.ndim), None)
            if dims is None:
                wanted = " or ".join(f"[{', '.join(d)}]" for d in allowed)
                raise TraceError(f"array {key!r} must be {wanted}, got shape {list(value.shape)}")
            for axis, (symbol, size) in enumerate(zip(dims, value.shape, strict=True)):
                expected = schema.expected_size(symbol, sizes)
                if expected is None:
                    if size < 1:
                        raise TraceError(f"array {key!r} is empty along {symbol} (axis {axis})")
                    sizes[symbol] = (int(size), key)
                elif expected[0] < 0:
                    raise TraceError(
                        f"array {key!r} has shape {list(value.shape)}: no size of its axis {axis} "
                        f"({symbol}) fits {expected[1]}"
                    )
                elif size != expected[0]:
                    raise TraceError(
                        f"array {key!r} has shape {list(value.shape)}: its axis {axis} ({symbol}) "
                        f"is {size} but {expected[1]} says {symbol}={expected[0]}"
                    )
        self._check_gate_widths(sizes)
        for key in schema.keys_with(schema.STEPS, self.arrays):
            steps = np.asarray(self.arrays[key])
            if steps.ndim != 1 or (steps.size and steps.dtype.kind not in "iu"):
                raise TraceError(f"array {key!r} must be a list of integer steps")
            limit = sizes.get("S" if key == "nonfinite_loss_steps" else "T")
            if steps.size and (steps.min() < 0 or (limit and steps.max() >= limit[0])):
                raise TraceError(f"array {key!r} holds steps outside the run")
        return self


def _suggest(name: str, arrays: dict) -> str:
    """ " (did you mean …?)" with the keys closest to `name`, or where to find them."""
    close = []  # trace[0]: no name is close to a number
    if isinstance(name, str):
        close = difflib.get_close_matches(name, list(arrays), n=3, cutoff=0.6)
    if close:
        return f" (did you mean {', '.join(map(repr, close))}?)"
    return " (trace.keys() lists them)"


def _wrap(head: str, items: list[str], width: int = 100) -> list[str]:
    """`head` and the items joined by ", ", in lines of at most `width` characters where the
    items allow it, broken only between items."""
    lines: list[str] = []
    line = ""
    for n, item in enumerate(items):
        piece = item + ("," if n < len(items) - 1 else "")
        indent = head if not lines else "      "
        if line and len(indent) + len(line) + 1 + len(piece) > width:
            lines.append(indent + line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    return [*lines, (head if not lines else "      ") + line]


def _scalar_text(value: np.ndarray) -> str:
    """A 0-d array as repr shows it: numbers with 4 significant digits, text cut to a line."""
    if value.dtype.kind == "U":
        text = str(value)
        first = text.splitlines()[0] if text else ""
        return repr(first[:40] + ("…" if len(first) > 40 or first != text else ""))
    if value.dtype.kind == "f":
        return f"{float(value):.4g}"
    return str(value.item())


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an .npz, member by member, without pickle. Every member's header is read
    first and its declared size compared with the bytes stored, so a corrupt header cannot make
    us allocate more memory than the file holds."""
    arrays: dict[str, np.ndarray] = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as member:
                version = np.lib.format.read_magic(member)
                if version not in ((1, 0), (2, 0), (3, 0)):
                    raise ValueError(f"unknown .npy version {version}")
                read_header = (
                    np.lib.format.read_array_header_1_0
                    if version == (1, 0)
                    else np.lib.format.read_array_header_2_0
                )
                shape, _, dtype = read_header(member)
                if dtype.hasobject:
                    raise ValueError(f"{info.filename}: object arrays are not allowed")
                declared = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
                if declared > info.file_size:
                    raise ValueError(
                        f"{info.filename}: header declares {declared} bytes, "
                        f"the file holds {info.file_size}"
                    )
            with archive.open(info) as member:
                arrays[info.filename[:-4]] = np.lib.format.read_array(member, allow_pickle=False)
    return arrays


def _text(path: Path, data: dict[str, np.ndarray], key: str) -> str:
    value = data[key]
    if value.shape != () or value.dtype.kind != "U":
        raise TraceError(f"{path}: {key} must be a text scalar, got {value.dtype} {value.shape}")
    return str(value)


def _config(path: Path, text: str) -> RunConfig:
    """The RunConfig in `config_json`: a JSON object whose known keys have valid values."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise TraceError(f"{path}: config_json is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise TraceError(f"{path}: config_json must be a JSON object, got {type(data).__name__}")
    try:
        return RunConfig.from_dict(data).validate(limits=False)  # sizes as big as the arrays
    except ConfigError as exc:
        raise TraceError(f"{path}: config_json: {exc}") from None
