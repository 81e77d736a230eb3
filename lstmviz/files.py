"""The kinds of file lstmviz opens, by suffix, and what a given file is. NumPy only.

One list per kind: the loaders, the file dialogs, drag and drop and `lstmviz gui FILE …` read
these. An `.npz` can be any of three kinds; `kind()` looks inside (names only, no array read).
`check_output` refuses a file lstmviz is asked to write where it cannot be written.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from lstmviz.errors import ConfigError, LstmvizError

TRACES = (".npz",)
RECORDINGS = (".lvz",)  # a training run's recording (lstmviz.recording)
INPUTS = (".npy", ".npz")
# Longest first where one ends another (`.weights.h5` before `.h5`).
WEIGHTS = (".keras", ".weights.h5", ".h5", ".hdf5", ".npz", ".safetensors", ".pt", ".pth")

KIND_TEXT = {"trace": "a trace (.npz)", "recording": "a recording (.lvz)",
             "inputs": "inputs (.npy, .npz with x)",
             "weights": f"weights ({', '.join(WEIGHTS)})"}  # fmt: skip


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


def kind(path: str | os.PathLike) -> str:
    """What `path` is: "trace", "recording", "inputs" or "weights". Raises LstmvizError
    naming the file when it does not exist, has an unknown suffix, or is an unreadable .npz."""
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
        return "weights"
    expected = ", ".join(KIND_TEXT.values())
    raise LstmvizError(f"{path}: lstmviz opens {expected}; not {path.suffix or 'this file'}")


def check_output(path: str | os.PathLike, flag: str, suffixes: tuple[str, ...], what: str) -> Path:
    """`path` as a file to write, or a ConfigError naming `flag`: it must end in one of
    `suffixes` ("`what` end in …"), not be a folder, and sit in a folder that exists and is
    writable."""
    path = Path(path)
    if suffix_of(path, suffixes) is None:
        raise ConfigError(flag, f"{path}: {what} end in {' or '.join(suffixes)}")
    if path.is_dir():
        raise ConfigError(flag, f"{path}: is a folder, not a file name")
    if not path.parent.is_dir():
        raise ConfigError(flag, f"{path.parent}: no such folder")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise ConfigError(flag, f"{path.parent}: folder is not writable")
    return path
