"""The recording bar's texts in a narrow window (a 1366×768 screen at scale 2, pytest-qt,
offscreen): none is cut at the bar's edge, and what does not fit its line is in a tooltip."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from lstmviz.analysis.records import panel_arrays  # noqa: E402
from lstmviz.analysis.report.summary import plain  # noqa: E402
from lstmviz.gui.widgets.recording_bar import RecordingBar  # noqa: E402
from lstmviz.io.recording import load_recording  # noqa: E402

RECORDING = Path(__file__).resolve().parents[1] / "data" / "recording_format1.lvz.gz"


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    """The panels' arrays of a two-record recording (a real `.lvz`)."""
    path = tmp_path_factory.mktemp("bar") / "a_recording_of_a_long_fit.lvz"
    with gzip.open(RECORDING) as packed, open(path, "wb") as out:
        shutil.copyfileobj(packed, out)
    return panel_arrays(load_recording(path)), str(path)


def uncut(label) -> bool:
    """Whether a label has the room its text takes: Qt's own measure of it (wrapped to its
    width, else on one line) against the geometry the bar's layout gave it."""
    if label.wordWrap():
        return label.heightForWidth(label.width()) <= label.height()
    hint = label.sizeHint()
    return hint.width() <= label.width() and hint.height() <= label.height()


@pytest.mark.parametrize("width", [420, 560, 1000])
@pytest.mark.parametrize("status", ["finished", "following", "stopped"])
@pytest.mark.parametrize("record", [None, 0])  # the last record, an earlier one (a longer note)
def test_the_bars_texts_are_never_cut(qtbot, arrays, width, status, record):
    values, path = arrays
    bar = RecordingBar()
    qtbot.addWidget(bar)
    bar.resize(width, bar.height())
    bar.show()
    bar.show_recording(values, path, status)
    bar.set_record(record)
    qtbot.waitUntil(lambda: bar.header.width() > 0 and bar.layout().geometry().width() == width,
                    timeout=2_000)  # fmt: skip
    for label in (bar.header, bar.note, bar.record_label):
        assert uncut(label), (label.text(), label.size(), label.sizeHint())
    # whatever the width, the whole header and note are there to read
    assert "a_recording_of_a_long_fit.lvz" in bar.header.toolTip()
    assert "2 records" in plain(bar.header.text()) + bar.header.toolTip()
    note = plain(bar.note.text()) + bar.note.toolTip()
    assert ("this record's full model trace" if record is None else "last record only") in note
