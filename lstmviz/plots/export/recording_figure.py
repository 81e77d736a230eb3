"""A recording's panels rendered offscreen (`lstmviz export REC.lvz --png/--svg/--pdf`, the window's
Export with a recording open): the evolution figure, drawn by the panels the window shows for it
(`lstmviz.plots.panels.record_panels`), and, when asked for, the model panels of its last record
(the one whose full trace the file keeps; their titles say so when the recording's panels show
another record). PNG, SVG and the PDF report as for a trace (`lstmviz.plots.export.figure`)."""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from xml.sax.saxutils import escape

import lstmviz
from lstmviz.analysis.diagnosis import diagnosis_lines
from lstmviz.analysis.layout import RECORDING_PANELS
from lstmviz.analysis.records import (
    chosen_record,
    evolution_lines,
    panel_arrays,
    range_text,
    record_count,
    record_text,
    recording_summary,
    steps_of,
)
from lstmviz.analysis.report.model_report import model_lines, model_table_html
from lstmviz.core.view import DEFAULT_VIEW, ViewOptions
from lstmviz.io.recording import Recording
from lstmviz.plots.export.figure import Figure
from lstmviz.plots.panels.panel import Panel
from lstmviz.plots.panels.record_panels import RecordChoice


class RecordingFigure(Figure):
    """The panels of a `Recording`, drawn offscreen; by default the recording's own three
    (`RECORDING_PANELS`). `view.record`: the record they show (None: the last); `view.t_range`:
    the heatmap's timestep range (None: every t). Model panels show the last record's trace (left
    out when it was not read). Use as a context manager, as `Figure`."""

    def __init__(
        self,
        recording: Recording,
        panels: Sequence[str | type[Panel]] | None = None,
        view: ViewOptions = DEFAULT_VIEW,
        source: str | None = None,
    ):
        self.recording = recording
        self.view = panel_arrays(recording)
        self.record, self.t_range = view.record, view.t_range
        super().__init__(recording.last, panels, view, source or str(recording.path))

    def default_panels(self) -> list[str]:
        return list(RECORDING_PANELS)

    def draw_panel(self, name: str, panel: Panel) -> None:
        if isinstance(panel, RecordChoice):
            panel.record, panel.t_range = self.record, self.t_range
            panel.draw(self.view)
        elif self.trace is not None:
            panel.draw(self.trace.arrays, self.trace.config)
            last = record_count(self.view) - 1
            if chosen_record(self.view, self.record) != last:  # beside curves of another one
                when = escape(f"last record, {record_text(self.view, last)}")
                panel.title.setText(f"{panel.title.text()}<b> · {when}</b>")

    def title(self) -> str:
        name = f" · {os.path.basename(self.source)}" if self.source else ""
        return f"lstmviz · training recording{name}"

    def summary_html(self) -> str:
        parts = [recording_summary(self.view, sources=False)]  # one line: the report has them
        shown = chosen_record(self.view, self.record)
        if shown != record_count(self.view) - 1:
            parts.append(f"curves at {record_text(self.view, shown)}")
        if self.t_range is not None:
            parts.append(f"heatmap over {range_text(self.t_range, steps_of(self.view))}")
        parts.append("finished" if self.recording.finished else "being written")
        return " · ".join(parts)

    def report_html(self) -> str:
        a = self.view
        items = [("file", str(self.recording.path)), ("records", str(record_count(a))),
                 ("every", f"{int(a.get('every', 0))} batches"),
                 ("model", str(a.get("model_source", ""))),
                 ("data", str(a.get("inputs_source", "")))]  # fmt: skip
        rows = "".join(f"<tr><td style='padding-right:10px'><tt>{escape(k)}</tt></td>"
                       f"<td>{escape(v)}</td></tr>" for k, v in items if v)  # fmt: skip
        summary = "".join(f"<li>{line}</li>" for line in self.summary_lines())
        return (
            "<table width='100%' cellspacing='0'><tr>"
            "<td width='46%' valign='top'><b>Recording</b>"
            f"<table cellspacing='0'>{rows}</table>{model_table_html(a)}</td>"
            f"<td valign='top'><b>Summary</b><ul style='margin-left:0px'>{summary}</ul></td>"
            "</tr></table>"
        )

    def summary_lines(self) -> list[str]:
        lines = [self.summary_html(), *evolution_lines(self.view)]
        lines += [escape(x) for x in diagnosis_lines(self.recording.diagnosis)]
        if self.trace is not None:
            last = record_text(self.view, record_count(self.view) - 1)
            found = model_lines(self.trace.arrays)
            if found:  # under one heading: a prefix on every line would make each wrap in two
                items = "".join(f"<li>{line}</li>" for line in found)
                style = "margin-left:0px; -qt-list-indent:1"  # the outer list's indent
                lines.append(f"at the last record, {last}:<ul style='{style}'>{items}</ul>")
        stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
        lines.append(f"<span style='color:#666'>{escape(self.source or '')} · exported {stamp} "
                     f"by lstmviz {lstmviz.__version__}</span>")  # fmt: skip
        return lines
