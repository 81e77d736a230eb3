"""PySide's types and the window's threads: the panels' modules are imported in a thread only
once the GUI thread has made every Python type of the Qt modules pyqtgraph uses
(`lstmviz.gui.qt_types`), since two threads making PySide types at once crash the process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

ROOT = Path(__file__).resolve().parents[2]

# A fresh process (in this one earlier tests have made the types already): the window as the
# app shows it, its computing process left out; what was unmade when the import thread started.
WINDOW = textwrap.dedent("""
    import json, os, sys, threading, time
    from PySide6.QtCore import QSettings
    from PySide6.QtWidgets import QApplication
    from lstmviz.gui import qt_types
    from lstmviz.gui.main_window import MainWindow

    unmade, start = [], threading.Thread.start
    def recording_start(thread):
        if thread.name == "lstmviz-panels":
            unmade.append(qt_types.unmade())
        start(thread)
    threading.Thread.start = recording_start
    MainWindow.start_worker = lambda window: None
    app = QApplication([])
    window = MainWindow(settings=QSettings(sys.argv[1], QSettings.Format.IniFormat))
    window.show()
    deadline = time.monotonic() + 60
    while window._area is None and time.monotonic() < deadline:
        app.processEvents()
        time.sleep(0.001)
    print(json.dumps({"starts": len(unmade), "unmade": unmade[0] if unmade else None,
                      "panels": window._area is not None}), flush=True)
    os._exit(0)
""")


def test_the_panels_modules_are_imported_in_a_thread_after_every_qt_type_is_made(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    done = subprocess.run([sys.executable, "-c", WINDOW, str(tmp_path / "settings.ini")],
                          cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {"starts": 1, "unmade": [], "panels": True}


def test_making_the_types_gives_the_event_loop_turns_and_leaves_none_unmade():
    code = textwrap.dedent("""
        import json
        from PySide6 import QtCore, QtGui, QtWidgets
        from lstmviz.gui import qt_types
        before = len(qt_types.unmade())
        turns, steps, end = 0, qt_types.making(), object()
        while next(steps, end) is not end:
            turns += 1
        print(json.dumps({"before": before, "after": qt_types.unmade(), "turns": turns}))
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["before"] > 100  # PySide makes its types when asked: many are still to make
    assert seen["after"] == []
    assert seen["turns"] > 5  # in pieces, not in one turn of the event loop
