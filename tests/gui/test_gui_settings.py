"""What the window keeps across restarts (QSettings): the folder of the files opened and saved,
the panels' splitter, and a settings file that is damaged or hand-edited."""

from pathlib import Path

import pytest

pytest.importorskip("pytestqt")
from PySide6.QtCore import QSettings  # noqa: E402
from PySide6.QtWidgets import QApplication, QFileDialog  # noqa: E402

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.io.trace import GradientTrace  # noqa: E402
from tests.helpers import gui_fakes  # noqa: E402
from tests.helpers.gui_checks import idle_window  # noqa: E402
from tests.helpers.gui_fakes import PASSES, TP  # noqa: E402


def saved_trace(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = RunConfig(steps=PASSES * TP, batch=3, hidden=5)
    trace = next(item for item in gui_fakes.multipass(config) if isinstance(item, GradientTrace))
    return trace.save(folder / "t.npz")


CORRUPT = {
    "params not an object": 'params="[1, 2]"',
    "params out of any range": 'params="{\\"steps\\": 12, \\"batch\\": 1e99}"',
    "geometry as text": "geometry=hello\nstate=12",
    "recent as a number": "recent=@Variant(\\0\\0\\0\\x2\\0\\0\\0\\a)",
}


@pytest.mark.parametrize("line", CORRUPT.values(), ids=CORRUPT.keys())
def test_a_damaged_settings_file_starts_the_window_with_defaults(qtbot, tmp_path, line):
    path = tmp_path / "settings.ini"
    path.write_text(f"[General]\n{line}\n")
    settings = QSettings(str(path), QSettings.Format.IniFormat)
    win = idle_window(qtbot, settings)  # raised in the constructor: no window at all
    assert win.params.config().batch == RunConfig().batch
    win.show()
    assert win.isVisible() and win.width() > 300
    win.files.recent_menu.aboutToShow.emit()
    win.close()
    # what the window wrote over them is read back as written
    again = idle_window(qtbot, QSettings(str(path), QSettings.Format.IniFormat))
    assert again.params.config() == win.params.config()
    again.close()


def test_file_dialogs_start_in_the_folder_last_used_also_after_a_restart(
    qtbot, settings, tmp_path, monkeypatch
):
    first = saved_trace(tmp_path / "runs" / "a")
    asked = []

    def opened(parent, title, folder, wanted):
        asked.append(folder)
        return str(first), wanted

    monkeypatch.setattr(QFileDialog, "getOpenFileName", opened)
    win = idle_window(qtbot, settings)
    win.files.open_trace_dialog()
    assert win.trace is not None
    win.close()

    again = idle_window(qtbot, settings)
    for dialog in (again.files.open_trace_dialog, again.files.open_model_dialog,
                   again.files.open_inputs_dialog,
                   again.recordings.open_recording_dialog):  # fmt: skip
        monkeypatch.setattr(QFileDialog, "getOpenFileName",
                            lambda p, t, folder, w: (asked.append(folder), ("", ""))[1])
        dialog()
        assert Path(asked[-1]) == first.parent, dialog.__name__
    # a trace saved elsewhere: the next dialog starts there, and the save offers that folder
    again.files.open_trace(str(first))
    other = tmp_path / "saved" / "mine.npz"
    other.parent.mkdir()
    offered = []
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda p, t, start, w: (offered.append(start), (str(other), w))[1])
    again.files.save_trace_dialog()
    assert other.is_file() and Path(offered[-1]).parent == first.parent
    again.files.save_trace_dialog()
    assert Path(offered[-1]).parent == other.parent
    again.close()


def test_a_folder_since_removed_is_not_offered(qtbot, settings, tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    path = saved_trace(gone)
    win = idle_window(qtbot, settings)
    win.files.open_trace(str(path))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda p, t, f, w: (str(path), w))
    win.files.open_trace_dialog()
    win.close()
    path.unlink()
    gone.rmdir()
    asked = []
    again = idle_window(qtbot, settings)
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        lambda p, t, folder, w: (asked.append(folder), ("", ""))[1])
    again.files.open_trace_dialog()
    assert asked == [""]  # Qt's own choice (the working folder), not a missing one
    again.close()


def test_the_panels_splitter_is_kept_across_restarts(qtbot, settings):
    win = idle_window(qtbot, settings)
    win.resize(1280, 820)
    win.show()
    splitter = win.area.splitter
    qtbot.waitUntil(lambda: not win.area.busy() and sum(splitter.sizes()) > 0, timeout=5_000)
    total = sum(splitter.sizes())
    splitter.setSizes([0, total // 4, total - total // 4])  # the user drags it up
    QApplication.processEvents()
    dragged = splitter.sizes()
    win.close()

    again = idle_window(qtbot, settings)
    again.show()
    restored = again.area.splitter
    qtbot.waitUntil(lambda: not again.area.busy(), timeout=5_000)  # its first panels shown
    QApplication.processEvents()
    share = restored.sizes()[1] / sum(restored.sizes())  # of a height that may differ a bit
    assert share == pytest.approx(dragged[1] / sum(dragged), abs=0.02), (restored.sizes(), dragged)
    again.close()
