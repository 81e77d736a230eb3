"""Writing a recording (`RecordingWriter`): records appended to one `.lvz`, the file made with
the first record (under a temporary name, then renamed: no reader sees a file without one).

A record is written in this order, each dataset flushed before the next is touched: its rows,
then `writing` = n, its trace into the free slot of two (record n into `trace/{(n - 1) % 2}`),
then `records` = n (what a reader relies on: `reader`).

A write that fails (a full disk, a quota, an I/O error) ends the recording: the file keeps the
records completed before it (marked finished, when that still fits in place), or is not
created when the first record failed; the writer then takes no more records. HDF5 is never
asked to write to the failing file again (`_close_failed`): it cannot close a file it cannot
write, and what it leaves then crashes or hangs the process later.

One writer per file in a process: a second writer that opens a file another holds (two
callbacks given one path) takes it over, and the first takes no more records. Files still open
when the process ends (a fit interrupted by Ctrl-C) are closed as finished. `check_replaceable`:
what a new recording may replace.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import weakref
from collections.abc import Mapping
from pathlib import Path

import h5py
import numpy as np

from lstmviz.core import schema
from lstmviz.core.errors import ConfigError
from lstmviz.io import files
from lstmviz.io.atomic import atomic_path
from lstmviz.io.recording.format import (
    FORMAT,
    FORMAT_VERSION,
    NAME_DTYPE,
    ROWS,
    RecordingError,
    one_line,
)
from lstmviz.io.recording.hdf5 import WRITE_ERRORS, access, divert
from lstmviz.io.recording.reader import load_recording
from lstmviz.io.recording.rows import ANCHOR_KEYS, LOSS_NAMES, anchor_fill
from lstmviz.io.trace import GradientTrace


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
    return one_line(exc)


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
