"""The dock's table of a loaded model's layers: name (with the recurrent directions it adds to
a run: → forward, ← backward), class (naming the cell: "GRU", "Bidirectional(GRU)"), output
shape, parameters."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from lstmviz.core.schema import CELL_CLASSES
from lstmviz.weights.model import CELLS, ModelSpec, class_text, shape_text

HEADERS = ("Layer", "Class", "Output shape", "Params")
MAX_ROWS = 12  # shown at once; a longer model scrolls


def direction_marks(layer) -> str:
    """ "→" for a recurrent layer (LSTM, GRU, SimpleRNN), "←" when it reads the sequence
    backwards, "→ ←" for a Bidirectional (forward and backward halves); "" for other layers."""
    if layer.kind in CELLS:
        return "←" if layer.args.get("go_backwards") else "→"
    if layer.kind == "bidirectional":
        return "→ ←"
    return ""


def table_rows(spec: ModelSpec) -> list[tuple[str, ...]]:
    """One row of cells per layer (HEADERS), the input first; an LSTM layer's name carries
    its directions ("bi → ←")."""
    rows = []
    for layer in spec.layers:
        shape = "?" if layer.output_shape is None else shape_text((None, *layer.output_shape))
        name = f"{layer.name} {direction_marks(layer)}".strip()
        rows.append((name, class_text(layer), shape, f"{layer.params:,}"))
    return rows


class ModelTable(QTableWidget):
    """Read-only; `set_spec(spec)` fills it, `set_spec(None)` empties it."""

    def __init__(self):
        super().__init__(0, len(HEADERS))
        self.setHorizontalHeaderLabels(HEADERS)
        self.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.NoSelection)
        self.setFocusPolicy(Qt.NoFocus)
        self.verticalHeader().hide()
        self.setStyleSheet("font-size: 8pt;")
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeToContents)
        self.verticalHeader().setDefaultSectionSize(18)
        self.setToolTip(
            "The model's layers as lstmviz runs them; after a recurrent layer's name, the\n"
            "directions it adds to the panels (→ forward, ← backward: a Bidirectional has both)."
        )

    def set_spec(self, spec: ModelSpec | None) -> None:
        rows = table_rows(spec) if spec is not None else []
        self.setRowCount(len(rows))
        for r, cells in enumerate(rows):
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 3:
                    item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
                self.setItem(r, c, item)
        if spec is not None:
            names = ", ".join(f"{d.name} ({CELL_CLASSES[d.cell]})" for d in spec.directions())
            self.setToolTip(f"{spec.summary()}\n\nRecurrent directions in the panels: {names}")
        # wide and tall enough for every column and up to MAX_ROWS rows (the dock widens)
        self.resizeColumnsToContents()
        frame = 2 * self.frameWidth()
        width = sum(self.columnWidth(c) for c in range(self.columnCount())) + frame
        tall = len(rows) > MAX_ROWS
        scroll = self.verticalScrollBar().sizeHint().width() if tall else 0
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setMinimumWidth(width + scroll)
        row = self.verticalHeader().defaultSectionSize()
        header = self.horizontalHeader().sizeHint().height()
        self.setFixedHeight(header + row * min(len(rows), MAX_ROWS) + frame)
        self.setVisible(bool(rows))

    def rows(self) -> list[list[str]]:
        """The table's text, row by row (for tests and bug reports)."""
        return [[self.item(r, c).text() for c in range(self.columnCount())]
                for r in range(self.rowCount())]  # fmt: skip
