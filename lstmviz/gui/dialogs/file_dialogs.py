"""Dialogs: choose a file to open; pick one LSTM layer of a weights file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSettings
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from lstmviz.weights.loaders import LayerInfo

FOLDER_KEY = "files/dir"  # the settings' key of the folder the file dialogs start in


def last_folder(settings: QSettings) -> str:
    """The folder of the file last chosen in a file dialog (this session or an earlier one),
    if it is still there; "" (the dialog's own choice: the working folder) otherwise."""
    folder = settings.value(FOLDER_KEY, "")
    return folder if isinstance(folder, str) and folder and Path(folder).is_dir() else ""


def remember_folder(settings: QSettings, path: str) -> None:
    """The next file dialog starts in the folder of `path`, a file just chosen in one."""
    settings.setValue(FOLDER_KEY, str(Path(path).absolute().parent))


def in_last_folder(settings: QSettings, name: str) -> str:
    """A save dialog's proposed file `name`, in the folder the dialogs last used."""
    folder = last_folder(settings)
    return str(Path(folder) / name) if folder else name


def ask_to_open(window, title: str, wanted: str, opener: Callable[[str], object]):
    """A file dialog `title` offering the files `wanted` (a Qt name filter, "Models (*.keras
    *.h5)"), starting in the folder last used (`window.settings`); the file chosen goes to
    `opener` (nothing when the dialog is cancelled)."""
    path, _ = QFileDialog.getOpenFileName(window, title, last_folder(window.settings), wanted)
    if path:
        remember_folder(window.settings, path)
        opener(path)


class LayerPickerDialog(QDialog):
    """Lists the LSTM layers of a file (name, I, H, note); `chosen()` is the selected one."""

    def __init__(self, path: str, layers: list[LayerInfo], parent: QWidget | None = None):
        super().__init__(parent)
        self.layers = list(layers)
        self.setWindowTitle("Pick an LSTM layer")
        text = QLabel(
            f"<b>{Path(path).name}</b> holds {len(self.layers)} LSTM layers. "
            "Which one should lstmviz run?"
        )
        text.setToolTip(str(path))
        text.setWordWrap(True)
        self.table = QTableWidget(len(self.layers), 4)
        self.table.setHorizontalHeaderLabels(["Layer", "Input I", "Hidden H", "Note"])
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.table.verticalHeader().hide()
        for row, layer in enumerate(self.layers):
            cells = (layer.name or "(unnamed)", str(layer.input_dim), str(layer.hidden), layer.note)
            for column, value in enumerate(cells):
                self.table.setItem(row, column, QTableWidgetItem(value))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.selectRow(0)
        self.table.doubleClicked.connect(self.accept)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(text)
        layout.addWidget(self.table)
        layout.addWidget(buttons)
        self.resize(520, 120 + 30 * min(len(self.layers), 8))

    def rows(self) -> list[list[str]]:
        """The table's text, row by row (for tests and bug reports)."""
        return [
            [self.table.item(r, c).text() for c in range(self.table.columnCount())]
            for r in range(self.table.rowCount())
        ]

    def chosen(self) -> LayerInfo | None:
        rows = self.table.selectionModel().selectedRows()
        return self.layers[rows[0].row()] if rows else None


def pick_layer(parent: QWidget | None, path: str, layers: list[LayerInfo]) -> LayerInfo | None:
    """Ask which layer to use; None if the user cancels."""
    dialog = LayerPickerDialog(path, layers, parent)
    if dialog.exec() != QDialog.Accepted:
        return None
    return dialog.chosen()
