"""The suite's own guards: an unmocked modal dialog fails its test (offscreen nobody answers
it, so it would hang the run), a hung test ends the run with every thread's stack, and test
files share code through tests/helpers/ only (none imports another test file)."""

import ast
from pathlib import Path

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


# ---- the tests' layout --------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent


def imported_test_files(source: str) -> set[str]:
    """The test files (modules named test_*) that `source` imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found |= {m for m in modules if m.split(".")[-1].startswith("test_")}
    return found


def test_test_files_share_code_through_helpers_only():
    found = {}
    for path in sorted(TESTS.rglob("test_*.py")):
        imported = imported_test_files(path.read_text(encoding="utf-8"))
        if imported:
            found[path.relative_to(TESTS).as_posix()] = imported
    assert found == {}
    assert imported_test_files("from tests.gui import test_gui_cli\nimport tests.io.test_x\n"
                               "from test_recording import f\nfrom tests.helpers import x\n") == {
        "tests.gui.test_gui_cli", "tests.io.test_x", "test_recording"}
