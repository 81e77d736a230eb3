"""`main()`, the `lstmviz` command: the flags parsed (`cli/parser.py`), the command run (`gui`,
`run`, `export`, `diagnose`, `compare`: one module each) and its errors said in one line.

Exit codes: 0 ok, 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
from collections.abc import Sequence

from lstmviz.cli import diagnose as cli_diagnose
from lstmviz.cli import export as cli_export
from lstmviz.cli import gui as cli_gui
from lstmviz.cli import run as cli_run
from lstmviz.cli.parser import build_parser
from lstmviz.core.errors import LstmvizError
from lstmviz.core.progress import is_terminal


def _streams_for_a_launcher_without_them() -> None:
    """A launcher may start the process with no stdout or stderr (sys.stdout/sys.stderr None,
    as pythonw or a desktop entry does): messages then go to the null device instead of
    failing to be written."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115


def report(line: str) -> None:
    """Print what a command did (its files are written by then); a stdout that takes no more
    (closed by `| head`: silently; a full disk: a line on stderr) then goes to /dev/null."""
    try:
        print(line, flush=True)
    except OSError as exc:
        if not isinstance(exc, BrokenPipeError):
            sys.stderr.write(f"lstmviz: could not print on stdout ({exc.strerror or exc}); "
                             "the files are written\n")  # fmt: skip
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` names (sys.argv's arguments when None); its exit code."""
    _streams_for_a_launcher_without_them()
    # a crash in native code (Qt, TensorFlow, the kernels) prints where each thread was, for
    # the bug report (not without a usable stderr: a launcher may give none)
    with contextlib.suppress(AttributeError, RuntimeError, ValueError, OSError):
        if not faulthandler.is_enabled():
            faulthandler.enable()
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already reported in one line
        return int(exc.code or 0)
    try:
        if args.command == "gui":
            cli_gui.gui_command(args)  # ends the process when the window is closed
        if args.command == "export":
            return cli_export.export_command(args, report)
        if args.command in ("diagnose", "compare"):
            return getattr(cli_diagnose, f"{args.command}_command")(args, report)
        return cli_run.run_command(args, report)
    except LstmvizError as exc:
        sys.stderr.write(f"lstmviz: error: {exc}\n")
        return 2
    except MemoryError:  # past the estimate (`RunConfig.check_memory`): nothing was written
        sys.stderr.write("lstmviz: error: memory: the run ran out of memory; make it smaller\n")
        return 2
    except KeyboardInterrupt:  # on a terminal, after the ^C it echoed
        newline = "\n" if is_terminal(sys.stderr) else ""
        sys.stderr.write(f"{newline}lstmviz: interrupted; nothing written\n")
        return 130
    except cli_run.Abandoned:
        # The engine thread is still inside TensorFlow: end the process without waiting for
        # it (a daemon thread inside native code can crash the interpreter's shutdown).
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(130)
