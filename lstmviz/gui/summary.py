"""The summary line under the panels, with the Verify button and its result."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from lstmviz import modes
from lstmviz.config import RunConfig
from lstmviz.render.summary import summary_text, summary_tip
from lstmviz.render.values import Arrays
from lstmviz.trace import GradientTrace

VERIFY_TIP = ("Check a few random entries of dL/dh_t (and the largest one) by central finite\n"
              "differences of the loss in float64, and show the worst error "
              "(Ctrl+Shift+V).")  # fmt: skip


class SummaryPanel(QWidget):
    """The summary line and the Verify button with its result."""

    def __init__(self):
        super().__init__()
        self.text = QLabel("No run yet: set the parameters on the left and press Run (Ctrl+R).")
        self.text.setTextFormat(Qt.RichText)
        self.text.setWordWrap(True)  # long summaries wrap instead of widening the window
        self.text.setTextInteractionFlags(Qt.TextSelectableByMouse)
        # Two lines high whatever the text: when a run's one-line summary at its start became
        # two lines at its end, every panel above was resized, and so repainted, in one
        # event-loop turn (40-70 ms: docs/performance.md, "The window's whole life").
        self.text.setMinimumHeight(2 * self.text.fontMetrics().lineSpacing())
        self.verify_button = QPushButton("Verify")
        self.verify_button.setToolTip(VERIFY_TIP)
        self.verify_button.setEnabled(False)
        self.verify_result = QLabel()
        self.verify_result.setTextFormat(Qt.RichText)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.verify_result)
        layout.addWidget(self.verify_button)

    def set_verifiable(self, trace: GradientTrace | None) -> bool:
        """Enable Verify for a trace whose loss it can rebuild (taped, multi-pass, training);
        its tooltip says why not for the others. Returns whether it is enabled."""
        verifiable = trace is not None and modes.find(trace.mode).verifiable
        can = verifiable and "grad_h_total" in trace
        self.verify_button.setEnabled(can)
        other = trace is not None and not verifiable
        self.verify_button.setToolTip(VERIFY_TIP + ("\n(Not for this mode: it rebuilds the loss of "
                                      "taped, multi-pass and training runs.)" if other else ""))
        return can

    def show_text(self, text: str) -> None:
        """A plain line instead of a trace's summary (nothing is shown)."""
        self.text.setText(text)
        self.text.setToolTip("")
        self.verify_result.clear()

    def draw(self, mode: str, arrays: Arrays, config: RunConfig | None, seconds: float | None):
        self.text.setText(summary_text(mode, arrays, config, seconds))
        self.text.setToolTip(summary_tip(arrays))
        self.verify_result.clear()
