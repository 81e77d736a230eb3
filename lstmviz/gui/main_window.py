"""The main window: parameter dock, panels, menus, status bar; drives a Worker in a QThread."""

from __future__ import annotations

import contextlib
import platform
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyqtgraph as pg
import PySide6
from PySide6.QtCore import (
    QElapsedTimer,
    QSettings,
    QSignalBlocker,
    Qt,
    QTimer,
    Signal,
    Slot,
    qVersion,
)
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDockWidget,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

import lstmviz
from lstmviz import files, modes
from lstmviz.config import RunConfig
from lstmviz.errors import LstmvizError
from lstmviz.gui import export_dialog
from lstmviz.gui.dialogs import pick_layer
from lstmviz.gui.params import ParamsEditor
from lstmviz.gui.summary import SummaryPanel
from lstmviz.gui.worker import Worker
from lstmviz.inputs import describe_inputs, load_inputs
from lstmviz.render.curves import NormHistoryPanel
from lstmviz.render.heatmaps import RowsHeatmap, UnitsHeatmap
from lstmviz.render.layout import panels_for
from lstmviz.render.summary import LSTM_KERNEL_TEXT, stopped_early
from lstmviz.render.training import ConnectivityPanel, LossPanel
from lstmviz.trace import GradientTrace, TraceUpdate
from lstmviz.weights.loaders import list_lstm_layers, read_weights

MAX_RECENT = 8
DEMO_MODES = ("multipass", "taped")  # the demo falls back to the next mode if one is missing


DEMO_WEIGHTS = Path(__file__).resolve().parents[2] / "resources" / "demo_lstm.keras"


def demo_config(mode: str) -> RunConfig:
    """A run that fills every panel in a few seconds on a laptop CPU. It uses the LSTM in
    `resources/demo_lstm.keras` (trained on the adding problem, so it remembers: its gradient
    does not vanish within a pass of 15 steps) with a loss on every pass's last step, so the
    full gradient through all passes clearly differs from the truncated one at the start of
    each pass. Seeded random weights (I=8, H=48) if the file is missing."""
    weights = str(DEMO_WEIGHTS) if DEMO_WEIGHTS.is_file() else None
    return RunConfig(mode=mode, steps=15 if mode == "multipass" else 60, passes=4, batch=16,
                     input_dim=2 if weights else 8, hidden=16 if weights else 48,
                     loss="last_mse", random_state=True, seed=7, weights=weights)  # fmt: skip


class MainWindow(QMainWindow):
    """`settled` fires whenever the window becomes idle with TensorFlow loaded and every
    panel drawn (after a run ends, or at start-up when nothing runs): the screenshot hook."""

    settled = Signal()

    def __init__(self, settings: QSettings | None = None, quiet_errors: bool = False):
        super().__init__()
        self.settings = settings or QSettings()
        self.quiet_errors = quiet_errors  # errors go to stderr instead of a dialog
        self.errors = 0
        self.device: dict | None = None
        self.trace: GradientTrace | None = None
        self.run_config: RunConfig | None = None
        self.active: int | None = None  # id of the run in progress
        self.last_id = 0
        self.pending: dict[str, np.ndarray] = {}
        self.dirty = False
        self.rows_total: int | None = None
        self.demo_modes: list[str] = []
        self.steps_done = 0  # units of work the active run has reported
        self.finishing = False  # a stopped training run is building the trace of its steps
        self.clock = QElapsedTimer()
        self.tick = QTimer(self, interval=33)  # redraws at most ~30 times a second
        self.tick.timeout.connect(self._flush)
        # Panels draw one per event-loop turn (`_draw`): the calls left, the next on a 0 ms timer.
        self.stages: list[Callable[[], None]] = []
        self.stage_timer = QTimer(self, singleShot=True, interval=0)
        self.stage_timer.timeout.connect(self._draw_stage)
        self.settle_when_drawn = False

        self._build_panels()
        self._build_dock()
        self._build_status()
        self._build_menus()
        self.setAcceptDrops(True)
        self.resize(1280, 820)
        self._restore()
        self._set_title()

        self.worker = Worker()
        self.worker.ready.connect(self._on_ready)
        self.worker.progress.connect(self._on_progress)
        self.worker.finished_run.connect(self._on_finished)
        self.worker.cancelled.connect(self._on_cancelled)
        self.worker.failed.connect(self._on_failed)
        self.worker.verified.connect(self._on_verified)
        self.worker.paused.connect(self._on_paused)
        self.worker.saved.connect(self._on_saved)
        # The worker imports TensorFlow first, holding the GIL for seconds: it starts after the
        # window's first paint (or when a run is asked for), so the window shows at once.
        self.worker_started = False
        self._sync()

    def start_worker(self) -> None:
        """Start the worker thread (it imports TensorFlow, then serves requests); once."""
        if not self.worker_started:
            self.worker_started = True
            self.worker.start()

    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        if not self.worker_started:  # in case no paint event arrives (e.g. minimised)
            QTimer.singleShot(1000, self.start_worker)

    def paintEvent(self, event) -> None:  # noqa: N802
        super().paintEvent(event)
        if not self.worker_started:  # after this paint has reached the screen
            QTimer.singleShot(0, self.start_worker)

    # ---- construction ----------------------------------------------------------------------

    def _build_panels(self) -> None:
        self.norm = NormHistoryPanel()
        self.loss_panel = LossPanel()  # shown in training runs
        self.rows = RowsHeatmap()
        self.units = UnitsHeatmap()
        self.connectivity = ConnectivityPanel()  # shown when a run computes the map
        self.panels = (self.norm, self.rows, self.units, self.loss_panel, self.connectivity)
        self.summary = SummaryPanel()
        for panel in self.panels:
            panel.cache_axes()
        self.summary.verify_button.clicked.connect(self.verify)
        for panel in self.panels:
            panel.export_action.triggered.connect(
                lambda _=False, p=panel: export_dialog.export_panel(self, p)
            )
        heatmaps = QSplitter(Qt.Horizontal)
        heatmaps.addWidget(self.rows)
        heatmaps.addWidget(self.units)
        heatmaps.addWidget(self.connectivity)
        top = QSplitter(Qt.Horizontal)
        top.addWidget(self.norm)
        top.addWidget(self.loss_panel)
        top.setSizes([640, 360])
        self.loss_panel.hide()
        self.connectivity.hide()
        self.splitter = QSplitter(Qt.Vertical)
        self.splitter.addWidget(top)
        self.splitter.addWidget(heatmaps)
        self.splitter.setSizes([440, 330])
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.splitter, 1)
        layout.addWidget(self.summary)
        self.setCentralWidget(central)

    def _build_dock(self) -> None:
        self.params = ParamsEditor()
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Start a run with these parameters (Ctrl+R)")
        self.stop_button = QPushButton("Stop")
        self.stop_button.setToolTip("Stop the run at its next pass, batch or step (Esc)")
        self.pause_button = QPushButton("Pause", checkable=True)
        self.pause_button.setToolTip(
            "Hold the run after its current step, pass or batch; press again to resume (Ctrl+P)"
        )
        self.run_button.clicked.connect(lambda: self.start_run())
        self.stop_button.clicked.connect(self.stop)
        self.pause_button.toggled.connect(self.set_paused)
        self.save_weights_button = QPushButton("Save trained weights…")
        self.save_weights_button.setToolTip(
            "Write a training run's final weights as Keras .weights.h5 or NumPy .npz"
        )
        self.save_weights_button.clicked.connect(self.save_weights_dialog)
        self.params.widgets["time_major"].toggled.connect(self._reload_sources)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.pause_button)
        buttons.addWidget(self.stop_button)
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.addWidget(self.params)
        layout.addLayout(buttons)
        layout.addWidget(self.save_weights_button)
        layout.addStretch(1)
        self.dock = QDockWidget("Parameters", self, objectName="parameters")
        self.dock.setFeatures(QDockWidget.DockWidgetMovable | QDockWidget.DockWidgetClosable)
        self.dock.setWidget(box)
        box.setMinimumWidth(270)
        self.addDockWidget(Qt.LeftDockWidgetArea, self.dock)

    def _build_status(self) -> None:
        self.message = QLabel("loading TensorFlow…")
        self.progress = QProgressBar(maximumWidth=220, textVisible=True)
        self.progress.hide()  # until the first run
        self.elapsed = QLabel("")
        self.device_label = QLabel("TensorFlow: loading…")
        bar = self.statusBar()
        bar.addWidget(self.message, 1)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.elapsed)
        bar.addPermanentWidget(self.device_label)

    def _action(self, menu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
        action = QAction(text, self, statusTip=tip, toolTip=tip)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file = bar.addMenu("&File")
        self._action(
            file,
            "&Open trace…",
            self.open_trace_dialog,
            QKeySequence.Open,
            "Open a .npz trace saved by lstmviz",
        )
        self.save_action = self._action(
            file,
            "&Save trace…",
            self.save_trace_dialog,
            QKeySequence.Save,
            "Save the current trace as .npz",
        )
        self.export_action = self._action(
            file,
            "&Export…",
            lambda: export_dialog.export_dialog(self),
            "Ctrl+E",
            "Export the plots as PNG, SVG, a PDF report or CSV (as lstmviz export)",
        )
        self.export_panel_action = self._action(
            file,
            "Export &panel under cursor…",
            lambda: export_dialog.export_under_cursor(self),
            "Ctrl+Shift+E",
            "Export the panel the mouse points at (also: right-click a panel)",
        )
        self.recent_menu = file.addMenu("Recent traces")
        file.addSeparator()
        self._action(
            file,
            "Open &weights…",
            self.open_weights_dialog,
            None,
            "Use LSTM weights from a file instead of seeded random ones",
        )
        self._action(
            file,
            "Open &inputs…",
            self.open_inputs_dialog,
            None,
            "Use an input sequence from a .npy/.npz file",
        )
        self.save_weights_action = self._action(
            file,
            "Save trained weigh&ts…",
            self.save_weights_dialog,
            None,
            "Write a training run's final weights as .weights.h5 or .npz",
        )
        file.addSeparator()
        self._action(file, "&Quit", self.close, QKeySequence.Quit)

        run = bar.addMenu("&Run")
        self.run_action = self._action(run, "&Run", lambda: self.start_run(), "Ctrl+R")
        self.pause_action = self._action(
            run,
            "&Pause",
            lambda: self.pause_button.toggle(),
            "Ctrl+P",
            "Hold the run after its current step; again to resume",
        )
        self.stop_action = self._action(run, "&Stop", self.stop, "Esc")
        self.verify_action = self._action(
            run,
            "&Verify gradients",
            self.verify,
            "Ctrl+Shift+V",
            "Check dL/dh_t by finite differences",
        )

        view = bar.addMenu("&View")
        self.log_action = self._action(
            view,
            "&Log scale",
            self._view_changed,
            "Ctrl+L",
            "Logarithmic gradient norms in every panel",
        )
        self.normalise_action = self._action(
            view,
            "&Normalise per pass",
            self._view_changed,
            "Ctrl+N",
            "Divide each pass, batch or row by its maximum",
        )
        for action in (self.log_action, self.normalise_action):
            action.setCheckable(True)
        view.addSeparator()
        view.addAction(self.dock.toggleViewAction())
        for name, widget in (
            ("Gradient norm panel", self.norm),
            ("Rows heatmap", self.rows),
            ("Units heatmap", self.units),
            ("Summary", self.summary),
        ):
            action = QAction(name, self, checkable=True, checked=True)
            action.toggled.connect(widget.setVisible)
            view.addAction(action)
        self.optional_views = {}  # shown when checked and the run has something for them
        optional = (("Loss panel", self.loss_panel), ("Connectivity map", self.connectivity))
        for name, widget in optional:
            action = QAction(name, self, checkable=True, checked=True)
            action.toggled.connect(self._show_optional)
            view.addAction(action)
            self.optional_views[widget] = action

        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "&About lstmviz", self.about)

    # ---- settings --------------------------------------------------------------------------

    def _restore(self) -> None:
        s = self.settings
        if s.value("geometry") is not None:
            self.restoreGeometry(s.value("geometry"))
        if s.value("state") is not None:
            self.restoreState(s.value("state"))
        text = s.value("params")
        if text:
            with contextlib.suppress(ValueError, TypeError):  # unreadable: keep the defaults
                self.params.set_config(RunConfig.from_json(str(text)))
            self._reload_sources()
        self.log_action.setChecked(s.value("view/log", "true") == "true")
        self.normalise_action.setChecked(s.value("view/normalise", "false") == "true")
        self._view_changed()
        self._fill_recent()

    def _save_settings(self) -> None:
        s = self.settings
        s.setValue("geometry", self.saveGeometry())
        s.setValue("state", self.saveState())
        s.setValue("params", self.params.config().to_json())
        s.setValue("view/log", str(self.log_action.isChecked()).lower())
        s.setValue("view/normalise", str(self.normalise_action.isChecked()).lower())
        s.sync()

    def recent(self) -> list[str]:
        value = self.settings.value("recent", [])
        return [value] if isinstance(value, str) else list(value or [])

    def _add_recent(self, path: str) -> None:
        paths = [path] + [p for p in self.recent() if p != path]
        self.settings.setValue("recent", paths[:MAX_RECENT])
        self._fill_recent()

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for path in self.recent():
            action = self.recent_menu.addAction(path)
            action.triggered.connect(lambda _=False, p=path: self.open_trace(p))
        self.recent_menu.setEnabled(bool(self.recent()))

    # ---- runs ------------------------------------------------------------------------------

    def start_run(self, config: RunConfig | None = None) -> bool:
        """Validate and start a run (the parameters shown, or `config`). False if refused."""
        if self.active is not None:
            return False
        try:
            config = self.params.validated() if config is None else config.validate()
        except LstmvizError as exc:
            self.show_error("Invalid parameter", str(exc))
            return False
        self.last_id += 1
        self.active = self.last_id
        self.run_config, self.trace = config, None
        self.pending, self.rows_total, self.dirty = {}, None, True
        self.settle_when_drawn = False
        self.steps_done, self.finishing = 0, False
        self._set_pause_button(False)
        self.summary.draw(config.mode, {}, config, 0.0)
        self.progress.setRange(0, 0)
        self.progress.show()
        self.message.setText(
            modes.label(config.mode) + (": starting…" if self.device else ": loading TensorFlow…")
        )
        self.clock.start()
        self.tick.start()
        self.worker.request_run(self.active, config)
        self.start_worker()
        self._sync()
        return True

    def start_demo(self) -> None:
        """The demo run: multi-pass if this version has it, else taped."""
        self.demo_modes = list(DEMO_MODES)
        self._next_demo()

    def _next_demo(self) -> None:
        config = demo_config(self.demo_modes.pop(0))
        self.params.set_config(config)
        self._reload_sources()
        self.start_run(config)

    def stop(self) -> None:
        """Cancel the run; the window is idle at once (a TensorFlow call in flight finishes in
        the background and its result is dropped). A training run with steps done is paused
        first and the user may keep those steps as a complete trace."""
        if self.active is None or self.finishing:
            return
        run_id = self.active
        if self.run_config.mode == "train" and self.steps_done > 0:
            self.worker.pause(run_id)
            answer = self.ask_keep_steps(self.steps_done)
            if self.active != run_id:  # it ended while the question was open
                return
            if answer == QMessageBox.Cancel:
                if not self.pause_button.isChecked():
                    self.worker.resume(run_id)
                return
            if answer == QMessageBox.Yes:
                self.finishing = True
                self.worker.finish_early(run_id)
                self.message.setText("training stopped: computing the trace of the steps done…")
                self._sync()
                return
        self.worker.cancel(run_id)
        self._idle(f"stopped after {self.clock.elapsed() / 1000:.1f} s")

    def ask_keep_steps(self, done: int) -> QMessageBox.StandardButton:
        """Yes: keep the steps done as a trace; No: discard them; Cancel: keep training."""
        return QMessageBox.question(
            self,
            "Stop training",
            f"Keep the training steps done so far (at least {done}) as a trace?\n\n"
            "Yes: a complete trace of those steps (final weights, loss curve, gradient\n"
            "history; the weights can be saved). No: discard them.",
            QMessageBox.Yes | QMessageBox.No | QMessageBox.Cancel,
            QMessageBox.Yes,
        )

    def set_paused(self, paused: bool) -> None:
        """Pause or resume the active run (at its next step, pass or batch)."""
        self.pause_button.setText("Resume" if paused else "Pause")
        self.pause_action.setText("&Resume" if paused else "&Pause")
        if self.active is None or self.finishing:
            return
        if paused:
            self.worker.pause(self.active)
            self.message.setText(f"{modes.label(self.run_config.mode)}: pausing…")
        else:
            self.worker.resume(self.active)
            self.message.setText(f"{modes.label(self.run_config.mode)}: running…")

    def _set_pause_button(self, paused: bool) -> None:
        with QSignalBlocker(self.pause_button):
            self.pause_button.setChecked(paused)
        self.pause_button.setText("Resume" if paused else "Pause")
        self.pause_action.setText("&Resume" if paused else "&Pause")

    @Slot(int, int)
    def _on_paused(self, run_id: int, done: int) -> None:
        if run_id == self.active and self.pause_button.isChecked():
            total = self.progress.maximum()
            self.message.setText(
                f"{modes.label(self.run_config.mode)}: paused after {done}/{total} (Resume: Ctrl+P)"
            )

    def _idle(self, message: str) -> None:
        self.active = None
        self.finishing = False
        self._set_pause_button(False)
        self.demo_modes = []
        self._flush()
        self.tick.stop()
        self.message.setText(message)
        if self.progress.maximum() == 0:
            self.progress.setRange(0, 1)
        self._sync()
        if self.device is not None:
            self._settle()

    @Slot(object)
    def _on_ready(self, device: dict) -> None:
        self.device = device
        self.device_label.setText(
            f"{device['device']} · {LSTM_KERNEL_TEXT[device['lstm']]} · cuDNN {device['cudnn']} · "
            f"TensorFlow {device['tensorflow']}"
        )
        self.device_label.setToolTip(f"LSTM implementation: {device['lstm_detail']}")
        self._set_title()
        if self.active is None:
            self.message.setText("ready: set parameters and press Run (Ctrl+R)")
            self._settle()
        else:
            self.message.setText(f"{modes.label(self.run_config.mode)}: running…")

    @Slot(int, object)
    def _on_progress(self, run_id: int, update: TraceUpdate) -> None:
        if run_id != self.active:
            return
        self.steps_done = update.done
        self.pending.update(update.arrays)
        if any(k.endswith(("_by_pass", "_by_batch", "_by_step")) for k in update.arrays):
            self.rows_total = update.total
        self.dirty = True
        self.progress.setRange(0, max(update.total, 1))
        self.progress.setValue(update.done)
        self.progress.setFormat(f"{update.done}/{update.total}")
        if not (self.pause_button.isChecked() or self.finishing):
            self.message.setText(f"{modes.label(self.run_config.mode)}: {update.message}")

    @Slot(int, object)
    def _on_finished(self, run_id: int, trace: GradientTrace) -> None:
        if run_id != self.active:
            return
        seconds = self.clock.elapsed() / 1000
        self.show_trace(trace, seconds)
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.progress.setFormat("done")
        kept = stopped_early(trace.arrays)
        what = f"kept {trace.config.train_steps} training steps" if kept else "done"
        self._idle(f"{what}: {modes.label(trace.mode)} in {seconds:.2f} s")

    @Slot(int)
    def _on_cancelled(self, run_id: int) -> None:
        if run_id == self.active:
            self._idle("stopped")

    @Slot(int, str)
    def _on_failed(self, run_id: int, message: str) -> None:
        if run_id == 0:
            self.message.setText("TensorFlow did not load: runs are unavailable")
            self.device_label.setText("TensorFlow: not loaded")
            self.show_error("TensorFlow did not load", message)
            return
        if run_id != self.active:
            return
        if self.demo_modes and message.startswith("--mode:"):
            self.active = None
            self._next_demo()
            return
        self._idle("run failed")
        self.show_error("Run failed", message)

    def _flush(self) -> None:
        """Draw what arrived since the last tick (called ~30 times a second while running)."""
        if self.active is not None and self.clock.isValid():
            self.elapsed.setText(f"{self.clock.elapsed() / 1000:.1f} s")
        if not self.dirty:
            return
        self.dirty = False
        if self.trace is None:
            self._draw(self.pending, self.run_config)

    def _settle(self) -> None:
        """Emit `settled` now, or once the panels left to draw are drawn."""
        self.settle_when_drawn = bool(self.stages)
        if not self.stages:
            self.settled.emit()

    def _draw(self, arrays, config: RunConfig | None) -> None:
        """Draw `arrays` in every panel: the first now, the others one per event-loop turn."""
        arrays, rows_total = dict(arrays), self.rows_total
        self._show_optional()
        self._stage(lambda p=panel: p.draw(arrays, config, rows_total) for panel in self.panels)

    def _stage(self, calls) -> None:
        """Run `calls` (each drawing one panel) one per event-loop turn, so that each panel's
        draw and the repaint it causes stay apart from the others' (all at once: 40-60 ms for
        a new finished trace, bench/bench_gui.py). Replaces the calls left from an earlier one."""
        self.stages = list(calls)
        self._draw_stage()

    def _draw_stage(self) -> None:
        if self.stages:
            self.stages.pop(0)()
        if self.stages:
            self.stage_timer.start()
        elif self.settle_when_drawn:
            self.settle_when_drawn = False
            self.settled.emit()

    def _show_optional(self) -> None:
        """The loss and connectivity panels appear when the run has (or will have) their data
        (`panels_for`, as the exported figure) and the View menu has them checked."""
        arrays = self.trace.arrays if self.trace is not None else self.pending
        live = self.trace is None and self.run_config is not None
        shown = panels_for(arrays, self.run_config, live=live)
        names = {self.loss_panel: "loss", self.connectivity: "connectivity"}
        for widget, action in self.optional_views.items():
            widget.setVisible(names[widget] in shown and action.isChecked())

    def show_trace(self, trace: GradientTrace, seconds: float | None) -> None:
        """Draw a finished or loaded trace in every panel."""
        self.trace, self.run_config, self.rows_total, self.dirty = trace, trace.config, None, False
        self._draw(trace.arrays, trace.config)
        self.summary.draw(
            trace.mode, trace.arrays, trace.config, seconds
        )
        if seconds is not None:
            self.elapsed.setText(f"{seconds:.2f} s")
        self._set_title()
        self._sync()

    # ---- verify ----------------------------------------------------------------------------

    def verify(self) -> None:
        if self.trace is None:
            return
        self.summary.verify_button.setEnabled(False)
        self.summary.verify_result.setText("checking by finite differences…")
        self.last_id += 1
        self.worker.request_verify(self.last_id, self.trace)
        self.start_worker()

    @Slot(int, object)
    def _on_verified(self, request_id: int, result) -> None:
        if isinstance(result, str):
            text = f"<span style='color:#a60'>{result}</span>"
        else:
            mark = "✓" if result.ok else "<span style='color:#c00'>✗</span>"
            text = (
                f"{mark} finite differences: worst |Δ| {result.worst_abs:.1e} "
                f"(rel. {result.worst_rel:.1e}) over {len(result.entries)} entries"
            )
        self.summary.verify_result.setText(text)
        self._sync()

    # ---- files -----------------------------------------------------------------------------

    def open_trace(self, path: str) -> bool:
        try:
            trace = GradientTrace.load(path)
        except LstmvizError as exc:
            self.show_error("Cannot open trace", str(exc))
            return False
        self.stop()
        self.params.set_config(trace.config)
        self._reload_sources()
        self.show_trace(trace, None)
        self.message.setText(f"opened {path}")
        self._add_recent(str(Path(path).resolve()))
        return True

    def open_path(self, path: str) -> bool:
        """Open a file as if dropped on the window: a trace, weights or inputs
        (`lstmviz.files.kind` tells which). False, after a dialog, when it is none of them."""
        try:
            kind = files.kind(path)
        except LstmvizError as exc:
            self.show_error("Cannot open file", str(exc))
            return False
        opener = {"trace": self.open_trace, "inputs": self.open_inputs,
                  "weights": self.open_weights}[kind]  # fmt: skip
        return opener(path)

    def open_trace_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open trace", "", "lstmviz traces (*.npz)")
        if path:
            self.open_trace(path)

    def save_trace_dialog(self) -> None:
        if self.trace is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, "Save trace", "trace.npz", "Traces (*.npz)")
        if not path:
            return
        path = path if path.endswith(".npz") else path + ".npz"
        try:
            self.trace.save(path)
        except (LstmvizError, OSError) as exc:
            self.show_error("Cannot save trace", str(exc))
            return
        self.message.setText(f"saved {path}")
        self._add_recent(str(Path(path).resolve()))

    def open_weights_dialog(self) -> None:
        wanted = f"Weights ({files.pattern(files.WEIGHTS)})"
        path, _ = QFileDialog.getOpenFileName(self, "Open weights", "", wanted)
        if path:
            self.open_weights(path)

    def open_inputs_dialog(self) -> None:
        wanted = f"Arrays ({files.pattern(files.INPUTS)})"
        path, _ = QFileDialog.getOpenFileName(self, "Open inputs", "", wanted)
        if path:
            self.open_inputs(path)

    def open_weights(self, path: str, layer: str | None = None, quiet: bool = False) -> bool:
        """Use the LSTM weights in `path` (asking which layer when it holds several and
        `layer` is None): I and H follow the file and stay locked while it is loaded.
        Bad files: a dialog naming the file and the problem (status line only if `quiet`)."""
        try:
            if layer is None:
                layers = list_lstm_layers(path)
                if len(layers) > 1 and not quiet:
                    picked = self.pick_layer(path, layers)
                    if picked is None:
                        return False
                    layer = picked.name
                elif len(layers) == 1:
                    layer = layers[0].name or None
            weights, description = read_weights(path, layer)  # NumPy/h5py: no TensorFlow
        except LstmvizError as exc:
            if quiet:
                self.message.setText(f"weights not loaded: {exc}")
            else:
                self.show_error("Cannot open weights", str(exc))
            return False
        sizes = {"input_dim": weights.input_dim, "hidden": weights.hidden}
        self.params.set_loaded("weights", path, sizes, description, layer)
        if not quiet:
            self.message.setText(f"weights: {description}")
        return True

    def pick_layer(self, path: str, layers):
        """The layer picker dialog (tests replace it); None if cancelled."""
        return pick_layer(self, path, layers)

    def open_inputs(self, path: str, quiet: bool = False) -> bool:
        """Use the input sequence in `path`: T, B and I follow it (locked while loaded)."""
        time_major = self.params.widgets["time_major"].isChecked()
        try:
            x = load_inputs(path, time_major)
        except LstmvizError as exc:
            if quiet:
                self.message.setText(f"inputs not loaded: {exc}")
            else:
                self.show_error("Cannot open inputs", str(exc))
            return False
        steps, batch, input_dim = (int(n) for n in x.shape)
        description = describe_inputs(path, x, time_major)
        sizes = {"steps": steps, "batch": batch, "input_dim": input_dim}
        self.params.set_loaded("inputs", path, sizes, description)
        if not quiet:
            self.message.setText(f"inputs: {description}")
        return True

    def _reload_sources(self) -> None:
        """Re-read the weights and inputs files the parameters name (settings, a reopened
        trace, a layout change) so the sizes they fix are shown and locked."""
        config = self.params.config()
        if config.weights and Path(config.weights).is_file() and config.mode != "batchwise":
            self.open_weights(config.weights, config.layer or None, quiet=True)
        if config.inputs and Path(config.inputs).is_file():
            self.open_inputs(config.inputs, quiet=True)

    def save_weights_dialog(self) -> None:
        """Save the trained weights of the current training trace (written by the worker:
        `.weights.h5` needs Keras)."""
        if self.trace is None or "readout_kernel" not in self.trace:
            return
        keras, numpy = "Keras weights (*.weights.h5)", "NumPy arrays (*.npz)"
        name = f"{self.trace.config.task}-trained.weights.h5"
        path, chosen = QFileDialog.getSaveFileName(
            self, "Save trained weights", name, f"{keras};;{numpy}"
        )
        if not path:
            return
        if not path.endswith((".weights.h5", ".npz")):
            path += ".npz" if chosen == numpy else ".weights.h5"
        self.last_id += 1
        self.message.setText(f"saving trained weights to {path}…")
        self.worker.request_save_weights(self.last_id, self.trace, path)
        self.start_worker()

    @Slot(int, str, str)
    def _on_saved(self, request_id: int, path: str, error: str) -> None:
        if error:
            self.message.setText("trained weights not saved")
            self.show_error("Cannot save trained weights", error)
        else:
            self.message.setText(f"saved trained weights: {path}")

    def dragEnterEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802
        for url in event.mimeData().urls():
            if url.isLocalFile():
                self.open_path(url.toLocalFile())
                break

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
        tf = self.device["tensorflow"] if self.device else "not loaded yet"
        QMessageBox.about(
            self,
            "About lstmviz",
            f"<h3>lstmviz {lstmviz.__version__}</h3>"
            "<p>See how gradients flow through an LSTM: dL/dh_t at every step, through\n"
            "one pass, several passes, or per-batch weights.</p>"
            f"<p>Python {platform.python_version()} · TensorFlow {tf}<br>"
            f"PySide6 {PySide6.__version__} (Qt {qVersion()}) · "
            f"pyqtgraph {pg.__version__} · NumPy {np.__version__}</p>",
        )

    def _view_changed(self) -> None:
        log, normalise = self.log_action.isChecked(), self.normalise_action.isChecked()
        for panel in self.panels:  # a redraw that replaces the staged calls uses them too
            panel.log, panel.normalise = log, normalise
        self._stage(lambda p=panel: p.set_options(log, normalise) for panel in self.panels)

    def _set_title(self) -> None:
        config = self.run_config or self.params.config()
        parts = ["lstmviz", modes.label(config.mode)]
        if self.device:
            parts += [self.device["device"], f"TF {self.device['tensorflow']}"]
        else:
            parts.append("loading TensorFlow…")
        self.setWindowTitle(" — ".join(parts[:2]) + " · " + " · ".join(parts[2:]))

    def _sync(self) -> None:
        """Enable what makes sense now."""
        running = self.active is not None
        for widget in (self.run_button, self.run_action):
            widget.setEnabled(not running)
        for widget in (self.stop_button, self.stop_action, self.pause_button, self.pause_action):
            widget.setEnabled(running and not self.finishing)
        self.params.setEnabled(not running)
        for action in (self.save_action, self.export_action, self.export_panel_action):
            action.setEnabled(self.trace is not None)
        for panel in self.panels:
            panel.export_action.setEnabled(self.trace is not None)
        trained = self.trace is not None and "readout_kernel" in self.trace
        for widget in (self.save_weights_button, self.save_weights_action):
            widget.setEnabled(trained and not running)
        can_verify = self.trace is not None and "grad_h_total" in self.trace
        self.summary.verify_button.setEnabled(can_verify)
        self.verify_action.setEnabled(can_verify)

    def shutdown(self, timeout_ms: int = 1500) -> bool:
        """Stop the run and the worker thread; True if the thread ended within `timeout_ms`
        (it cannot while TensorFlow is importing or inside one computation)."""
        self.tick.stop()
        if self.active is not None:
            self.worker.cancel(self.active)
            self.active = None
        self.worker.close()
        return self.worker.wait(timeout_ms)

    def closeEvent(self, event) -> None:  # noqa: N802
        self._save_settings()
        self.shutdown()
        event.accept()
