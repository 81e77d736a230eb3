"""Dialogs: choose a file to open; pick one LSTM layer of a weights file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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


def ask_to_open(parent: QWidget, title: str, wanted: str, opener: Callable[[str], object]):
    """A file dialog `title` offering the files `wanted` (a Qt name filter, "Models (*.keras
    *.h5)"); the file chosen goes to `opener` (nothing when the dialog is cancelled)."""
    path, _ = QFileDialog.getOpenFileName(parent, title, "", wanted)
    if path:
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
