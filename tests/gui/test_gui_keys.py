"""The window from the keyboard, as a user meets it: every shortcut from any focus (real key
presses on the window), no two actions on one key, menus that show their keys and enable what
makes sense, tab order through the dock, Enter in a field, mnemonics, the Help texts. Runs go
to a recording stand-in for the worker: no computing process, no TensorFlow."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import QEvent, QObject, Qt  # noqa: E402
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence, QShortcut  # noqa: E402
from PySide6.QtWidgets import (  # noqa: E402
    QApplication,
    QDialog,
    QFileDialog,
    QMessageBox,
    QScrollArea,
    QWidget,
)

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.gui.main_window import MainWindow  # noqa: E402
from lstmviz.gui.parts import run_view  # noqa: E402
from lstmviz.gui.state.run_state import Outcome  # noqa: E402
from lstmviz.io.trace import GradientTrace, TraceUpdate, step_norm  # noqa: E402

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture
def win(qtbot, settings, errors, monkeypatch):
    """The main window, shown and active, its worker never started: `requests` records what
    it was asked (("run", id), ("pause", id), ("resume", id), ("cancel", id), …)."""
    w = MainWindow(settings=settings)
    w.requests_seen = []
    w.start_worker = lambda: None
    for name in ("request_run", "pause", "resume", "cancel", "finish_early"):
        monkeypatch.setattr(
            w.worker, name, lambda run_id, *rest, n=name: w.requests_seen.append((n, run_id))
        )
    qtbot.addWidget(w)
    w.show()
    w.activateWindow()
    qtbot.waitActive(w)
    yield w
    w.close()


def small_trace() -> GradientTrace:
    g = np.random.default_rng(0).standard_normal((10, 2, 3)).astype(np.float32)
    arrays = {"grad_h_total": g, "norm_h_total": step_norm(g), "loss": np.float32(1)}
    return GradientTrace("taped", RunConfig(steps=10, batch=2, hidden=3), arrays)


def press(qtbot, win, keys: str) -> None:
    """Press `keys` ("Ctrl+R") where the keyboard focus is (the window if none)."""
    combo = QKeySequence(keys)[0]
    target = QApplication.focusWidget() or win
    qtbot.keyClick(target, combo.key(), combo.keyboardModifiers())


def keyed(win) -> dict[str, QAction]:
    """Every action of the window with a key, by its key ("Ctrl+R")."""
    return {a.shortcut().toString(): a for a in win.findChildren(QAction)
            if not a.shortcut().isEmpty()}  # fmt: skip


class Catch(QObject):
    """Swallows the shortcut events of the actions it watches and names the keys that came."""

    def __init__(self, actions) -> None:
        super().__init__()
        self.came: list[str] = []
        for action in actions:
            action.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:  # noqa: N802
        if event.type() == QEvent.Type.Shortcut:
            self.came.append(watched.shortcut().toString())
            return True
        return False


def focus_on(win, where: str) -> None:
    """Put the keyboard focus on a spin box or the mode list of the dock, a panel, the Run
    button, or nowhere."""
    target = {"spin box": lambda: win.params.widgets["steps"],
              "mode list": lambda: win.params.widgets["mode"],
              "panel": lambda: win.area.norm.plot,
              "Run button": lambda: win.run_button}.get(where)  # fmt: skip
    if target is None:
        if QApplication.focusWidget() is not None:
            QApplication.focusWidget().clearFocus()
        return
    widget = target()
    widget.setFocusPolicy(widget.focusPolicy() | Qt.ClickFocus)  # a plot takes a click's
    widget.setFocus()
    focus = QApplication.focusWidget()
    assert focus is widget or widget.isAncestorOf(focus), where


def start(qtbot, win, mode: str = "taped") -> None:
    win.params.widgets["mode"].setCurrentIndex(win.params.widgets["mode"].findData(mode))
    press(qtbot, win, "Ctrl+R")
    assert win.state.running


# ---- shortcuts: one action each, from anywhere ------------------------------------------------


def test_no_two_actions_or_shortcuts_share_a_key(win):
    """Qt disables both on an ambiguous key ("QAction::event: Ambiguous shortcut overload"),
    silently: every key belongs to one action or shortcut of the window."""
    win.show_trace(small_trace(), 0.1)  # the panels and their context-menu actions too
    keys = [k.toString() for a in win.findChildren(QAction) for k in a.shortcuts()]
    keys += [s.key().toString() for s in win.findChildren(QShortcut)]
    assert len(keys) >= 14
    assert sorted(keys) == sorted(set(keys))


def test_menu_and_item_mnemonics_are_unique(win):
    bar = win.menuBar()

    def letters(actions):
        found = [m.group(1).lower() for a in actions
                 if (m := re.search(r"&(\w)", a.text()))]  # fmt: skip
        return found

    tops = letters(bar.actions())
    assert tops == ["f", "r", "v", "h"]
    for top in bar.actions():
        mine = letters(top.menu().actions())
        assert len(mine) == len(set(mine)), (top.text(), mine)


@pytest.mark.parametrize("where", ["spin box", "mode list", "panel", "Run button", "nowhere"])
def test_every_shortcut_reaches_its_action_from_any_focus(qtbot, win, where):
    win.show_trace(small_trace(), 0.1)
    actions = keyed(win)
    catch = Catch(actions.values())
    idle = [k for k, a in actions.items() if a.isEnabled()]
    assert {"Ctrl+R", "Ctrl+O", "Ctrl+S", "Ctrl+E", "Ctrl+Shift+E", "Ctrl+Q", "F1", "Ctrl+L",
            "Ctrl+N", "Ctrl+M", "Ctrl+Shift+O", "Ctrl+Shift+V"} <= set(idle)  # fmt: skip
    for key in idle:
        focus_on(win, where)
        press(qtbot, win, key)
    assert catch.came == idle
    # running: Pause and Stop, wherever the focus went
    catch.came.clear()
    win.state.start(RunConfig())
    for key in ("Ctrl+P", "Esc"):
        if where in ("panel", "nowhere"):  # the dock (and Run) are disabled during a run
            focus_on(win, where)
        press(qtbot, win, key)
    assert catch.came == ["Ctrl+P", "Esc"]


def test_run_pause_resume_and_stop_from_the_keyboard(qtbot, win):
    """Ctrl+R in a spin box runs what was typed in it (no Enter needed); Ctrl+R again while
    it runs starts nothing; Ctrl+P pauses and resumes; Esc stops a run that has just begun."""
    box = win.params.widgets["steps"]
    box.setFocus()
    box.selectAll()
    qtbot.keyClicks(box, "37")
    press(qtbot, win, "Ctrl+R")
    assert win.state.running and win.state.config.steps == 37
    press(qtbot, win, "Ctrl+R")
    press(qtbot, win, "Ctrl+P")
    assert win.pause_button.text() == "Resume" and win.pause_action.text() == "&Resume"
    press(qtbot, win, "Ctrl+P")
    assert win.pause_button.text() == "Pause"
    press(qtbot, win, "Esc")
    assert not win.state.running
    assert win.requests_seen == [("request_run", 1), ("pause", 1), ("resume", 1), ("cancel", 1)]


def test_esc_asks_before_throwing_away_a_long_run_with_nothing_to_keep(qtbot, win, monkeypatch):
    """A stray Esc (closing a tooltip, a notebook's habit) never loses a long run: Esc asks,
    Esc again goes on; the Stop button and Run → Stop do not ask."""
    monkeypatch.setattr(run_view, "ESC_ASKS_AFTER", 0.0)
    asked = []

    def question(parent, title, text, buttons, default):
        asked.append(text)
        assert default == QMessageBox.Yes and buttons & QMessageBox.Cancel
        return answers.pop(0)

    monkeypatch.setattr(QMessageBox, "question", question)
    answers = [QMessageBox.Cancel, QMessageBox.Yes]
    start(qtbot, win)
    press(qtbot, win, "Esc")
    assert len(asked) == 1 and "Nothing of its" in asked[0] and win.state.running
    press(qtbot, win, "Esc")
    assert len(asked) == 2 and not win.state.running
    for stop in (win.stop_button.click, win.stop_action.trigger):
        start(qtbot, win)
        stop()
        assert not win.state.running and len(asked) == 2
    monkeypatch.setattr(run_view, "ESC_ASKS_AFTER", 3600.0)
    start(qtbot, win)
    press(qtbot, win, "Esc")  # a run just begun: stopped at once
    assert not win.state.running and len(asked) == 2


def test_esc_on_a_run_with_passes_done_asks_to_keep_them_and_esc_goes_on(qtbot, win, monkeypatch):
    asked = []
    monkeypatch.setattr(win.run_view, "ask_keep",
                        lambda done: asked.append(done) or QMessageBox.Cancel)
    start(qtbot, win, "multipass")
    win.state._on_progress(win.state.active, TraceUpdate(1, 3, "pass 1/3", {}))
    press(qtbot, win, "Esc")
    assert asked == [1] and win.state.running
    assert win.requests_seen[-2:] == [("pause", 1), ("resume", 1)]  # held, then going on


def test_the_keyboard_focus_comes_back_to_the_dock_after_a_run(qtbot, win):
    """Ctrl+R in a field disables the dock (the focus is nowhere while it runs): when the run
    ends the focus is back in that field, so typing goes on there."""
    box = win.params.widgets["hidden"]
    box.setFocus()
    press(qtbot, win, "Ctrl+R")
    assert win.state.running and QApplication.focusWidget() is None
    win.state._on_cancelled(win.state.active)
    assert not win.state.running
    focus = QApplication.focusWidget()
    assert focus is not None and box.isAncestorOf(focus)
    box.selectAll()
    qtbot.keyClicks(QApplication.focusWidget(), "12")
    assert box.value() == 12


def test_ctrl_q_quits_from_a_field(qtbot, win):
    win.params.widgets["seed"].setFocus()
    press(qtbot, win, "Ctrl+Q")
    assert not win.isVisible()


def test_file_and_help_keys_open_their_dialogs(qtbot, win, monkeypatch):
    seen = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        lambda parent, title, *a: seen.append(title) or ("", ""))  # fmt: skip
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda parent, title, *a: seen.append(title) or ("", ""))  # fmt: skip
    monkeypatch.setattr(QMessageBox, "information",
                        lambda parent, title, text: seen.append(title))  # fmt: skip
    from lstmviz.gui.dialogs.export_dialog import ExportDialog

    monkeypatch.setattr(ExportDialog, "exec", lambda d: seen.append("Export") or QDialog.Rejected)
    win.show_trace(small_trace(), 0.1)
    win.params.widgets["batch"].setFocus()
    for key in ("Ctrl+O", "Ctrl+S", "Ctrl+E", "Ctrl+M", "Ctrl+Shift+O", "F1"):
        press(qtbot, win, key)
    assert seen == ["Open trace", "Save trace", "Export", "Open model", "Open recording",
                    "Keyboard shortcuts"]  # fmt: skip
    log = win.log_action.isChecked()
    press(qtbot, win, "Ctrl+L")
    assert win.log_action.isChecked() is not log


# ---- menus: enabled when they can do something ------------------------------------------------


def test_menu_items_are_enabled_when_they_can_act(win):
    def enabled():
        return {name: getattr(win, f"{name}_action").isEnabled()
                for name in ("run", "pause", "stop", "save", "export", "export_panel",
                             "verify", "save_weights")}  # fmt: skip

    assert enabled() == dict(run=True, pause=False, stop=False, save=False, export=False,
                             export_panel=False, verify=False, save_weights=False)  # fmt: skip
    win.show_trace(small_trace(), 0.1)
    assert enabled() == dict(run=True, pause=False, stop=False, save=True, export=True,
                             export_panel=True, verify=True, save_weights=False)  # fmt: skip
    win.state.start(RunConfig())
    assert enabled() == dict(run=False, pause=True, stop=True, save=False, export=False,
                             export_panel=False, verify=False, save_weights=False)  # fmt: skip


# ---- the dock from the keyboard ---------------------------------------------------------------


def test_tab_goes_down_the_dock_to_run_pause_and_stop(qtbot, win):
    win.state.start(RunConfig())  # Pause and Stop take the focus only while a run goes
    win.state._end("stopped", Outcome.STOPPED, restore=False)
    win.params.widgets["mode"].setFocus()
    order, tops = [], []
    for _ in range(40):
        focus = QApplication.focusWidget()
        if focus is win.run_button:
            break
        name = next((k for k, w in win.params.widgets.items()
                     if w is focus or w.isAncestorOf(focus)), None)  # fmt: skip
        if name is not None and name not in order:
            order.append(name)
            tops.append(focus.mapTo(win, focus.rect().topLeft()).y())
        qtbot.keyClick(focus, Qt.Key_Tab)
    assert QApplication.focusWidget() is win.run_button
    assert order[0] == "mode" and tops == sorted(tops) and len(order) >= 8
    for _ in range(3):  # past Stop: no invisible stop (the dock's scroll area) on the way
        qtbot.keyClick(QApplication.focusWidget(), Qt.Key_Tab)
        assert not isinstance(QApplication.focusWidget(), QScrollArea)
    win.state.start(RunConfig())
    win.pause_button.setFocus()
    qtbot.keyClick(win.pause_button, Qt.Key_Tab)
    assert QApplication.focusWidget() is win.stop_button


def test_enter_in_a_field_takes_the_typed_value_and_starts_nothing(qtbot, win):
    """Enter in the dock keeps the value typed (as leaving the field does); runs start with
    Ctrl+R or Run only, so a value can be typed and checked first."""
    box = win.params.widgets["batch"]
    box.setFocus()
    box.selectAll()
    qtbot.keyClicks(box, "9")
    qtbot.keyClick(box, Qt.Key_Return)
    assert box.value() == 9 and win.params.config().batch == 9
    assert not win.state.running and win.requests_seen == []


def test_alt_f_opens_the_file_menu(qtbot, win):
    win.params.widgets["steps"].setFocus()
    file_menu = win.menuBar().actions()[0].menu()
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key_F, Qt.AltModifier)
    qtbot.waitUntil(file_menu.isVisible, timeout=2_000)
    qtbot.keyClick(file_menu, Qt.Key_Escape)  # closes the menu, and stops nothing
    qtbot.waitUntil(lambda: not file_menu.isVisible(), timeout=2_000)


# ---- Help ---------------------------------------------------------------------------------------


def test_readme_keyboard_line_lists_exactly_the_apps_shortcuts(win):
    from lstmviz.gui.menus import shortcut_rows

    text = README.read_text(encoding="utf-8")
    line = " ".join(text.split("\nKeyboard:", 1)[1].split("\n\n", 1)[0].split())
    named = set(re.findall(r"\b(?:Ctrl\+(?:Shift\+)?[A-Z]|Esc|F1)\b", line))
    assert named == {keys for _, _, keys in shortcut_rows(win)}


def test_help_says_when_esc_asks(win, monkeypatch):
    from lstmviz.gui.menus import ESC_ASKS_AFTER, shortcuts_html

    assert f"Esc on a run that has computed {ESC_ASKS_AFTER:.0f} s" in shortcuts_html(win)
    assert f"{ESC_ASKS_AFTER:.0f} s or more into a run" in README.read_text(encoding="utf-8")


def test_about_names_the_versions_and_a_tensorflow_that_did_not_load(win, monkeypatch):
    import lstmviz

    texts = []
    monkeypatch.setattr(QMessageBox, "about", lambda parent, title, text: texts.append(text))
    win.about()  # the computing process is not ready yet
    assert f"lstmviz {lstmviz.__version__}" in texts[-1] and "TensorFlow loading…" in texts[-1]
    win._on_worker_failed(0, "no module named tensorflow")  # it could not import TensorFlow
    win.about()
    assert "TensorFlow not loaded · Keras" in texts[-1] and "yet" not in texts[-1]
    win.device = {"tensorflow": "9.9.9"}
    win.about()
    assert "TensorFlow 9.9.9 · Keras" in texts[-1]


class LikeLinuxLineEdit(QObject):
    """What a line edit does on Linux desktops (Qt's X11 key scheme: Ctrl+E is "end of line"):
    it claims Ctrl+E before the window's shortcuts see it."""

    def eventFilter(self, watched, event) -> bool:  # noqa: N802
        if event.type() == QEvent.Type.ShortcutOverride and event.key() == Qt.Key_E:
            event.accept()
            return True
        return False


@pytest.mark.parametrize("field", ["steps", "layer"])
def test_ctrl_e_exports_from_a_field_that_claims_it_for_end_of_line(
    qtbot, win, monkeypatch, field
):
    from lstmviz.gui.dialogs.export_dialog import ExportDialog

    seen = []
    monkeypatch.setattr(ExportDialog, "exec", lambda d: seen.append("Export") or QDialog.Rejected)
    win.show_trace(small_trace(), 0.1)
    widget = win.params.widgets[field]
    widget.setEnabled(True)
    linux = LikeLinuxLineEdit(win)
    for target in (widget, *widget.findChildren(QWidget)):
        target.installEventFilter(linux)  # before it takes the focus, as Qt's own handling
    widget.setFocus()
    focus = QApplication.focusWidget()
    assert focus is widget or widget.isAncestorOf(focus)
    press(qtbot, win, "Ctrl+E")
    assert seen == ["Export"]

    def claimed() -> bool:
        event = QKeyEvent(QEvent.Type.ShortcutOverride, Qt.Key_E, Qt.ControlModifier)
        event.ignore()
        QApplication.sendEvent(QApplication.focusWidget(), event)
        return event.isAccepted()

    assert not claimed()
    win.export_action.setEnabled(False)  # a key no enabled action has stays the field's
    assert claimed()


def test_enter_presses_the_focused_run_pause_or_stop_button(qtbot, win):
    """Tabbed to Run, Enter starts the run (as Space does); on Pause it pauses, on Stop it
    stops: outside dialogs Qt's buttons ignore Enter unless told otherwise."""
    win.run_button.setFocus()
    qtbot.keyClick(win.run_button, Qt.Key_Return)
    assert win.state.running
    win.pause_button.setFocus()
    qtbot.keyClick(win.pause_button, Qt.Key_Return)
    assert win.pause_button.isChecked() and win.pause_button.text() == "Resume"
    qtbot.keyClick(win.pause_button, Qt.Key_Enter)
    assert not win.pause_button.isChecked()
    win.stop_button.setFocus()
    qtbot.keyClick(win.stop_button, Qt.Key_Return)
    assert not win.state.running
    assert [name for name, _ in win.requests_seen] == ["request_run", "pause", "resume", "cancel"]
