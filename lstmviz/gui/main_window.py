"""The main window: parameter dock, panels, menus, status bar; drives a Worker in a QThread."""

from __future__ import annotations

import contextlib
import platform
import sys
from pathlib import Path

import numpy as np
import pyqtgraph as pg
import PySide6
from PySide6.QtCore import QElapsedTimer, QSettings, Qt, QTimer, Signal, Slot, qVersion
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
from lstmviz.config import RunConfig
from lstmviz.errors import LstmvizError
from lstmviz.gui import export_dialog
from lstmviz.gui.panels import NormPanel, RowsHeatmap, SummaryPanel, UnitsHeatmap
from lstmviz.gui.params import MODE_TEXT, ParamsEditor
from lstmviz.gui.worker import Worker
from lstmviz.trace import GradientTrace, TraceUpdate

WEIGHT_SUFFIXES = (".h5", ".keras", ".safetensors", ".pt", ".pth")
MAX_RECENT = 8
DEMO_MODES = ("multipass", "taped")  # the demo falls back to the next mode if one is missing


def demo_config(mode: str) -> RunConfig:
    """A run that fills every panel in a second or two on a laptop CPU: a loss on the last
    step (on each pass's last step in multi-pass mode) shows how the gradient fades."""
    steps = 60 if mode == "multipass" else 120
    return RunConfig(mode=mode, steps=steps, passes=4, batch=16, input_dim=8, hidden=48,
                     loss="last_mse", random_state=True, seed=7)  # fmt: skip


class MainWindow(QMainWindow):
    """`settled` fires whenever the window becomes idle with TensorFlow loaded (after a run
    ends, or at start-up when nothing runs): the screenshot hook."""

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
        self.clock = QElapsedTimer()
        self.tick = QTimer(self, interval=33)  # redraws at most ~30 times a second
        self.tick.timeout.connect(self._flush)

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
        self.worker.start()
        self._sync()

    # ---- construction ----------------------------------------------------------------------

    def _build_panels(self) -> None:
        self.norm = NormPanel()
        self.rows = RowsHeatmap()
        self.units = UnitsHeatmap()
        self.summary = SummaryPanel()
        self.summary.verify_button.clicked.connect(self.verify)
        for panel in (self.norm, self.rows, self.units):
            panel.export_action.triggered.connect(
                lambda _=False, p=panel: export_dialog.export_panel(self, p)
            )
        heatmaps = QSplitter(Qt.Horizontal)
        heatmaps.addWidget(self.rows)
        heatmaps.addWidget(self.units)
        self.splitter = QSplitter(Qt.Vertical)
        self.splitter.addWidget(self.norm)
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
        self.run_button.clicked.connect(lambda: self.start_run())
        self.stop_button.clicked.connect(self.stop)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.stop_button)
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.addWidget(self.params)
        layout.addLayout(buttons)
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
        file.addSeparator()
        self._action(file, "&Quit", self.close, QKeySequence.Quit)

        run = bar.addMenu("&Run")
        self.run_action = self._action(run, "&Run", lambda: self.start_run(), "Ctrl+R")
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
        self.summary.draw(config.mode, {}, config, 0.0)
        self.progress.setRange(0, 0)
        self.progress.show()
        self.message.setText(
            f"{MODE_TEXT[config.mode]}: " + ("starting…" if self.device else "loading TensorFlow…")
        )
        self.clock.start()
        self.tick.start()
        self.worker.request_run(self.active, config)
        self._sync()
        return True

    def start_demo(self) -> None:
        """The demo run: multi-pass if this version has it, else taped."""
        self.demo_modes = list(DEMO_MODES)
        self._next_demo()

    def _next_demo(self) -> None:
        config = demo_config(self.demo_modes.pop(0))
        self.params.set_config(config)
        self.start_run(config)

    def stop(self) -> None:
        """Cancel the run; the window is idle at once (a TensorFlow call in flight finishes in
        the background and its result is dropped)."""
        if self.active is None:
            return
        self.worker.cancel(self.active)
        self._idle(f"stopped after {self.clock.elapsed() / 1000:.1f} s")

    def _idle(self, message: str) -> None:
        self.active = None
        self.demo_modes = []
        self._flush()
        self.tick.stop()
        self.message.setText(message)
        if self.progress.maximum() == 0:
            self.progress.setRange(0, 1)
        self._sync()
        if self.device is not None:
            self.settled.emit()

    @Slot(object)
    def _on_ready(self, device: dict) -> None:
        self.device = device
        self.device_label.setText(
            f"{device['device']} · cuDNN {device['cudnn']} · TensorFlow {device['tensorflow']}"
        )
        self._set_title()
        if self.active is None:
            self.message.setText("ready: set parameters and press Run (Ctrl+R)")
            self.settled.emit()
        else:
            self.message.setText(f"{MODE_TEXT[self.run_config.mode]}: running…")

    @Slot(int, object)
    def _on_progress(self, run_id: int, update: TraceUpdate) -> None:
        if run_id != self.active:
            return
        self.pending.update(update.arrays)
        if any(k.endswith(("_by_pass", "_by_batch", "_by_step")) for k in update.arrays):
            self.rows_total = update.total
        self.dirty = True
        self.progress.setRange(0, max(update.total, 1))
        self.progress.setValue(update.done)
        self.progress.setFormat(f"{update.done}/{update.total}")
        self.message.setText(f"{MODE_TEXT[self.run_config.mode]}: {update.message}")

    @Slot(int, object)
    def _on_finished(self, run_id: int, trace: GradientTrace) -> None:
        if run_id != self.active:
            return
        seconds = self.clock.elapsed() / 1000
        self.show_trace(trace, seconds)
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        self.progress.setFormat("done")
        self._idle(f"done: {MODE_TEXT.get(trace.mode, trace.mode)} in {seconds:.2f} s")

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

    def _draw(self, arrays, config: RunConfig | None) -> None:
        for panel in (self.norm, self.rows, self.units):
            panel.draw(arrays, config, self.rows_total)

    def show_trace(self, trace: GradientTrace, seconds: float | None) -> None:
        """Draw a finished or loaded trace in every panel."""
        self.trace, self.run_config, self.rows_total, self.dirty = trace, trace.config, None, False
        self._draw(trace.arrays, trace.config)
        self.summary.draw(
            MODE_TEXT.get(trace.mode, trace.mode), trace.arrays, trace.config, seconds
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
        self.show_trace(trace, None)
        self.message.setText(f"opened {path}")
        self._add_recent(str(Path(path).resolve()))
        return True

    def open_path(self, path: str) -> None:
        """Open a dropped file: a trace, weights, or an input sequence."""
        suffix = Path(path).suffix.lower()
        if suffix == ".npz":
            try:
                with np.load(path, allow_pickle=False) as data:
                    is_trace = "config_json" in data.files
            except (OSError, ValueError) as exc:
                self.show_error("Cannot open file", f"{path}: not a readable .npz file ({exc})")
                return
            if is_trace:
                self.open_trace(path)
            else:
                self.params.set_path("weights", path)
        elif suffix == ".npy":
            self.params.set_path("inputs", path)
        elif suffix in WEIGHT_SUFFIXES:
            self.params.set_path("weights", path)
        else:
            self.show_error(
                "Cannot open file",
                f"{path}: expected a trace (.npz), weights ({', '.join(WEIGHT_SUFFIXES)}, .npz)"
                " or inputs (.npy)",
            )

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
        pattern = " ".join(f"*{s}" for s in (*WEIGHT_SUFFIXES, ".npz"))
        path, _ = QFileDialog.getOpenFileName(self, "Open weights", "", f"Weights ({pattern})")
        if path:
            self.params.set_path("weights", path)

    def open_inputs_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open inputs", "", "Arrays (*.npy *.npz)")
        if path:
            self.params.set_path("inputs", path)

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
        for panel in (self.norm, self.rows, self.units):
            panel.set_options(self.log_action.isChecked(), self.normalise_action.isChecked())

    def _set_title(self) -> None:
        config = self.run_config or self.params.config()
        parts = ["lstmviz", MODE_TEXT.get(config.mode, config.mode)]
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
        for widget in (self.stop_button, self.stop_action):
            widget.setEnabled(running)
        self.params.setEnabled(not running)
        for action in (self.save_action, self.export_action, self.export_panel_action):
            action.setEnabled(self.trace is not None)
        for panel in (self.norm, self.rows, self.units):
            panel.export_action.setEnabled(self.trace is not None)
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
