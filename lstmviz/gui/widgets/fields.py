"""The dock's file fields: a file's path (`FileField`) and the LSTM layer read from it
(`LayerField`)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLineEdit,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionFrame,
    QToolButton,
    QWidget,
)

from lstmviz.core.config import help_for
from lstmviz.weights.loaders import LayerInfo


class FileField(QWidget):
    """A read-only path with a clear button (empty: seeded random, or none) and a browse
    button ("…": `browse` fires; the window opens the file). With no path it can name what a
    recording shown was made of instead (`set_recorded`: no file, so no run reads it); any
    path set, or cleared, ends that."""

    changed = Signal()
    browse = Signal()

    def __init__(self, placeholder: str, clear_tip: str = "Back to seeded random"):
        super().__init__()
        self.edit = QLineEdit(readOnly=True, placeholderText=placeholder, toolTip=placeholder)
        self.edit.installEventFilter(self)  # resized or shown: the text fitted again
        self._path: str | None = None
        self._recorded = False
        # What the field says (`_say`): the text, the part kept whole at its end, and where a
        # text too wide for the field is cut (a file name: in its middle, so that its start
        # and extension stay in view)
        self._said: tuple[str, str, Qt.TextElideMode] = ("", "", Qt.ElideMiddle)
        clear = QToolButton(text="✕", toolTip=clear_tip, autoRaise=True)
        clear.clicked.connect(lambda: self.set_path(None))
        pick = QToolButton(text="…", toolTip="Open a file", autoRaise=True)
        pick.clicked.connect(self.browse.emit)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit)
        layout.addWidget(pick)
        layout.addWidget(clear)

    def path(self) -> str | None:
        return self._path

    def set_path(self, path: str | None) -> None:
        """Show the file's name (each name, for a comma-separated list; one too long for the
        field shortened in its middle); the whole path, or what an empty field means, in the
        tooltip."""
        self.set_recorded(None)
        self._path = path or None
        self.set_missing(False)
        self.changed.emit()

    def set_missing(self, missing: bool) -> None:
        """Mark the path as a file that is not there (in red, "not found", the path in the
        tooltip), or show it plainly. The path stays: a run says the file is missing instead of
        running seeded values in its place."""
        path = self._path or ""
        names = ", ".join(Path(part).name or part for part in path.split(","))
        missing = missing and bool(path)
        self._say(names, " (not found)" if missing else "")
        self.edit.setStyleSheet("color: #b00020;" if missing else "")
        self.edit.setToolTip(f"Not found: {path}\n(open the file again, or clear it with ✕)"
                             if missing else path or self.edit.placeholderText())  # fmt: skip

    def recorded(self) -> bool:
        """Whether the field names a recording's model or data (`set_recorded`)."""
        return self._recorded

    def set_recorded(self, text: str | None, tip: str = "", end: str = "") -> None:
        """Show `text` then `end` (in italics: not a file; `text` cut at its end to fit, `end`
        whole) and `tip` in a field with no path; None: back to what the path, or its
        absence, says. No `changed`: the config is the same."""
        if (text is not None and self._path is not None) or (text is None and not self._recorded):
            return
        self._recorded = text is not None
        font = self.edit.font()
        font.setItalic(text is not None)
        self.edit.setFont(font)
        self._say(text or "", end if text is not None else "", how=Qt.ElideRight)
        self.edit.setToolTip(tip if text is not None else self.edit.placeholderText())

    def _say(self, text: str, end: str = "", how: Qt.TextElideMode = Qt.ElideMiddle) -> None:
        """Show `text` then `end`, `text` cut (`how`, with "…") to what the field has room for."""
        self._said = (text, end, how)
        self._fit()

    def _fit(self) -> None:
        text, end, how = self._said
        if self.edit.isVisible() and text:  # a hidden field's width is not the one it shows
            option = QStyleOptionFrame()
            self.edit.initStyleOption(option)
            rect = self.edit.style().subElementRect(QStyle.SubElement.SE_LineEditContents,
                                                    option, self.edit)  # fmt: skip
            margins = self.edit.textMargins()
            metrics = self.edit.fontMetrics()
            # QLineEdit keeps 2 px on each side of its text
            room = rect.width() - margins.left() - margins.right() - 4
            room -= metrics.horizontalAdvance(end)
            text = metrics.elidedText(text, how, max(room, 0))
        self.edit.setText(text + end)
        self.edit.setCursorPosition(0)  # should it still overflow: its start

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if watched is self.edit and event.type() in (QEvent.Type.Resize, QEvent.Type.Show,
                                                     QEvent.Type.FontChange):  # fmt: skip
            self._fit()
        return super().eventFilter(watched, event)


SIZES_ROLE = Qt.UserRole + 1  # a layer item's "I=…, H=…", shown beside its name in the list
ONLY_LAYER = "the file's only LSTM"


class _WithSizes(QStyledItemDelegate):
    """Draws a layer item of the Layer list as "name  (I=…, H=…)" (its text stays the name)."""

    def initStyleOption(self, option, index) -> None:  # noqa: N802 (Qt's name)
        super().initStyleOption(option, index)
        if sizes := index.data(SIZES_ROLE):
            option.text = f"{option.text}   ({sizes})"


class LayerField(QComboBox):
    """Which LSTM layer of the weights file: a list of the file's layers (`set_layers`, each
    with its sizes beside it and in its tooltip) that also takes a typed name (a Bidirectional's
    own name, NAME/backward). `picked` fires with the name chosen or typed (Enter, or leaving
    the field) when it is not the layer loaded; `revert` shows the loaded one again."""

    picked = Signal(str)

    def __init__(self):
        super().__init__(editable=True, insertPolicy=QComboBox.NoInsert)
        self.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.setMinimumContentsLength(6)
        self.setItemDelegate(_WithSizes(self))
        self.lineEdit().setPlaceholderText(ONLY_LAYER)
        self.loaded = ""  # the name the weights shown were read with ("": the only layer)
        self.activated.connect(self._entered)
        self.lineEdit().editingFinished.connect(self._entered)

    def text(self) -> str:
        return self.currentText().strip()

    def setText(self, name: str) -> None:  # noqa: N802 (QLineEdit's name: the field's text)
        """Show `name` as the layer loaded: what the weights were read with, or what a config
        names (its file is read again, and its layers listed, by the window)."""
        self.loaded = name
        self._show(name)

    def clear(self) -> None:
        super().clear()
        self.loaded = ""
        self.lineEdit().setPlaceholderText(ONLY_LAYER)
        self.setToolTip(help_for("layer"))

    def set_layers(self, layers: list[LayerInfo], name: str | None) -> None:
        """List the weights file's LSTM `layers` and show `name`, the one read (None: the
        file's only layer)."""
        self.blockSignals(True)
        super().clear()
        for info in (layer for layer in layers if layer.name):
            self.addItem(info.name)
            self.setItemData(self.count() - 1, info.label, Qt.ToolTipRole)
            self.setItemData(self.count() - 1, f"I={info.input_dim}, H={info.hidden}", SIZES_ROLE)
        self.blockSignals(False)
        only = ONLY_LAYER
        if len(layers) == 1:
            only += f" (I={layers[0].input_dim}, H={layers[0].hidden})"
        self.lineEdit().setPlaceholderText(only)
        listed = "\n".join(f"  {layer.label}" for layer in layers)
        self.setToolTip(f"{help_for('layer')}\n\nIn this file:\n{listed}" if listed else
                        help_for("layer"))  # fmt: skip
        self.setText(name or "")

    def revert(self) -> None:
        """Show the layer loaded again (the one typed or picked could not be read)."""
        self._show(self.loaded)

    def _show(self, name: str) -> None:
        self.blockSignals(True)
        self.setCurrentIndex(self.findText(name))  # -1 (no item) for a name not listed
        self.setEditText(name)
        self.blockSignals(False)

    @Slot()
    def _entered(self) -> None:
        name = self.text()
        if name == self.loaded:
            return
        if not name:  # emptied: the layer loaded stays
            self.revert()
            return
        self.picked.emit(name)
