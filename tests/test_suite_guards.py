"""The suite's own guards: an unmocked modal dialog fails its test (offscreen nobody answers
it, so it would hang the run), and a hung test ends the run with every thread's stack."""

import pytest

pytest.importorskip("pytestqt")
from PySide6.QtWidgets import QDialog, QFileDialog, QMessageBox  # noqa: E402


def test_an_unmocked_dialog_fails_the_test_naming_it(qtbot):
    with pytest.raises(AssertionError, match=r"QMessageBox\.question: Stop the run \| Keep\?"):
        QMessageBox.question(None, "Stop the run", "Keep?")
    box = QMessageBox()
    box.setText("engine exploded")
    with pytest.raises(AssertionError, match=r"QMessageBox\.exec: engine exploded"):
        box.exec()
    with pytest.raises(AssertionError, match=r"QDialog\.exec"):
        QDialog().exec()
    with pytest.raises(AssertionError, match=r"QFileDialog\.getSaveFileName"):
        QFileDialog.getSaveFileName(None, "Export to", "")


def test_a_mocked_dialog_answers(qtbot, monkeypatch):
    monkeypatch.setattr(QMessageBox, "question", lambda *args: QMessageBox.No)
    assert QMessageBox.question(None, "Stop the run", "Keep?") == QMessageBox.No


def test_a_hung_test_is_ended_by_the_timeout_plugin(pytestconfig):
    assert pytestconfig.pluginmanager.hasplugin("timeout")
    assert float(pytestconfig.getini("timeout")) > 0
    assert pytestconfig.getini("timeout_method") == "thread"
