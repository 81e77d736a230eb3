"""`lstmviz gui`: its flags checked before the window opens (exit 2 in one line), the window
started (`gui/app.py`) and its process ended once the window is closed (`leave`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from lstmviz.cli import diagnose as cli_diagnose
from lstmviz.core.errors import ConfigError
from lstmviz.io import files


def gui_command(args: argparse.Namespace) -> None:
    """Check the flags, open the window on `args.files` and end the process with the app's
    exit code when it is closed (it does not return)."""
    check_flags(args)
    cli_diagnose.check_gui_compare(args)
    from lstmviz.gui.app import main as gui_main

    leave(gui_main(args.files, run=args.run, demo=args.demo, screenshot=args.screenshot,
                   layer=args.layer, compare=args.compare, module=args.module))


def check_flags(args: argparse.Namespace) -> None:
    """Files that are not there, a screenshot that cannot be written and no display: exit 2
    before the window opens. (A file that is there but unreadable gets the window's dialog, as
    a drop.)"""
    if args.demo and (args.files or args.run or args.layer):
        raise ConfigError("--demo", "runs its own files; drop FILE, --run and --layer, or --demo")
    if args.layer is not None and not args.files:
        raise ConfigError("--layer", "names a layer of a weights FILE: give the file too")
    for name in args.files:
        if not name:
            raise ConfigError("FILE", "empty file name")
        if problem := files.missing(name):
            raise ConfigError("FILE", f"{name}: {problem}")
        if args.run and files.suffix_of(name, files.RECORDINGS):
            raise ConfigError("--run", f"{name}: a recording is shown as it grows, not run; "
                              "drop --run")  # fmt: skip
    if args.screenshot is not None:
        if not args.screenshot:
            raise ConfigError("--screenshot", "empty file name")
        if files.suffix_of(args.screenshot, (".png",)) is None:
            raise ConfigError("--screenshot", f"{args.screenshot}: screenshots are .png files")
        files.check_output(args.screenshot, "--screenshot", (".png",), "screenshots")
    check_display()


def check_display() -> None:
    """On X11/Wayland systems, a window needs a display: without one, or with a DISPLAY that
    names an X server that is not there, Qt aborts the process (a core dump, exit 134) after
    lines of plugin errors (`lstmviz.core.display`). Qt's own platforms that need none
    (QT_QPA_PLATFORM=offscreen, vnc, …) are the user's choice and pass."""
    from lstmviz.core import display

    if why := display.window_problem():
        raise ConfigError("gui", why)

def leave(code: int) -> None:
    """End the app's process with `code` once its window is closed and its work is done:
    the exit handlers run and the streams are flushed, but Python's own teardown is skipped.
    It destroys what is left of Qt's and pyqtgraph's objects in an order PySide does not
    always survive (pyqtgraph's `exit()` does the same), and a crash there would turn a
    finished session's exit code 0 into -11."""
    import atexit

    atexit._run_exitfuncs()
    with contextlib.suppress(AttributeError, OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)

