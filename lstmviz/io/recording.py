"""Recordings of a training run (`.lvz`): one record every N training batches, read while written.

A `.lvz` is an HDF5 file written with h5py in SWMR mode (single writer, multiple readers), so a
reader can open it while `model.fit` appends to it. No TensorFlow here.

Layout (every dataset exists from the first record on; SWMR forbids creating any later):

- attributes of the root: `format` ("lstmviz-recording"), `format_version`, `every` (N);
- one row per record, datasets that grow along their first axis (S records): `step` [S] (the
  training batch, counted across epochs: N, 2N, …), `epoch` [S] (0-based, as Keras counts),
  `loss` [S] (on the recorded data), `train_loss` [S] (what Keras reported), `record_seconds`
  [S], `norm_h_total_by_layer`, `norm_h_direct_by_layer`, `norm_c_total_by_layer` [S, L, T],
  `saliency` [S, T] (the mean over the samples); where the first record's trace had the error
  of one step (docs/diagnosis.md), `anchors_by_layer` [S, L, A] (int64 input positions t*),
  `anchor_norm_h_by_layer`, `anchor_norm_c_by_layer` [S, L, A, T] (`recording_rows`);
- `loss_name` [S]: the loss each record was computed with (UTF-8, at most `LOSS_BYTES` bytes);
  it changes where the model was compiled again between two fits;
- `text/`: the text of the first record's trace (`layer_names` [L], `model_summary`,
  `model_source`, `inputs_source`, `lstm_kernel`) and its RunConfig as `config_json`;
- `trace/0/`, `trace/1/`: the numeric arrays of the last record's full model trace (model
  mode's keys), in turns: record n (1-based) is written into `trace/{(n - 1) % 2}`, and
  `trace_text/0`, `trace_text/1` [bytes] the text of that record's trace (the keys of `text/`)
  as UTF-8 JSON: the loss in its config and summary is that record's;
- `records`: how many records are complete; `writing`: the record being written (equal to
  `records` between records); `finished`: 1 once the writer closed the file.

A record is written in this order, each dataset flushed before the next is touched: its rows,
then `writing` = n, its trace into the free slot, then `records` = n. A reader takes `records`
(n) first, then n rows and the slot of record n, then reads `writing` again: more than n + 1
means record n + 2 may have been overwriting that slot meanwhile, and it reads again. So a
half-written record is never returned. A file written before `loss_name` and `trace_text`
existed (same format version) reads as it did: one loss, the first record's text.

A write that fails (a full disk, a quota, an I/O error) ends the recording: the file keeps the
records completed before it (marked finished, when that still fits in place), or is not
created when the first record failed; the writer then takes no more records. HDF5 is never
asked to write to the failing file again (`_close_failed`): it cannot close a file it cannot
write, and what it leaves then crashes or hangs the process later.

One writer per file in a process: a second writer that opens a file another holds (two
callbacks given one path) takes it over, and the first takes no more records. Files still open
when the process ends (a fit interrupted by Ctrl-C) are closed as finished.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import struct
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np

from lstmviz.core import schema
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import ConfigError, LstmvizError, TraceError
from lstmviz.io import files
from lstmviz.io.atomic import atomic_path
from lstmviz.io.recording_hdf5 import WRITE_ERRORS, access, divert, open_file
from lstmviz.io.recording_rows import ANCHOR_KEYS, LOSS_BYTES, LOSS_NAMES, SERIES, anchor_fill
from lstmviz.io.recording_rows import NORM_KEYS as NORM_KEYS  # re-exported, as before
from lstmviz.io.recording_rows import record_rows as record_rows  # re-exported, as before
from lstmviz.io.trace import GradientTrace

FORMAT = "lstmviz-recording"
FORMAT_VERSION = 1
TEXT_KEYS = ("layer_names", "model_summary", "model_source", "inputs_source")
NAME_DTYPE = h5py.string_dtype("utf-8", LOSS_BYTES)
ROWS = (*SERIES, LOSS_NAMES)  # the datasets every record adds a row to (and ANCHOR_KEYS)
READ_ATTEMPTS = 50  # reads of a record the writer overwrote meanwhile, before giving up
RETRY_SECONDS = 0.002  # the pause before reading again, so a starved reader gets a turn
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
SWMR_WRITING = 0b100  # the superblock's flag: a writer holds (or held, if killed) it in SWMR


class RecordingError(LstmvizError):
    """A recording cannot be read or written. The message starts with the file (in the CLI,
    with its flag: "--record run.lvz: …")."""


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


class RecordingWriter:
    """Appends records to one `.lvz`. The file appears with the first record (written under a
    temporary name, then renamed: no reader sees a file without one); `close` marks it
    finished, and a later `append` reopens it and goes on (another `fit` of the same model).
    A failed write raises a RecordingError saying why and what the file keeps, and ends the
    recording (see the module's docstring)."""

    def __init__(self, path: str | os.PathLike, every: int):
        self.path = Path(path)  # as given, for messages
        # where it is written: a relative path is taken from the folder current now (a
        # notebook's %cd between the callback's cell and fit must not move the file)
        self._target = self.path.absolute()
        self.every = int(every)
        self.records = 0
        self._file: h5py.File | None = None
        self._ended: str | None = None  # why no record is taken any more (a failed write, …)
        self._pid = os.getpid()  # the process whose file it is (a fork's copy leaves it alone)

    @property
    def ended(self) -> str | None:
        """Why the writer takes no more records (a failed write, another writer took the file
        over), or None while it takes them."""
        return self._ended

    def append(self, rows: Mapping[str, np.ndarray], trace: GradientTrace) -> None:
        """Add one record: its `rows` (`record_rows`) and its full model trace."""
        if self._ended is not None:
            raise RecordingError(f"{self.path}: takes no more records {self._ended}")
        try:
            if self._file is None and self.records == 0:
                self._create(rows, trace)
                return
            if self._file is None:
                self._reopen()
            self._write(rows, trace)
        except RecordingError:
            raise
        except WRITE_ERRORS as exc:
            raise self._failed(exc) from None

    def close(self) -> None:
        """Mark the recording finished and close it (nothing happens when it is not open).
        Everything is flushed first, so that a write that fails does so here, where the file
        can still be closed safely, and not inside HDF5's close."""
        if self._file is None:
            return
        try:
            _set(self._file["finished"], 1)
            self._file.flush()
        except WRITE_ERRORS as exc:
            raise self._failed(exc) from None
        f, self._file = self._file, None
        f.close()

    def _failed(self, exc: BaseException) -> RecordingError:
        """After a write failed: close the file without writing to it again, and the error to
        raise, saying why and what the file keeps."""
        reason = _reason(exc)
        self._ended = f"after a failed write ({reason})"
        if self._file is not None:
            f, self._file = self._file, None
            _close_failed(f, finish=True)
        return RecordingError(f"{self.path}: cannot write the recording ({reason}); "
                              f"{self._kept()}")  # fmt: skip

    def _claim(self) -> None:
        """Be the one writer of the file in this process: another writer that has it open
        (two callbacks given one path) closes it and takes no more records."""
        key = os.path.realpath(self._target)
        other = _OPEN.get(key)
        if other is not None and other is not self and other._file is not None:
            with contextlib.suppress(RecordingError):
                other.close()
            other._ended = ("since another writer in this process took the file over (give "
                            "each callback a file of its own)")  # fmt: skip
        _OPEN[key] = self

    def _kept(self) -> str:
        """What the file holds after a failed write, read back as a user would read it: its
        complete records, or nothing (the first record failed: no file was made). A file
        that does not read back is removed rather than left as a broken recording."""
        if self.records == 0:
            return "nothing written"
        try:
            count = len(load_recording(self._target))
        except RecordingError as exc:
            with contextlib.suppress(OSError):
                self._target.unlink()
            why = str(exc).removeprefix(f"{self._target}: ")
            return f"removed it: it does not read back ({why})"
        return f"it keeps its {count} complete record{'s' * (count != 1)}"

    def _create(self, rows: Mapping[str, np.ndarray], trace: GradientTrace) -> None:
        self._claim()
        try:
            with atomic_path(self._target, suffix=files.RECORDINGS[0]) as tmp:
                self._file = f = h5py.File(tmp, "w", libver="latest", locking=False)
                f.attrs.update(format=FORMAT, format_version=FORMAT_VERSION, every=self.every)
                for name in ("records", "writing", "finished"):
                    _flushed(f.create_dataset(name, data=np.int64(0)))
                for key in (*ROWS, *(k for k in ANCHOR_KEYS if k in rows)):
                    value = np.asarray(rows[key])
                    shape = value.shape
                    dtype = NAME_DTYPE if key == LOSS_NAMES else value.dtype
                    f.create_dataset(key, (0, *shape), dtype, maxshape=(None, *shape),
                                     chunks=(_chunk_rows(value), *shape))  # fmt: skip
                text = f.create_group("text")
                _flushed(text.create_dataset("config_json", data=trace.config.to_json()))
                for key, value in trace.arrays.items():
                    if np.asarray(value).dtype.kind == "U":
                        value = np.asarray(value, dtype=h5py.string_dtype())
                        _flushed(text.create_dataset(key, data=value))
                # Written before SWMR starts, so that their space is allocated: a dataset
                # first written under SWMR may lie beyond the end of file a reader sees.
                for slot in ("0", "1"):
                    group = f.create_group(f"trace/{slot}")
                    for key, value in _numeric(trace).items():
                        if schema.role(key, "model") == schema.STEPS:  # its length varies
                            _flushed(group.create_dataset(key, data=value, maxshape=(None,),
                                                          chunks=(1024,)))  # fmt: skip
                        else:
                            _flushed(group.create_dataset(key, data=value))
                    _flushed(f.create_dataset(f"trace_text/{slot}", data=_text_bytes(trace),
                                              maxshape=(None,), chunks=(1024,)))  # fmt: skip
                f.swmr_mode = True
                self._write(rows, trace)
        except BaseException:
            if self._file is not None:  # the temporary file is gone: no record was made
                _close_failed(self._file, finish=False)
            self._file, self.records = None, 0
            raise

    def _reopen(self) -> None:
        # In SWMR mode from the start: a file open for writing without it is refused to
        # readers until it is closed, which a failed write may never let happen.
        if not self._target.is_file():
            raise RecordingError(f"{self.path}: no such recording any more (deleted or moved "
                                 "since its last record): cannot append to it")  # fmt: skip
        self._claim()
        flags = h5py.h5f.ACC_RDWR | h5py.h5f.ACC_SWMR_WRITE
        try:
            f = h5py.File(h5py.h5f.open(os.fsencode(self._target), flags, fapl=access()))
        except WRITE_ERRORS as exc:  # nothing written yet: the file is left as it is
            raise RecordingError(f"{self.path}: cannot open it to append a record "
                                 f"({_reason(exc)})") from None  # fmt: skip
        try:
            if f.attrs.get("format") != FORMAT:
                raise RecordingError(f"{self.path}: not an lstmviz recording any more")
        except BaseException:
            _close_failed(f, finish=False)  # nothing of ours to write into it
            raise
        self._file = f  # from here on a failed write is the recording's (`_failed`)
        self.records = int(f["records"][()])
        _set(f["finished"], 0)

    def _write(self, rows: Mapping[str, np.ndarray], trace: GradientTrace) -> None:
        f, n = self._file, self.records
        for key in (*ROWS, *(k for k in ANCHOR_KEYS if k in f)):
            dataset = f[key]
            dataset.resize(n + 1, axis=0)
            if key in ANCHOR_KEYS:  # a record without them (or of another A): the fill rows
                value = rows.get(key)
                if value is None or np.shape(value) != dataset.shape[1:]:
                    value = anchor_fill(key, dataset.shape[1:])
            else:
                value = rows[key]
            dataset[n] = value
            dataset.flush()
        _set(f["writing"], n + 1)
        slot = f[f"trace/{n % 2}"]
        for key, value in _numeric(trace).items():
            dataset = slot[key]
            if dataset.maxshape != dataset.shape:
                dataset.resize(value.shape)
            if value.size:
                dataset[...] = value
            dataset.flush()
        text = f[f"trace_text/{n % 2}"]
        encoded = _text_bytes(trace)
        text.resize(encoded.shape)
        text[...] = encoded
        text.flush()
        _set(f["records"], n + 1)
        f.flush()  # the file's own metadata too: the records of a killed writer stay readable
        self.records = n + 1


# The writers by the real path of their file (`RecordingWriter._claim`).
_OPEN: weakref.WeakValueDictionary[str, RecordingWriter] = weakref.WeakValueDictionary()


@atexit.register
def _close_open_writers() -> None:
    """Close, as finished, the files this process still holds open at its end: a fit
    interrupted by Ctrl-C never told its callback it ended. (Registered after h5py's import,
    so it runs before h5py's own clean-up.)"""
    for writer in list(_OPEN.values()):
        if writer._pid == os.getpid():
            with contextlib.suppress(Exception):
                writer.close()


def _close_failed(f: h5py.File, finish: bool) -> None:
    """Close `f` after a write to it failed, leaving on disk what was written before (with
    `finish`, `finished` = 1 too, when that write still succeeds: it is in place).

    To close a file HDF5 writes what it still holds; when that fails as well (a full disk
    stays full), HDF5 has already freed part of the file's state, and the next attempt to
    close it, h5py collecting an object or HDF5 at interpreter exit, uses the freed memory: a
    segfault, or a hang. So HDF5 is made to write to a private copy of the file (`divert`)
    before anything of the file is closed, the object that was being written included."""
    finished = None
    if finish:
        with contextlib.suppress(*WRITE_ERRORS):
            finished = f["finished"]
            _set(finished, 1)
    divert(f)
    del finished
    with contextlib.suppress(*WRITE_ERRORS):  # diverted, HDF5's writes cannot fail any more
        f.close()


def _reason(exc: BaseException) -> str:
    """Why a write failed, in the system's words where there are some: h5py quotes them in
    a long report of HDF5's ("… errno = 28, error message = 'No space left on device', …")."""
    quoted = re.search(r"error message = '([^']+)'", str(exc))
    if quoted:
        return quoted.group(1)
    if isinstance(exc, OSError) and exc.strerror:
        return " ".join(str(exc.strerror).split())[:300]
    return _one_line(exc)


def _set(dataset: h5py.Dataset, value: int) -> None:
    dataset[()] = value
    dataset.flush()


def _flushed(dataset: h5py.Dataset) -> None:
    """Write what HDF5 holds of a dataset now, before it is let go: closing a dataset writes
    what is left, and a close that fails leaves HDF5 broken (see `_close_failed`), while a
    flush that fails only raises."""
    dataset.flush()


def _numeric(trace: GradientTrace) -> dict[str, np.ndarray]:
    """The trace's arrays that are not text (text is written once per file)."""
    arrays = {key: np.asarray(value) for key, value in trace.arrays.items()}
    return {key: value for key, value in arrays.items() if value.dtype.kind != "U"}


def _text_bytes(trace: GradientTrace) -> np.ndarray:
    """The trace's text (`config_json` and its text keys) as UTF-8 JSON, [bytes] uint8."""
    text = {key: np.asarray(value).tolist() for key, value in trace.arrays.items()
            if np.asarray(value).dtype.kind == "U"}  # fmt: skip
    text["config_json"] = trace.config.to_json()
    return np.frombuffer(json.dumps(text).encode(), np.uint8)


def _chunk_rows(value: np.ndarray) -> int:
    """Rows per chunk of a growing dataset: about 64 KiB."""
    return max(1, min(1024, 65536 // max(1, value.nbytes)))


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def load_recording(path: str | os.PathLike, trace: bool = True) -> Recording:
    """Read a recording, also while `fit` is writing it: every complete record, never half of
    one. `trace=False` leaves out the last record's full model trace (the rows alone are
    small). Raises RecordingError naming the file when it is missing, not a recording,
    truncated or corrupt, or written by a newer lstmviz."""
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
            f"{path}: not a readable recording (truncated or corrupt: {_one_line(exc)})"
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
        raise TraceError(f"config_json: {_one_line(exc)}") from None


def check_replaceable(path: Path, flag: str) -> None:
    """A ConfigError naming `flag` when a file at `path` is not a recording: a new recording
    replaces an earlier one (a run recorded again), never a file that only has the name. An
    empty file, holding nothing, is replaced too."""
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return
    try:
        load_recording(path, trace=False)
        return
    except RecordingError as exc:
        reason = str(exc).removeprefix(f"{path}: ")
    if not path.is_file():
        reason = "it is not a regular file"
    elif files.content(path) != "hdf5":
        reason = files.wrong_content(path) or "it is not an HDF5 file"
    elif reason.startswith(("not a recording", "not an lstmviz recording")):
        reason = "it is an HDF5 file of another kind (a Keras .h5?)"
    raise ConfigError(flag, f"{path}: is there already and is not a recording lstmviz may "
                      f"replace ({reason}); move it away or give another path")  # fmt: skip
