"""Reading a recording (`load_recording` → `Recording`), also while it is written: every
complete record, never half of one. A reader takes `records` (n), then the n rows and the trace
slot of record n, then `writing` again, and reads again when a later record may have touched
that slot; the HDF5 superblock is checked before HDF5 opens the file (a SWMR reader would loop
or crash on a truncated one). A file written before `loss_name` and `trace_text` existed (same
format version) reads as it did: one loss, the first record's text."""

from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from lstmviz.core import schema
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import LstmvizError, TraceError
from lstmviz.io.recording.format import (
    FORMAT,
    FORMAT_VERSION,
    HDF5_SIGNATURE,
    SWMR_WRITING,
    TEXT_KEYS,
    RecordingError,
    one_line,
)
from lstmviz.io.recording.hdf5 import open_file
from lstmviz.io.recording.rows import ANCHOR_KEYS, LOSS_NAMES, SERIES
from lstmviz.io.trace import GradientTrace

READ_ATTEMPTS = 50  # reads of a record the writer overwrote meanwhile, before giving up
RETRY_SECONDS = 0.002  # the pause before reading again, so a starved reader gets a turn


@dataclass
class Recording:
    """A recording as read: `arrays` holds the rows of every record (`step` [S], `epoch`,
    `loss`, `train_loss`, `record_seconds` [S], the norms [S, L, T], `saliency` [S, T]; the
    error of one step where the file has it: `anchors_by_layer` [S, L, A],
    `anchor_norm_h_by_layer`, `anchor_norm_c_by_layer` [S, L, A, T]) and
    `layer_names` [L], `model_summary`, `model_source`, `inputs_source`, `every`; `last` is
    the last record's full model trace (None when not read); `finished` says whether the
    writer has closed the file (False while fit runs); `loss_names` [S] the loss each record
    was computed with. The text is the last record's; when the loss changed between records
    (a model compiled again) `model_summary` ends in a line naming each loss and its steps.

    Arrays are reachable as attributes too: `recording.step`."""

    path: Path
    arrays: dict[str, np.ndarray]
    last: GradientTrace | None
    finished: bool
    loss_names: list[str] = field(default_factory=list)  # [S]: the loss of each record

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(f"Recording has no array {name!r}")

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    def __contains__(self, key: str) -> bool:
        return key in self.arrays

    def __len__(self) -> int:
        return len(self.arrays["step"])

    def keys(self) -> list[str]:
        return sorted(self.arrays)

    @property
    def diagnosis(self):
        """Each record's diagnosis from its norm rows, and its anchored rows where the loss
        enters at every step (`lstmviz.analysis.diagnosis.RecordingDiagnosis`; `.series()`
        steps per decade and reach over training steps)."""
        from lstmviz.analysis.diagnosis import diagnose_recording

        return diagnose_recording(self)

    def __repr__(self) -> str:
        """The file, its records and LSTM directions, whether it is finished; not the rows."""
        count, steps = len(self), np.ravel(self.arrays.get("step", []))
        span = f", steps {int(steps[0])}–{int(steps[-1])}" if count > 1 else ""
        names = [str(n) for n in np.ravel(self.arrays.get("layer_names", []))]
        return (f"Recording({str(self.path)!r}, {count} record{'s' * (count != 1)}{span}, "
                f"directions {names}, finished={self.finished})")  # fmt: skip

    def _repr_html_(self) -> str:
        """What Jupyter shows: records, steps, epochs, loss, each direction's ‖dL/dh_t‖."""
        from lstmviz.notebook.html import recording_html

        return recording_html(self)


def load_recording(path: str | os.PathLike, trace: bool = True) -> Recording:
    """Read a recording, also while `fit` is writing it: every complete record, never half of
    one.

    Args:
        path: the `.lvz` file.
        trace: read the last record's full model trace too (`Recording.last`); False reads
            the rows alone, which are small.

    Raises:
        RecordingError: the file is missing, not a recording, truncated or corrupt, or
            written by a newer lstmviz; the message names it.
    """
    path = Path(path)
    if not path.is_file():
        raise RecordingError(f"{path}: no such recording")
    live = _check_superblock(path)
    try:
        with open_file(path, live) as f:
            return _read(path, f, trace)
    except RecordingError:
        raise
    except Exception as exc:  # untrusted bytes: h5py raises many types for damaged files
        raise RecordingError(
            f"{path}: not a readable recording (truncated or corrupt: {one_line(exc)})"
        ) from None


def _check_superblock(path: Path) -> bool:
    """Whether a writer holds the file in SWMR mode (or held it and was killed), from its
    HDF5 superblock (versions 2 and 3, as h5py's libver="latest" writes them); a
    RecordingError for a file that is not HDF5 or is shorter than the end of file it records.

    Read before HDF5 opens the file: a SWMR reader expects a file that grows, so it does not
    check the end of file, and on a truncated one it loops or crashes."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(36)
        size = path.stat().st_size
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(head) < 36 or head[:8] != HDF5_SIGNATURE:
        raise RecordingError(f"{path}: not a recording (not an HDF5 file, or truncated)")
    version, offset_size, flags = head[8], head[9], head[11]
    if version not in (2, 3) or offset_size != 8:
        raise RecordingError(f"{path}: not a recording (HDF5 superblock version {version})")
    end = struct.unpack_from("<Q", head, 28)[0]  # after the base and extension addresses
    if size < end:
        raise RecordingError(f"{path}: truncated ({size} of its {end} bytes)")
    return bool(flags & SWMR_WRITING)


def _read(path: Path, f: h5py.File, with_trace: bool) -> Recording:
    if f.attrs.get("format") != FORMAT:
        raise RecordingError(f"{path}: not an lstmviz recording (an HDF5 file of another kind)")
    version = int(f.attrs.get("format_version", 0))
    if version > FORMAT_VERSION:
        raise RecordingError(
            f"{path}: written by a newer lstmviz (format {version}, this version reads up to "
            f"{FORMAT_VERSION})"
        )
    for _ in range(READ_ATTEMPTS):
        count = _counter(f, "records")
        if count < 1:
            raise RecordingError(f"{path}: holds no complete record")
        # a file from before the error of one step was recorded has no anchor rows
        keys = (*SERIES, *(key for key in ANCHOR_KEYS if key in f))
        arrays = {key: _rows(path, f[key], count) for key in keys}
        names = _rows(path, f[LOSS_NAMES], count) if LOSS_NAMES in f else None
        numeric = _slot(f[f"trace/{(count - 1) % 2}"]) if with_trace else None
        slot_text = f.get(f"trace_text/{(count - 1) % 2}")
        last_text = None if slot_text is None else _whole(slot_text)
        if _counter(f, "writing") <= count + 1:
            break
        time.sleep(RETRY_SECONDS)
    else:
        raise RecordingError(f"{path}: records arrive faster than they can be read")
    if last_text is None:  # written before each record's text was kept: the first record's
        text = {key: _text(f["text"][key]) for key in f["text"]}
    else:
        text = {key: np.array(value, dtype=str)
                for key, value in json.loads(last_text.tobytes().decode()).items()}  # fmt: skip
    config_json = str(text.pop("config_json"))
    arrays |= {key: text[key] for key in TEXT_KEYS if key in text}
    arrays["every"] = np.int64(f.attrs.get("every", 0))
    try:
        config = _config(config_json)
        losses = ([bytes(name).decode(errors="replace") for name in names] if names is not None
                  else [config.loss or "?"] * count)  # fmt: skip
        if len(set(losses)) > 1 and "model_summary" in arrays:
            segments = _loss_segments(losses, arrays["step"])
            arrays["model_summary"] = np.array(f"{arrays['model_summary']}\n{segments}")
        # A recording is no trace, but its arrays obey the trace's rules under the schema's
        # recording keys (one size for each of S, L, T across them).
        GradientTrace(schema.RECORDING, RunConfig(), arrays).check()
        last = None
        if numeric is not None:
            last = GradientTrace("model", config, numeric | text).check()
    except TraceError as exc:
        raise RecordingError(f"{path}: {exc}") from None
    return Recording(path, arrays, last, bool(_counter(f, "finished")), losses)


def _loss_segments(losses: list[str], steps: np.ndarray) -> str:
    """ "Losses by record: mse at steps 10–40, binary_crossentropy at step 50." for the loss of
    each record [S] and its training step [S]."""
    parts, first = [], 0
    for n in range(1, len(losses) + 1):
        if n == len(losses) or losses[n] != losses[first]:
            lo, hi = int(steps[first]), int(steps[n - 1])
            parts.append(f"{losses[first]} at step {lo}" if lo == hi
                         else f"{losses[first]} at steps {lo}–{hi}")  # fmt: skip
            first = n
    return f"Losses by record: {', '.join(parts)}."


def _counter(f: h5py.File, name: str) -> int:
    dataset = f[name]
    dataset.refresh()
    return int(dataset[()])


def _rows(path: Path, dataset: h5py.Dataset, count: int) -> np.ndarray:
    dataset.refresh()
    if dataset.shape[0] < count:
        raise RecordingError(
            f"{path}: {dataset.name.lstrip('/')} holds {dataset.shape[0]} rows, not {count}"
        )
    return dataset[:count]


def _slot(group: h5py.Group) -> dict[str, np.ndarray]:
    return {key: _whole(group[key]) for key in group}


def _whole(dataset: h5py.Dataset) -> np.ndarray:
    dataset.refresh()
    return dataset[()]


def _text(dataset: h5py.Dataset) -> np.ndarray:
    value = dataset.asstr()[()]
    return np.array(value, dtype=str)


def _config(text: str) -> RunConfig:
    try:
        return RunConfig.from_dict(json.loads(text)).validate()
    except (ValueError, TypeError, LstmvizError) as exc:
        raise TraceError(f"config_json: {one_line(exc)}") from None
