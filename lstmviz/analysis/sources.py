"""`diagnose(source)` and `compare(a, b)` (`lstmviz.diagnose`, `lstmviz.compare`; `lstmviz
diagnose` and `lstmviz compare` call them too) on what they read: GradientTraces, Recordings, or
their files (a trace .npz, a recording .lvz), or a model (or an LSTM stack's weights) run through
model mode on `inputs` (seeded random data without), in this process: the engine, and with it
TensorFlow, is imported only then.
"""

from __future__ import annotations

import os
from pathlib import Path

from lstmviz.core.errors import ConfigError, InputError, LstmvizError
from lstmviz.io import files


def open_source(source, inputs: str | os.PathLike | None = None, loss: str | None = None,
                role: str = "SOURCE"):  # fmt: skip
    """A GradientTrace or Recording as given, or read from its file; a model or weights file
    run through model mode on `inputs` (`loss` when it has none compiled). LstmvizError naming
    the file (and `role`, the argument it came from) when it cannot be read."""
    from lstmviz.io.recording import Recording, load_recording
    from lstmviz.io.trace import GradientTrace

    if isinstance(source, GradientTrace | Recording):
        return source
    if not isinstance(source, str | os.PathLike) or not str(source):
        raise InputError(f"{role}: give a trace (.npz), a recording (.lvz) or a model file, "
                         f"not {type(source).__name__}")  # fmt: skip
    path = Path(source)
    kind = files.kind(path)
    if kind in ("trace", "recording") and (inputs is not None or loss):
        flag = "--inputs" if inputs is not None else "--loss"
        raise ConfigError(flag, f"{path}: a {kind} is not run again: {flag} is read only for "
                          "a model")  # fmt: skip
    if kind == "trace":
        return GradientTrace.load(path)
    if kind == "recording":
        return load_recording(path)
    if kind in ("model", "weights"):
        return run_model(path, inputs, loss)
    raise LstmvizError(f"{path}: {role} must be a trace (.npz), a recording (.lvz) or a "
                       f"model, not {files.KIND_TEXT.get(kind, kind)} (give data with "
                       "--inputs)")  # fmt: skip


def run_model(path: Path, inputs, loss: str | None):
    """The model-mode trace of the model (or stack) at `path` on `inputs` (a data file, or
    seeded random data when None): the run `lstmviz run --mode model` makes."""
    from lstmviz.core.config import RunConfig
    from lstmviz.engine.runner import run
    from lstmviz.io.trace import GradientTrace

    config = RunConfig(mode="model", model=str(path), inputs=None if inputs is None
                       else str(inputs), **({"loss": loss} if loss else {}))  # fmt: skip
    trace = None
    for item in run(config):
        if isinstance(item, GradientTrace):
            trace = item
    if trace is None:
        raise LstmvizError(f"{path}: the model run gave no trace")
    return trace


def diagnose(source, inputs=None, loss: str | None = None):
    """The diagnosis of a trace, a recording or a model file (`open_source`): a Diagnosis, or
    for a recording a RecordingDiagnosis (each record's). docs/diagnosis.md says what it holds.

    Args:
        source: a GradientTrace or a Recording, or the file of one (a trace `.npz`, a
            recording `.lvz`), or a model or LSTM weights file, run through model mode first.
        inputs: for a model file, the data it runs on (`.npz` with x and y, or an x `.npy`);
            None: seeded random data. Refused for a trace or a recording.
        loss: for a model file compiled without a loss, the Keras loss name to use.

    Raises:
        LstmvizError: a file that cannot be read or run, naming it.
    """
    return open_source(source, inputs, loss).diagnosis


def compare(a, b, inputs=None, loss: str | None = None):
    """Runs A and B compared (`lstmviz.analysis.compare.Comparison`: `.plot()`, `.to_dict()`;
    docs/diagnosis.md).

    Args:
        a, b: two traces, two recordings, or two model files (GradientTraces, Recordings, or
            their files, as `diagnose` takes them); a file's name labels its side.
        inputs: for model files, the data both run on (None: seeded random data).
        loss: for model files compiled without a loss, the Keras loss name to use.

    Raises:
        InputError: a trace compared with a recording (before B is read).
        LstmvizError: a file that cannot be read or run, naming it.
    """
    from lstmviz.analysis.compare import compare as compared

    names = tuple(Path(x).name if isinstance(x, str | os.PathLike) else label
                  for x, label in ((a, "A"), (b, "B")))  # fmt: skip
    first = open_source(a, inputs, loss, "A")
    _check_pair(first, b)
    return compared(first, open_source(b, inputs, loss, "B"), names)


def _check_pair(first, b) -> None:
    """Refuse a trace and a recording before B is read (or its model run)."""
    from lstmviz.io.recording import Recording

    if isinstance(b, str | os.PathLike) and str(b):
        kind = files.kind(b)
        other = "recording" if kind == "recording" else "trace"
        mine = "recording" if isinstance(first, Recording) else "trace"
        if other != mine:
            raise InputError(f"cannot compare a {mine} with a {other}: give two traces, two "
                             "recordings or two models")  # fmt: skip
