"""The main window: the parameter dock, the panels, the summary line, menus and status bar.

A view that holds its parts, each handed what it needs when made: what is shown lives in `Shown`
(gui/state/shown.py); the run's state in `RunState` (gui/state/run_state.py), which drives the
`Worker` thread (gui/threads/worker.py); `files` (gui/parts/file_actions.py) opens and saves files,
`recordings` (gui/parts/recording_actions.py) shows a recording, `run_view` (gui/parts/run_view.py)
a run's life (Stop, Pause, progress, live redraws), `diagnosis` (gui/parts/diagnosis_view.py) the
Diagnosis dock and Compare with…. The window wires its menus (gui/menus.py) and signals to them.
"""

from __future__ import annotations

import contextlib
import importlib
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

from lstmviz.analysis.report.summary import LSTM_KERNEL_TEXT
from lstmviz.core import modes
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import LstmvizError
from lstmviz.gui import qt_types
from lstmviz.gui.menus import build_menus, show_about
from lstmviz.gui.parts.diagnosis_view import DiagnosisView
from lstmviz.gui.parts.file_actions import FileActions
from lstmviz.gui.parts.recording_actions import RecordingActions
from lstmviz.gui.parts.run_view import LOADING, RunView, StatusLine
from lstmviz.gui.parts.summary import SummaryPanel, Verifier
from lstmviz.gui.state.run_state import RunState
from lstmviz.gui.state.shown import Shown
from lstmviz.gui.threads.worker import Worker
from lstmviz.gui.widgets.params import FieldsArea, ParamsEditor, in_dock_terms
from lstmviz.io.recording import Recording
from lstmviz.io.trace import GradientTrace

DEMO_WEIGHTS = Path(__file__).resolve().parents[2] / "resources" / "demo_lstm.keras"
NOT_LOADED = "TensorFlow: not loaded"  # the device label when the computing process failed
# What the panels need (pyqtgraph is slow to import), imported after the window's first
# paint in a thread of their own (`MainWindow.prepare_panels`).
ALL_MADE = object()  # the end of `qt_types.making`
PANEL_MODULES = ("pyqtgraph", "lstmviz.gui.widgets.panel_area", "lstmviz.plots.style",
                 "lstmviz.gui.dialogs.export_dialog")  # fmt: skip


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


class MainWindow(QMainWindow):
    """`settled` fires whenever the window becomes idle with TensorFlow loaded and every
    panel drawn (after a run ends, or at start-up when nothing runs): the screenshot hook.

    What it holds: `shown` (what is shown), `state` (the run) and `worker`; its parts `files`,
    `recordings`, `run_view`, `diagnosis` and `verifier`; the dock (`params`), the panels
    (`area`), the summary and the status bar. It shows a trace (`show_trace`), keeps the
    title and the enabled controls in step (`set_title`, `sync`) and reports errors
    (`show_error`) for its parts.

    The panels (`area`) come after the first paint: their modules are imported in a thread,
    then the panels are made one per event-loop turn (`prepare_panels`); whatever needs them
    before that makes them at once. `styled`: pyqtgraph takes `plots.style.STYLE` first (the
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
        self.worker = Worker()
        self.shown = Shown()
        self.state = RunState(self.worker, self.shown)
        self.settle_when_drawn = False

        self._area = None  # the PanelArea, once made
        self.hidden_panels: set[str] = set()  # turned off in the View menu
        self.importing: threading.Thread | None = None  # imports the panels' modules
        self.making_types: Iterator[None] | None = None  # `qt_types.making`, before the import
        self.imported.connect(self._make_area, Qt.QueuedConnection)
        self.summary = SummaryPanel()
        central = QWidget()
        self.central_layout = layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QWidget(), 1)  # the panels' place until they are made
        layout.addWidget(self.summary)
        self.setCentralWidget(central)
        self._build_dock()
        self._build_status()
        # the parts, each handed the state and the widgets it works with
        self.recordings = RecordingActions(self, self.params, self.shown, self.message, layout)
        self.files = FileActions(self, self.params, self.dock, self.settings, self.message,
                                 self.shown, self.state, self.worker, self.recordings)  # fmt: skip
        self.diagnosis = DiagnosisView(self, self.shown, self.message)
        self.verifier = Verifier(self.summary, self.shown, self.worker, self)
        build_menus(self)
        self.run_view = RunView(self, self.state, self.recordings, self.summary, self.message,
                                self.progress, self.elapsed, self.pause_button,
                                self.pause_action)  # fmt: skip
        self._wire_parts()
        self.stop_action.installEventFilter(self)  # Esc: `RunView.stop_by_key`
        self.refocus = None  # the dock's widget that had the keyboard focus when a run started
        self.setAcceptDrops(True)
        self._fit_to_screen()
        self._restore()
        self.set_title()

        self.worker.ready.connect(self._on_ready)
        self.worker.failed.connect(self._on_worker_failed)
        self.worker.crashed.connect(lambda text: self.show_error("Computing process ended", text))
        self.worker.notice.connect(self.message.setText)  # building the native kernels
        self.worker.verified.connect(self.verifier.on_verified)
        self.worker.saved.connect(self.files.on_saved)
        self.state.started.connect(self.run_view.on_started)
        self.state.started.connect(self._on_started)
        self.state.updated.connect(self.run_view.on_updated)
        self.state.finished.connect(self.run_view.on_finished)
        self.state.ended.connect(self.run_view.on_ended)
        # the engine's messages name CLI flags: the dock's names for the fields instead
        self.state.failed.connect(lambda text: self.show_error("Run failed", in_dock_terms(text)))
        self.state.changed.connect(self.sync)
        # The worker starts the computing process, which imports TensorFlow: after the window's
        # first paint (or when a run is asked for), so starting it takes nothing from the paint.
        self.worker_started = False
        self.sync()

    @property
    def trace(self) -> GradientTrace | None:
        """The trace shown (the last finished or opened one; None during a run)."""
        return self.shown.trace

    @property
    def recording(self) -> Recording | None:
        """The recording shown (None: none)."""
        return self.shown.recording

    def open_path(self, path: str, layer: str | None = None) -> bool:
        """Open a file as if dropped on the window (`FileActions.open_path`)."""
        return self.files.open_path(path, layer)

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
    def made_area(self):
        """The panels (`gui.widgets.panel_area.PanelArea`) if they are made, else None."""
        return self._area

    @property
    def area(self):
        """The panels (`gui.widgets.panel_area.PanelArea`), made now if they are not yet."""
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
        from lstmviz.analysis.layout import MODEL_PANELS
        from lstmviz.gui.widgets.panel_area import LSTM_PREPARED, PanelArea

        if self.styled:
            import pyqtgraph as pg

            from lstmviz.plots.style import STYLE

            pg.setConfigOptions(**STYLE)
        area = PanelArea()
        area.drawn.connect(self._drawn)
        area.created.connect(self._wire_panel)
        area.log, area.normalise = self.shown.view.log, self.shown.view.normalise
        area.chained = self.chain_action.isChecked()
        area.anchored, area.anchor = self.shown.view.anchored, self.shown.view.anchor
        area.layer = self.shown.view.layer
        area.layer_chosen.connect(self._layer_chosen)
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
            from lstmviz.analysis.layout import MODEL_PANELS

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
        self.save_weights_button = QPushButton("Save trained weights…")
        self.save_weights_button.setToolTip(
            "Write a training run's final weights as Keras .weights.h5 or NumPy .npz"
        )
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

    def _wire_parts(self) -> None:
        """The dock's buttons and fields to the parts that act on them."""
        files, widgets = self.files, self.params.widgets
        self.run_button.clicked.connect(lambda: self.start_run())
        self.stop_button.clicked.connect(self.run_view.stop)
        self.pause_button.toggled.connect(self.run_view.set_paused)
        self.save_weights_button.clicked.connect(files.save_weights_dialog)
        widgets["time_major"].toggled.connect(files.reload_sources)
        # the inputs file is a model's data (x, y) in model mode: read it again as the mode takes it
        widgets["mode"].currentIndexChanged.connect(files.reread_inputs)
        widgets["mode"].currentIndexChanged.connect(
            lambda: self._prepare_model_panels(self.params.model_mode()))
        browse = {"model": files.open_model_dialog, "weights": files.open_weights_dialog,
                  "targets": files.open_targets_dialog,
                  "inputs": lambda: (files.open_data_dialog if self.params.model_mode()
                                     else files.open_inputs_dialog)()}  # fmt: skip
        for name, dialog in browse.items():
            widgets[name].browse.connect(dialog)
        widgets["layer"].picked.connect(files.choose_layer)  # another layer: read it
        self.summary.verify_button.clicked.connect(self.verifier.verify)
        self.verifier.asked.connect(self.start_worker)
        self.verifier.answered.connect(self.sync)
        files.failed_in_thread.connect(self._drawn)  # nothing to draw: `settled` now if waited
        self.recordings.opened.connect(files.add_recent)

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
            self.files.reload_sources()
        self.log_action.setChecked(s.value("view/log", "true") == "true")
        self.normalise_action.setChecked(s.value("view/normalise", "false") == "true")
        self.view_changed()
        self.diagnosis.set_anchored(s.value("view/anchored", "false") == "true")
        self.files.fill_recent()

    def _save_settings(self) -> None:
        s = self.settings
        s.setValue("geometry", self.saveGeometry())
        s.setValue("state", self.saveState())
        if self._area is not None:
            s.setValue("panels", self._area.splitter.saveState())
        s.setValue("params", self.params.config().to_json())
        s.setValue("view/log", str(self.log_action.isChecked()).lower())
        s.setValue("view/normalise", str(self.normalise_action.isChecked()).lower())
        s.setValue("view/anchored", str(self.shown.view.anchored).lower())
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
        self.files.drop_opening()  # the run's trace is the one to show
        self.start_worker()
        self._prepare_model_panels(config.mode == "model")
        return self.state.start(config)

    def start_demo(self) -> None:
        config = demo_config()
        self.params.set_config(config)
        self.files.reload_sources()
        self.start_run(config)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.stop_action and event.type() == QEvent.Type.Shortcut:
            self.run_view.stop_by_key()
            return True
        return super().eventFilter(watched, event)

    @Slot(object)
    def _on_ready(self, device: dict) -> None:
        self.device = device
        self.device_label.setText(
            f"{device['device']} · {LSTM_KERNEL_TEXT[device['lstm']]} · cuDNN {device['cudnn']} · "
            f"TensorFlow {device['tensorflow']}"
        )
        self.device_label.setToolTip(f"LSTM implementation: {device['lstm_detail']}")
        self.set_title()
        if self.state.running:
            self.run_view.show_message()
        else:
            if self.message.text() == LOADING:  # else it says what was opened meanwhile
                self.message.setText("ready: set parameters and press Run (Ctrl+R)")
            self.settle()

    @Slot(int, str)
    def _on_worker_failed(self, run_id: int, message: str) -> None:
        if run_id == 0:  # the worker's start
            self.message.setText("TensorFlow did not load: runs are unavailable")
            self.device_label.setText(NOT_LOADED)
            self.set_title()
            self.show_error("TensorFlow did not load", message)

    # ---- drawing ---------------------------------------------------------------------------

    @Slot(object)
    def _on_started(self, config: RunConfig) -> None:
        """A run started (after `RunView.on_started`): it settles when it ends."""
        self.settle_when_drawn = False
        self.set_title()

    def settle(self) -> None:
        """Emit `settled` now, or once the panels left to draw are drawn (or made), and a
        trace file being read is shown."""
        self.settle_when_drawn = (self._area is None or self._area.busy()
                                  or self.files.opening())  # fmt: skip
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
        self.run_view.dirty = False
        self.area.draw(trace.arrays, trace.config, None, live=False, at_once=at_once)
        self.summary.draw(trace.mode, trace.arrays, trace.config, seconds)
        self.params.direction_table.show_arrays(trace.arrays)
        self.diagnosis.show_diagnosis(trace)
        self.elapsed.setText(f"{seconds:.2f} s" if seconds is not None else "")
        if seconds is None:  # opened, not run: an earlier run's "done" is not about it
            self.progress.hide()
        self.set_title()
        self.sync()

    @Slot(object)
    def _wire_panel(self, panel) -> None:
        """Right-click → Export panel… of `panel` (also of the panels made later)."""
        from lstmviz.gui.dialogs import export_dialog

        panel.export_action.triggered.connect(
            lambda _=False, p=panel: export_dialog.export_panel(self, p)
        )
        panel.export_action.setEnabled(self.trace is not None)

    def view_changed(self) -> None:
        """View → Log scale or Normalise per pass changed."""
        log, normalise = self.log_action.isChecked(), self.normalise_action.isChecked()
        self.shown.view = self.shown.view.but(log=log, normalise=normalise)
        self.worker.view = (log, normalise)  # a finished trace's heatmap images are made so
        if self._area is not None:  # otherwise the panels take the options when made
            self._area.set_options(log, normalise)

    def chain_changed(self) -> None:
        """View → Chain hand-overs on one time axis changed: the panels that draw hand-overs,
        and the reach marked on them."""
        if self._area is not None:
            self._area.set_chained(self.chain_action.isChecked())
            self.diagnosis.mark_reach()

    @Slot(int)
    def _layer_chosen(self, k: int) -> None:
        """A panel's choice of the model direction its gates and units show."""
        self.shown.view = self.shown.view.but(layer=k)

    def set_panel_hidden(self, name: str, hidden: bool) -> None:
        (self.hidden_panels.add if hidden else self.hidden_panels.discard)(name)
        if self._area is None:  # the panels take it when made
            return
        state = self.state
        arrays = state.trace.arrays if state.trace is not None else state.pending
        self._area.set_hidden(name, hidden, arrays, state.config, live=state.running)

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

    def set_title(self) -> None:
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
        name = self.shown.file_name()
        self.setWindowTitle(f"{name} — " * (name is not None) + " · ".join(parts))

    def sync(self) -> None:
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
        self.run_view.closing = True
        self.run_view.tick.stop()
        self.recordings.close_recording()
        self.state.stop_now()
        self.worker.close()
        if self.importing is not None:  # a thread importing at the interpreter's exit crashes
            self.importing.join(timeout_ms / 1000)
        return self.worker.wait(timeout_ms) and not (self.importing and self.importing.is_alive())

    def closeEvent(self, event) -> None:  # noqa: N802
        self._save_settings()
        self.shutdown()
        event.accept()

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.open_path(url.toLocalFile())
                break
