"""The parameter editor: one widget per RunConfig field, ranges from `config.RANGES`; in model
mode, the loaded model's layer table (`gui.widgets.model_table`)."""

from __future__ import annotations

import html
import re
from pathlib import Path

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QLabel,
    QLineEdit,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from lstmviz.core import modes
from lstmviz.core.config import (
    GENERATORS,
    LOSSES,
    PYTORCH_KERAS_NAMES,
    PYTORCH_LOSSES,
    RANGES,
    TASKS,
    RunConfig,
    help_for,
)
from lstmviz.core.errors import ConfigError, cli_term, render
from lstmviz.gui.widgets.fields import FileField, LayerField
from lstmviz.gui.widgets.model_table import DirectionTable, ModelTable
from lstmviz.weights.loaders import LayerInfo
from lstmviz.weights.model_spec import ModelSpec

SIZE_FIELDS = ("steps", "batch", "input_dim", "hidden")  # what loaded files can fix
CUDNN_NOTE = (
    "Each batch shares one weight set. Per-sample weights (one set per sequence) "
    "cannot run on cuDNN, so they are not offered."
)

# Keras losses the loss field offers in model mode (any other Keras loss name can be typed).
MODEL_LOSSES = ("binary_crossentropy", "sparse_categorical_crossentropy",
                "categorical_crossentropy", "mse", "mae", "huber")  # fmt: skip
FILE_WIDGETS = {  # name: (placeholder, the clear button's tooltip)
    "model": ("none: File → Open model… (Ctrl+M)", "No model"),
    "weights": ("random (seeded)", "Back to seeded random"),
    "inputs": ("random (seeded)", "Back to seeded random"),
    "targets": ("y from the data file, or drawn", "No targets file"),
}

LABELS = {
    "mode": "Mode",
    "model": "Model",
    "module": "Module",
    "steps": "Steps T",
    "batch": "Batch B",
    "input_dim": "Input I",
    "hidden": "Hidden H",
    "passes": "Passes P",
    "batches": "Batches N",
    "generator": "Generator",
    "loss": "Loss",
    "anchors": "Anchors",
    "task": "Task",
    "train_steps": "Train steps",
    "connectivity": "Connectivity",
    "seed": "Seed",
    "random_state": "Initial state",
    "weights": "Weights",
    "layer": "Layer",
    "inputs": "Inputs",
    "targets": "Targets",
    "time_major": "Inputs layout",
}


def dock_term(name: str, value: str | None = None) -> str:
    """The dock's words for field `name` (`errors.Term`): its label ("Steps T", "Inputs
    layout"), "a Weights file" for a file it names; a field the dock has no row for, as the
    command line names it."""
    if name not in LABELS:
        return cli_term(name, value)
    label = LABELS[name]
    if value == "FILE":
        return f"{'an' if label[0] in 'AEIOU' else 'a'} {label} file"
    return f"{label} {value}" if value else label


def in_dock_terms(text: str) -> str:
    """A message (an error's, as `LstmvizError.marked` keeps it: the computing process sends
    them so) in the dock's words (`dock_term`)."""
    return render(text, dock_term)


class FieldsArea(QScrollArea):
    """The dock's fields, scrolled up and down only: as wide as they need (a model's layer
    table widens them), as short as the window needs (it fits a 768-px screen)."""

    def __init__(self, fields: QWidget):
        super().__init__(widgetResizable=True, frameShape=QFrame.NoFrame)
        inner = QWidget()
        column = QVBoxLayout(inner)
        column.setContentsMargins(0, 0, 0, 0)
        column.addWidget(fields)
        column.addStretch(1)  # the fields keep their heights when the dock is tall
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setSizeAdjustPolicy(QScrollArea.AdjustToContents)
        self.setFocusPolicy(Qt.NoFocus)  # no Tab stop of its own: Tab goes field to field
        self.setWidget(inner)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt's name)
        inner = self.widget().minimumSizeHint().width() if self.widget() else 0
        return QSize(inner + self.verticalScrollBar().sizeHint().width(),
                     super().minimumSizeHint().height())  # fmt: skip

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            self.updateGeometry()  # the fields' width changed: the dock follows
        return super().eventFilter(watched, event)


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
            elif name in FILE_WIDGETS:
                widget = FileField(*FILE_WIDGETS[name])
            elif name == "layer":
                widget = LayerField()
            elif name == "module":  # a PyTorch state dict's module: its factory's import path
                widget = QLineEdit(placeholderText="pkg.mod:factory (a PyTorch state dict)",
                                   clearButtonEnabled=True)  # fmt: skip
            elif name == "anchors":  # the error of one step: which steps are followed back
                widget = QLineEdit(placeholderText="last step (every:K, or 10,20,30)",
                                   clearButtonEnabled=True)  # fmt: skip
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
        # name -> {mode: what the file is to that mode}, where it differs from its text
        self.mode_texts: dict[str, dict[str, str]] = {}
        self.model_spec: ModelSpec | None = None  # the model file's, while it is loaded
        self.compiled_loss: str | None = None  # what the Loss field got from a model's compile
        self.pytorch = False  # the model loaded is PyTorch's: the Loss field offers its losses
        # The recording (its file name) whose model and data the Model and Data fields name,
        # while the dock is as that recording filled it (`show_recorded`)
        self.recorded_from: str | None = None
        self.recorded_how = ""
        self.form = form
        self.sources = QLabel(wordWrap=True, textFormat=Qt.RichText)
        self.sources.setStyleSheet("color: #333; font-size: 8pt;")
        form.addRow(self.sources)
        self.model_table = ModelTable()
        self.model_table.hide()
        form.addRow(self.model_table)
        self.direction_table = DirectionTable()  # a graph trace's directions, while shown
        form.addRow(self.direction_table)
        self.widgets["mode"].currentIndexChanged.connect(self._mode_changed)
        self.widgets["passes"].valueChanged.connect(self._apply_locks)
        for name in FILE_WIDGETS:
            self.widgets[name].changed.connect(self._files_changed)
        self.set_config(RunConfig())

    def config(self) -> RunConfig:
        """The RunConfig the widgets show (not yet validated)."""
        values = {}
        for name, widget in self.widgets.items():
            if isinstance(widget, LayerField):
                values[name] = widget.text() or None
            elif isinstance(widget, QComboBox) and widget.isEditable():  # a Keras loss name
                # a PyTorch model's loss left empty: the mean of its output (no targets)
                values[name] = widget.currentText().strip() or ("mean" if self.pytorch else "")
            elif isinstance(widget, QComboBox):
                values[name] = widget.currentData()
            elif isinstance(widget, QSpinBox):
                values[name] = widget.value()
            elif isinstance(widget, QCheckBox):
                values[name] = widget.isChecked()
            elif isinstance(widget, QLineEdit):
                values[name] = widget.text().strip() or None
            else:
                values[name] = widget.path()  # a FileField
        return RunConfig.from_dict(values)

    def set_config(self, config: RunConfig) -> None:
        # a file this config does not name fixes no size now: else its sizes would be locked
        # again over the config's while the fields are filled, before its own field is
        for name in [n for n, (path, *_) in self.loaded.items() if getattr(config, n) != path]:
            del self.loaded[name]
        for name, widget in self.widgets.items():
            value = getattr(config, name)
            if isinstance(widget, LayerField):  # its list: when the weights are read again
                widget.clear()
                widget.setText(value or "")
            elif isinstance(widget, QComboBox) and widget.isEditable():
                widget.setCurrentText(value or "")
            elif isinstance(widget, QComboBox):
                widget.setCurrentIndex(max(widget.findData(value), 0))
            elif isinstance(widget, QSpinBox):
                widget.setValue(value)
            elif isinstance(widget, QCheckBox):
                widget.setChecked(bool(value))
            elif isinstance(widget, QLineEdit):
                widget.setText(value or "")
            else:
                widget.set_path(value)  # a FileField
        self._mode_changed()

    def validated(self) -> RunConfig:
        """The config a run of the shown mode gets (the fields the mode does not read are
        cleared), checked as the CLI checks it: values, combinations, files that exist, and a
        run that fits in memory. Raises ConfigError naming the field as the dock does."""
        config = self.config().for_mode()
        mode = modes.get(config.mode)
        try:
            self._check_needed(config, mode)
            config.validate().check_flags()
            for name in FILE_WIDGETS:
                path = getattr(config, name)
                listed = [path] if path else []
                if name == "weights" and path and mode.lists_weight_files:
                    from lstmviz.engine.problem.weight_sources import weight_paths  # no TensorFlow

                    listed = weight_paths(path, config.batches)  # one file per batch
                for one in (p for p in listed if not Path(p).is_file()):
                    raise ConfigError(name, f"{one}: no such file")
            return config.check_memory()
        except ConfigError as exc:  # the dock's names for the fields, not the CLI's flags
            raise exc.worded(dock_term) from None

    def _check_needed(self, config: RunConfig, mode: modes.Mode) -> None:
        """ConfigError for a file the mode cannot run without (a model) or a loss the model
        does not give, in the dock's words: how to give it here."""
        for name in (n for n in mode.requires if not getattr(config, n)):
            how = FILE_WIDGETS[name][0].split(": ", 1)[-1]
            if self.widgets[name].recorded():
                raise ConfigError(name, f"the {name} of {self.recorded_from} was "
                                  f"{self.recorded_how}, in another process: it cannot be re-run "
                                  f"from here. To run it, open its saved {name} file: {how}; or "
                                  "choose another mode")  # fmt: skip
            raise ConfigError(name, f"{mode.label} mode needs a {name} file: {how}, "
                              "or drop the file on the window")  # fmt: skip
        if mode.any_loss and not config.loss:
            raise ConfigError("loss", "the model has no compiled loss: choose "
                              "one (mse, binary_crossentropy, …) or type a Keras loss name")

    def set_path(self, name: str, path: str | None) -> None:
        self.widgets[name].set_path(path)

    def set_loaded(self, name: str, path: str, sizes: dict[str, int], text: str,
                   layer: str | None = None, layers: list[LayerInfo] = (),
                   mode_texts: dict[str, str] | None = None) -> None:  # fmt: skip
        """Use the weights or inputs file `path` (name "weights"/"inputs"), read by the caller:
        `sizes` are the fields it fixes (locked while it is loaded), `text` says what it is
        (`mode_texts`: {mode: text} for the modes that read it otherwise: the caption follows
        the mode shown without reading the file again). Weights: `layer` is the name they were
        read with, `layers` the file's LSTM layers (the Layer field lists them)."""
        self.loaded.pop(name, None)
        self.mode_texts[name] = dict(mode_texts or {})
        if name == "weights":
            self.widgets["layer"].set_layers(list(layers), layer)
        self.widgets[name].set_path(path)
        self.loaded[name] = (path, dict(sizes), text)
        self._apply_locks()

    def forget(self, name: str) -> None:
        """The file `name` stays named but no longer fixes any size (it does not fit the mode
        shown)."""
        if self.loaded.pop(name, None) is not None:
            self._apply_locks()

    def set_model(self, path: str, spec: ModelSpec, text: str) -> None:
        """Use the model in `path` (read by the caller): mode "model", its layer table, and the
        sizes it fixes locked (T when the model takes one length; H from its first LSTM)."""
        self.pytorch = False
        sizes = {"hidden": spec.lstm_layers()[0].directions()[0].hidden}
        if spec.input_shape[0] is not None:
            sizes["steps"] = int(spec.input_shape[0])
        loss = self.widgets["loss"]
        # the field shows the last model's compiled loss, not one the user chose
        inherited = self.model_mode() and loss.currentText().strip() == self.compiled_loss
        self.compiled_loss = None
        mode = self.widgets["mode"]
        mode.setCurrentIndex(mode.findData("model"))
        self.loaded.pop("model", None)
        self.model_spec = None
        self.widgets["model"].set_path(path)
        self.model_spec = spec
        self.loaded["model"] = (path, sizes, text)
        self.model_table.set_spec(spec)
        self._loss_choices(True)
        self._apply_locks()
        if spec.loss is None and not spec.stack:  # the user chooses it: no silent default
            loss.setCurrentText("")
        elif spec.stack and inherited:  # a stack has no loss of its own: a fresh start's
            loss.setCurrentText(RunConfig().loss)
        loss.lineEdit().setPlaceholderText(
            "" if spec.loss or spec.stack else f"choose: {spec.no_loss}")

    def set_program(self, path: str, text: str, pytorch: bool = False) -> None:
        """Use the program in `path` that the window does not read (PyTorch's files, a Keras
        graph: read in the computing process): mode "model", no layer table, no sizes fixed,
        the loss the user's — for PyTorch (`pytorch`) one of its losses: a loss it has not
        (the built-in modes' mean_h or last_mse, a Keras one) is cleared for the user to
        choose."""
        mode = self.widgets["mode"]
        mode.setCurrentIndex(mode.findData("model"))
        self.loaded.pop("model", None)
        self.model_spec, self.compiled_loss = None, None
        self.widgets["model"].set_path(path)
        self.loaded["model"] = (path, {}, text)
        self.model_table.set_spec(None)
        self.pytorch = pytorch
        self._loss_choices(True)
        loss = self.widgets["loss"]
        kept = {*PYTORCH_LOSSES, *PYTORCH_KERAS_NAMES} - {"mean_h"}  # the built-in modes' too
        if pytorch and loss.currentText().strip() not in kept:
            loss.setCurrentText("")
        loss.lineEdit().setPlaceholderText(
            "choose: mse, cross_entropy, … (mean: no targets)" if pytorch else "")
        self._apply_locks()

    def show_recorded(self, shown: str, arrays, how: str = "recorded during model.fit",
                      tag: str = "recorded") -> None:
        """The dock shows `shown` ("recording run.lvz", "trace t.npz") in model mode, made
        (`how`) from a model and data in another process's memory: the Model and Data fields
        that name no file say what it was made of (its `arrays`' `model_source` and
        `inputs_source`, marked `tag`), and that a run from here cannot repeat it. Until the
        user sets up a run of their own: another mode, or a file opened or cleared."""
        model_source = str(arrays.get("model_source", "")) or "a Keras model"
        inputs_source = str(arrays.get("inputs_source", "")) or "data in memory"
        if model_source.startswith("PyTorch") and how.endswith("model.fit"):
            how = "recorded during training"  # lstmviz.torch.GradientFlowRecorder's
        self.drop_recorded()
        model, data = self.widgets["model"], self.widgets["inputs"]
        if not self.model_mode() or model.path() is not None:
            return
        named = re.search(r"'([^']+)'", model_source)  # "keras.Model 'name' (…)"
        tip = (
            f"{shown[:1].upper()}{shown[1:]}: {how}, of {model_source}.\n"
            "That model was in another process's memory: it cannot be re-run from here. To run\n"
            "it, open its saved file (File → Open model…, Ctrl+M)."
        )
        model.set_recorded(named[1] if named else model_source, tip, end=f" ({tag})")
        shapes = inputs_source.partition(": ")[2] or inputs_source
        tip = (
            f"{shown[:1].upper()}{shown[1:]}: {how}, on this data ({inputs_source}).\n"
            "It was in another process's memory, in no file: a run from here draws\n"
            "seeded random data of the model's input shape unless you open a data file."
        )
        data.set_recorded(f"{tag}: {shapes}", tip)
        self.recorded_from, self.recorded_how = shown, how
        self._apply_locks()

    def drop_recorded(self) -> None:
        """The dock no longer shows a recording's model and data (`show_recorded`)."""
        if self.recorded_from is None:
            return
        self.recorded_from = None
        for name in ("model", "inputs"):
            self.widgets[name].set_recorded(None)
        self._apply_locks()

    def model_mode(self) -> bool:
        """Whether the mode shown runs a whole model."""
        return modes.get(self.widgets["mode"].currentData()).whole_model

    def _mode_changed(self) -> None:
        mode = modes.get(self.widgets["mode"].currentData())
        self.cudnn_note.setVisible(mode.uses("generator"))
        self._loss_choices(mode.any_loss)
        label = self.form.labelForField(self.widgets["inputs"])
        label.setText(self._label("inputs", mode))
        if not mode.whole_model:  # a run of another mode reads neither the model nor the data
            self.drop_recorded()
        self._apply_locks()

    @staticmethod
    def _label(name: str, mode: modes.Mode) -> str:
        """The dock's label of field `name` while `mode` is shown."""
        return "Data" if name == "inputs" and mode.whole_model else LABELS[name]

    def _loss_choices(self, model: bool) -> None:
        """Model mode: any Keras loss name (typed, or one of MODEL_LOSSES; a stack of LSTM
        layers also takes the hidden-state losses), or for a PyTorch model (`pytorch`) its
        losses; the other modes: LOSSES."""
        box = self.widgets["loss"]
        names = ((PYTORCH_LOSSES if self.pytorch else (*LOSSES, *MODEL_LOSSES)) if model
                 else LOSSES)  # fmt: skip
        if box.isEditable() == model and [box.itemText(i) for i in range(box.count())] == list(
                names):  # fmt: skip
            return
        current = box.currentText() if box.isEditable() else box.currentData()
        box.blockSignals(True)
        box.clear()
        box.setEditable(model)
        for value in names:
            box.addItem(value, value)
        if model:
            box.setCurrentText(current or "")
        else:
            box.setCurrentIndex(max(box.findData(current), 0))
        box.blockSignals(False)

    def _files_changed(self) -> None:
        self.drop_recorded()  # a file opened or cleared: the dock sets up a run of its own
        for name in list(self.loaded):  # cleared or replaced: no longer fixes anything
            if self.widgets[name].path() != self.loaded[name][0]:
                del self.loaded[name]
        if not self.widgets["weights"].path():
            self.widgets["layer"].clear()
        if "model" not in self.loaded and self.model_spec is not None:
            self.model_spec = None
            self.model_table.set_spec(None)
        if "model" not in self.loaded and self.pytorch:
            self.pytorch = False
            self._loss_choices(self.model_mode())
        self._apply_locks()

    def _apply_locks(self) -> None:
        """Enable the fields the mode reads (the registry says which), set and lock the sizes
        the loaded files fix, and show what was loaded."""
        if not hasattr(self, "loaded"):  # still building
            return
        mode = modes.get(self.widgets["mode"].currentData())
        units = self.widgets[mode.count].value() if mode.steps_per_unit else 1
        fixed: dict[str, tuple[int, str]] = {}
        for name, (path, sizes, _) in self.loaded.items():
            # Training reads its own task sequences from an inputs file (the engine checks
            # them); a file the mode does not read fixes nothing.
            if not mode.uses(name) or (name == "inputs" and mode.trains):
                continue
            for field, value in sizes.items():
                if field == "steps" and mode.steps_per_unit:
                    if value % units:
                        continue  # the run will say that T does not split into its units
                    value //= units
                fixed[field] = (value, path)
        spec = self.model_spec if mode.whole_model else None
        if spec is not None and spec.loss is not None and not spec.stack:
            fixed["loss"] = (spec.loss, self.loaded["model"][0])  # compiled into the model
            self.widgets["loss"].setCurrentText(spec.loss)
            self.compiled_loss = spec.loss
        self.model_table.setVisible(spec is not None)
        needs = {"layer": "weights", "time_major": "inputs", "targets": "inputs"}
        for name, widget in self.widgets.items():
            enabled = mode.uses(name) and name not in fixed
            if name in needs:
                enabled = enabled and bool(self.widgets[needs[name]].path())
            if name == "task" and self.widgets["inputs"].path():
                enabled = False  # training on the sequences of the inputs file instead
            widget.setEnabled(enabled)
            # a model run reads few fields: the others make room for its layer table (the
            # one-LSTM modes keep theirs in view, greyed out where unused)
            self.form.setRowVisible(widget, not mode.whole_model or mode.uses(name))
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
        used = {name: value for name, value in self.loaded.items() if mode.uses(name)}
        used = {name: (path, sizes, self.mode_texts.get(name, {}).get(mode.name, text))
                for name, (path, sizes, text) in used.items()}  # fmt: skip
        for name, (path, _, text) in used.items():  # a file the mode ignores is not listed
            shown = text.replace(str(path), Path(path).name, 1)
            label = self._label(name, mode)
            lines.append(f"<b>{label}:</b> {html.escape(shown)}")
        tips = [text for _, _, text in used.values()]
        if self.recorded_from is not None:
            lines.append(f"<b>Shown:</b> {html.escape(self.recorded_from)}, "
                         f"{html.escape(self.recorded_how)}: its model and data are in no "
                         "file here, so Run cannot repeat it")  # fmt: skip
            tips.append(self.widgets["model"].edit.toolTip())
        self.sources.setText("<br>".join(lines))
        self.sources.setToolTip("\n".join(tips))
        self.sources.setVisible(bool(lines))
