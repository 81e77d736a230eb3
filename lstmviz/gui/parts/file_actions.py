"""The window's file actions: open traces, weights, inputs, models and their data (menus, drops,
the command line; recordings open in gui/parts/recording_actions.py, weights in
gui/parts/weights_actions.py, mixed in), save traces and trained weights, the recent-files
menu. A part the window owns (`MainWindow.files`). Files are read here with NumPy and h5py (no
TensorFlow): a bad one gets a dialog naming it and the problem, and nothing changes."""

from __future__ import annotations

import itertools
import os
import zipfile
from pathlib import Path

import numpy as np
from PySide6.QtCore import QObject, QSettings, Qt, Signal, Slot
from PySide6.QtWidgets import QDockWidget, QFileDialog, QLabel, QMainWindow, QMenu

from lstmviz.analysis.report.summary import trained_on
from lstmviz.core import modes
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import GraphModel, LstmvizError
from lstmviz.gui.dialogs.file_dialogs import ask_to_open, in_last_folder, remember_folder
from lstmviz.gui.parts.recording_actions import RecordingActions
from lstmviz.gui.parts.weights_actions import WeightsActions
from lstmviz.gui.state.run_state import RunState
from lstmviz.gui.state.shown import Shown
from lstmviz.gui.threads import trace_loading
from lstmviz.gui.widgets.params import FILE_WIDGETS, ParamsEditor
from lstmviz.io import files
from lstmviz.io.absolute_paths import absolute, listed_weights
from lstmviz.io.inputs import TRACE_KEY, describe_inputs, describe_training, load_inputs
from lstmviz.io.model_data import check_data, load_data
from lstmviz.io.trace import GradientTrace
from lstmviz.weights.loaders import weight_files
from lstmviz.weights.model_files import load_model

MAX_RECENT = 8


def _stamp(path: str | None) -> tuple | None:
    """A file as it is on disk: (path, size, modification time in ns); None when it is not
    there (or no path)."""
    if not path:
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return path, stat.st_size, stat.st_mtime_ns


class FileActions(QObject, WeightsActions):
    """Opens files into the dock (`params`: weights, inputs, a model and its data) or into
    `shown` (traces; recordings through `recordings`), saves the trace shown and its trained
    weights (through `worker`), and keeps the recent files in `settings` and `recent_menu`.
    `window` is the dialogs' parent; its `show_trace`, `show_error`, `set_title` and
    `start_worker` show what was opened. Files opened are named by their absolute paths: the
    settings and the traces keep them, and another working folder must not find another file
    by the same name.

    `failed_in_thread`: a trace file read in a thread could not be opened (nothing to draw)."""

    failed_in_thread = Signal()

    def __init__(self, window: QMainWindow, params: ParamsEditor, dock: QDockWidget,
                 settings: QSettings, message: QLabel, shown: Shown, state: RunState,
                 worker, recordings: RecordingActions) -> None:  # fmt: skip
        super().__init__(window)
        self.window, self.params, self.dock, self.settings = window, params, dock, settings
        self.message, self.shown, self.state, self.worker = message, shown, state, worker
        self.recordings = recordings
        self.recent_menu = QMenu("Recent files", window)
        self.requests = itertools.count(1)  # ids of save requests
        self._quiet_notes: list[str] | None = None  # while files are re-read: what could not be
        self._trace_loader: trace_loading.TraceLoader | None = None
        # What the inputs file gave when read last, as sequences ("inputs") and as a model's
        # data ("data"): {kind: (key, result)}. A mode switch reads it the other way; reading a
        # big file again (0.5 GB: seconds) would block the window each time, for the same result.
        self._inputs_read: dict[str, tuple] | None = None

    def _read_before(self, kind: str, key: tuple | None):
        """The result kept for reading the inputs file as `kind` with `key` (the file's
        `_stamp` and how it was read), None if it was not read so (or changed since)."""
        kept = (self._inputs_read or {}).get(kind)
        return kept[1] if key is not None and kept is not None and kept[0] == key else None

    def _keep_read(self, kind: str, key: tuple | None, result: tuple) -> None:
        if key is not None:
            self._inputs_read = {**(self._inputs_read or {}), kind: (key, result)}

    def recent(self) -> list[str]:
        value = self.settings.value("recent", [])
        if isinstance(value, str):
            return [value]
        # a list; anything else is a settings file edited by hand: no recent files
        return [str(path) for path in value] if isinstance(value, (list, tuple)) else []

    def add_recent(self, path: str) -> None:
        """File → Recent files takes `path`, a file just opened or saved: the trace shown
        came from it or went to it, and the title names it."""
        paths = [path] + [p for p in self.recent() if p != path]
        self.settings.setValue("recent", paths[:MAX_RECENT])
        self.fill_recent()
        if self.shown.trace is not None and not self.state.running:
            self.shown.set_file(path)
            self.window.set_title()

    def fill_recent(self) -> None:
        self.recent_menu.clear()
        for path in self.recent():
            action = self.recent_menu.addAction(path)
            action.triggered.connect(lambda _=False, p=path: self.open_recent(p))
        self.recent_menu.setEnabled(bool(self.recent()))

    def open_recent(self, path: str) -> bool:
        """File → Recent files: open `path` (a trace or a recording); one that is gone leaves
        the list (after the dialog saying so)."""
        if self.open_path(path):
            return True
        if not Path(path).exists():
            self.settings.setValue("recent", [p for p in self.recent() if p != path])
            self.fill_recent()
        return False

    @property
    def trace_loader(self) -> trace_loading.TraceLoader:
        if self._trace_loader is None:  # made in the window's thread, on first use
            self._trace_loader = trace_loading.TraceLoader(self.window)
            self._trace_loader.loaded.connect(self._trace_loaded)
        return self._trace_loader

    def open_trace(self, path: str) -> bool:
        """Show the trace in `path`. A big file is read in a thread (`trace_loading`): True
        then means it is being read, and a bad one gets its dialog when that ends."""
        self.trace_loader.drop()  # a file opened since is the one wanted
        try:
            size = Path(path).stat().st_size
        except OSError:
            size = 0  # `load` says what is wrong
        if size >= trace_loading.IN_THREAD_BYTES:
            self.trace_loader.start(path, (self.shown.view.log, self.shown.view.normalise))
            self.message.setText(f"opening {path} ({size / 2**20:.0f} MB)…")
            return True
        try:
            trace = GradientTrace.load(path)
        except LstmvizError as exc:
            self.window.show_error("Cannot open trace", str(exc))
            return False
        return self._show_opened(path, trace)

    def opening(self) -> bool:
        """Whether a trace file is being read in a thread."""
        return self._trace_loader is not None and self._trace_loader.pending is not None

    def drop_opening(self) -> None:
        """A run started: the trace file being read (if any) is not shown when it arrives."""
        if self.opening():
            self.trace_loader.drop()
            self.message.setText("not opened: a run started while the trace file was read")

    @Slot(int, str, object, str)
    def _trace_loaded(self, ticket: int, path: str, trace, error: str) -> None:
        if not self.trace_loader.take(ticket):
            return  # another file was opened, or a run started, meanwhile
        if error:
            self.message.setText(f"not opened: {path}")
            self.window.show_error("Cannot open trace", error)
        else:
            self._show_opened(path, trace)
        if trace is None:
            self.failed_in_thread.emit()  # nothing to draw

    def _show_opened(self, path: str, trace: GradientTrace) -> bool:
        self.recordings.close_recording()
        self.params.set_config(trace.config)
        problems = self.reload_sources()
        if trace.mode == "model" and trace.config.model is None:  # a keras.Model in memory
            how = "computed from a model in memory (a notebook or model.fit)"
            self.params.show_recorded(f"trace {Path(path).name}", trace.arrays, how, "in memory")
        self.window.show_trace(trace, None)
        self.message.setText(" · ".join([f"opened {path}", *problems]))
        self.add_recent(str(Path(path).resolve()))
        return True

    def open_path(self, path: str, layer: str | None = None) -> bool:
        """Open a file as if dropped on the window: a trace, a recording, weights (its LSTM
        `layer`, or the one asked for when it holds several), inputs or a model
        (`lstmviz.io.files.kind` tells which). In model mode weights open as a model (a stack of
        LSTM layers, or a state dict for the dock's Module) and inputs as its data. False,
        after a dialog, when it is none of them or cannot be read."""
        try:
            kind = files.kind(path)
        except LstmvizError as exc:
            self.window.show_error("Cannot open file", str(exc))
            return False
        if layer is not None and kind in ("weights", "model"):
            return self._open_layer(path, layer)
        if self.params.widgets["module"].text().strip() and kind == "weights":
            kind = "model"  # a state dict for the module the dock names
        if self.params.model_mode():
            kind = {"weights": "model", "inputs": "data"}.get(kind, kind)
        if kind == "weights":
            return self.open_weights(path, layer)
        opener = {"trace": self.open_trace, "recording": self.recordings.open_recording,
                  "inputs": self.open_inputs, "data": self.open_data,
                  "model": self.open_model}[kind]  # fmt: skip
        return opener(path)

    def _open_layer(self, path: str, layer: str) -> bool:
        """The LSTM `layer` of the weights or model file `path`, as `lstmviz run --weights PATH
        --layer NAME` runs it: in model mode the window leaves it for the one-LSTM modes'
        default (a model runs all its layers, so a layer named would go unread)."""
        if not self.open_weights(path, layer):
            return False
        if self.params.model_mode():
            mode = self.params.widgets["mode"]
            mode.setCurrentIndex(mode.findData(RunConfig().mode))
        return True

    def open_model_dialog(self) -> None:
        """File → Open model…: the usual names of model files, or any file (a TorchScript
        program is told by its content, whatever its name)."""
        wanted = f"Models ({files.pattern(files.MODELS)});;All files (*)"
        ask_to_open(self.window, "Open model", wanted, self.open_model)

    def open_data_dialog(self) -> None:
        wanted = f"Data: x (and y) ({files.pattern(files.INPUTS)})"
        ask_to_open(self.window, "Open data", wanted, self.open_data)

    def open_targets_dialog(self) -> None:
        ask_to_open(self.window, "Open targets y", "Targets (*.npy)", self.open_targets)

    def _not_opened(self, what: str, exc: LstmvizError, quiet: bool) -> bool:
        """A file that cannot be opened: a dialog naming the problem, or when `quiet` (files
        re-read at start-up or on a mode change) a line in the status bar. Returns False."""
        if quiet:
            self.message.setText(f"{what} not loaded: {exc}")
            if self._quiet_notes is not None:
                self._quiet_notes.append(self.message.text())
        else:
            self.window.show_error(f"Cannot open {what}", str(exc))
        return False

    def open_model(self, path: str, quiet: bool = False) -> bool:
        """Run the model in `path` (File → Open model…, a drop): mode "model", its layers in
        the dock, the sizes it fixes locked. Data already loaded that does not fit the model
        is let go (with a message). A bad file: a dialog naming the file and the problem
        (an unsupported layer: its name and class), and nothing changes."""
        path = absolute(path)
        module = self.params.widgets["module"]
        program = files.torch_program(path)
        if program or files.suffix_of(path, (".keras", ".h5", ".hdf5")):
            module.clear()  # the factory of a state dict's module: not of these
        if program:  # PyTorch reads it in the computing process
            what = {"export": "torch.export program", "torchscript": "TorchScript model"}[program]
            self.params.set_program(path, f"{Path(path).name} ({what})", pytorch=True)
            if not quiet:
                self.message.setText(f"{what} {Path(path).name} (Run: Ctrl+R)")
            return True
        module = module.text().strip()
        if module:
            # a PyTorch state dict and the factory of its module: PyTorch reads both in the
            # computing process
            self.params.set_program(path, f"{Path(path).name} (a state dict for {module})",
                                    pytorch=True)  # fmt: skip
            if not quiet:
                self.message.setText(f"checkpoint {Path(path).name} for {module} (Run: Ctrl+R)")
            return True
        try:
            spec = load_model(path)  # NumPy and h5py: no TensorFlow
        except GraphModel as exc:  # Keras runs the graph, in the computing process
            why = str(exc).removeprefix(f"{path}: ")
            self.params.set_program(path, f"{Path(path).name} (a graph Keras runs: {why})")
            if not quiet:
                self.message.setText(f"model {Path(path).name}: a graph Keras runs, lstmviz its "
                                     f"recurrent layers ({why}) (Run: Ctrl+R)")  # fmt: skip
            return True
        except LstmvizError as exc:
            return self._not_opened("model", exc, quiet)
        self.params.set_model(path, spec, spec.source)
        needed = self.dock.widget().minimumSizeHint().width()
        if self.dock.width() < needed:  # room for the layer table
            self.window.resizeDocks([self.dock], [needed], Qt.Horizontal)
        data, let_go = self.params.widgets["inputs"].path(), ""
        if data and not self.open_data(data, quiet=True):
            self.params.set_path("inputs", None)
            self.params.set_path("targets", None)
            let_go = f" · data {Path(data).name} let go: it does not fit this model"
        if not quiet:
            directions = len(spec.lstm_directions())
            self.message.setText(f"model {spec.name!r}: {len(spec.layers) - 1} layers, "
                                 f"{directions} LSTM directions (Run: Ctrl+R){let_go}")  # fmt: skip
        return True

    def open_data(self, path: str, quiet: bool = False, targets: str | None = None) -> bool:
        """Use x (and y) in `path` as the model's data (File → Open data…, a drop in model
        mode): B and T follow x and stay locked. x (and y) of a shape the loaded model does
        not take: a dialog saying what it takes, and nothing changes."""
        path, targets = absolute(path), targets and absolute(targets)
        spec = self.params.model_spec
        # checked against this model: its id, with the spec kept in the result (no id reused)
        stamp, y_stamp = _stamp(path), _stamp(targets)
        key = (stamp, y_stamp, id(spec)) if stamp and (y_stamp or not targets) else None
        read = self._read_before("data", key)
        if read is None:
            try:
                named = _named_inputs(path) if spec is None and not targets else None
                # a model of several inputs: its first array by name, else x (and y)
                x, y, description = named or load_data(path, targets)
                if spec is not None:
                    check_data(spec, x, y, where=path)
            except LstmvizError as exc:
                return self._not_opened("data", exc, quiet)
            sizes = {"batch": int(x.shape[0])}
            if x.ndim >= 2:
                sizes["steps"] = int(x.shape[1])
            read = (sizes, description, spec)
            self._keep_read("data", key, read)
        sizes, description, _ = read
        mode = self.params.widgets["mode"]
        mode.setCurrentIndex(mode.findData("model"))
        self.params.set_loaded("inputs", path, sizes, description)
        self.params.set_path("targets", targets)
        if not quiet:
            self.message.setText(f"data: {description}")
        return True

    def open_targets(self, path: str) -> bool:
        """Targets y from a .npy, for the x of the data file already loaded."""
        data = self.params.widgets["inputs"].path()
        if not data:
            self.window.show_error("Cannot open targets",
                                   "open the data x first (File → Open data…)")
            return False
        return self.open_data(data, targets=path)

    def open_trace_dialog(self) -> None:
        ask_to_open(self.window, "Open trace", "lstmviz traces (*.npz)", self.open_trace)

    def save_trace_dialog(self) -> None:
        trace = self.shown.trace
        if trace is None:
            return
        path, _ = QFileDialog.getSaveFileName(self.window, "Save trace",
                                              in_last_folder(self.settings, "trace.npz"),
                                              "Traces (*.npz)")  # fmt: skip
        if not path:
            return
        remember_folder(self.settings, path)
        path = path if path.endswith(".npz") else path + ".npz"
        try:
            trace.save(path)
        except (LstmvizError, OSError) as exc:
            self.window.show_error("Cannot save trace", str(exc))
            return
        self.message.setText(f"saved {path}")
        self.add_recent(str(Path(path).resolve()))

    def open_inputs_dialog(self) -> None:
        wanted = f"Arrays ({files.pattern(files.INPUTS)})"
        ask_to_open(self.window, "Open inputs", wanted, self.open_inputs)

    def open_inputs(self, path: str, quiet: bool = False) -> bool:
        """Use the input sequence in `path`: T, B and I follow it (locked while loaded)."""
        path, time_major = absolute(path), self.params.widgets["time_major"].isChecked()
        stamp = _stamp(path)
        key = (stamp, time_major) if stamp else None
        read = self._read_before("inputs", key)
        if read is None:
            try:
                x = load_inputs(path, time_major)
            except LstmvizError as exc:
                return self._not_opened("inputs", exc, quiet)
            steps, batch, input_dim = (int(n) for n in x.shape)
            description = describe_inputs(path, x, time_major)
            sizes = {"steps": steps, "batch": batch, "input_dim": input_dim}
            # Training reads the file's array as stored, as sequences [N, …] (`read_task_file`).
            names = files.npz_names(path) if zipfile.is_zipfile(path) else None
            as_read = time_major or (names is not None and TRACE_KEY in names)
            stored = (steps, batch, input_dim) if as_read else (batch, steps, input_dim)
            read = (sizes, description, describe_training(path, stored, names))
            self._keep_read("inputs", key, read)
        sizes, description, training = read
        self.params.set_loaded("inputs", path, sizes, description, mode_texts={"train": training})
        if not quiet:
            training_mode = self.params.widgets["mode"].currentData() == "train"
            self.message.setText(f"inputs: {training if training_mode else description}")
        return True

    def reload_sources(self) -> list[str]:
        """Re-read the weights, model and inputs files the parameters name (settings, a
        reopened trace, a layout change) so the sizes they fix are shown and locked. Files
        not there are marked in their fields (a run refuses them). Returns what could not be
        re-read, one line each (also in the status bar)."""
        self._quiet_notes = notes = []
        try:
            self._reread_sources()
        finally:
            self._quiet_notes = None
        config = self.params.config()
        gone = []
        for name in FILE_WIDGETS:
            value = getattr(config, name) or ""
            listed = value.split(",") if listed_weights(config, name) else [value]
            missing = [path for path in listed if path and not Path(path).exists()]
            self.params.widgets[name].set_missing(bool(missing))
            if modes.get(config.mode).uses(name):  # one the mode does not read: only marked
                gone += [f"{name} {path}" for path in missing]
        if gone:
            notes.insert(0, f"not found: {', '.join(gone)}")
        if notes:
            self.message.setText(" · ".join(notes))
        return notes

    def _reread_sources(self) -> None:
        config = self.params.config()
        if config.weights and Path(config.weights).is_file() and config.mode != "batchwise":
            self.open_weights(config.weights, config.layer or None, quiet=True)
        elif config.weights and config.mode == "batchwise" and config.generator == "files":
            listed = [str(p) for p in weight_files(config.weights)]
            if all(Path(p).is_file() for p in listed):
                self.open_batch_weights(listed, config.layer or None, quiet=True)
        if config.model and Path(config.model).is_file() and config.mode == "model":
            self.open_model(config.model, quiet=True)
        self.reread_inputs()

    def reread_inputs(self) -> None:
        """Read the inputs file again as the mode shown takes it: a model's data (x, y) in
        model mode, an input sequence otherwise (the sizes it fixes differ)."""
        config = self.params.config()
        if not (config.inputs and Path(config.inputs).is_file()):
            return
        if config.mode == "model":
            targets = config.targets if config.targets and Path(config.targets).is_file() else None
            read = self.open_data(config.inputs, quiet=True, targets=targets)
        else:
            read = self.open_inputs(config.inputs, quiet=True)
        if not read:  # it fixes nothing in this mode
            self.params.forget("inputs")

    def save_weights_dialog(self) -> None:
        """Save the trained weights of the current training trace (written by the computing
        process: `.weights.h5` needs Keras)."""
        trace = self.shown.trace
        if trace is None or "readout_kernel" not in trace:
            return
        keras, numpy = "Keras weights (*.weights.h5)", "NumPy arrays (*.npz)"
        name = f"{trained_on(trace.config, stem=True)}-trained.weights.h5"
        path, chosen = QFileDialog.getSaveFileName(
            self.window, "Save trained weights", in_last_folder(self.settings, name),
            f"{keras};;{numpy}"
        )
        if not path:
            return
        remember_folder(self.settings, path)
        if not path.endswith((".weights.h5", ".npz")):
            path += ".npz" if chosen == numpy else ".weights.h5"
        self.message.setText(f"saving trained weights to {path}…")
        self.worker.request_save_weights(next(self.requests), trace, path)
        self.window.start_worker()

    @Slot(int, str, str)
    def on_saved(self, request_id: int, path: str, error: str) -> None:
        """The worker's answer to a save request."""
        if error:
            self.message.setText("trained weights not saved")
            self.window.show_error("Cannot save trained weights", error)
        else:
            self.message.setText(f"saved trained weights: {path}")


def _named_inputs(path: str):
    """(the first input, y or None, a description) of an .npz holding one array per input of
    a model (by name or x0, x1, …; no `x`), which the computing process matches to the model's
    inputs; None for another file."""
    if not path.endswith(".npz"):
        return None
    try:
        names = files.npz_names(path)
    except (OSError, ValueError, zipfile.BadZipFile):
        return None
    inputs = [n for n in names if n != "y" and not n.startswith("y_")]
    if "x" in names or not inputs or not files.is_data(names):
        return None
    with np.load(path, allow_pickle=False) as data:
        first = data[inputs[0]]
    shapes = ", ".join(inputs)
    return first, None, f"{path}: inputs {shapes}" + (
        ", targets" if len(inputs) < len(names) else "")  # fmt: skip
