"""The bar above the panels while a recording is shown: what the recording is and whether it is
still growing, a slider over its records, the timestep range of its heatmap, which record the
model panels below show, and the model's summary."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QEvent, QSignalBlocker, Qt, Signal
from PySide6.QtGui import QFontDatabase, QFontMetrics
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from lstmviz.analysis.records import (
    TimeRange,
    record_count,
    record_text,
    recording_summary,
    steps_of,
)
from lstmviz.analysis.report.summary import WARNING_STYLE, plain
from lstmviz.analysis.values import Arrays

NOTE_STYLE = {"this": "color:#555", "last": "color:#a60"}  # the note, by the record it is about
STATUS = {  # what the header says about the file, by state
    "following": "<span style='color:#2a7a2a'>● following: fit is writing it</span>",
    "finished": "finished",
    "stopped": f"<span style='{WARNING_STYLE}'>not followed any more (see the status bar)</span>",
}


class RecordingBar(QWidget):
    """`record_chosen` (the record index, None for the last: the slider at its right end
    follows new records) and `range_chosen` ((t0, t1), None for every t) fire when the user
    changes them; `show_recording` fills the bar from a recording's arrays."""

    record_chosen = Signal(object)
    range_chosen = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.arrays: Arrays = {}
        # The header and the note take one line each, as much of their text as their width
        # holds (`_fit`; all of it in the tooltip): wrapped in a bar of fixed height, a narrow
        # window (a 1366-px screen at scale 2) cut their last lines off.
        self.header = QLabel(textFormat=Qt.RichText)
        self.header.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self._header_parts: list[str] = []  # HTML, joined by " · "
        self._header_tip = ""
        self.slider = QSlider(Qt.Horizontal, minimum=0, maximum=0, pageStep=1)
        self.slider.setToolTip(
            "Scrub through the records: the curves, the loss mark and the heatmap mark show\n"
            "the record chosen. At the right end the view follows new records as they arrive."
        )
        self.slider.valueChanged.connect(self._slid)
        self.record_label = QLabel()
        self.range_box = QComboBox()
        self.range_box.addItems(["all timesteps", "a window"])
        self.range_box.setToolTip(
            "The timesteps the heatmap's total gradient norm is taken over: all of them, or a\n"
            "window (also: drag the shaded band in the curves panel)."
        )
        self.range_box.activated.connect(lambda _: self._range_edited())
        self.first = QSpinBox(prefix="t ", minimum=0, maximum=0)
        self.last = QSpinBox(prefix="to ", minimum=0, maximum=0)
        self.first.setToolTip("The window's first timestep (a window: the heatmap's total "
                              "gradient norm is taken over t from here to the last timestep)")
        self.last.setToolTip("The window's last timestep (included)")
        for box in (self.first, self.last):
            box.setKeyboardTracking(False)
            box.valueChanged.connect(lambda _, edited=box: self._range_edited(edited))
        self.note = QLabel(textFormat=Qt.RichText)
        self._note: tuple[str, str] = ("", "")  # plain text, its style
        for label in (self.header, self.note):  # as wide as the layout gives, not as the text
            label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
            label.setMinimumWidth(1)
            label.installEventFilter(self)
        # The model's summary (Keras's, ~60 characters a line) in a window of its own, opened
        # from the bar: legible, and the panels keep the bar's width.
        self.summary = QPlainTextEdit(readOnly=True)
        self.summary.setLineWrapMode(QPlainTextEdit.NoWrap)
        self.summary.setFont(QFontDatabase.systemFont(QFontDatabase.FixedFont))
        self.summary_window = QDialog(self, windowTitle="Model summary")
        QVBoxLayout(self.summary_window).addWidget(self.summary)
        self.summary_button = QToolButton(text="Model summary…", enabled=False)
        self.summary_button.setToolTip("The model the recording was made of: its layers, output "
                                       "shapes and parameters")  # fmt: skip
        self.summary_button.clicked.connect(self.show_summary)

        scrub = QHBoxLayout()
        scrub.setSpacing(6)  # the window's style gives none: label, slider and text would touch
        scrub.addWidget(QLabel("Record"))
        scrub.addWidget(self.slider, 1)
        scrub.addWidget(self.record_label)
        span = QHBoxLayout()
        span.setSpacing(6)
        span.addWidget(QLabel("Heatmap over"))
        for widget in (self.range_box, self.first, self.last):
            span.addWidget(widget)
        span.addSpacing(6)
        span.addWidget(self.note, 1)
        layout = QGridLayout(self)
        layout.setContentsMargins(6, 4, 6, 2)
        layout.setVerticalSpacing(2)
        layout.addWidget(self.header, 0, 0)
        layout.addWidget(self.summary_button, 0, 1, Qt.AlignTop)
        layout.addLayout(scrub, 1, 0, 1, 2)
        layout.addLayout(span, 2, 0, 1, 2)
        layout.setColumnStretch(0, 1)
        # Fixed (text that changes as records arrive never re-lays the window out): one line
        # of each row, as tall as the bar's font makes them.
        self.header.setText("<b>Recording</b>")
        self.note.setText("<span>The panels below</span>")
        self.setFixedHeight(layout.sizeHint().height())
        self.header.clear()
        self.note.clear()

    def reset(self) -> None:
        """For another recording: the last record, every timestep (no signals)."""
        self.slider.blockSignals(True)
        self.slider.setMaximum(0)
        self.slider.blockSignals(False)
        for box in (self.first, self.last):
            box.blockSignals(True)
            box.setMaximum(0)
            box.blockSignals(False)
        self.set_range(None)

    # ---- what the user chose -------------------------------------------------------------------

    def record(self) -> int | None:
        """The record chosen: its index, None when the slider is at the last one."""
        value = self.slider.value()
        return None if value >= self.slider.maximum() else value

    def t_range(self) -> TimeRange:
        if self.range_box.currentIndex() == 0:
            return None
        return self.first.value(), self.last.value()

    def set_record(self, record: int | None) -> None:
        """Show record `record` as chosen (None, or one past the records: the last, which
        follows new records), without signals."""
        last = self.slider.maximum()
        with QSignalBlocker(self.slider):
            self.slider.setValue(last if record is None else min(record, last))
        self._describe()

    def set_range(self, t_range: TimeRange) -> None:
        """Show `t_range` as chosen (a window dragged in the curves panel), without signals."""
        for widget in (self.range_box, self.first, self.last):
            widget.blockSignals(True)
        try:
            self.range_box.setCurrentIndex(0 if t_range is None else 1)
            if t_range is not None:
                lo, hi = sorted(t_range)
                self.first.setValue(lo)
                self.last.setValue(hi)
        finally:
            for widget in (self.range_box, self.first, self.last):
                widget.blockSignals(False)
        self._enable_range()

    def _slid(self, _value: int) -> None:
        self._describe()
        self.record_chosen.emit(self.record())

    def _range_edited(self, edited: QSpinBox | None = None) -> None:
        """The range box or an end changed: an end moved past the other takes it along."""
        lo, hi = self.first.value(), self.last.value()
        if lo > hi and edited is not None:
            self.set_range((lo, lo) if edited is self.first else (hi, hi))
        self._enable_range()
        self.range_chosen.emit(self.t_range())

    def _enable_range(self) -> None:
        window = self.range_box.currentIndex() == 1
        for box in (self.first, self.last):  # shown only for a window: greyed, "t 0 to 2"
            box.setVisible(window)  # beside "all timesteps" read as a range that applied

    # ---- what the recording is -------------------------------------------------------------------

    def show_recording(self, arrays: Arrays, path: str, status: str) -> None:
        """Fill the bar from a recording's `arrays` (`analysis.records`) read from `path`;
        `status`: "following", "finished" or "stopped" (STATUS). The record chosen stays,
        unless it was the last: then the new last one is."""
        self.arrays = arrays
        count = record_count(arrays)
        at_end = self.slider.value() >= self.slider.maximum()
        self.slider.blockSignals(True)
        try:
            self.slider.setMaximum(max(count - 1, 0))
            if at_end:
                self.slider.setValue(self.slider.maximum())
        finally:
            self.slider.blockSignals(False)
        steps = steps_of(arrays)
        if steps != self.first.maximum() + 1:  # another recording: the window offered first
            for box, value in ((self.first, 0), (self.last, max(steps // 4 - 1, 0))):
                box.blockSignals(True)  # covers the first quarter of t (where a gradient
                box.setMaximum(max(steps - 1, 0))  # coming back from the end vanishes)
                box.setValue(value)
                box.blockSignals(False)
        self.set_status(path, status)
        summary = str(arrays.get("model_summary", ""))
        if summary != self.summary.toPlainText():
            self.summary.setPlainText(summary)
        self.summary_button.setEnabled(bool(summary))
        self._describe()

    def hideEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        self.summary_window.hide()  # the recording is closed: its model's summary too
        super().hideEvent(event)

    def show_summary(self) -> None:
        """The model summary's window, sized to its text (up to most of the screen)."""
        metrics = self.summary.fontMetrics()
        lines = self.summary.toPlainText().splitlines() or [""]
        width = max(metrics.horizontalAdvance(line) for line in lines) + 48
        height = metrics.lineSpacing() * len(lines) + 48
        screen = self.screen().availableGeometry()
        self.summary_window.resize(min(width, screen.width() * 9 // 10),
                                   min(height, screen.height() * 8 // 10))  # fmt: skip
        self.summary_window.show()
        self.summary_window.raise_()

    def set_status(self, path: str, status: str) -> None:
        name = html.escape(Path(path).name)
        summary = recording_summary(self.arrays, sources=False).split(" · ")
        self._header_parts = [f"<b>Recording {name}</b>", STATUS[status], *summary]
        self._header_tip = str(path)
        self._fit_header()

    def eventFilter(self, watched, event) -> bool:  # noqa: N802 (Qt's name)
        if event.type() == QEvent.Type.Resize:
            if watched is self.header:
                self._fit_header()
            elif watched is self.note:
                self._fit_note()
        return super().eventFilter(watched, event)

    def _fit_header(self) -> None:
        """The header's first parts that its width holds, then "…"; the path and the whole
        header in its tooltip when some are left out."""
        parts, room = self._header_parts, self.header.width()
        if not parts:
            return
        for count in range(len(parts), 0, -1):
            self.header.setText(" · ".join(parts[:count]) + (" · …" if count < len(parts) else ""))
            if self.header.sizeHint().width() <= room:
                break
        else:  # not even the file's name: its middle goes
            bold = self.header.font()
            bold.setBold(True)
            name = plain(parts[0])
            cut = QFontMetrics(bold).elidedText(name, Qt.ElideMiddle, max(room - 4, 0))
            self.header.setText(f"<b>{html.escape(cut)}</b>")
        whole = " · ".join(plain(part) for part in parts)
        shown = plain(self.header.text())
        self.header.setToolTip(self._header_tip + ("" if shown == whole else f"\n{whole}"))

    def _set_note(self, text: str, style: str) -> None:
        self._note = (text, style)
        self._fit_note()

    def _fit_note(self) -> None:
        """The note, cut to its width with "…" (the whole in its tooltip)."""
        text, style = self._note
        if not text:
            self.note.clear()
            self.note.setToolTip("")
            return
        metrics = self.note.fontMetrics()
        shown = metrics.elidedText(text, Qt.ElideRight, max(self.note.width() - 4, 0))
        self.note.setText(f"<span style='{style}'>{html.escape(shown, quote=False)}</span>")
        self.note.setToolTip("" if shown == text else text)

    def _describe(self) -> None:
        """The record label and the note on what the model panels below show."""
        count = record_count(self.arrays)
        if count == 0:
            self.record_label.clear()
            self._set_note("", "")
            return
        s = self.slider.value()
        latest = " · the latest" if s == count - 1 else ""
        self.record_label.setText(f"{s + 1}/{count} · {record_text(self.arrays, s)}{latest}")
        last = record_text(self.arrays, count - 1)
        if s == count - 1:
            self._set_note("The panels below: this record's full model trace.", NOTE_STYLE["this"])
        else:
            # what matters first: a line too long for the bar loses its end
            self._set_note(f"The panels below show the last record only ({last}), whose full "
                           "trace the file keeps.", NOTE_STYLE["last"])  # fmt: skip
