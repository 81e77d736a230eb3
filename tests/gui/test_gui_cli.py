"""`lstmviz gui FILE … [--run] [--screenshot PNG]`: files open as if dropped on the window."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lstmviz.core.config import RunConfig
from lstmviz.engine.runner import run
from lstmviz.weights import random_weights
from tests.helpers.gui_checks import coloured_fraction

ROOT = Path(__file__).resolve().parents[2]


def gui(tmp_path, *args, timeout=180):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path))
    command = [sys.executable, "-m", "lstmviz", "gui", *map(str, args)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def test_a_trace_on_the_command_line_is_shown_and_the_screenshot_saved(tmp_path):
    *_, trace = run(RunConfig(mode="multipass", steps=12, passes=3, batch=4, hidden=8))
    path = trace.save(tmp_path / "t.npz")
    shot = tmp_path / "shot.png"
    done = gui(tmp_path, path, "--screenshot", shot)
    assert done.returncode == 0, done.stderr
    assert shot.is_file() and coloured_fraction(shot) > 0.02  # the panels are drawn


def test_weights_and_inputs_then_run(tmp_path):
    w = random_weights(3, 5, np.random.default_rng(0))
    np.savez(tmp_path / "w.npz", kernel=w.kernel, recurrent_kernel=w.recurrent_kernel,
             bias=w.bias)  # fmt: skip
    np.save(tmp_path / "x.npy", np.random.default_rng(1).standard_normal((2, 9, 3)))
    shot = tmp_path / "shot.png"
    done = gui(tmp_path, tmp_path / "w.npz", tmp_path / "x.npy", "--run", "--screenshot", shot)
    assert done.returncode == 0, done.stderr
    assert coloured_fraction(shot) > 0.02


@pytest.mark.parametrize(("args", "message"), [
    (["missing.npz"], "FILE: missing.npz: no such file"),
    (["--demo", "--run"], "--demo: runs its own files"),
    (["--screenshot", "shot.jpg"], "--screenshot: shot.jpg: screenshots are .png files"),
])  # fmt: skip
def test_bad_command_lines_exit_2_in_one_line(tmp_path, args, message):
    done = gui(tmp_path, *args, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1
    assert lines[0].startswith(f"lstmviz: error: {message}")


def test_the_app_leaves_through_its_exit_handlers(tmp_path):
    """The window's process skips Python's teardown (`cli.gui.leave`: it destroys Qt's and
    pyqtgraph's leftovers in an order PySide does not always survive) but still runs the exit
    handlers (a recording is closed there) and says its exit code."""
    shot, handler = tmp_path / "shot.png", tmp_path / "handler"
    code = (
        "import atexit, pathlib, sys\n"
        f"atexit.register(pathlib.Path({str(handler)!r}).write_text, 'ran')\n"
        "from lstmviz.cli import main\n"
        f"sys.exit(main(['gui', '--screenshot', {str(shot)!r}]))\n"
    )
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert shot.is_file() and handler.read_text() == "ran"
