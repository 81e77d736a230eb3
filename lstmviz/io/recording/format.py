"""The `.lvz` format: what a recording file is (HDF5 written in SWMR mode, one record every N
training batches, read while written), as docs/recording.md#the-file-lvz lays it out: its
marks (`FORMAT`, `FORMAT_VERSION`), the datasets every record adds a row to (`ROWS`, with
`rows.ANCHOR_KEYS` where the first record had them), the text keys kept once, the HDF5
superblock's signature and SWMR flag; and `RecordingError`, what reading or writing one raises.
"""

from __future__ import annotations

import h5py

from lstmviz.core.errors import LstmvizError
from lstmviz.io.recording.rows import LOSS_BYTES, LOSS_NAMES, SERIES

FORMAT = "lstmviz-recording"
FORMAT_VERSION = 1
TEXT_KEYS = ("layer_names", "model_summary", "model_source", "inputs_source")
NAME_DTYPE = h5py.string_dtype("utf-8", LOSS_BYTES)
ROWS = (*SERIES, LOSS_NAMES)  # the datasets every record adds a row to (and ANCHOR_KEYS)
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
SWMR_WRITING = 0b100  # the superblock's flag: a writer holds (or held, if killed) it in SWMR


class RecordingError(LstmvizError):
    """A recording cannot be read or written. The message starts with the file (in the CLI,
    with its flag: "--record run.lvz: …")."""


def one_line(exc: BaseException) -> str:
    """An exception as one line of at most 300 characters, for a message."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
