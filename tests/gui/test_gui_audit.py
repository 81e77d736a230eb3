"""The window's polish, as a user meets it: shortcuts listed in Help, tooltips in the Export
dialog, export names and paths, refusals in the dock's words, the recent-files menu, what a
model opened over loaded inputs says. The window is shown without waiting for TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6.QtWidgets import (  # noqa: E402
    QAbstractButton,
    QComboBox,
    QFileDialog,
    QMessageBox,
    QSpinBox,
)

from lstmviz.core.errors import ConfigError  # noqa: E402
from lstmviz.gui.main_window import DEMO_WEIGHTS, MainWindow  # noqa: E402
from tests.helpers.gui_checks import export_with  # noqa: E402
from tests.helpers.trace_fixtures import small_trace  # noqa: E402


@pytest.fixture
def shown(qtbot, settings, errors):
    """The main window, shown, not waiting for TensorFlow; error dialogs recorded in
    `errors`; closed afterwards."""
    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.show()
    yield win
    win.close()


@pytest.fixture
def with_trace(shown, qtbot):
    with qtbot.waitSignal(shown.area.drawn, timeout=10_000):
        shown.show_trace(small_trace(), 0.1)
    return shown


# ---- Help → Keyboard shortcuts ------------------------------------------------------------------


def test_help_lists_every_menu_shortcut(shown, monkeypatch):
    from lstmviz.gui.menus import shortcut_rows

    shown_text = []
    monkeypatch.setattr(QMessageBox, "information",
                        lambda parent, title, text: shown_text.append((title, text)))  # fmt: skip
    help_menu = next(a.menu() for a in shown.menuBar().actions() if "Help" in a.text())
    item = next(a for a in help_menu.actions() if "shortcuts" in a.text().lower())
    assert item.shortcut().toString() == "F1"
    item.trigger()
    (title, text), = shown_text
    assert title == "Keyboard shortcuts"
    rows = shortcut_rows(shown)
    keys = {keys for _, _, keys in rows}
    assert {"Ctrl+R", "Esc", "Ctrl+P", "Ctrl+E", "Ctrl+Shift+E", "Ctrl+L", "Ctrl+N", "Ctrl+M",
            "Ctrl+O", "Ctrl+S", "Ctrl+Q", "Ctrl+Shift+V", "F1"} <= keys  # fmt: skip
    for _menu, name, key in rows:
        assert key in text and name in text
    assert "Right-click a panel → Export panel…" in text


def test_every_menu_item_has_a_tooltip_of_its_own(shown):
    """The status tip says what an item does (not its name again), except the View menu's
    panel switches and the recent files, whose names say it."""
    for top in shown.menuBar().actions():
        if "View" in top.text():
            continue
        for action in top.menu().actions():
            if action.isSeparator() or action.menu() is not None:
                continue
            assert action.toolTip() != action.text().replace("&", ""), action.text()


def test_normalise_tooltip_says_which_panels_it_rescales(shown):
    tip = shown.normalise_action.toolTip()
    assert "per-unit heatmaps" in tip and "stay absolute" in tip


# ---- the Export dialog --------------------------------------------------------------------------


def test_every_export_dialog_control_has_a_tooltip(with_trace):
    from lstmviz.gui.dialogs.export_dialog import ExportDialog

    dialog = ExportDialog(with_trace)
    controls = [w for cls in (QAbstractButton, QSpinBox, QComboBox)
                for w in dialog.findChildren(cls)]  # fmt: skip
    assert len(controls) >= 11
    missing = [w.text() if hasattr(w, "text") else type(w).__name__ for w in controls
               if not w.toolTip()]  # fmt: skip
    assert not missing
    dialog.deleteLater()


def test_a_panel_export_does_not_rename_the_next_one(with_trace, monkeypatch, tmp_path):
    """Export panel… twice: the second file name offered is the export base and the panel,
    not the first panel's file name with the second's appended ("p-norm-rows.png")."""
    from lstmviz.gui.dialogs.export_dialog import export_panel

    offered = []

    def save(parent, title, start, filters):
        offered.append(start)
        return str(tmp_path / f"picked{len(offered)}.png"), ""

    monkeypatch.setattr(QFileDialog, "getSaveFileName", save)
    area = with_trace.area
    assert export_panel(with_trace, area.norm)
    assert export_panel(with_trace, area.rows)
    assert (tmp_path / "picked1.png").is_file() and (tmp_path / "picked2.png").is_file()
    assert "picked1" not in offered[1]
    assert Path(offered[1]).parent == tmp_path  # the folder is remembered
    assert Path(offered[1]).name == Path(offered[0]).name.replace("-norm", "-rows")


def test_export_to_a_folder_name_is_refused(with_trace, monkeypatch, tmp_path, errors):
    folder = tmp_path / "plots"
    folder.mkdir()
    assert not export_with(monkeypatch, with_trace, str(folder))
    assert "is a folder" in errors[-1] and str(folder) in errors[-1]
    assert not list(tmp_path.rglob("*.png"))


def test_export_asks_before_replacing_files(with_trace, monkeypatch, tmp_path, errors):
    old = tmp_path / "plot.png"
    old.write_bytes(b"keep me")
    asked = []

    def answer(choice):
        def question(parent, title, text, *args):
            asked.append(text)
            return choice

        return question

    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.No))
    assert not export_with(monkeypatch, with_trace, str(tmp_path / "plot"), ("png", "csv"))
    assert str(old) in asked[-1] and "plot.csv" not in asked[-1]
    assert old.read_bytes() == b"keep me" and not (tmp_path / "plot.csv").exists()
    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.Yes))
    assert export_with(monkeypatch, with_trace, str(tmp_path / "plot"), ("png", "csv")), errors
    assert old.read_bytes()[:4] == b"\x89PNG" and (tmp_path / "plot.csv").is_file()
    asked.clear()
    assert export_with(monkeypatch, with_trace, str(tmp_path / "fresh"))  # nothing to ask
    assert not asked


def test_export_errors_name_the_format_not_a_cli_flag(with_trace, monkeypatch, tmp_path,
                                                      errors):  # fmt: skip
    missing = tmp_path / "missing" / "plot"
    assert not export_with(monkeypatch, with_trace, str(missing), ("png", "svg"))
    assert "--" not in errors[-1] and "no such folder" in errors[-1]
    assert "PNG" in errors[-1] or "SVG" in errors[-1]
    assert not export_with(monkeypatch, with_trace, str(tmp_path / "plot"), width=16)
    assert "--" not in errors[-1] and "Image size" in errors[-1]


# ---- the dock -----------------------------------------------------------------------------------


def test_a_run_too_big_for_memory_is_refused_in_the_docks_words(shown, monkeypatch):
    monkeypatch.setattr("lstmviz.core.config.available_memory", lambda: 2**20)
    with pytest.raises(ConfigError) as refused:
        shown.params.validated()
    message = str(refused.value)
    assert "GiB" in message and "--" not in message
    assert "Steps T" in message and "Hidden H" in message


# ---- files --------------------------------------------------------------------------------------


def test_a_recent_trace_that_is_gone_leaves_the_menu(shown, tmp_path, errors):
    kept = small_trace(1).save(tmp_path / "kept.npz")
    gone = small_trace(2).save(tmp_path / "gone.npz")
    assert shown.open_path(str(gone)) and shown.open_path(str(kept))
    Path(gone).unlink()
    names = [a.text() for a in shown.files.recent_menu.actions()]
    assert names == [str(Path(kept).resolve()), str(Path(gone).resolve())]
    shown.files.recent_menu.actions()[1].trigger()
    assert "gone.npz" in errors[-1]
    assert [a.text() for a in shown.files.recent_menu.actions()] == [str(Path(kept).resolve())]
    shown.files.recent_menu.actions()[0].trigger()  # one that is there stays, first
    assert shown.files.recent() == [str(Path(kept).resolve())]


@pytest.mark.skipif(not DEMO_WEIGHTS.is_file(), reason="no demo model")
def test_a_model_opened_over_inputs_it_cannot_take_says_it_let_them_go(shown, tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((4, 12, 5), np.float32))  # the demo model takes I=2
    assert shown.open_path(str(x))
    assert shown.files.open_model(str(DEMO_WEIGHTS))
    assert shown.params.widgets["inputs"].path() is None
    assert "x.npy let go" in shown.message.text()
