"""What lstmviz computes of a training run, written for TensorBoard (docs/recording.md,
"TensorBoard"): per record, each direction's diagnosis numbers as scalars and its panels as
images, at the record's training step.

Tags:
- scalars `lstmviz/{direction}/reach`, `…/steps_per_decade`, `…/decay_per_step` (of
  ‖dL/dh_t‖, as `lstmviz diagnose` computes them from the record's norms) and, for a direction
  with a cell state, `…/c_reach`, `…/c_steps_per_decade`, `…/c_decay_per_step` (of ‖dL/dc_t‖);
  `lstmviz/loss` (on the recorded data) and `lstmviz/train_loss` (what training reported); a
  value the diagnosis leaves undefined (the reach of a direction the loss enters at every step
  when the record has no error of one step to follow, as records written before model mode
  kept it; the decay of one never reached) is written as NaN, never left out. Where the record
  has the error of one step (`anchor_norm_h_by_layer`), such a direction's values are that
  error's, as `lstmviz diagnose` gives them;
- images `lstmviz/panels/layers` (‖dL/dh_t‖ of each direction over t, log axis) and
  `lstmviz/panels/layer_map` (layers × timesteps heatmap), PNG, one per record.

The raw per-step norms stay in the `.lvz`. The event files are written with TensorBoard's own record
writer and protos (`tensorboard` package), synchronously and flushed at each record, so TensorBoard
shows a record as it comes; TensorBoard's EventFileWriter is not used because it imports TensorFlow
(seconds, and a second framework in a PyTorch run). No Qt: the images are drawn with NumPy
(`analysis.images.panel_images`), so this runs in a process without a display and on any thread.

    writer = TensorBoardWriter("runs/a", "tensorboard")  # checks the folder, writes nothing
    writer.add_rows(record_rows(trace, step, epoch), trace)  # one record; or:
    writer.add_file("run.lvz")                             # every record of a file
    writer.close()
"""

from __future__ import annotations

import contextlib
import itertools
import os
import socket
import tempfile
import time
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from lstmviz.analysis.diagnosis import Diagnosis, diagnose_directions
from lstmviz.analysis.directions import Direction, record_directions, trace_directions
from lstmviz.analysis.images.panel_images import layer_map_image, layers_image
from lstmviz.analysis.images.raster import png
from lstmviz.core.errors import ConfigError, LstmvizError
from lstmviz.io import files
from lstmviz.io.recording import LOSS_NAMES, Recording, load_recording
from lstmviz.io.trace import GradientTrace

PANELS = ("layers", "layer_map")
DECAY = ("reach", "steps_per_decade", "decay_per_step")
_FILE_NUMBER = itertools.count()  # keeps two writers' file names apart within one second


class TensorBoardError(LstmvizError):
    """An event file cannot be written (the disk is full, the folder went away)."""


def scalars(diagnosis: Diagnosis, loss: float, train_loss: float) -> dict[str, float]:
    """{tag: value} of one record: each direction's decay numbers (NaN where undefined) and the
    losses (see the module's docstring)."""
    out = {"lstmviz/loss": _float(loss), "lstmviz/train_loss": _float(train_loss)}
    for d in diagnosis.layers:
        for prefix, decay in (("", d.h), ("c_", d.c)):
            if decay is not None:
                out |= {f"lstmviz/{d.name}/{prefix}{key}": _float(getattr(decay, key))
                        for key in DECAY}  # fmt: skip
    return out


def images(directions: list[Direction], step: int | None) -> dict[str, np.ndarray]:
    """{tag: RGB [h, w, 3] uint8} of one record's panels."""
    names = [d.name for d in directions]
    curves = [d.norm_h for d in directions]
    at = "" if step is None else f", step {step}"
    return {"lstmviz/panels/layers": layers_image(names, curves, f"|dL/dh_t| by direction{at}"),
            "lstmviz/panels/layer_map": layer_map_image(
                names, curves, f"directions x timesteps, |dL/dh_t|{at}")}  # fmt: skip


def _float(value) -> float:
    return float("nan") if value is None else float(value)


class TensorBoardWriter:
    """Writes lstmviz's scalars and images to an event file in `logdir` (made when missing).
    `flag` names the argument in messages ("tensorboard" → the CLI's `--tensorboard`; a
    callback passes "GradientFlowCallback tensorboard"). A folder that cannot be made or
    written, a remote one (gs://, s3://), or TensorBoard not installed: ConfigError, here,
    before anything is written. The event file appears with the first record; `close` closes
    it, and a later record opens another in the same folder (TensorBoard reads them as one run).
    """

    def __init__(self, logdir: str | os.PathLike, flag: str = "tensorboard"):
        self.flag = flag
        text = os.fspath(logdir)
        if not text.strip():
            raise ConfigError(flag, "empty folder name")
        if "://" in text:
            raise ConfigError(flag, f"{text}: lstmviz writes TensorBoard logs to a local folder "
                              "only; give one (and copy it to where TensorBoard reads)")
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2
            from tensorboard.summary.writer.record_writer import RecordWriter
        except ImportError:
            raise ConfigError(flag, "needs the tensorboard package: pip install tensorboard "
                              "(or lstmviz[tensorboard])") from None  # fmt: skip
        self._protos, self._record_writer = (event_pb2, summary_pb2), RecordWriter
        self.logdir = Path(text).absolute()
        _check_folder(self.logdir, text, flag)
        self.path: Path | None = None  # the event file being written
        self._file = None
        self.ended: str | None = None  # why a training callback's writer writes no more

    def add_rows(self, rows: Mapping[str, np.ndarray], trace: GradientTrace) -> None:
        """One record: its rows (`io.recording.record_rows`) and its model trace (for each
        direction's cell, length and hand-over, as a recording's diagnosis reads them)."""
        # every row the record has (the .lvz's rows), as a recording of one record
        arrays = {key: np.asarray(value)[None] for key, value in rows.items()
                  if key != LOSS_NAMES}  # fmt: skip
        arrays["layer_names"] = np.asarray(trace.arrays["layer_names"])
        self.add_recording(Recording(Path(""), arrays, trace, False))

    def add_recording(self, recording: Recording) -> None:
        """Every record of a recording, each at its training step."""
        for s in range(len(recording)):
            directions = record_directions(recording, s)
            step = int(recording.arrays["step"][s])
            values = scalars(diagnose_directions(directions), recording.arrays["loss"][s],
                             recording.arrays["train_loss"][s])  # fmt: skip
            self._write(step, values, images(directions, step))

    def add_trace(self, trace: GradientTrace, step: int = 0) -> None:
        """A trace (any mode) as one record at `step`: its diagnosis from its norm curves and
        its loss (NaN when it has none)."""
        directions = trace_directions(trace, full=False)
        loss = trace.arrays.get("loss")
        loss = float(np.ravel(loss)[-1]) if loss is not None and np.size(loss) else np.nan
        values = scalars(diagnose_directions(directions), loss, np.nan)
        self._write(step, values, images(directions, None))

    def add_file(self, path: str | os.PathLike) -> Path:
        """Every record of a recording (`.lvz`), or a trace (`.npz`) as one record at step 0;
        the event file written."""
        if files.suffix_of(path, files.RECORDINGS):
            self.add_recording(load_recording(path))
        else:
            self.add_trace(GradientTrace.load(path))
        return self.path

    def record(self, rows: Mapping[str, np.ndarray], trace: GradientTrace, where: str) -> None:
        """`add_rows` for a training callback: a write that fails is said once, in a warning
        from `where`, and the writer then writes no more; training goes on."""
        if self.ended is not None:
            return
        try:
            self.add_rows(rows, trace)
        except TensorBoardError as exc:
            self.ended = str(exc)
            warnings.warn(f"{where}: stopped writing TensorBoard logs: {exc}; training goes on "
                          "(the .lvz has every record)", stacklevel=3)  # fmt: skip

    def close(self) -> None:
        """Close the event file (nothing happens when none is open)."""
        f, self._file = self._file, None
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()

    def _open(self):
        """A new event file, its first event the format's version (as TensorBoard's writer)."""
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_FILE_NUMBER)}.lstmviz")  # fmt: skip
        try:
            self.logdir.mkdir(parents=True, exist_ok=True)
            handle = open(self.logdir / name, "xb")  # noqa: SIM115 (kept open between records)
        except OSError as exc:
            raise TensorBoardError(f"{self.logdir}: cannot write an event file there "
                                   f"({exc.strerror or exc})") from None  # fmt: skip
        self._file, self.path = self._record_writer(handle), self.logdir / name
        event_pb2 = self._protos[0]
        self._send(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))

    def _write(self, step: int, values: dict[str, float], pictures: dict[str, np.ndarray]):
        event_pb2, summary_pb2 = self._protos
        summary = summary_pb2.Summary()
        for tag, value in values.items():
            summary.value.add(tag=tag, simple_value=value)
        for tag, pixels in pictures.items():
            image = summary_pb2.Summary.Image(height=pixels.shape[0], width=pixels.shape[1],
                                              colorspace=3, encoded_image_string=png(pixels))
            summary.value.add(tag=tag, image=image)
        if self._file is None:
            self._open()
        self._send(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))

    def _send(self, event) -> None:
        try:
            self._file.write(event.SerializeToString())
            self._file.flush()
        except OSError as exc:
            self.close()
            raise TensorBoardError(f"{self.path}: cannot write ({exc.strerror or exc})") from None


def _check_folder(folder: Path, given: str, flag: str) -> None:
    """Make `folder` when missing and check that a file can be made in it: a ConfigError naming
    `flag` otherwise (a file in the way, no permission, a read-only disk)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(flag, f"{given}: is a file, not a folder") from None
    except OSError as exc:
        raise ConfigError(flag, f"{given}: cannot make the folder "
                          f"({exc.strerror or exc})") from None  # fmt: skip
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise ConfigError(flag, f"{given}: cannot write in the folder "
                          f"({exc.strerror or exc})") from None  # fmt: skip
