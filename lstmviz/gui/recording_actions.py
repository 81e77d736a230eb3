"""The window's recording view: File → Open recording…, a drop or `lstmviz gui run.lvz` shows a
recording of a training run (`.lvz`) in its own panels above the model panels of its last
record, with a bar to scrub through the records and choose the heatmap's timesteps
(gui/recording_bar.py), and follows the file while `model.fit` writes it (gui/recording_follow.py:
read in a thread, never in the window's). A mixin of `MainWindow`."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Slot

from lstmviz import files
from lstmviz.errors import LstmvizError
from lstmviz.gui.dialogs import ask_to_open
from lstmviz.gui.recording_bar import RecordingBar
from lstmviz.gui.recording_follow import RecordingFollower
from lstmviz.recording import Recording, load_recording
from lstmviz.render.records import TimeRange, panel_arrays, record_text


class RecordingActions:
    """Needs the window's `area`, `message`, `params`, `show_trace`, `show_error`, `_add_recent`
    and a central widget with a box layout (the bar goes on top of it)."""

    recording: Recording | None = None  # the recording shown (rows, and the last trace)
    follower: RecordingFollower | None = None
    recording_bar: RecordingBar | None = None  # made on first use
    _dock_set = False  # the dock shows the recording's first trace's parameters

    def open_recording_dialog(self) -> None:
        wanted = f"Recordings of a training run ({files.pattern(files.RECORDINGS)})"
        ask_to_open(self, "Open recording", wanted, self.open_recording)

    def open_recording(self, path: str, keep_dock: bool = False) -> bool:
        """Show the recording in `path` (ending any run, as an opened trace does), and follow
        it while it grows; the dock takes the parameters of its trace unless `keep_dock` (it is
        shown again after a run that kept nothing). A file that is no readable recording: a
        dialog naming it and the problem, and nothing changes."""
        try:
            recording = load_recording(path)  # h5py: no TensorFlow
        except LstmvizError as exc:
            self.show_error("Cannot open recording", str(exc))
            return False
        self.close_recording()
        bar = self._recording_bar()
        bar.reset()
        self.area.set_record_view(None, None)
        self.follower = RecordingFollower(path, recording, self)
        self.follower.read.connect(self._on_recording_read)
        self.follower.waiting.connect(self._on_recording_waiting)
        self.follower.failed.connect(self._on_recording_failed)
        self.follower.start()
        self.recording = recording
        self._dock_set = keep_dock
        self._show_recording(recording, trace_changed=True)
        # the model and data the records were made of lived in the training process: the dock
        # names them (while it is as the recording left it), and Run says it cannot repeat them
        self.params.show_recorded(f"recording {Path(path).name}", recording.arrays)
        count = len(recording)
        what = "following it while fit writes it" if self.follower.following else "finished"
        self.message.setText(f"recording {Path(path).name}: {count} record"
                             f"{'s' * (count != 1)}, {what}")  # fmt: skip
        self._add_recent(str(Path(path).resolve()))
        return True

    def close_recording(self) -> None:
        """Stop following and hide the recording's bar and panels (the model panels of its
        last record stay until something else is shown); the dock no longer names its model
        and data."""
        if self.follower is not None:
            self.follower.stop()
            self.follower.deleteLater()
            self.follower = None
        if self.recording is not None:
            self.recording = None
            self.area.set_recording(None)
            self.recording_bar.hide()
            self.params.drop_recorded()

    def recording_view(self) -> tuple[int | None, TimeRange]:
        """The record and timestep range chosen in the bar (None, None: the last, every t)."""
        bar = self.recording_bar
        return (None, None) if self.recording is None else (bar.record(), bar.t_range())

    def set_recording_view(self, record: int | None, t_range: TimeRange) -> None:
        """Choose `record` and `t_range` as the user would in the bar (`recording_view`)."""
        if self.recording is not None:
            self.recording_bar.set_record(record)
            self.recording_bar.set_range(t_range)
            self._recording_view_changed()

    def _recording_bar(self) -> RecordingBar:
        if self.recording_bar is None:
            bar = self.recording_bar = RecordingBar()
            bar.record_chosen.connect(self._recording_view_changed)
            bar.range_chosen.connect(self._recording_view_changed)
            self.area.range_moved.connect(self._recording_range_moved)
            self.centralWidget().layout().insertWidget(0, bar)
        return self.recording_bar

    def _show_recording(self, recording: Recording, trace_changed: bool) -> None:
        """Draw `recording`: its bar and panels, and, when its last record is a new one, that
        record's trace in the model panels (as an opened trace)."""
        following = self.follower is not None and self.follower.following
        status = "following" if following else "finished" if recording.finished else "stopped"
        arrays = panel_arrays(recording)
        self.recording_bar.show_recording(arrays, str(recording.path), status)
        self.recording_bar.show()
        self.area.set_recording(arrays)
        if trace_changed and recording.last is not None and not self._dock_set:
            # as an opened trace: the dock shows what made the records, once (later records
            # leave what the user changes there alone)
            self.params.set_config(recording.last.config)
            self._dock_set = True
        if trace_changed:
            self.show_trace(recording.last, None)  # draws the recording's panels too
        else:
            self.area.draw_recording()

    @Slot(object)
    def _on_recording_read(self, recording: Recording) -> None:
        if self.recording is None:
            return
        trace_changed = recording.last is not None
        if not trace_changed:  # the same last record: its trace as read before
            recording.last = self.recording.last
        self.recording = recording
        self._show_recording(recording, trace_changed)
        count = len(recording)
        last = record_text(recording.arrays, count - 1)
        done = "finished" if recording.finished else "following"
        self.message.setText(f"recording {recording.path.name}: {count} record"
                             f"{'s' * (count != 1)}, the last at {last} ({done})")  # fmt: skip

    @Slot(str)
    def _on_recording_waiting(self, message: str) -> None:
        self.message.setText(f"recording not read ({message}); trying again")

    @Slot(str)
    def _on_recording_failed(self, message: str) -> None:
        if self.recording is None:
            return
        self.recording_bar.set_status(str(self.recording.path), "stopped")
        self.message.setText("stopped following the recording: it cannot be read")
        self.show_error("Cannot follow recording", message)

    @Slot(object)
    def _recording_view_changed(self, _=None) -> None:
        bar = self.recording_bar
        self.area.set_record_view(bar.record(), bar.t_range())

    @Slot(object)
    def _recording_range_moved(self, t_range) -> None:
        if self.recording_bar is not None:
            self.recording_bar.set_range(t_range)
            self._recording_view_changed()
