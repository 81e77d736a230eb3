"""Load one LSTM layer's weights from a file: `load_weights`, `read_weights`, `list_lstm_layers`.

Formats by extension: `.keras`, `.weights.h5`, `.h5`/`.hdf5` (Keras, read without building the
model or running code from the file; Keras 2 `CuDNNLSTM` groups are converted to `LSTM`
weights), `.npz` (`kernel`, `recurrent_kernel`, `bias`, or `<name>/kernel` … per layer),
`.safetensors` and `.pt`/`.pth` (PyTorch `nn.LSTM` state dicts; `.pt` needs torch). Every
problem is a WeightsError whose one-line message starts with the file's path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, TypeVar

import numpy as np

from lstmviz.core.errors import WeightsError
from lstmviz.io import files
from lstmviz.weights.formats.found import FoundLayer, class_of, found_kind
from lstmviz.weights.formats.keras_files import h5_layers, keras_zip_layers
from lstmviz.weights.formats.npz_files import npz_layers
from lstmviz.weights.formats.torch_files import pt_layers, safetensors_layers
from lstmviz.weights.lstm_weights import LSTMWeights

_FORMATS: dict[str, tuple[str, Callable[[Path], list[FoundLayer]]]] = {
    ".keras": ("Keras model (.keras)", keras_zip_layers),
    ".weights.h5": ("Keras weights (.weights.h5)", h5_layers),
    ".h5": ("Keras HDF5 (.h5)", h5_layers),
    ".hdf5": ("Keras HDF5 (.hdf5)", h5_layers),
    ".npz": ("NumPy (.npz)", npz_layers),
    ".safetensors": ("PyTorch state dict (.safetensors)", safetensors_layers),
    ".pt": ("PyTorch state dict (.pt)", pt_layers),
    ".pth": ("PyTorch state dict (.pth)", pt_layers),
}
# In `files.WEIGHTS` order: longest suffix first (`.weights.h5` before `.h5`).
_READERS = {suffix: _FORMATS[suffix] for suffix in files.WEIGHTS}
WEIGHT_SUFFIXES = tuple(_READERS)


def weight_files(spec: str) -> list[Path]:
    """The files a per-batch `--weights` names: comma-separated paths, or a folder's weight
    files (by `WEIGHT_SUFFIXES`, in any case) sorted by name. Nothing is opened."""
    folder = Path(spec)
    if folder.is_dir():
        found = (p for p in folder.iterdir() if files.suffix_of(p, WEIGHT_SUFFIXES))
        return sorted(p for p in found if p.is_file())
    return [Path(p) for p in spec.split(",")]


T = TypeVar("T")
# What a weights description says when `layer=` named a Bidirectional (the CLI repeats it).
BIDIRECTIONAL_PICK = "a Bidirectional, using its forward half"


class LayerInfo(NamedTuple):
    """An LSTM layer in a file, for pickers: `name` is what `layer=` / `--layer` takes."""

    name: str
    input_dim: int
    hidden: int
    note: str = ""

    @property
    def label(self) -> str:
        text = f"{self.name or '(unnamed)'} (I={self.input_dim}, H={self.hidden})"
        return f"{text}, {self.note}" if self.note else text


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def file_format(
    path: Path, error: type[WeightsError] = WeightsError, noun: str = "weights"
) -> tuple[str, str]:
    """(suffix, format label) of `path`, or `error` naming the file: missing, unknown suffix."""
    suffix = files.suffix_of(path, WEIGHT_SUFFIXES)
    if problem := files.missing(path):
        raise error(f"{path}: {problem}")
    if suffix is None:
        raise error(
            f"{path}: unknown {noun} format {path.suffix or '(no extension)'!r} "
            f"(use {', '.join(_READERS)})"
        )
    return suffix, _READERS[suffix][0]


def layer_reader(suffix: str) -> Callable[[Path], list[FoundLayer]]:
    """The reader of the LSTM layers in a file with this suffix (see file_format)."""
    return _READERS[suffix][1]


def read_file(
    path: Path, label: str, read: Callable[[], T], error: type[WeightsError] = WeightsError
) -> T:
    """`read()`, with any failure as one line of `error` that starts with the file's path."""
    try:
        return read()
    except WeightsError as exc:
        kind = type(exc) if issubclass(type(exc), error) else error  # GraphModel stays one
        raise kind(f"{path}: {one_line(exc)}") from None
    except Exception as exc:  # untrusted bytes: h5py, zipfile, json, safetensors raise many types
        raise error(f"{path}: not a readable {label} file{files.unreadable(path, exc)}") from None


def scan(path: Path, error: type[WeightsError] = WeightsError) -> tuple[str, list[FoundLayer]]:
    """The format's label and the LSTM layers found in `path`, in the order the model runs
    them (a Bidirectional's forward half first), or `error` naming the file."""
    suffix, label = file_format(path, error)
    found = read_file(path, label, lambda: layer_reader(suffix)(path), error)
    return label, sorted(found, key=lambda f: (f.order, f.direction == "backward"))


def checked(layer: FoundLayer) -> LSTMWeights:
    """The layer as LSTMWeights, or a WeightsError saying why it is not a usable LSTM."""
    if layer.problem:
        raise WeightsError(layer.problem)
    if (kind := found_kind(layer)) != "lstm":
        raise WeightsError(f"not an LSTM but a {class_of(layer)} layer ({kind}); model mode "
                           "(--mode model) runs it")  # fmt: skip
    arrays = dict(layer.arrays)
    if "kernel" not in arrays or "recurrent_kernel" not in arrays:
        raise WeightsError("kernel or recurrent_kernel is missing")
    if "bias" not in arrays:  # use_bias=False / bias=False
        arrays["bias"] = np.zeros(np.shape(arrays["recurrent_kernel"])[-1:], np.float32)
    try:
        return LSTMWeights(**arrays)
    except WeightsError as exc:
        raise WeightsError(f"not an LSTM: {exc}") from None


def _usable(found: list[FoundLayer]) -> tuple[list[tuple[FoundLayer, LSTMWeights]], list[str]]:
    usable, refused = [], []
    for layer in found:
        try:
            usable.append((layer, checked(layer)))
        except WeightsError as exc:
            refused.append(f"{layer.name}: {exc}" if layer.name else str(exc))
    return usable, refused


def _bidirectionals(found: list[FoundLayer]) -> dict[str, dict[str, FoundLayer]]:
    """{name of a Bidirectional: {"forward": its forward half, "backward": …}} for the halves
    in `found` whose wrapper has a name of its own (PyTorch's `l0` names its forward half)."""
    halves: dict[str, dict[str, FoundLayer]] = {}
    for f in found:
        if f.direction and f.owner and f.owner != f.name:
            halves.setdefault(f.owner, {}).setdefault(f.direction, f)
    return {owner: pair for owner, pair in halves.items() if "forward" in pair}


def _named(found: list[FoundLayer], layer: str) -> tuple[FoundLayer | None, str]:
    """The layer `layer` names and, when it names a Bidirectional, that wrapper's name.

    A layer's own name or alias comes first. A Bidirectional's name picks its forward half
    (one LSTM runs forward in time, as the non-model modes run it); `NAME/forward` and
    `NAME/backward` pick a half by direction, as model mode names them."""
    for f in found:
        if f.name and layer in (f.name, *f.aliases):
            return f, ""
    pairs = _bidirectionals(found)
    owner, _, direction = layer.rpartition("/")
    if owner in pairs and direction in pairs[owner]:
        return pairs[owner][direction], ""
    if layer in pairs:
        return pairs[layer]["forward"], layer
    return None, ""


def _listing(found: list[FoundLayer]) -> str:
    """The names `layer=` takes, for messages: every named layer, then each Bidirectional's
    own name (which picks its forward half) and how to name its backward half."""
    names = ", ".join(repr(f.name) for f in found if f.name)
    wrappers = [f"Bidirectional {owner!r} = its forward half, "
                f"{owner + '/backward'!r} = its backward half"
                for owner in _bidirectionals(found)]  # fmt: skip
    return "; ".join([names, *wrappers]) if names else ""


def bidirectional_pick(description: str) -> str:
    """From a weights description (`read_weights`'s), the layer asked for when it named a
    Bidirectional and which half that used ("'bi': a Bidirectional, using its forward half
    'forward_lstm' (its backward half: 'bi/backward')"); "" otherwise."""
    if BIDIRECTIONAL_PICK not in description:
        return ""
    return description.partition(", layer ")[2].partition("; kernel")[0]


def _describe(path: Path, label: str, layer: FoundLayer, w: LSTMWeights, wrapper: str = "") -> str:
    name = f", layer {layer.name!r}" if layer.name else ""
    note = f" ({layer.note})" if layer.note else ""
    if wrapper:  # asked for by the Bidirectional's name
        name = f", layer {wrapper!r}: {BIDIRECTIONAL_PICK} {layer.name!r}"
        note = f" (its backward half: {wrapper + '/backward'!r})"
    return (
        f"{path}: {label}{name}{note}; kernel {list(w.kernel.shape)}, recurrent_kernel "
        f"{list(w.recurrent_kernel.shape)}, bias {list(w.bias.shape)} (I={w.input_dim}, "
        f"H={w.hidden})"
    )


class WeightsFile:
    """A weights file read once (`WeightsFile.open(path)`): its LSTM layers with their sizes
    (`layers()`, what a picker offers) and any one layer's weights (`read(layer)`), without
    reading the file again. `read_weights` and `list_lstm_layers` are the one-call forms."""

    def __init__(self, path: Path, label: str, found: list[FoundLayer]):
        self.path, self.label, self.found = path, label, found
        self._usable: tuple[list[tuple[FoundLayer, LSTMWeights]], list[str]] | None = None

    @classmethod
    def open(cls, path: str | os.PathLike) -> WeightsFile:
        """Read the layers in `path`. Raises WeightsError naming the file: missing, unknown
        format, unreadable."""
        if not isinstance(path, str | os.PathLike):
            raise WeightsError(f"a weights file's path, not a {type(path).__name__}: for "
                               "weights in memory use lstmviz.LSTMWeights(*layer.get_weights())")
        path = Path(path)
        return cls(path, *scan(path))

    def usable(self) -> tuple[list[tuple[FoundLayer, LSTMWeights]], list[str]]:
        """The LSTM layers (with their weights) and why each other layer found is refused."""
        if self._usable is None:
            self._usable = _usable(self.found)
        return self._usable

    def layers(self) -> list[LayerInfo]:
        """The usable LSTM layers in model order, each with the name `layer=` takes (one
        unnamed weight set: name "") and its sizes. The names the errors list."""
        return [LayerInfo(f.name, w.input_dim, w.hidden, f.note) for f, w in self.usable()[0]]

    def read(self, layer: str | None = None) -> tuple[LSTMWeights, str]:
        """One layer's weights and a one-line description; see `read_weights`."""
        path, found = self.path, self.found
        wrapper = ""
        if layer is not None and not isinstance(layer, str):
            names = _listing(found) or "none"
            raise WeightsError(f"{path}: layer must be a name, not a {type(layer).__name__} "
                               f"(layers: {names})")  # fmt: skip
        if layer is not None:
            pick, wrapper = _named(found, layer)
            if pick is None:
                names = _listing(found)
                detail = f"layers: {names}" if names else "the file's layers have no names; omit it"
                raise WeightsError(f"{path}: no layer named {layer!r} ({detail})")
            try:
                weights = checked(pick)
            except WeightsError as exc:
                raise WeightsError(f"{path}: layer {layer!r}: {one_line(exc)}") from None
        else:
            usable, refused = self.usable()
            if not usable:
                detail = f" ({one_line('; '.join(refused))})" if refused else ""
                raise WeightsError(f"{path}: no LSTM layer inside{detail}")
            if len(usable) > 1:
                names = _listing([f for f, _ in usable])
                raise WeightsError(
                    f"{path}: {len(usable)} LSTM layers ({names}); pick one with --layer NAME "
                    "(layer= in Python)"
                )
            pick, weights = usable[0]
        bad = weights.nonfinite()
        if bad:
            where = f"layer {pick.name!r}: " if pick.name else ""
            verb = "contain" if len(bad) > 1 else "contains"
            raise WeightsError(f"{path}: {where}{', '.join(bad)} {verb} NaN or Inf")
        return weights, _describe(path, self.label, pick, weights, wrapper)


def read_weights(path: str | os.PathLike, layer: str | None = None) -> tuple[LSTMWeights, str]:
    """The weights of one LSTM layer in `path` and a one-line description of where they came from.

    `layer` names the layer when the file holds several (see `list_lstm_layers`). Raises
    WeightsError naming the file: unreadable, no LSTM inside, ambiguous or unknown layer, NaN or
    Inf in an array.
    """
    return WeightsFile.open(path).read(layer)


def load_weights(path: str | os.PathLike, layer: str | None = None) -> LSTMWeights:
    """The weights of one LSTM layer in `path`, in Keras's layout. See `read_weights`."""
    return read_weights(path, layer)[0]


def list_lstm_layers(path: str | os.PathLike) -> list[LayerInfo]:
    """The usable LSTM layers in `path` (a file with one unnamed weight set gives name "")."""
    if not isinstance(path, str | os.PathLike):
        raise WeightsError(f"a weights file's path, not a {type(path).__name__}")
    return WeightsFile.open(path).layers()
