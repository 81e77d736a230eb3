"""The parameter editor: one widget per RunConfig field, ranges from `config.RANGES`."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QToolButton,
    QWidget,
)

from lstmviz import modes
from lstmviz.config import GENERATORS, LOSSES, RANGES, TASKS, RunConfig, help_for
from lstmviz.errors import ConfigError

SIZE_FIELDS = ("steps", "batch", "input_dim", "hidden")  # what loaded files can fix
CUDNN_NOTE = (
    "Each batch shares one weight set. Per-sample weights (one set per sequence) "
    "cannot run on cuDNN, so they are not offered."
)

LABELS = {
    "mode": "Mode",
    "steps": "Steps T",
    "batch": "Batch B",
    "input_dim": "Input I",
    "hidden": "Hidden H",
    "passes": "Passes P",
    "batches": "Batches N",
    "generator": "Generator",
    "loss": "Loss",
    "task": "Task",
    "train_steps": "Train steps",
    "connectivity": "Connectivity",
    "seed": "Seed",
    "random_state": "Initial state",
    "weights": "Weights",
    "layer": "Layer",
    "inputs": "Inputs",
    "time_major": "Inputs layout",
}


class FileField(QWidget):
    """A read-only path with a clear button; empty means "seeded random"."""

    changed = Signal()

    def __init__(self, placeholder: str):
        super().__init__()
        self.edit = QLineEdit(readOnly=True, placeholderText=placeholder)
        clear = QToolButton(text="✕", toolTip="Back to seeded random", autoRaise=True)
        clear.clicked.connect(lambda: self.set_path(None))
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit)
        layout.addWidget(clear)

    def path(self) -> str | None:
        return self.edit.text() or None

    def set_path(self, path: str | None) -> None:
        self.edit.setText(path or "")
        self.edit.setToolTip(path or "")
        self.changed.emit()


class ParamsEditor(QWidget):
    """Edits a RunConfig. `config()` reads the widgets; `set_config()` fills them."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.widgets: dict[str, QWidget] = {}
        form = QFormLayout(self)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        choices = {
            "mode": modes.names(),
            "generator": GENERATORS,
            "loss": LOSSES,
            "task": TASKS,
        }
        for name in LABELS:
            if name in choices:
                widget = QComboBox()
                for value in choices[name]:
                    widget.addItem(modes.label(value) if name == "mode" else value, value)
            elif name in RANGES:
                widget = QSpinBox(accelerated=True)
                widget.setRange(*RANGES[name])
                widget.setGroupSeparatorShown(name != "seed")
            elif name in ("weights", "inputs"):
                widget = FileField("random (seeded)")
            elif name == "layer":
                widget = QLineEdit(placeholderText="the file's only LSTM", readOnly=True)
            else:
                text = {
                    "random_state": "random h0, c0",
                    "time_major": "time-major [T, B, I]",
                    "connectivity": "map C[t, s] = ‖∂L_t/∂h_s‖",
                }
                widget = QCheckBox(text[name])
            widget.setToolTip(help_for(name))
            form.addRow(LABELS[name], widget)
            form.labelForField(widget).setToolTip(help_for(name))
            self.widgets[name] = widget
            if name == "generator":
                self.cudnn_note = QLabel(CUDNN_NOTE, wordWrap=True, toolTip=help_for("generator"))
                self.cudnn_note.setStyleSheet("color: #666; font-size: 8pt;")
                form.addRow(self.cudnn_note)
        # What the loaded files are and which sizes they fix: name -> (path, sizes, description)
        self.loaded: dict[str, tuple[str, dict[str, int], str]] = {}
        self.sources = QLabel(wordWrap=True, textFormat=Qt.RichText)
        self.sources.setStyleSheet("color: #333; font-size: 8pt;")
        form.addRow(self.sources)
        self.widgets["mode"].currentIndexChanged.connect(self._mode_changed)
        self.widgets["passes"].valueChanged.connect(self._apply_locks)
        self.widgets["weights"].changed.connect(self._files_changed)
        self.widgets["inputs"].changed.connect(self._files_changed)
        self.set_config(RunConfig())

    def config(self) -> RunConfig:
        """The RunConfig the widgets show (not yet validated)."""
        values = {}
        for name, widget in self.widgets.items():
            if isinstance(widget, QComboBox):
                values[name] = widget.currentData()
            elif isinstance(widget, QSpinBox):
                values[name] = widget.value()
            elif isinstance(widget, QCheckBox):
                values[name] = widget.isChecked()
            elif isinstance(widget, FileField):
                values[name] = widget.path()
            else:
                values[name] = widget.text().strip() or None
        return RunConfig.from_dict(values)

    def set_config(self, config: RunConfig) -> None:
        for name, widget in self.widgets.items():
            value = getattr(config, name)
            if isinstance(widget, QComboBox):
                widget.setCurrentIndex(max(widget.findData(value), 0))
            elif isinstance(widget, QSpinBox):
                widget.setValue(value)
            elif isinstance(widget, QCheckBox):
                widget.setChecked(bool(value))
            elif isinstance(widget, FileField):
                widget.set_path(value)
            else:
                widget.setText(value or "")
        self._mode_changed()

    def validated(self) -> RunConfig:
        """The config a run of the shown mode gets (the fields the mode does not read are
        cleared), checked as the CLI checks it: values, combinations, files that exist, and a
        run that fits in memory. Raises ConfigError naming the field."""
        config = self.config().for_mode().validate().check_flags()
        for name in ("weights", "inputs"):
            path = getattr(config, name)
            if path and not Path(path).is_file():
                raise ConfigError(LABELS[name], f"{path}: no such file")
        return config.check_memory()

    def set_path(self, name: str, path: str | None) -> None:
        self.widgets[name].set_path(path)

    def set_loaded(
        self, name: str, path: str, sizes: dict[str, int], text: str, layer: str | None = None
    ) -> None:
        """Use the weights or inputs file `path` (name "weights"/"inputs"), read by the caller:
        `sizes` are the fields it fixes (locked while it is loaded), `text` says what it is."""
        self.loaded.pop(name, None)
        if name == "weights":
            self.widgets["layer"].setText(layer or "")
        self.widgets[name].set_path(path)
        self.loaded[name] = (path, dict(sizes), text)
        self._apply_locks()

    def _mode_changed(self) -> None:
        self.cudnn_note.setVisible(self.widgets["mode"].currentData() == "batchwise")
        self._apply_locks()

    def _files_changed(self) -> None:
        for name in list(self.loaded):  # cleared or replaced: no longer fixes anything
            if self.widgets[name].path() != self.loaded[name][0]:
                del self.loaded[name]
        if not self.widgets["weights"].path():
            self.widgets["layer"].clear()
        self._apply_locks()

    def _apply_locks(self) -> None:
        """Enable the fields the mode reads (the registry says which), set and lock the sizes
        the loaded files fix, and show what was loaded."""
        if not hasattr(self, "loaded"):  # still building
            return
        mode = modes.get(self.widgets["mode"].currentData())
        passes = self.widgets["passes"].value()
        fixed: dict[str, tuple[int, str]] = {}
        for name, (path, sizes, _) in self.loaded.items():
            # Training reads its own task sequences from an inputs file (the engine checks
            # them); a file the mode does not read fixes nothing.
            if not mode.uses(name) or (name == "inputs" and mode.name == "train"):
                continue
            for field, value in sizes.items():
                if field == "steps" and mode.name == "multipass":
                    if value % passes:
                        continue  # the run will say that T does not split into passes
                    value //= passes
                fixed[field] = (value, path)
        needs = {"layer": "weights", "time_major": "inputs"}  # enabled once the file is given
        for name, widget in self.widgets.items():
            enabled = mode.uses(name) and name not in fixed
            if name in needs:
                enabled = enabled and bool(self.widgets[needs[name]].path())
            widget.setEnabled(enabled)
        for field in SIZE_FIELDS:
            widget = self.widgets[field]
            if field in fixed:
                value, path = fixed[field]
                widget.setValue(value)
                widget.setToolTip(
                    f"{help_for(field)}\n\nFixed by {path}\n(clear the file with ✕ to edit this)"
                )
            else:
                widget.setToolTip(help_for(field))
        lines = []
        for name, (path, _, text) in self.loaded.items():
            shown = text.replace(str(path), Path(path).name, 1)
            lines.append(f"<b>{LABELS[name]}:</b> {html.escape(shown)}")
        self.sources.setText("<br>".join(lines))
        self.sources.setToolTip("\n".join(text for _, _, text in self.loaded.values()))
        self.sources.setVisible(bool(lines))
