"""The kinds of file lstmviz opens, by suffix, and what a given file is. NumPy, json and h5py.

One list per kind: the loaders, the file dialogs, drag and drop and `lstmviz gui FILE …` read
these. An `.npz` can be any of three kinds; `kind()` looks inside (names only, no array read).
A Keras `.keras` or full-model `.h5` is a model when its config has layers besides LSTMs (an
Embedding, a head), else weights: `kind()` reads the config, not the weights. `check_output`
refuses a file lstmviz is asked to write where it cannot be written, `check_suffix` one whose
name does not say what it holds.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

from lstmviz.errors import ConfigError, LstmvizError

TRACES = (".npz",)
RECORDINGS = (".lvz",)  # a training run's recording (lstmviz.recording)
INPUTS = (".npy", ".npz")
# Longest first where one ends another (`.weights.h5` before `.h5`).
WEIGHTS = (".keras", ".weights.h5", ".h5", ".hdf5", ".npz", ".safetensors", ".pt", ".pth")

# Model files: a whole model (`lstmviz.weights.model_files.load_model`); weights-only files of
# stacked LSTM layers open as a model too when asked to (File → Open model…).
MODELS = WEIGHTS
KIND_TEXT = {"trace": "a trace (.npz)", "recording": "a recording (.lvz)",
             "inputs": "inputs (.npy, .npz with x)",
             "weights": f"weights ({', '.join(WEIGHTS)})",
             "model": "a model (.keras, .h5)"}  # fmt: skip
# Layer classes a weights file may hold; a Keras config with any other layer is a model's.
_LSTM_CLASSES = frozenset({"InputLayer", "LSTM", "CuDNNLSTM", "Bidirectional"})


def suffix_of(path: str | os.PathLike, suffixes: tuple[str, ...]) -> str | None:
    """The first of `suffixes` that `path` ends with (case-insensitive), else None."""
    name = Path(path).name.lower()
    return next((s for s in suffixes if name.endswith(s)), None)


def pattern(suffixes: tuple[str, ...]) -> str:
    """A file-dialog pattern: "*.npy *.npz"."""
    return " ".join(f"*{s}" for s in dict.fromkeys(suffixes))


def npz_names(path: str | os.PathLike) -> list[str]:
    """The array names in an .npz (from its zip directory; nothing is read)."""
    with zipfile.ZipFile(path) as archive:
        return [n[:-4] for n in archive.namelist() if n.endswith(".npy")]


def layer_classes(config) -> list[str]:
    """The class names of a Keras model config's layers, nested models opened (a Bidirectional
    counts as itself). [] for anything that is not a model config."""
    from lstmviz.weights.keras_config import MODELS  # the classes that nest layers

    found: list[str] = []

    def walk(node, depth: int = 0) -> None:
        inner = node.get("config") if isinstance(node, dict) else None
        layers = inner.get("layers") if isinstance(inner, dict) else None
        if not isinstance(layers, list) or depth > 32:
            return
        for layer in layers:
            if not isinstance(layer, dict):
                continue
            if layer.get("class_name") in MODELS:
                walk(layer, depth + 1)
            else:
                found.append(str(layer.get("class_name")))

    walk(config)
    return found


def keras_config(path: str | os.PathLike) -> dict | None:
    """The model config of a `.keras` archive or a full-model Keras `.h5`/`.hdf5` (weights are
    not read); None when the file holds none or cannot be read (the loaders say why)."""
    path = Path(path)
    try:
        if suffix_of(path, (".keras",)):
            with zipfile.ZipFile(path) as archive:
                return json.loads(archive.read("config.json"))
        import h5py  # here: `import lstmviz.files` stays cheap

        with h5py.File(path, "r") as f:
            text = f.attrs.get("model_config")
        if text is None:
            return None
        return json.loads(text.decode() if isinstance(text, bytes) else str(text))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, UnicodeDecodeError):
        return None


def is_model(path: str | os.PathLike) -> bool:
    """Whether `path` is a Keras model with layers besides LSTMs (an Embedding, a head): a
    `.keras`, `.h5` or `.hdf5` whose config says so. Weights-only files are not."""
    if suffix_of(path, (".weights.h5",)) or not suffix_of(path, (".keras", ".h5", ".hdf5")):
        return False
    config = keras_config(path)
    return config is not None and bool(set(layer_classes(config)) - _LSTM_CLASSES)


def kind(path: str | os.PathLike) -> str:
    """What `path` is: "trace", "recording", "inputs", "model" or "weights". Raises
    LstmvizError naming the file when it does not exist, has an unknown suffix, or is an
    unreadable .npz."""
    path = Path(path)
    if not path.is_file():
        raise LstmvizError(f"{path}: no such file")
    if suffix_of(path, (".npz",)):
        try:
            names = npz_names(path)
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            raise LstmvizError(f"{path}: not a readable .npz file ({exc})") from None
        if "config_json" in names:
            return "trace"
        return "inputs" if "x" in names and "kernel" not in names else "weights"
    if suffix_of(path, RECORDINGS):
        return "recording"
    if suffix_of(path, INPUTS):
        return "inputs"
    if suffix_of(path, WEIGHTS):
        return "model" if is_model(path) else "weights"
    expected = ", ".join(KIND_TEXT.values())
    raise LstmvizError(f"{path}: lstmviz opens {expected}; not {path.suffix or 'this file'}")


def check_suffix(path: str | os.PathLike, flag: str, suffixes: tuple[str, ...], what: str) -> Path:
    """`path`, or a ConfigError naming `flag` when it does not end in one of `suffixes`
    ("`what` end in …"): the rule for the names of the files lstmviz writes."""
    path = Path(path)
    if suffix_of(path, suffixes) is None:
        raise ConfigError(flag, f"{path}: {what} end in {' or '.join(suffixes)}")
    return path


def check_output(path: str | os.PathLike, flag: str, suffixes: tuple[str, ...], what: str) -> Path:
    """`path` as a file to write, or a ConfigError naming `flag`: it must end in one of
    `suffixes` ("`what` end in …"), not be a folder or a write-protected file, and sit in a
    folder that exists and is writable."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(flag, f"{path}: is a folder, not a file name")
    check_suffix(path, flag, suffixes, what)
    if not path.parent.is_dir():
        raise ConfigError(flag, f"{path.parent}: no such folder")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ConfigError(flag, f"{path.parent}: folder is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise ConfigError(flag, f"{path}: file is write-protected")
    return path
