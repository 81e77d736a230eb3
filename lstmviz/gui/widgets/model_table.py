"""The dock's table of a loaded model's layers: name (with the recurrent directions it adds to
a run: → forward, ← backward), class (naming the cell: "GRU", "Bidirectional(GRU)"), output
shape, parameters. And `DirectionTable`, the recurrent directions of a graph's trace shown:
each direction's layer, cell, steps (and calls of its layer, when more than one) and what feeds
its initial state ("← enc": an encoder's final state)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from lstmviz.analysis.layers import (
    calls_of,
    cell_of,
    direction_label,
    direction_steps,
    initial_from,
    input_names,
    layer_count,
    layer_names,
)
from lstmviz.core.schema import CELL_CLASSES
from lstmviz.weights.model_spec import CELLS, ModelSpec, class_text, shape_text

HEADERS = ("Layer", "Class", "Output shape", "Params")
MAX_ROWS = 12  # shown at once; a longer model scrolls
DIRECTION_HEADERS = ("Direction", "Cell", "Steps", "Initial state")


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


def is_graph(arrays) -> bool:
    """Whether a model trace's directions are a graph's: one records its calls or a hand-over,
    their lengths differ, or the model has several inputs."""
    count = layer_count(arrays) if "layer_names" in arrays else 0
    keys = any(f"layer{k}_{key}" in arrays for k in range(count)
               for key in ("calls", "initial_from"))  # fmt: skip
    lengths = {direction_steps(arrays, k) for k in range(count)}
    return count > 0 and (keys or len(lengths) > 1 or len(input_names(arrays)) > 1)


def direction_rows(arrays) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(cells, tooltips) per direction of a model trace (DIRECTION_HEADERS): the direction
    ("dec", "bi →"), its cell, its steps ("4 · 4 calls" when its layer was called more than
    once) and "← enc" when its initial state is direction enc's final state."""
    names = layer_names(arrays)
    rows = []
    for k, name in enumerate(names):
        cell = CELL_CLASSES.get(cell_of(arrays, k), cell_of(arrays, k))
        steps, calls = direction_steps(arrays, k), calls_of(arrays, k)
        step_text = f"{steps}" + (f" · {calls} calls" if calls > 1 else "")
        step_tip = (f"{name} runs {steps} steps" + (
            f", made by {calls} calls of its layer (a decoder stepped once per token: one "
            "call a step), joined in call order" if calls > 1 else ""))  # fmt: skip
        source = initial_from(arrays, k)
        initial = f"← {names[source]}" if source >= 0 else ""
        initial_tip = f"{name} starts from its own initial state"
        if source >= 0:
            src = names[source]
            initial_tip = (f"{name}'s initial state is {src}'s final state (a hand-over, as an\n"
                           f"encoder hands (h, c) to its decoder): the panels draw {src}'s steps,\n"
                           f"then {name}'s on one time axis, and the diagnosis of {src} follows\n"
                           f"{name}'s loss back across the hand-over")  # fmt: skip
        rows.append(((direction_label(name), cell, step_text, initial),
                     (name, cell, step_tip, initial_tip)))  # fmt: skip
    return rows


class _ReadOnlyTable(QTableWidget):
    """A small read-only table of the dock: `headers`, no selection or focus, columns sized to
    their contents."""

    def __init__(self, headers):
        super().__init__(0, len(headers))
        self.setHorizontalHeaderLabels(headers)
        self.setEditTriggers(QAbstractItemView.NoEditTriggers)
        self.setSelectionMode(QAbstractItemView.NoSelection)
        self.setFocusPolicy(Qt.NoFocus)
        self.verticalHeader().hide()
        self.setStyleSheet("font-size: 8pt;")
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)


class DirectionTable(_ReadOnlyTable):
    """Read-only: the recurrent directions of the graph trace shown (`show_arrays`), hidden
    for other traces."""

    def __init__(self):
        super().__init__(DIRECTION_HEADERS)
        self.horizontalHeader().setStretchLastSection(True)
        self.verticalHeader().setDefaultSectionSize(18)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setToolTip(
            "The recurrent directions of the trace shown: steps (and calls of the layer,\n"
            "when more than one), and what feeds the initial state: ← enc, the final state of\n"
            "direction enc (an encoder handing its state to its decoder)."
        )
        self.hide()

    def show_arrays(self, arrays) -> None:
        """Fill from a graph trace's arrays (`is_graph`); hide for anything else (None)."""
        rows = direction_rows(arrays) if arrays is not None and is_graph(arrays) else []
        self.setRowCount(len(rows))
        for r, (cells, tips) in enumerate(rows):
            for c, (text, tip) in enumerate(zip(cells, tips, strict=True)):
                item = QTableWidgetItem(text)
                item.setToolTip(tip)
                self.setItem(r, c, item)
        self.resizeColumnsToContents()
        row = self.verticalHeader().defaultSectionSize()
        header = self.horizontalHeader().sizeHint().height()
        self.setFixedHeight(header + row * min(len(rows), MAX_ROWS) + 2 * self.frameWidth())
        self.setVisible(bool(rows))

    def rows(self) -> list[list[str]]:
        """The table's text, row by row (for tests and bug reports)."""
        return [[self.item(r, c).text() for c in range(self.columnCount())]
                for r in range(self.rowCount())]  # fmt: skip


class ModelTable(_ReadOnlyTable):
    """Read-only; `set_spec(spec)` fills it, `set_spec(None)` empties it."""

    def __init__(self):
        super().__init__(HEADERS)
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
