"""The export dialog's file name and remembered choices: a name typed with ~ is in the home
folder, and export settings an edited settings file made unreadable fall back to the defaults
instead of breaking File → Export… and Export panel…."""

from __future__ import annotations

import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtGui import QImage  # noqa: E402
from PySide6.QtWidgets import QFileDialog  # noqa: E402

from lstmviz.gui.main_window import MainWindow  # noqa: E402
from lstmviz.plots.export.writer import DEFAULT_DPI, DEFAULT_HEIGHT, DEFAULT_WIDTH  # noqa: E402
from tests.helpers.gui_checks import export_with  # noqa: E402
from tests.helpers.trace_fixtures import small_trace  # noqa: E402

EDITED = """[export]
width=wide
height=99999999
dpi=
formats=png, svg
dir=/one, /two
"""


@pytest.fixture
def edited(qtbot, tmp_path, errors):
    """The window showing a trace, its settings file edited by hand into unreadable export
    values; error dialogs in `errors`."""
    path = tmp_path / "settings.ini"
    path.write_text(EDITED)
    win = MainWindow(settings=QSettings(str(path), QSettings.Format.IniFormat))
    qtbot.addWidget(win)
    win.show()
    with qtbot.waitSignal(win.area.drawn, timeout=10_000):
        win.show_trace(small_trace(), 0.1)
    yield win
    win.close()


def test_unreadable_export_settings_open_the_dialog_with_the_defaults(edited, monkeypatch,
                                                                      tmp_path):  # fmt: skip
    from PySide6.QtWidgets import QDialog

    from lstmviz.gui.dialogs.export_dialog import ExportDialog, export_dialog

    seen = {}

    def look(dialog):
        seen.update(width=dialog.width_box.value(), height=dialog.height_box.value(),
                    dpi=dialog.dpi_box.value(), base=dialog.base.text())  # fmt: skip
        return QDialog.Rejected

    monkeypatch.setattr(ExportDialog, "exec", look)
    monkeypatch.chdir(tmp_path)
    assert not export_dialog(edited)
    assert (seen["width"], seen["height"], seen["dpi"]) == (DEFAULT_WIDTH, DEFAULT_HEIGHT,
                                                            DEFAULT_DPI)  # fmt: skip
    assert seen["base"] == str(tmp_path / "lstmviz-taped")  # the working folder


def test_unreadable_export_settings_leave_export_panel_working(edited, monkeypatch, tmp_path,
                                                               errors):  # fmt: skip
    target = tmp_path / "norm.png"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    edited.area.norm.export_action.trigger()
    assert not errors and QImage(str(target)).width() == DEFAULT_WIDTH


def test_a_name_typed_with_a_tilde_is_in_the_home_folder(edited, monkeypatch, tmp_path, errors):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    assert export_with(monkeypatch, edited, "~/fig", ("csv",)), errors
    assert (home / "fig.csv").is_file()
    assert "~" not in edited.message.text()
