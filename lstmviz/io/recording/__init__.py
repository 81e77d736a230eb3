"""Recordings of a training run (`.lvz`): one record every N training batches, read while
written (docs/recording.md). h5py and NumPy; no TensorFlow.

    format  what the file is: its marks and datasets, RecordingError
    rows    one record's rows, taken from a model-mode trace (`record_rows`)
    writer  RecordingWriter: records appended, a failed write ending the recording
    reader  load_recording → Recording: every complete record, never half of one
    hdf5    how a `.lvz` is opened, and a file a write failed on taken out of HDF5's hands
"""

from lstmviz.io.recording.format import (
    FORMAT,
    FORMAT_VERSION,
    RecordingError,
)
from lstmviz.io.recording.reader import Recording, load_recording
from lstmviz.io.recording.rows import ANCHOR_KEYS, LOSS_NAMES, NORM_KEYS, record_rows
from lstmviz.io.recording.writer import RecordingWriter, check_replaceable

__all__ = [
    "ANCHOR_KEYS",
    "FORMAT",
    "FORMAT_VERSION",
    "LOSS_NAMES",
    "NORM_KEYS",
    "Recording",
    "RecordingError",
    "RecordingWriter",
    "check_replaceable",
    "load_recording",
    "record_rows",
]
