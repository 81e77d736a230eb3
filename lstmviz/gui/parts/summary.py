"""The summary line under the panels, with the Verify button and its result; `Verifier`, the
part of the window that asks the computing process to verify the trace shown."""

from __future__ import annotations

import itertools

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from lstmviz.analysis.report.summary import WARNING_STYLE, summary_text, summary_tip
from lstmviz.analysis.values import Arrays
from lstmviz.core import modes
from lstmviz.core.config import RunConfig
from lstmviz.gui.state.shown import Shown
from lstmviz.io.trace import GradientTrace

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
        # event-loop turn, a stall (bench/bench_gui.py --only life).
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


class Verifier(QObject):
    """Verify (the summary's button, Run → Verify gradients): the trace `shown` checked by
    finite differences in the computing process (`worker`), the result in `summary`.
    `asked`: a check was sent (the worker must be started); `answered`: its result is shown."""

    asked = Signal()
    answered = Signal()

    def __init__(self, summary: SummaryPanel, shown: Shown, worker, parent: QObject) -> None:
        super().__init__(parent)
        self.summary, self.shown, self.worker = summary, shown, worker
        self.requests = itertools.count(1)  # ids of verify requests

    def verify(self) -> None:
        trace = self.shown.trace
        if trace is None:
            return
        self.summary.verify_button.setEnabled(False)
        self.summary.verify_result.setText("checking by finite differences…")
        self.worker.request_verify(next(self.requests), trace)
        self.asked.emit()

    @Slot(int, object)
    def on_verified(self, request_id: int, result) -> None:
        """The worker's answer: a `verify.Verification`, or why there is none (str)."""
        if isinstance(result, str):
            text = f"<span style='color:#a60'>{result}</span>"
        else:
            mark = "✓" if result.ok else f"<span style='{WARNING_STYLE}'>✗</span>"
            text = (
                f"{mark} finite differences: worst |Δ| {result.worst_abs:.1e} "
                f"(rel. {result.worst_rel:.1e}) over {len(result.entries)} entries"
            )
        self.summary.verify_result.setText(text)
        self.answered.emit()
