"""The kinds of file lstmviz opens, by suffix, and what a given file is. NumPy, json and h5py.

One list per kind: the loaders, the file dialogs, drag and drop and `lstmviz gui FILE …` read
these. An `.npz` can be any of three kinds; `kind()` looks inside (names only, no array read).
A Keras `.keras` or full-model `.h5` is a model when its config has layers besides LSTMs (an
Embedding, a head), else weights: `kind()` reads the config, not the weights. A PyTorch
program (TorchScript, torch.export) is told by its zip directory, whatever its name ends in.
`check_output` refuses a file lstmviz is asked to write where it cannot be written,
`check_suffix` one whose name does not say what it holds. `missing` and `wrong_content` word
the two commonest reasons a file cannot be read: it is not there (or is a folder), or it holds
another kind of file.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

from lstmviz.core.errors import ConfigError, LstmvizError, ref

TRACES = (".npz",)
RECORDINGS = (".lvz",)  # a training run's recording (lstmviz.io.recording)
INPUTS = (".npy", ".npz")
# Longest first where one ends another (`.weights.h5` before `.h5`).
WEIGHTS = (".keras", ".weights.h5", ".h5", ".hdf5", ".npz", ".safetensors", ".pt", ".pth")
# A training run's trained LSTM and read-out
# (`lstmviz.engine.modes.trained_weights.save_trained_weights`).
TRAINED_WEIGHTS = (".weights.h5", ".npz")

# The names PyTorch programs usually have (the dialogs offer them; `torch_program` reads the
# content, whatever the name): TorchScript .pt/.pth/.jit, torch.export .pt2 (lstmviz.torch).
TORCH_PROGRAMS = (".pt2", ".pt", ".pth", ".jit")
# Model files: a whole model (`lstmviz.weights.model_files.load_model`, or a PyTorch program);
# weights-only files of stacked LSTM layers open as a model too when asked to (File → Open
# model…).
MODELS = (*WEIGHTS, ".pt2", ".jit")
KIND_TEXT = {"trace": "a trace (.npz)", "recording": "a recording (.lvz)",
             "inputs": "inputs (.npy, .npz with x)",
             "weights": f"weights ({', '.join(WEIGHTS)})",
             "model": "a model (.keras, .h5, TorchScript .pt/.jit, torch.export .pt2)"}  # fmt: skip
# Layer classes a weights file may hold; a Keras config with any other layer is a model's.
_LSTM_CLASSES = frozenset({"InputLayer", "LSTM", "CuDNNLSTM", "Bidirectional"})


# What a file's first bytes say it is (`content`), and the kind each suffix's files are.
_SIGNATURES = ((b"PK\x03\x04", "zip"), (b"PK\x05\x06", "zip"), (b"\x89HDF\r\n\x1a\n", "hdf5"),
               (b"\x93NUMPY", "npy"))  # fmt: skip
_CONTENT_TEXT = {
    "empty": "it is empty (0 bytes)",
    "zip": "it is a zip archive (a .keras model or an .npz?)",
    "hdf5": "it is an HDF5 file (a Keras .h5 or a recording .lvz?)",
    "npy": "it is a single NumPy array (an .npy file)",
    "safetensors": "it is a .safetensors file",
    "pickle": "it is a Python pickle (a .pt file?)",
    "text": "it is a text file",
}
_SUFFIX_CONTENT = {".keras": ("zip",), ".npz": ("zip",), ".npy": ("npy",),
                   ".weights.h5": ("hdf5",), ".h5": ("hdf5",), ".hdf5": ("hdf5",),
                   ".lvz": ("hdf5",), ".safetensors": ("safetensors",),
                   ".pt": ("zip", "pickle"), ".pth": ("zip", "pickle"),
                   ".pt2": ("zip",), ".jit": ("zip",)}  # fmt: skip


def missing(path: str | os.PathLike) -> str | None:
    """Why `path` cannot be opened as a file ("no such file", "is a folder, not a file"), or
    None when it is a file."""
    path = Path(path)
    if path.is_file():
        return None
    return "is a folder, not a file" if path.is_dir() else "no such file"


def content(path: str | os.PathLike) -> str:
    """What `path`'s first bytes say it holds: "empty", "zip", "hdf5", "npy", "safetensors",
    "pickle", "text", or "" when they do not say (or cannot be read)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(512)
            size = os.fstat(handle.fileno()).st_size
    except OSError:
        return ""
    if not head:
        return "empty"
    for signature, name in _SIGNATURES:
        if head.startswith(signature):
            return name
    if len(head) > 9 and head[8:9] == b"{" and 0 < int.from_bytes(head[:8], "little") < size:
        return "safetensors"  # an 8-byte header length, then the JSON header
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return "pickle"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not a character cut at the end of the 512 bytes
            return ""
        text = head[: exc.start].decode("utf-8")
    return "text" if all(c.isprintable() or c.isspace() for c in text) else ""


def wrong_content(path: str | os.PathLike) -> str | None:
    """What `path` holds ("it is an HDF5 file (…)") when its first bytes show another kind of
    file than its suffix names, or it is empty; None when they fit or do not say."""
    suffix = suffix_of(path, tuple(_SUFFIX_CONTENT))
    found = content(path)
    if not found or suffix is None or found in _SUFFIX_CONTENT[suffix]:
        return None
    return _CONTENT_TEXT[found]


def unreadable(path: str | os.PathLike, exc: BaseException) -> str:
    """The end of a "not a readable … file" message: ": " and what the file holds when its
    bytes show another kind of file (`wrong_content`), else " (" the exception ")", one line."""
    if mismatch := wrong_content(path):
        return f": {mismatch}"
    detail = " ".join(f"{type(exc).__name__}: {exc}".split())
    return f" ({detail if len(detail) <= 300 else detail[:299] + '…'})"


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


# Words in the array names of weights (Keras's, PyTorch's state dicts'), never of data
_WEIGHT_WORDS = ("kernel", "weight", "bias", "embeddings", "gamma", "beta", "moving_", "w_ih",
                 "w_hh", "b_ih", "b_hh")


def is_data(names: list[str]) -> bool:
    """Whether an .npz of these array names holds a model's data: `x` (and `y`), or, for a
    model of several inputs, one array per input by its name or `x0`, `x1`, … — no array named
    as weights are."""
    if any(word in name for name in names for word in _WEIGHT_WORDS):
        return False
    return bool(names) and ("x" in names or "y" in names or "x0" in names
                            or not any("/" in name or "." in name for name in names))


def layer_classes(config) -> list[str]:
    """The class names of a Keras model config's layers, nested models opened (a Bidirectional
    counts as itself). [] for anything that is not a model config."""
    from lstmviz.weights.formats.keras_config import MODELS  # the classes that nest layers

    found: list[str] = []

    def walk(node, depth: int = 0) -> None:
        inner = node.get("config") if isinstance(node, dict) else None
        # Keras 2.0/2.1 wrote a Sequential's config as the list of its layers itself
        layers = inner.get("layers") if isinstance(inner, dict) else inner
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
        import h5py  # here: `import lstmviz.io.files` stays cheap

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


def torch_program(path: str | os.PathLike) -> str | None:
    """"torchscript" for a TorchScript archive, "export" for a torch.export program, else
    None, from the zip's directory (nothing is unpickled), whatever the file's name ends in.

    TorchScript (`torch.jit.save`) writes `<archive>/code/…` (its source) beside
    `constants.pkl` / `data.pkl`; torch.export (`torch.export.save`) `archive_format` and
    `models/*.json` (PyTorch ≥ 2.6) or `serialized_exported_program.json` (before). A plain
    `torch.save` state dict has `data.pkl` and no code/: not a program. A `.pt2` zip is taken
    as torch.export's even when its layout is another (loading it says what is wrong)."""
    if content(path) != "zip":
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (OSError, zipfile.BadZipFile, ValueError):
        return None
    # paths inside the archive's top folder, ("code", "__torch__", …), ("constants.pkl",); an
    # older .pt2 keeps its files at the top
    inner = {tuple(name.split("/")[1:]) if "/" in name else (name,) for name in names}
    ends = {parts[-1] for parts in inner if parts}
    code = any(len(parts) > 1 and parts[0] == "code" for parts in inner)
    if code and ends & {"constants.pkl", "data.pkl"}:
        return "torchscript"
    exported = "serialized_exported_program.json" in ends or ("archive_format",) in inner
    return "export" if exported or suffix_of(path, (".pt2",)) else None


def kind(path: str | os.PathLike) -> str:
    """What `path` is: "trace", "recording", "inputs", "model" or "weights". Raises
    LstmvizError naming the file when it does not exist, has an unknown suffix, or is an
    unreadable .npz."""
    path = Path(path)
    if problem := missing(path):
        raise LstmvizError(f"{path}: {problem}")
    if torch_program(path):  # by content: a TorchScript `.jit`, `.pt`, or any other name
        return "model"
    if suffix_of(path, (".npz",)):
        try:
            names = npz_names(path)
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            raise LstmvizError(f"{path}: not a readable .npz file{unreadable(path, exc)}") from None
        if "config_json" in names:
            return "trace"
        return "inputs" if is_data(names) else "weights"
    if suffix_of(path, RECORDINGS):
        return "recording"
    if suffix_of(path, INPUTS):
        return "inputs"
    if suffix_of(path, WEIGHTS):
        return "model" if is_model(path) else "weights"
    if suffix_of(path, TORCH_PROGRAMS):  # named as a program, and not one
        why = wrong_content(path) or "its zip directory holds neither's files"
        raise LstmvizError(f"{path}: not a TorchScript or torch.export program: {why}")
    expected = ", ".join(KIND_TEXT.values())
    raise LstmvizError(f"{path}: lstmviz opens {expected}; not {path.suffix or 'this file'}")


def check_suffix(path: str | os.PathLike, flag: str, suffixes: tuple[str, ...], what: str) -> Path:
    """`path`, or a ConfigError naming `flag` when it does not end in one of `suffixes`
    ("`what` end in …"): the rule for the names of the files lstmviz writes."""
    path = Path(path)
    if suffix_of(path, suffixes) is None:
        raise ConfigError(flag, f"{path}: {what} end in {' or '.join(suffixes)}")
    return path


def check_trained_weights_output(path: str, flag: str = "save_model") -> Path:
    """`path` as the file of a task run's trained weights (`TRAINED_WEIGHTS`), or a ConfigError
    naming `flag`: an empty name, a `.keras` name (the model of a fit, not these weights), or
    what `check_output` refuses."""
    if not path:
        raise ConfigError(flag, "empty file name")
    if suffix_of(path, (".keras",)):
        raise ConfigError(flag, f"{path}: a task run's trained weights end in "
                          f"{' or '.join(TRAINED_WEIGHTS)} (a .keras file is the model of "
                          f"{ref('mode', 'train')} {ref('model', 'FILE')})")  # fmt: skip
    return check_output(path, flag, TRAINED_WEIGHTS, "trained weights")


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
