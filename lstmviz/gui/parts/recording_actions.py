"""The window's recording view: File → Open recording…, a drop or `lstmviz gui run.lvz` shows a
recording of a training run (`.lvz`) in its own panels above the model panels of its last record,
with a bar to scrub through the records and choose the heatmap's timesteps
(gui/widgets/recording_bar.py), and follows the file while `model.fit` writes it
(gui/threads/recording_follow.py: read in a thread, never in the window's). A part the window owns
(`MainWindow.recordings`)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QLabel, QMainWindow, QVBoxLayout

from lstmviz.analysis.records import TimeRange, panel_arrays, record_text
from lstmviz.core.errors import LstmvizError
from lstmviz.gui.dialogs.file_dialogs import ask_to_open
from lstmviz.gui.state.shown import Shown
from lstmviz.gui.threads.recording_follow import RecordingFollower
from lstmviz.gui.widgets.params import ParamsEditor
from lstmviz.gui.widgets.recording_bar import RecordingBar
from lstmviz.io import files
from lstmviz.io.recording import Recording, load_recording


class RecordingActions(QObject):
    """Shows a recording in `shown.recording` (its panels in the window's `area`, its bar on top
    of `central`, the window's central layout), names its model and data in the dock
    (`params`), follows its file, and keeps the record and timesteps chosen in `shown.view`.
    `window` is the dialogs' parent; its `show_trace` and `show_error` show the recording's
    last trace or what went wrong. `opened`: the path of a recording just shown (the recent
    files take it)."""

    opened = Signal(str)

    def __init__(self, window: QMainWindow, params: ParamsEditor, shown: Shown, message: QLabel,
                 central: QVBoxLayout) -> None:  # fmt: skip
        super().__init__(window)
        self.window, self.params, self.shown, self.message = window, params, shown, message
        self.central = central
        self.follower: RecordingFollower | None = None
        self.bar: RecordingBar | None = None  # made on first use
        self._dock_set = False  # the dock shows the recording's first trace's parameters

    @property
    def recording(self) -> Recording | None:
        """The recording shown (rows, and the last trace)."""
        return self.shown.recording

    def open_recording_dialog(self) -> None:
        wanted = f"Recordings of a training run ({files.pattern(files.RECORDINGS)})"
        ask_to_open(self.window, "Open recording", wanted, self.open_recording)

    def open_recording(self, path: str, keep_dock: bool = False) -> bool:
        """Show the recording in `path` (ending any run, as an opened trace does), and follow
        it while it grows; the dock takes the parameters of its trace unless `keep_dock` (it is
        shown again after a run that kept nothing). A file that is no readable recording: a
        dialog naming it and the problem, and nothing changes."""
        try:
            recording = load_recording(path)  # h5py: no TensorFlow
        except LstmvizError as exc:
            self.window.show_error("Cannot open recording", str(exc))
            return False
        self.close_recording()
        bar = self._recording_bar()
        bar.reset()
        self.window.area.set_record_view(None, None)
        self.shown.view = self.shown.view.but(record=None, t_range=None)
        self.follower = RecordingFollower(path, recording, self.window)
        self.follower.read.connect(self._on_recording_read)
        self.follower.waiting.connect(self._on_recording_waiting)
        self.follower.failed.connect(self._on_recording_failed)
        self.follower.start()
        self.shown.recording = recording
        self._dock_set = keep_dock
        self._show_recording(recording, trace_changed=True)
        # the model and data the records were made of lived in the training process: the dock
        # names them (while it is as the recording left it), and Run says it cannot repeat them
        self.params.show_recorded(f"recording {Path(path).name}", recording.arrays)
        count = len(recording)
        what = "following it while fit writes it" if self.follower.following else "finished"
        self.message.setText(f"recording {Path(path).name}: {count} record"
                             f"{'s' * (count != 1)}, {what}")  # fmt: skip
        self.opened.emit(str(Path(path).resolve()))
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
            self.shown.recording = None
            self.shown.view = self.shown.view.but(record=None, t_range=None)
            self.window.area.set_recording(None)
            self.bar.hide()
            self.params.drop_recorded()

    def recording_view(self) -> tuple[int | None, TimeRange]:
        """The record and timestep range chosen in the bar (None, None: the last, every t)."""
        bar = self.bar
        return (None, None) if self.recording is None else (bar.record(), bar.t_range())

    def set_recording_view(self, record: int | None, t_range: TimeRange) -> None:
        """Choose `record` and `t_range` as the user would in the bar (`recording_view`)."""
        if self.recording is not None:
            self.bar.set_record(record)
            self.bar.set_range(t_range)
            self._recording_view_changed()

    def _recording_bar(self) -> RecordingBar:
        if self.bar is None:
            bar = self.bar = RecordingBar()
            bar.record_chosen.connect(self._recording_view_changed)
            bar.range_chosen.connect(self._recording_view_changed)
            self.window.area.range_moved.connect(self._recording_range_moved)
            self.central.insertWidget(0, bar)
        return self.bar

    def _show_recording(self, recording: Recording, trace_changed: bool) -> None:
        """Draw `recording`: its bar and panels, and, when its last record is a new one, that
        record's trace in the model panels (as an opened trace)."""
        following = self.follower is not None and self.follower.following
        status = "following" if following else "finished" if recording.finished else "stopped"
        arrays = panel_arrays(recording)
        self.bar.show_recording(arrays, str(recording.path), status)
        self.bar.show()
        self.window.area.set_recording(arrays)
        if trace_changed and recording.last is not None and not self._dock_set:
            # as an opened trace: the dock shows what made the records, once (later records
            # leave what the user changes there alone)
            self.params.set_config(recording.last.config)
            self._dock_set = True
        if trace_changed:
            self.window.show_trace(recording.last, None)  # draws the recording's panels too
        else:
            self.window.area.draw_recording()

    @Slot(object)
    def _on_recording_read(self, recording: Recording) -> None:
        if self.recording is None:
            return
        trace_changed = recording.last is not None
        if not trace_changed:  # the same last record: its trace as read before
            recording.last = self.recording.last
        self.shown.recording = recording
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
        self.bar.set_status(str(self.recording.path), "stopped")
        self.message.setText("stopped following the recording: it cannot be read")
        self.window.show_error("Cannot follow recording", message)

    @Slot(object)
    def _recording_view_changed(self, _=None) -> None:
        bar = self.bar
        record, t_range = bar.record(), bar.t_range()
        self.shown.view = self.shown.view.but(record=record, t_range=t_range)
        self.window.area.set_record_view(record, t_range)

    @Slot(object)
    def _recording_range_moved(self, t_range) -> None:
        if self.bar is not None:
            self.bar.set_range(t_range)
            self._recording_view_changed()
