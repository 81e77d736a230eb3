"""The main window: the parameter dock, the panels, the summary line, menus and status bar.

A view: the run's state lives in `RunState` (gui/run_state.py), which drives the `Worker`
thread (gui/worker.py); a run's view (Stop, Pause, progress) is in gui/run_view.py, file
actions in gui/file_actions.py, a recording's view in gui/recording_actions.py, menus in
gui/menus.py.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from PySide6.QtCore import QByteArray, QEvent, QSettings, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QApplication,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from lstmviz import modes
from lstmviz.config import RunConfig
from lstmviz.errors import LstmvizError
from lstmviz.gui import qt_types
from lstmviz.gui.diagnosis_view import DiagnosisView
from lstmviz.gui.file_actions import FileActions
from lstmviz.gui.menus import ESC_ASKS_AFTER, build_menus, show_about
from lstmviz.gui.params import FieldsArea, ParamsEditor, in_dock_terms
from lstmviz.gui.recording_actions import RecordingActions
from lstmviz.gui.run_state import RunState
from lstmviz.gui.run_view import LOADING, RunView, StatusLine
from lstmviz.gui.summary import SummaryPanel
from lstmviz.gui.worker import Worker
from lstmviz.render.summary import LSTM_KERNEL_TEXT, WARNING_STYLE
from lstmviz.trace import GradientTrace

DEMO_WEIGHTS = Path(__file__).resolve().parents[2] / "resources" / "demo_lstm.keras"
NOT_LOADED = "TensorFlow: not loaded"  # the device label when the computing process failed
# What the panels need (pyqtgraph is slow to import), imported after the window's first
# paint in a thread of their own (`MainWindow.prepare_panels`).
ALL_MADE = object()  # the end of `qt_types.making`
PANEL_MODULES = ("pyqtgraph", "lstmviz.gui.panel_area", "lstmviz.render.style",
                 "lstmviz.gui.export_dialog")  # fmt: skip


def demo_config() -> RunConfig:
    """A multi-pass run that fills every panel in a few seconds on a laptop CPU. It uses the
    LSTM in `resources/demo_lstm.keras` (trained on the adding problem, so it remembers: its
    gradient does not vanish within a pass of 15 steps) with a loss on every pass's last step,
    so the full gradient through all passes clearly differs from the truncated one at the start
    of each pass. Seeded random weights (I=8, H=48) if the file is missing."""
    weights = str(DEMO_WEIGHTS) if DEMO_WEIGHTS.is_file() else None
    return RunConfig(mode="multipass", steps=15, passes=4, batch=16,
                     input_dim=2 if weights else 8, hidden=16 if weights else 48,
                     loss="last_mse", random_state=True, seed=7, weights=weights)  # fmt: skip


class MainWindow(FileActions, RecordingActions, DiagnosisView, RunView, QMainWindow):
    """`settled` fires whenever the window becomes idle with TensorFlow loaded and every
    panel drawn (after a run ends, or at start-up when nothing runs): the screenshot hook.

    The panels (`area`) come after the first paint: their modules are imported in a thread,
    then the panels are made one per event-loop turn (`prepare_panels`); whatever needs them
    before that makes them at once. `styled`: pyqtgraph takes `render.style.STYLE` first (the
    app; tests keep pyqtgraph's defaults)."""

    settled = Signal()
    imported = Signal()  # the panels' modules are imported (from the importing thread)

    def __init__(self, settings: QSettings | None = None, quiet_errors: bool = False,
                 styled: bool = False):  # fmt: skip
        super().__init__()
        self.styled = styled
        self.settings = settings or QSettings()
        self.quiet_errors = quiet_errors  # errors go to stderr instead of a dialog
        self.errors = 0
        self.device: dict | None = None
        self.requests = itertools.count(1)  # ids of verify and save requests
        self.worker = Worker()
        self.state = RunState(self.worker)
        self.dirty = False  # live arrays arrived since the last redraw
        # (trace, file name): the file the trace shown was opened from or saved to (the title)
        self.trace_file: tuple[GradientTrace, str] | None = None
        self.settle_when_drawn = False
        self.tick = QTimer(self, interval=33)  # live redraws at most ~30 times a second
        self.tick.timeout.connect(self._flush)

        self._area = None  # the PanelArea, once made
        self.hidden_panels: set[str] = set()  # turned off in the View menu
        self.importing: threading.Thread | None = None  # imports the panels' modules
        self.making_types: Iterator[None] | None = None  # `qt_types.making`, before the import
        self.imported.connect(self._make_area, Qt.QueuedConnection)
        self.summary = SummaryPanel()
        self.summary.verify_button.clicked.connect(self.verify)
        central = QWidget()
        self.central_layout = layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QWidget(), 1)  # the panels' place until they are made
        layout.addWidget(self.summary)
        self.setCentralWidget(central)
        self._build_dock()
        self.build_diagnosis_dock()
        self._build_status()
        build_menus(self)
        self.stop_action.installEventFilter(self)  # Esc: `stop_by_key`
        self.refocus = None  # the dock's widget that had the keyboard focus when a run started
        self.setAcceptDrops(True)
        self._fit_to_screen()
        self._restore()
        self._set_title()

        self.worker.ready.connect(self._on_ready)
        self.worker.failed.connect(self._on_worker_failed)
        self.worker.crashed.connect(lambda text: self.show_error("Computing process ended", text))
        self.worker.verified.connect(self._on_verified)
        self.worker.saved.connect(self._on_saved)
        self.state.started.connect(self._on_started)
        self.state.updated.connect(self._on_updated)
        self.state.finished.connect(self._on_finished)
        self.state.ended.connect(self._on_ended)
        # the engine's messages name CLI flags: the dock's names for the fields instead
        self.state.failed.connect(lambda text: self.show_error("Run failed", in_dock_terms(text)))
        self.state.changed.connect(self._sync)
        # The worker starts the computing process, which imports TensorFlow: after the window's
        # first paint (or when a run is asked for), so starting it takes nothing from the paint.
        self.worker_started = False
        self._sync()

    @property
    def trace(self) -> GradientTrace | None:
        """The trace shown (the last finished or opened one; None during a run)."""
        return self.state.trace

    def start_worker(self) -> None:
        """Start the worker thread (it starts the computing process, then serves requests);
        once."""
        if not self.worker_started:
            self.worker_started = True
            self.worker.start()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if not self.worker_started:  # in case no paint event arrives (e.g. minimised)
            QTimer.singleShot(1000, self.start_worker)
            QTimer.singleShot(1000, self.prepare_panels)

    def paintEvent(self, event) -> None:  # noqa: N802
        super().paintEvent(event)
        if not self.worker_started:  # after this paint has reached the screen
            QTimer.singleShot(0, self.start_worker)
            QTimer.singleShot(0, self.prepare_panels)

    @property
    def area(self):
        """The panels (`gui.panel_area.PanelArea`), made now if they are not yet."""
        if self._area is None:
            if self.importing is not None:
                # Their modules are being imported in the thread: wait for it. Importing them
                # here at the same time could hand this thread modules half made (Python
                # accepts that between threads) and run PySide's type set-up in two threads.
                self.importing.join()
            for name in PANEL_MODULES:
                importlib.import_module(name)
            self._make_area()
        return self._area

    def prepare_panels(self) -> None:
        """Make PySide's types in the window's idle turns (`qt_types`), then import the panels'
        modules in a thread, then make the panels in idle turns (once)."""
        if self._area is not None or self.importing is not None or self.making_types is not None:
            return
        self.making_types = qt_types.making()
        self._make_types()

    @Slot()
    def _make_types(self) -> None:
        """Some of PySide's types; the next turn more, or the import once all are made."""
        if self._area is not None:  # made meanwhile, its modules imported in this thread
            return
        if next(self.making_types, ALL_MADE) is not ALL_MADE:
            QTimer.singleShot(0, self._make_types)
            return

        def load() -> None:
            for name in PANEL_MODULES:
                importlib.import_module(name)
            with contextlib.suppress(RuntimeError):  # the window is gone
                self.imported.emit()

        self.importing = threading.Thread(target=load, name="lstmviz-panels", daemon=True)
        self.importing.start()

    @Slot()
    def _make_area(self) -> None:
        if self._area is not None:
            return
        from lstmviz.gui.panel_area import LSTM_PREPARED, PanelArea
        from lstmviz.render.layout import MODEL_PANELS

        if self.styled:
            import pyqtgraph as pg

            from lstmviz.render.style import STYLE

            pg.setConfigOptions(**STYLE)
        area = PanelArea()
        area.drawn.connect(self._drawn)
        area.created.connect(self._wire_panel)
        area.log, area.normalise = self.log_action.isChecked(), self.normalise_action.isChecked()
        area.hidden = set(self.hidden_panels)
        if isinstance(splitter := self.settings.value("panels"), QByteArray):
            area.splitter.restoreState(splitter)  # the heights the user gave the rows
        old = self.central_layout.itemAt(0).widget()
        self.central_layout.replaceWidget(old, area)
        old.deleteLater()
        self._area = area
        area.prepare(LSTM_PREPARED + (MODEL_PANELS if self.params.model_mode() else ()))

    def _prepare_model_panels(self, model: bool) -> None:
        """Model mode chosen, or a model run starting (`model`): make its panels in idle turns
        now, not all five in the turn that shows the first model trace (a stall)."""
        if model and self._area is not None:
            from lstmviz.render.layout import MODEL_PANELS

            self._area.prepare(MODEL_PANELS)

    # ---- construction ----------------------------------------------------------------------

    def _build_dock(self) -> None:
        self.params = ParamsEditor()
        self.run_button = QPushButton("Run", toolTip="Start a run with these parameters (Ctrl+R)")
        self.stop_button = QPushButton(
            "Stop", toolTip="Stop the run at its next pass, batch or step (Esc); the ones done\n"
            "can be kept as a trace"
        )  # fmt: skip
        self.pause_button = QPushButton("Pause", checkable=True)
        self.pause_button.setToolTip(
            "Hold the run after its current step, pass or batch; press again to resume (Ctrl+P)"
        )
        for button in (self.run_button, self.stop_button, self.pause_button):
            button.setAutoDefault(True)  # Enter presses it when it has the focus (as Space)
        self.run_button.clicked.connect(lambda: self.start_run())
        self.stop_button.clicked.connect(self.stop)
        self.pause_button.toggled.connect(self.set_paused)
        self.save_weights_button = QPushButton("Save trained weights…")
        self.save_weights_button.setToolTip(
            "Write a training run's final weights as Keras .weights.h5 or NumPy .npz"
        )
        self.save_weights_button.clicked.connect(self.save_weights_dialog)
        self.params.widgets["time_major"].toggled.connect(self._reload_sources)
        # the inputs file is a model's data (x, y) in model mode: read it again as the mode takes it
        self.params.widgets["mode"].currentIndexChanged.connect(self._reread_inputs)
        self.params.widgets["mode"].currentIndexChanged.connect(
            lambda: self._prepare_model_panels(self.params.model_mode()))
        browse = {"model": self.open_model_dialog, "weights": self.open_weights_dialog,
                  "targets": self.open_targets_dialog,
                  "inputs": lambda: (self.open_data_dialog if self.params.model_mode()
                                     else self.open_inputs_dialog)()}  # fmt: skip
        for name, dialog in browse.items():
            self.params.widgets[name].browse.connect(dialog)
        self.params.widgets["layer"].picked.connect(self.choose_layer)  # another layer: read it
        buttons = QHBoxLayout()
        for button in (self.run_button, self.pause_button, self.stop_button):
            buttons.addWidget(button)
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.addWidget(FieldsArea(self.params), 1)  # the buttons below stay in view
        layout.addLayout(buttons)
        layout.addWidget(self.save_weights_button)
        self.dock = QDockWidget("Parameters", self, objectName="parameters")
        self.dock.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetClosable)
        self.dock.setWidget(box)
        # no fixed minimum: the fields' own (FieldsArea), which a restored state cannot undercut
        self.addDockWidget(Qt.LeftDockWidgetArea, self.dock)

    def _build_status(self) -> None:
        self.message = StatusLine(LOADING)
        self.progress = QProgressBar(maximumWidth=220, textVisible=True)
        self.progress.hide()  # until the first run
        self.elapsed = QLabel("")
        self.device_label = QLabel("TensorFlow: loading…")
        bar = self.statusBar()
        bar.addWidget(self.message, 1)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.elapsed)
        bar.addPermanentWidget(self.device_label)

    def _fit_to_screen(self) -> None:
        """The first size: 1280×820, or less on a smaller screen (a 1366×768 laptop, or a
        large scale factor), leaving room for the title bar and the screen's panels. Offscreen
        (800×800 unless configured: no one's screen) it stays the size screenshots are made at."""
        screen = self.screen() or QApplication.primaryScreen()
        room = screen.availableGeometry() if screen is not None else None
        if QApplication.platformName() == "offscreen" or room is None or room.isEmpty():
            self.resize(1280, 820)
            return
        self.resize(min(1280, room.width() - 40), min(820, room.height() - 70))

    # ---- settings --------------------------------------------------------------------------

    def _restore(self) -> None:
        """What the last session kept; a value damaged or hand-edited into something else
        (text for a layout, a list for the parameters, a size no field takes) is skipped,
        and the window starts with its own for it."""
        s = self.settings
        for key, restore in (("geometry", self.restoreGeometry), ("state", self.restoreState)):
            if isinstance(s.value(key), QByteArray):
                restore(s.value(key))
        text = s.value("params")
        if text:
            try:
                self.params.set_config(RunConfig.from_json(str(text)))
            except (ValueError, TypeError, AttributeError, OverflowError):
                self.params.set_config(RunConfig())  # none of it half-applied
            self._reload_sources()
        self.log_action.setChecked(s.value("view/log", "true") == "true")
        self.normalise_action.setChecked(s.value("view/normalise", "false") == "true")
        self.view_changed()
        self._fill_recent()

    def _save_settings(self) -> None:
        s = self.settings
        s.setValue("geometry", self.saveGeometry())
        s.setValue("state", self.saveState())
        if self._area is not None:
            s.setValue("panels", self._area.splitter.saveState())
        s.setValue("params", self.params.config().to_json())
        s.setValue("view/log", str(self.log_action.isChecked()).lower())
        s.setValue("view/normalise", str(self.normalise_action.isChecked()).lower())
        s.sync()

    # ---- runs ------------------------------------------------------------------------------

    def start_run(self, config: RunConfig | None = None) -> bool:
        """Validate and start a run (the parameters shown, or `config`). False if refused."""
        if self.state.running:
            return False
        try:
            config = self.params.validated() if config is None else config.validate()
        except LstmvizError as exc:
            self.show_error("Invalid parameter", str(exc))
            return False
        if self.opening():  # the run's trace is the one to show
            self.trace_loader.drop()
            self.message.setText("not opened: a run started while the trace file was read")
        self.start_worker()
        self._prepare_model_panels(config.mode == "model")
        return self.state.start(config)

    def start_demo(self) -> None:
        config = demo_config()
        self.params.set_config(config)
        self._reload_sources()
        self.start_run(config)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.stop_action and event.type() == QEvent.Type.Shortcut:
            self.stop_by_key()
            return True
        return super().eventFilter(watched, event)

    def stop_by_key(self) -> None:
        """Esc: Stop, except that a run that has computed `ESC_ASKS_AFTER` seconds with
        nothing Stop could keep asks first (Enter: stop; Esc again: go on). Runs with units
        done ask anyway (`stop`)."""
        state = self.state
        if not state.running or state.finishing:
            return
        if not state.keepable() and state.elapsed() >= ESC_ASKS_AFTER:
            answer = QMessageBox.question(
                self, "Stop the run",
                f"Stop the run? Nothing of its {state.elapsed():.0f} s so far can be kept.\n\n"
                "Yes (Enter): stop it. Cancel (Esc): go on.",
                QMessageBox.Yes | QMessageBox.Cancel, QMessageBox.Yes,
            )  # fmt: skip
            if answer != QMessageBox.Yes or not state.running:  # or it ended meanwhile
                return
        self.stop()

    @Slot(object)
    def _on_ready(self, device: dict) -> None:
        self.device = device
        self.device_label.setText(
            f"{device['device']} · {LSTM_KERNEL_TEXT[device['lstm']]} · cuDNN {device['cudnn']} · "
            f"TensorFlow {device['tensorflow']}"
        )
        self.device_label.setToolTip(f"LSTM implementation: {device['lstm_detail']}")
        self._set_title()
        if self.state.running:
            self._show_message()
        else:
            if self.message.text() == LOADING:  # else it says what was opened meanwhile
                self.message.setText("ready: set parameters and press Run (Ctrl+R)")
            self._settle()

    @Slot(int, str)
    def _on_worker_failed(self, run_id: int, message: str) -> None:
        if run_id == 0:  # the worker's start
            self.message.setText("TensorFlow did not load: runs are unavailable")
            self.device_label.setText(NOT_LOADED)
            self._set_title()
            self.show_error("TensorFlow did not load", message)

    # ---- drawing ---------------------------------------------------------------------------

    def _flush(self) -> None:
        """Draw what arrived since the last tick (called ~30 times a second while running),
        once the panels are made and the last redraw's are all drawn: restarted every tick, it
        left those late in its order (training's loss) undrawn until the run ended."""
        state, area = self.state, self._area
        if state.running:
            self.elapsed.setText(f"{state.elapsed():.1f} s")
        if self.dirty and area is not None and not area.preparing and not area.busy():
            self.dirty = False
            if state.trace is None:
                area.draw(state.pending, state.config, state.rows_total, live=state.running)

    def _settle(self) -> None:
        """Emit `settled` now, or once the panels left to draw are drawn (or made), and a
        trace file being read is shown."""
        self.settle_when_drawn = self._area is None or self._area.busy() or self.opening()
        if not self.settle_when_drawn:
            self.settled.emit()

    @Slot()
    def _drawn(self) -> None:
        if self.settle_when_drawn:
            self.settle_when_drawn = False
            self.settled.emit()

    def show_trace(self, trace: GradientTrace, seconds: float | None, at_once=True) -> None:
        """Draw a finished or opened trace in every panel (an opened one ends any run); the
        first panel now, or in the next turn (not `at_once`)."""
        if self.state.trace is not trace:
            self.state.show(trace)
        self.dirty = False
        self.area.draw(trace.arrays, trace.config, None, live=False, at_once=at_once)
        self.summary.draw(trace.mode, trace.arrays, trace.config, seconds)
        self.show_diagnosis(trace)
        self.elapsed.setText(f"{seconds:.2f} s" if seconds is not None else "")
        if seconds is None:  # opened, not run: an earlier run's "done" is not about it
            self.progress.hide()
        self._set_title()
        self._sync()

    @Slot(object)
    def _wire_panel(self, panel) -> None:
        """Right-click → Export panel… of `panel` (also of the panels made later)."""
        from lstmviz.gui import export_dialog

        panel.export_action.triggered.connect(
            lambda _=False, p=panel: export_dialog.export_panel(self, p)
        )
        panel.export_action.setEnabled(self.trace is not None)

    def view_changed(self) -> None:
        view = self.log_action.isChecked(), self.normalise_action.isChecked()
        self.worker.view = view  # a finished trace's heatmap images are made for these
        if self._area is not None:  # otherwise the panels take the options when made
            self._area.set_options(*view)

    def set_panel_hidden(self, name: str, hidden: bool) -> None:
        (self.hidden_panels.add if hidden else self.hidden_panels.discard)(name)
        if self._area is None:  # the panels take it when made
            return
        state = self.state
        arrays = state.trace.arrays if state.trace is not None else state.pending
        self._area.set_hidden(name, hidden, arrays, state.config, live=state.running)

    # ---- verify ----------------------------------------------------------------------------

    def verify(self) -> None:
        if self.trace is None:
            return
        self.summary.verify_button.setEnabled(False)
        self.summary.verify_result.setText("checking by finite differences…")
        self.worker.request_verify(next(self.requests), self.trace)
        self.start_worker()

    @Slot(int, object)
    def _on_verified(self, request_id: int, result) -> None:
        if isinstance(result, str):
            text = f"<span style='color:#a60'>{result}</span>"
        else:
            mark = "✓" if result.ok else f"<span style='{WARNING_STYLE}'>✗</span>"
            text = (
                f"{mark} finite differences: worst |Δ| {result.worst_abs:.1e} "
                f"(rel. {result.worst_rel:.1e}) over {len(result.entries)} entries"
            )
        self.summary.verify_result.setText(text)
        self._sync()

    # ---- misc ------------------------------------------------------------------------------

    def show_error(self, title: str, text: str) -> None:
        self.errors += 1
        if "Traceback" in text:  # a bug, not bad input: full details on stderr
            sys.stderr.write(text + "\n")
            text = text.splitlines()[-1] + "\n\n(the traceback is on stderr)"
        if self.quiet_errors:
            sys.stderr.write(f"lstmviz: {title}: {text}\n")
        else:
            QMessageBox.critical(self, title, text)

    def about(self) -> None:
        show_about(self)

    def _add_recent(self, path: str) -> None:
        """File → Recent files takes `path`, a file just opened or saved: the trace shown
        came from it or went to it, and the title names it."""
        super()._add_recent(path)
        if self.state.trace is not None and not self.state.running:
            self.trace_file = (self.state.trace, Path(path).name)
            self._set_title()

    def shown_file(self) -> str | None:
        """The name of the file whose contents the panels show (a recording, or the trace
        opened or saved), None for a run's own trace or nothing shown."""
        if self.recording is not None:
            return self.recording.path.name
        trace, named = self.state.trace, self.trace_file
        if trace is not None and named is not None and named[0] is not trace:
            self.trace_file = named = None  # another trace replaced it: let it go (memory)
        return named[1] if trace is not None and named is not None else None

    def _set_title(self) -> None:
        """"[file — ]lstmviz[ — mode] · device · TF version": the mode of the run or trace
        shown (none while nothing is), or whether TensorFlow loads."""
        config = self.state.config
        parts = ["lstmviz" + (f" — {modes.label(config.mode)}" if config is not None else "")]
        if self.device:
            parts += [self.device["device"], f"TF {self.device['tensorflow']}"]
        elif self.device_label.text() == NOT_LOADED:
            parts.append("TensorFlow not loaded")
        else:
            parts.append(LOADING)
        name = self.shown_file()
        self.setWindowTitle(f"{name} — " * (name is not None) + " · ".join(parts))

    def _sync(self) -> None:
        """Enable what makes sense now."""
        running, finishing = self.state.running, self.state.finishing
        for widget in (self.run_button, self.run_action):
            widget.setEnabled(not running)
        for widget in (self.stop_button, self.stop_action, self.pause_button, self.pause_action):
            widget.setEnabled(running and not finishing)
        focus = QApplication.focusWidget()
        if running and focus is not None and self.dock.isAncestorOf(focus):
            self.refocus = focus  # disabled with the dock: the focus is nowhere
        self.params.setEnabled(not running)
        shown = self.trace is not None
        for action in (self.save_action, self.export_action, self.export_panel_action):
            action.setEnabled(shown)
        for panel in self._area.panels if self._area is not None else ():
            panel.export_action.setEnabled(shown)
        trained = shown and "readout_kernel" in self.trace
        for widget in (self.save_weights_button, self.save_weights_action):
            widget.setEnabled(trained and not running)
        self.verify_action.setEnabled(self.summary.set_verifiable(self.trace if shown else None))
        if not running and self.refocus is not None:  # back where the keyboard was
            if QApplication.focusWidget() is None and self.refocus.isEnabled():
                self.refocus.setFocus()
            self.refocus = None

    def shutdown(self, timeout_ms: int = 1500) -> bool:
        """Stop the run, the computing process and the worker thread; True if the thread
        ended within `timeout_ms`."""
        self.closing = True
        self.tick.stop()
        self.close_recording()
        self.state.stop_now()
        self.worker.close()
        if self.importing is not None:  # a thread importing at the interpreter's exit crashes
            self.importing.join(timeout_ms / 1000)
        return self.worker.wait(timeout_ms) and not (self.importing and self.importing.is_alive())

    def closeEvent(self, event) -> None:  # noqa: N802
        self._save_settings()
        self.shutdown()
        event.accept()
