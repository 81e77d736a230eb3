"""File names the window shows and proposes (pytest-qt, offscreen): a long name in a file field
keeps its start and its extension in view, and trained weights are offered under the name of
what they trained on."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.io.trace import GradientTrace  # noqa: E402


@pytest.fixture
def window(bare_window):
    return bare_window


@pytest.mark.parametrize(("inputs", "task", "proposed"), [
    ("/data/walks/walk.2024.npy", "adding", "walk.2024-trained.weights.h5"),
    ("/data/walks/x.npz", "copy", "x-trained.weights.h5"),
    (None, "sine", "sine-trained.weights.h5"),
])  # fmt: skip
def test_trained_weights_are_offered_under_what_they_trained_on(window, monkeypatch, inputs,
                                                               task, proposed):  # fmt: skip
    from PySide6.QtWidgets import QFileDialog

    config = RunConfig(mode="train", inputs=inputs, task=task, steps=4, batch=2, hidden=3)
    arrays = {"readout_kernel": np.zeros((3, 1), np.float32)}
    trace = GradientTrace("train", config, arrays)
    window.shown.show_trace(trace)  # shown, not drawn
    asked = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda parent, title, name, wanted: asked.append(name) or ("", ""))
    window.files.save_weights_dialog()
    assert asked == [proposed]


LONG = "a_very_long_model_file_name_for_sentiment_v12_final.keras"


def text_room(edit) -> int:
    """The px a QLineEdit has for its text: its contents rect, less its frame's and Qt's own
    2-px margins on each side."""
    from PySide6.QtWidgets import QStyle, QStyleOptionFrame

    option = QStyleOptionFrame()
    edit.initStyleOption(option)
    rect = edit.style().subElementRect(QStyle.SubElement.SE_LineEditContents, option, edit)
    margins = edit.textMargins()
    return rect.width() - margins.left() - margins.right() - 4


def fits(edit) -> bool:
    return edit.fontMetrics().horizontalAdvance(edit.text()) <= text_room(edit)


@pytest.mark.parametrize("name", ["model", "weights", "inputs", "targets"])
def test_a_long_file_name_shows_its_start_and_its_extension(window, qtbot, tmp_path, name):
    """Every file field: the name elided in its middle, to the field's width; the whole path
    in the tooltip; more of the name as the dock widens."""
    path = str(tmp_path / "runs" / LONG)
    field = window.params.widgets[name]
    window.resizeDocks([window.dock], [300], Qt.Horizontal)
    qtbot.wait(10)
    field.set_path(path)
    shown = field.edit.text()
    assert shown.startswith("a_very") and shown.endswith("al.keras") and "…" in shown
    assert fits(field.edit) and field.edit.toolTip() == path
    window.resizeDocks([window.dock], [900], Qt.Horizontal)
    qtbot.waitUntil(lambda: field.edit.text() == LONG, timeout=2_000)  # room for all of it
    window.resizeDocks([window.dock], [300], Qt.Horizontal)
    qtbot.waitUntil(lambda: field.edit.text() != LONG, timeout=2_000)
    assert fits(field.edit) and field.edit.text().endswith(".keras")


def test_a_long_name_not_found_keeps_saying_so(window, qtbot, tmp_path):
    field = window.params.widgets["inputs"]
    window.resizeDocks([window.dock], [400], Qt.Horizontal)
    qtbot.wait(10)
    field.set_path(str(tmp_path / LONG))
    field.set_missing(True)
    shown = field.edit.text()
    assert shown.startswith("a_very") and shown.endswith(".keras (not found)") and fits(field.edit)
    assert field.edit.toolTip().startswith(f"Not found: {tmp_path / LONG}")


def test_a_recorded_models_long_name_keeps_its_tag_in_view(window, qtbot):
    """A recording's model (no file) in the Model field: its name cut at its end, the tag that
    says it was recorded always whole (in a narrow dock it was cut to "sequential_5 (record…")."""
    field = window.params.widgets["model"]
    window.resizeDocks([window.dock], [300], Qt.Horizontal)
    qtbot.wait(10)
    field.set_recorded("sequential_with_a_rather_long_name_12", "tip", end=" (recorded)")
    shown = field.edit.text()
    assert shown.startswith("seq") and shown.endswith("… (recorded)") and fits(field.edit)
    field.set_recorded(None)
    assert field.edit.text() == ""
