"""Exports from the window (pytest-qt): a panel's right-click menu, the export dialog's formats
and the panel under the cursor, on a multi-pass trace."""

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from lstmviz.io.trace import GradientTrace
from tests.helpers.gui_checks import export_every_format, export_with
from tests.helpers.trace_fixtures import P, T, read_csv
from tests.helpers.trace_fixtures import traces as traces  # the module fixture the window shows


@pytest.fixture
def window(qtbot, tmp_path, traces, monkeypatch):
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QMessageBox

    from lstmviz.gui.main_window import MainWindow

    errors = []
    monkeypatch.setattr(QMessageBox, "critical", lambda parent, title, text: errors.append(text))
    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    win = MainWindow(settings=settings)
    win.errors_shown = errors
    win.worker_started = True  # no computing process: nothing here runs
    qtbot.addWidget(win)
    win.show()
    assert not win.export_action.isEnabled()  # nothing to export yet
    win.show_trace(traces["multipass"], None)
    yield win
    win.close()


def test_gui_right_click_export_writes_the_panel(window, tmp_path, monkeypatch):
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QFileDialog

    assert window.export_action.isEnabled()
    menu = window.area.rows.plot.scene().contextMenu
    assert menu == [window.area.rows.export_action]  # ours, not pyqtgraph's Export…
    target = tmp_path / "out" / "rows"
    target.parent.mkdir()
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), "SVG vector image (*.svg)")
    )
    window.area.rows.export_action.trigger()
    assert not window.errors_shown
    texts = " ".join(ET.parse(str(target) + ".svg").getroot().itertext())
    assert "rows × timesteps" in texts and "units × timesteps" not in texts
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target) + ".png", ""))
    window.area.norm.export_action.trigger()
    image = QImage(str(target) + ".png")
    assert image.width() == 1600 and image.height() > 300
    assert "exported" in window.message.text()


def test_gui_export_dialog_writes_every_chosen_format(window, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QDialog

    from lstmviz.gui.dialogs.export_dialog import ExportDialog

    base = tmp_path / "fig"
    export_every_format(window, monkeypatch, base, 800, 500)
    assert not window.errors_shown, window.errors_shown
    names = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("fig"))
    assert names == ["fig.csv", "fig.npz", "fig.pdf", "fig.png", "fig.svg", "fig_diagnosis.csv"]
    header, rows = read_csv(base.with_suffix(".csv"))
    assert header[:3] == ["t", "pass", "t_in_pass"] and len(rows) == P * T
    again = GradientTrace.load(base.with_suffix(".npz"))  # the trace itself, as Save trace
    np.testing.assert_array_equal(again.norm_h_total, window.trace.norm_h_total)
    assert window.files.recent()[0] == str(base.with_suffix(".npz").resolve())

    def unwritable(dialog):
        dialog.base.setText(str(tmp_path / "missing" / "fig"))
        return QDialog.Accepted

    monkeypatch.setattr(ExportDialog, "exec", unwritable)
    window.export_action.trigger()
    assert "no such folder" in window.errors_shown[-1]
    assert not (tmp_path / "missing").exists()


def test_gui_export_panel_under_cursor(window, tmp_path, monkeypatch):
    from PySide6.QtCore import QPoint
    from PySide6.QtWidgets import QFileDialog

    from lstmviz.gui.dialogs.export_dialog import export_under_cursor

    target = tmp_path / "units.csv"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    units = window.area.units  # the panel: its plot is laid out only once drawn
    centre = units.mapToGlobal(units.rect().center())
    assert export_under_cursor(window, centre)
    assert read_csv(target)[0][0] == "t"
    assert not export_under_cursor(window, QPoint(-10_000, -10_000))
    assert "point the mouse at a panel" in window.message.text()


def test_every_panel_hidden_refuses_images_and_writes_the_csv(window, tmp_path, monkeypatch):

    panels = ("Gradient", "Loss", "Rows", "Units", "Connectivity")  # the View menu's LSTM panels
    for action in window.findChildren(type(window.log_action)):
        if action.isCheckable() and action.text().startswith(panels):
            action.setChecked(False)
    assert not export_with(monkeypatch, window, str(tmp_path / "fig"), ("png", "csv"))
    assert "every panel is hidden" in window.errors_shown[-1]
    assert "--" not in window.errors_shown[-1] and not list(tmp_path.glob("fig*"))
    assert export_with(monkeypatch, window, str(tmp_path / "fig"), ("csv", "npz"))
    header, rows = read_csv(tmp_path / "fig.csv")
    assert header[:3] == ["t", "pass", "t_in_pass"] and len(rows) == P * T
    assert (tmp_path / "fig.npz").is_file()
