"""The window's view of a run's life: Stop (and whether to keep the units done), Pause, the
status line, the progress bar and the panels from a run's start to its end. The run itself is
`RunState`'s (gui/state/run_state.py). A part the window owns (`MainWindow.run_view`).

A run that ends without a trace (stopped, the units done discarded, failed) shows again what
the window showed before it: the same trace in the same panels, with its summary and title
(and the recording it came from, re-read, at the record and timesteps chosen in it), or the
empty panels."""

from __future__ import annotations

from PySide6.QtCore import QObject, QSignalBlocker, QSize, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QPainter
from PySide6.QtWidgets import QLabel, QMainWindow, QMessageBox, QProgressBar, QPushButton

from lstmviz.analysis.records import TimeRange
from lstmviz.analysis.report.summary import stopped_early
from lstmviz.core import modes
from lstmviz.core.config import RunConfig
from lstmviz.gui.menus import ESC_ASKS_AFTER
from lstmviz.gui.parts.recording_actions import RecordingActions
from lstmviz.gui.parts.summary import SummaryPanel
from lstmviz.gui.state.run_state import RunState, Stop
from lstmviz.io.trace import GradientTrace

LOADING = "loading TensorFlow…"  # the status line until the computing process is ready
# The summary line when a run ended with nothing kept and nothing was shown before it.
NOTHING_KEPT = "Nothing kept from the last run: press Run (Ctrl+R) or open a trace (Ctrl+O)."


class StatusLine(QLabel):
    """The status bar's message. One wider than its room is shown elided in the middle (its
    end often says what went wrong: "x.npy (not found)"), and whole in its tooltip; `text()`
    is the whole text. It never widens the window."""

    def shown_text(self) -> str:
        """The text as painted: elided to the label's width."""
        return self.fontMetrics().elidedText(self.text(), Qt.ElideMiddle,
                                             self.contentsRect().width())  # fmt: skip

    def setText(self, text: str) -> None:  # noqa: N802 (Qt's name)
        super().setText(text)
        self._tip()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._tip()

    def _tip(self) -> None:
        self.setToolTip(self.text() if self.shown_text() != self.text() else "")

    def minimumSizeHint(self) -> QSize:  # noqa: N802
        return QSize(0, super().minimumSizeHint().height())

    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.drawText(self.contentsRect(), self.alignment(), self.shown_text())
        painter.end()


class RunView(QObject):
    """Shows `state`'s run in the window's widgets handed here (the summary, the status line
    `message`, `progress`, `elapsed`, the Pause button and menu item), draws its live arrays in
    the window's panels (`tick`: at most ~30 times a second), and takes the panels from the
    recording shown (`recordings`), showing it again when the run keeps nothing. `window` is
    the dialogs' parent; its `show_trace`, `settle`, `set_title` and `sync` show the rest."""

    def __init__(self, window: QMainWindow, state: RunState, recordings: RecordingActions,
                 summary: SummaryPanel, message: StatusLine, progress: QProgressBar,
                 elapsed: QLabel, pause_button: QPushButton,
                 pause_action: QAction) -> None:  # fmt: skip
        super().__init__(window)
        self.window, self.state, self.recordings = window, state, recordings
        self.summary = summary
        self.message, self.progress, self.elapsed = message, progress, elapsed
        self.pause_button, self.pause_action = pause_button, pause_action
        self.dirty = False  # live arrays arrived since the last redraw
        self.tick = QTimer(self, interval=33)  # live redraws at most ~30 times a second
        self.tick.timeout.connect(self.flush)
        # the recording shown when the run started: its path, and the record and timestep range
        # chosen in its bar (`RecordingActions.recording_view`)
        self.recording_before: tuple[str, int | None, TimeRange] | None = None
        self.closing = False  # the window is shutting down: nothing is shown again

    def stop(self) -> None:
        """Stop the run; the window is idle at once and the computation ends within a tenth of
        a second (`Worker.cancel`). A run with passes, batches or training steps done asks
        whether to keep them as a complete trace: No (or a run with none done) shows again
        what was shown before the run; Cancel lets it go on."""
        if self.state.stop() is not Stop.ASK:
            return
        answer = self.ask_keep(self.state.done)
        if not self.state.running:  # it ended while the question was open
            return
        if answer == QMessageBox.Yes:
            self.state.keep()
        elif answer == QMessageBox.No:
            self.state.discard()
        else:
            self.state.go_on()

    def stop_by_key(self) -> None:
        """Esc: Stop, except that a run that has computed `ESC_ASKS_AFTER` seconds with
        nothing Stop could keep asks first (Enter: stop; Esc again: go on). Runs with units
        done ask anyway (`stop`)."""
        state = self.state
        if not state.running or state.finishing:
            return
        if not state.keepable() and state.elapsed() >= ESC_ASKS_AFTER:
            answer = QMessageBox.question(
                self.window, "Stop the run",
                f"Stop the run? Nothing of its {state.elapsed():.0f} s so far can be kept.\n\n"
                "Yes (Enter): stop it. Cancel (Esc): go on.",
                QMessageBox.Yes | QMessageBox.Cancel, QMessageBox.Yes,
            )  # fmt: skip
            if answer != QMessageBox.Yes or not state.running:  # or it ended meanwhile
                return
        self.stop()

    def ask_keep(self, done: int) -> QMessageBox.StandardButton:
        """Yes: keep the units done as a trace; No: discard them; Cancel: go on."""
        units = modes.plural(self.state.mode().unit)
        shown = self.state.before.trace is not None
        again = " and show the trace from before this run again" if shown else ""
        return QMessageBox.question(
            self.window,
            "Stop the run",
            f"Keep the {units} done so far (at least {done}) as a trace?\n\n"
            f"Yes: a complete trace of those {units}, as if the run had been asked for that\n"
            f"many. No: discard them{again}. Cancel: go on.",
            QMessageBox.Yes | QMessageBox.No | QMessageBox.Cancel,
            QMessageBox.Yes,
        )

    def set_paused(self, paused: bool) -> None:
        """Pause or resume the active run (at its next step, pass or batch)."""
        self._set_pause_button(paused)
        self.state.set_paused(paused)
        self.show_message()

    def _set_pause_button(self, paused: bool) -> None:
        with QSignalBlocker(self.pause_button):
            self.pause_button.setChecked(paused)
        self.pause_button.setText("Resume" if paused else "Pause")
        self.pause_action.setText("&Resume" if paused else "&Pause")

    def show_message(self) -> None:
        """The status line during a run: the mode and how far it is."""
        if self.state.running and self.state.config is not None:
            label = modes.label(self.state.config.mode)
            detail = self.state.message if self.window.device else LOADING
            self.message.setText(f"{label}: {detail}")

    def flush(self) -> None:
        """Draw what arrived since the last tick (called ~30 times a second while running),
        once the panels are made and the last redraw's are all drawn: restarted every tick, it
        left those late in its order (training's loss) undrawn until the run ended."""
        state, area = self.state, self.window.made_area
        if state.running:
            self.elapsed.setText(f"{state.elapsed():.1f} s")
        if self.dirty and area is not None and not area.preparing and not area.busy():
            self.dirty = False
            if state.trace is None:
                area.draw(state.pending, state.config, state.rows_total, live=state.running)

    @Slot(object)
    def on_started(self, config: RunConfig) -> None:
        recording = self.recordings.recording
        self.recording_before = (None if recording is None
                                 else (str(recording.path),
                                       *self.recordings.recording_view()))  # fmt: skip
        self.recordings.close_recording()  # a run takes the panels
        self.dirty = True
        self._set_pause_button(False)
        self.summary.draw(config.mode, {}, config, 0.0)
        self.progress.setRange(0, 0)
        self.progress.setFormat("")
        self.progress.show()
        self.show_message()
        self.tick.start()

    @Slot()
    def on_updated(self) -> None:
        state = self.state
        self.dirty = True
        if state.total == 1 and state.done == 0:  # one unit of work (a model): busy until done
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, max(state.total, 1))
            self.progress.setValue(state.done)
            self.progress.setFormat(f"{state.done}/{state.total}")
        self.show_message()

    @Slot(object, float)
    def on_finished(self, trace: GradientTrace, seconds: float) -> None:
        self.recording_before = None
        # QProgressBar.setValue repaints at once, with whatever else is dirty: before the
        # first panel draws, so that panel's repaint waits for the next event-loop turn
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.progress.setFormat("done")
        # the first panel in a turn of its own: drawn and painted after this turn's
        # bookkeeping, with no tick of the event loop between them, it stalled it
        self.window.show_trace(trace, seconds, at_once=False)
        what = "done"
        if stopped_early(trace.arrays):
            unit = modes.get(trace.mode).unit
            what = f"kept {int(trace['units_done'])} {modes.plural(unit, int(trace['units_done']))}"
        self._idle(f"{what}: {modes.label(trace.mode)} in {seconds:.2f} s")

    @Slot(str)
    def on_ended(self, message: str) -> None:
        if self.progress.maximum() == 0:  # busy: nothing counted
            self.progress.setRange(0, 1)
            self.progress.setValue(0)
        self.progress.setFormat(self.state.outcome.value)  # "stopped", "failed" at the count
        self._show_before()
        self._idle(message)

    def _show_before(self) -> None:
        """After a run that ended with nothing kept: what the window showed before it, again
        (an opened trace that ended the run shows itself); a recording at the record and
        timesteps chosen in it."""
        before, self.recording_before = self.recording_before, None
        state = self.state
        if not state.restored or self.closing:
            return
        self.dirty = False  # the run's partial arrays are gone
        if state.trace is None:
            self.window.area.draw({}, None, None, live=False)
            self.summary.show_text(NOTHING_KEPT)
            self.elapsed.clear()
            self.window.set_title()
            self.window.sync()
        elif before is not None and self.recordings.open_recording(before[0], keep_dock=True):
            self.recordings.set_recording_view(*before[1:])
        else:  # in a turn after the click's, which lays the panels out again
            self.window.show_trace(state.trace, state.seconds, at_once=False)

    def _idle(self, message: str) -> None:
        self._set_pause_button(False)
        self.flush()
        self.tick.stop()
        self.message.setText(message)
        if self.progress.maximum() == 0:
            self.progress.setRange(0, 1)
        self.window.sync()
        if self.window.device is not None:
            self.window.settle()
