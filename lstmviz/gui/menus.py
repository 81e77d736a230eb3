"""The window's menus and their shortcuts: File, Run, View, Help."""

from __future__ import annotations

import html
import importlib.metadata
import platform
from pathlib import Path

import numpy as np
import PySide6
from PySide6.QtCore import QEvent, QObject, Qt, Slot, qVersion
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QMessageBox

import lstmviz

# Esc stops a run at once only when that throws away less than this many seconds of it (or
# the units done are offered to keep): a stray Esc (closing a tooltip, a notebook's habit)
# never loses a long run.
ESC_ASKS_AFTER = 5.0
# Help → About points at these when lstmviz runs from its source folder (an editable install)
README = Path(__file__).resolve().parents[2] / "README.md"
DOCS = README.parent / "docs"

# View menu: panels that can be turned off, by their `PanelArea` name.
PANEL_ACTIONS = (("Gradient norm panel", "norm"), ("Loss panel", "loss"),
                 ("Rows heatmap", "rows"), ("Units heatmap", "units"),
                 ("Connectivity map", "connectivity"),
                 ("Model: gradient norm by layer", "layers"), ("Model: gates", "gates"),
                 ("Model: layers heatmap", "layer_map"), ("Model: input saliency", "saliency"),
                 ("Model: per-unit heatmap", "layer_units"),
                 ("Recording: gradient norm by layer", "record_norms"),
                 ("Recording: loss per record", "record_loss"),
                 ("Recording: layers × training step", "record_map"))  # fmt: skip


def _action(window, menu, text: str, slot, shortcut=None, tip: str = "") -> QAction:
    action = QAction(text, window, statusTip=tip, toolTip=tip)
    if shortcut is not None:
        action.setShortcut(QKeySequence(shortcut))
    action.triggered.connect(slot)
    menu.addAction(action)
    return action


class WindowKeys(QObject):
    """The window's Ctrl shortcuts win over a text field's own use of the key: on Linux
    desktops a line edit (every spin box of the dock) takes Ctrl+E as "end of line", so
    File → Export… would do nothing while the focus is in a field. Watches each widget of the
    window that takes the focus; a key no enabled action has stays the field's."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        QApplication.instance().focusChanged.connect(self._focused)

    @Slot(object, object)
    def _focused(self, _old, new) -> None:
        if new is not None and new.window() is self.window:
            new.installEventFilter(self)  # again: no second copy, and it runs first

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if event.type() != QEvent.Type.ShortcutOverride or not (
            event.modifiers() & Qt.ControlModifier
        ):
            return False
        keys = QKeySequence(event.keyCombination())
        # True, not accepted: the field does not claim the key, the window's action takes it
        return any(action.isEnabled() and action.shortcut() == keys
                   for action in self.window.findChildren(QAction))  # fmt: skip


def _export(name: str, window) -> None:
    """`gui.dialogs.export_dialog.<name>(window)`, imported on first use (with the export code)."""
    from lstmviz.gui.dialogs import export_dialog

    getattr(export_dialog, name)(window)


def shortcut_rows(window) -> list[tuple[str, str, str]]:
    """(menu, item, shortcut) of every menu item with a shortcut, in menu order."""
    rows = []
    for top in window.menuBar().actions():
        for action in top.menu().actions() if top.menu() else ():
            keys = action.shortcut().toString(QKeySequence.NativeText)
            if keys:
                rows.append((top.text().replace("&", ""), action.text().replace("&", ""), keys))
    return rows


def shortcuts_html(window) -> str:
    """Help → Keyboard shortcuts: a table of `shortcut_rows`, and what needs the mouse."""
    cells = "".join(
        f"<tr><td><b>{html.escape(keys)}</b></td><td>{html.escape(menu)} → {html.escape(item)}"
        "</td></tr>"
        for menu, item, keys in shortcut_rows(window)
    )
    return (f"<table cellspacing='0' cellpadding='3'>{cells}</table>"
            f"<p>Esc on a run that has computed {ESC_ASKS_AFTER:.0f} s or more with nothing Stop "
            "could keep asks first (Esc again: it goes on). Right-click a panel → Export "
            "panel… to save one panel. Drop a trace, recording, weights, model or inputs file "
            "on the window to open it. Hover a field or button for what it does.</p>")  # fmt: skip


def show_shortcuts(window) -> None:
    QMessageBox.information(window, "Keyboard shortcuts", shortcuts_html(window))


def show_about(window) -> None:
    """Help → About: lstmviz's version, those of Python, TensorFlow (as the computing process
    reports it: "loading…" until then, "not loaded" if it failed), Keras, Qt, pyqtgraph and
    NumPy, and where the documentation is."""
    import pyqtgraph as pg

    tf = (window.device["tensorflow"] if window.device
          else window.device_label.text().removeprefix("TensorFlow: "))
    try:  # the installed version, without importing Keras (TensorFlow) in the window
        keras = importlib.metadata.version("keras")
    except importlib.metadata.PackageNotFoundError:
        keras = "not installed"
    docs = (f"Documentation: <a href='{README.as_uri()}'>README.md</a> and "
            f"<a href='{DOCS.as_uri()}'>docs/</a> in {html.escape(str(README.parent))}. "
            if README.is_file() and DOCS.is_dir() else "")  # fmt: skip
    QMessageBox.about(
        window,
        "About lstmviz",
        f"<h3>lstmviz {lstmviz.__version__}</h3>"
        "<p>See how gradients flow through an LSTM: dL/dh_t at every step, through one pass, "
        "several passes, per-batch weights, a training run, or your whole Keras model.</p>"
        f"<p>Python {platform.python_version()} · TensorFlow {tf} · Keras {keras}<br>"
        f"PySide6 {PySide6.__version__} (Qt {qVersion()}) · "
        f"pyqtgraph {pg.__version__} · NumPy {np.__version__}</p>"
        f"<p>{docs}Every command-line flag: <code>lstmviz run --help</code>. Keyboard "
        "shortcuts: Help → Keyboard shortcuts (F1).</p>",
    )


def build_menus(window) -> None:
    """Add the menus to `window` (a MainWindow, its parts made but the run view: its items
    are wired to the parts) and keep the actions it enables as its attributes: save_action,
    export_action, export_panel_action, save_weights_action, run_action, pause_action,
    stop_action, verify_action, log_action, normalise_action, chain_action, anchored_action."""
    w, bar = window, window.menuBar()
    w.window_keys = WindowKeys(w)
    file = bar.addMenu("&File")
    files = w.files
    _action(w, file, "&Open trace…", files.open_trace_dialog, QKeySequence.Open,
            "Open a .npz trace saved by lstmviz (also: drop it on the window)")
    w.save_action = _action(w, file, "&Save trace…", files.save_trace_dialog, QKeySequence.Save,
                            "Save the current trace as .npz")
    w.export_action = _action(w, file, "&Export…", lambda: _export("export_dialog", w),
                              "Ctrl+E", "Export the plots as PNG, SVG, a PDF report or CSV "
                              "(as lstmviz export)")
    w.export_panel_action = _action(
        w, file, "Export &panel under cursor…", lambda: _export("export_under_cursor", w),
        "Ctrl+Shift+E", "Export the panel the mouse points at (also: right-click a panel)")
    _action(w, file, "Open &recording…", w.recordings.open_recording_dialog, "Ctrl+Shift+O",
            "Show a recording of a training run (.lvz, GradientFlowCallback or lstmviz run "
            "--record) and follow it while fit writes it (also: drop it on the window)")
    _action(w, file, "&Compare with…", w.diagnosis.compare_with_dialog, None,
            "Compare the trace or recording shown (A) with another (B): both runs' curves, "
            "log10(‖B‖/‖A‖) per direction and timestep, both diagnoses")
    file.addMenu(files.recent_menu)
    files.recent_menu.menuAction().setStatusTip("Open again a trace or recording opened or "
                                                "saved lately")
    file.addSeparator()
    _action(w, file, "Open &model…", files.open_model_dialog, "Ctrl+M",
            "Run a whole saved model (.keras, Keras 2 .h5, or a weights-only stack of LSTM "
            "layers) under its own loss: model mode (also: drop it on the window)")
    _action(w, file, "Open &data…", files.open_data_dialog, None,
            "The model's data: .npz with x (and y), or x as .npy (model mode)")
    _action(w, file, "Open &weights…", files.open_weights_dialog, None,
            "Use LSTM weights from a file instead of seeded random ones")
    _action(w, file, "Open &inputs…", files.open_inputs_dialog, None,
            "Use an input sequence from a .npy/.npz file")
    w.save_weights_action = _action(w, file, "Save trained weigh&ts…",
                                    files.save_weights_dialog, None, "Write a training run's "
                                    "final weights as .weights.h5 or .npz")
    file.addSeparator()
    # Ctrl+Q on every platform (QKeySequence.Quit has no key on Windows nor without a desktop theme)
    _action(w, file, "&Quit", w.close, "Ctrl+Q", "Close the window (a run is stopped first)")

    run = bar.addMenu("&Run")
    w.run_action = _action(w, run, "&Run", lambda: w.start_run(), "Ctrl+R",
                           "Start a run with the parameters in the dock")
    w.pause_action = _action(w, run, "&Pause", lambda: w.pause_button.toggle(), "Ctrl+P",
                             "Hold the run after its current step; again to resume")
    w.stop_action = _action(w, run, "&Stop", lambda: w.run_view.stop(), "Esc",
                            "Stop the run (keeping the passes, batches or steps done, if "
                            "you like)")
    w.verify_action = _action(w, run, "&Verify gradients", w.verifier.verify, "Ctrl+Shift+V",
                              "Check dL/dh_t by finite differences")

    view = bar.addMenu("&View")
    w.log_action = _action(w, view, "&Log scale", w.view_changed, "Ctrl+L",
                           "Logarithmic gradient norms in every panel")
    w.normalise_action = _action(w, view, "&Normalise per pass", w.view_changed, "Ctrl+N",
                                 "Divide each pass, batch or row by its maximum: the gradient "
                                 "curves and the rows and layers heatmaps (per-unit heatmaps "
                                 "and losses stay absolute)")
    w.chain_action = _action(w, view, "&Chain hand-overs on one time axis", w.chain_changed,
                             None, "A model whose encoder hands its final state to a decoder: "
                             "the encoder's steps, the hand-over, then the decoder's, on one "
                             "time axis of the norm curves and the layers heatmap (off: each "
                             "direction over its own steps)")  # fmt: skip
    w.anchored_action = _action(w, view, "&Error of one step t*", w.diagnosis.anchored_toggled,
                                "Ctrl+T", "A model trace: beside each direction's full "
                                "gradient, the loss of one anchor step t* alone followed back "
                                "(dotted; a diamond at the farthest step it reaches), the "
                                "curve its diagnosis reads where the loss enters at every "
                                "step; the anchor in the Diagnosis dock")  # fmt: skip
    for action in (w.log_action, w.normalise_action, w.chain_action, w.anchored_action):
        action.setCheckable(True)
    w.chain_action.setChecked(True)
    view.addSeparator()
    dock = w.dock.toggleViewAction()
    dock.setStatusTip("Show or hide the parameters dock with Run, Pause and Stop")
    view.addAction(dock)
    diagnosis = w.diagnosis.dock.toggleViewAction()
    diagnosis.setStatusTip("Show or hide the Diagnosis dock: decay per step, reach and verdict "
                           "per direction")  # fmt: skip
    view.addAction(diagnosis)
    for text, name in PANEL_ACTIONS:  # a panel shows when checked and the run has its data
        tip = f"Show or hide “{text}” (it appears when the run, trace or recording has its data)"
        action = QAction(text, w, checkable=True, checked=True, statusTip=tip)
        action.toggled.connect(lambda on, n=name: w.set_panel_hidden(n, not on))
        view.addAction(action)
    summary = QAction("Summary", w, checkable=True, checked=True,
                      statusTip="Show or hide the summary line and Verify under the panels")
    summary.toggled.connect(w.summary.setVisible)
    view.addAction(summary)

    help_menu = bar.addMenu("&Help")
    _action(w, help_menu, "&Keyboard shortcuts", lambda: show_shortcuts(w),
            QKeySequence.HelpContents, "Every shortcut of the menus (F1)")
    _action(w, help_menu, "&About lstmviz", w.about, None, "Versions of lstmviz, Python, "
            "TensorFlow, Keras, Qt, pyqtgraph and NumPy, and where the documentation is")
