"""HDF5 beneath the recordings (`lstmviz.io.recording`): how a `.lvz` is opened — HDF5's latest
format, never locked, a SWMR reader's retries bounded — and how a file a write failed on is
taken out of HDF5's hands (`divert`). h5py only; no TensorFlow."""

from __future__ import annotations

import ctypes
import functools
import os
import tempfile
from pathlib import Path

import h5py

# What h5py raises when HDF5 cannot write (RuntimeError, OSError) or finds the file changed.
WRITE_ERRORS = (OSError, RuntimeError, ValueError, KeyError)
# A SWMR reader reads metadata whose checksum fails again, sleeping 1, 2, 4, … ns in between:
# 25 attempts wait 34 ms at most, while HDF5's 100 would wait for ever on a damaged file.
METADATA_READ_ATTEMPTS = 25
COPY_BYTES = 1 << 24  # a failed file is copied this much at a time (`divert`)


def divert(f: h5py.File) -> bool:
    """Point the descriptor HDF5 writes `f` through at a private copy of the file, so that
    HDF5's further writes land there and the file itself stays as it is. False where that
    cannot be done (a driver that has no descriptor)."""
    try:
        fd = f.id.get_vfd_handle()
        size = os.fstat(fd).st_size
        scratch = _scratch_file()
    except (*WRITE_ERRORS, TypeError, AttributeError):
        return False
    try:
        _copy(fd, scratch, size)
        os.dup2(scratch, fd, inheritable=False)
    except OSError:
        return False
    finally:
        os.close(scratch)
    return True


def _scratch_file() -> int:
    """A descriptor of a new empty file of our own: in memory where the system offers that
    (the disk may be the full one), else a temporary file."""
    if hasattr(os, "memfd_create"):
        return os.memfd_create("lstmviz-recording", os.MFD_CLOEXEC)
    with tempfile.TemporaryFile() as handle:
        return os.dup(handle.fileno())


def _copy(source: int, target: int, size: int) -> None:
    """Copy the first `size` bytes of `source` to `target`: HDF5 may read the file as it
    closes it."""
    offset = 0
    while offset < size:
        chunk = os.pread(source, min(COPY_BYTES, size - offset), offset)
        if not chunk:
            return
        offset += os.pwrite(target, chunk, offset)


def open_file(path: Path, swmr: bool) -> h5py.File:
    """The file for reading (as a SWMR reader when `swmr`), never locked."""
    if not swmr:
        return h5py.File(path, "r", libver="latest", locking=False)
    fapl = access()
    set_attempts = _hdf5_function("H5Pset_metadata_read_attempts")
    if set_attempts is not None:
        set_attempts(fapl.id, METADATA_READ_ATTEMPTS)
    flags = h5py.h5f.ACC_RDONLY | h5py.h5f.ACC_SWMR_READ
    return h5py.File(h5py.h5f.open(os.fsencode(path), flags, fapl=fapl))


def access() -> h5py.h5p.PropFAID:
    """File access as a SWMR writer or reader opens the file: HDF5's latest format (SWMR
    needs it), never locked (as h5py.File(…, locking=False))."""
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_LATEST, h5py.h5f.LIBVER_LATEST)
    fapl.set_file_locking(False, False)
    return fapl


@functools.cache
def _hdf5_function(name: str):
    """A function of the HDF5 library h5py has loaded (h5py does not wrap every one), or None
    where it cannot be found (outside Linux: `/proc/self/maps` lists the loaded libraries)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/libhdf5" in line}
    except OSError:
        return None
    for path in sorted(paths):
        if "libhdf5_hl" in path or ".so" not in path:
            continue
        function = getattr(ctypes.CDLL(path), name, None)
        if function is not None:
            function.argtypes, function.restype = [ctypes.c_int64, ctypes.c_uint], ctypes.c_int
            return function
    return None
