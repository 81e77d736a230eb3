"""`lstmviz export`: its flags and the command.

An export that has taken SILENT_SECONDS shows its progress on stderr as `lstmviz run` does
(`lstmviz.core.progress`: one line redrawn on a terminal, a few plain lines in a log); a quicker one
stays silent. Ctrl-C asks the export to stop at its next step (`export(progress=…)` returning
False): exit 130 with nothing written. The export runs in the main thread (Qt draws there), so
a KeyboardInterrupt would land wherever Python happens to be, inside a plot's paint method too,
where pyqtgraph prints it and carries on: the first Ctrl-C only sets a flag. A second one
raises KeyboardInterrupt at once (the temporary files vanish with it).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable

from lstmviz.core.errors import ConfigError, LstmvizError
from lstmviz.core.progress import Progress
from lstmviz.io import files

SILENT_SECONDS = 1.0  # an export shows no progress before it has taken this long
STEPS = 1000  # the fraction done is shown in steps of 1/STEPS (a percentage, by tenths)


def add_parser(sub) -> None:
    """Add `export` and its flags to the subparsers `sub`."""
    from lstmviz.plots.export.writer import (
        DEFAULT_DPI,
        DEFAULT_HEIGHT,
        DEFAULT_WIDTH,
        MAX_PIXELS,
        PANEL_NAMES,
    )

    export = sub.add_parser(
        "export", help="write a trace's or a recording's plots as PNG, SVG, PDF or CSV"
    )
    export.add_argument("trace", metavar="TRACE.npz|REC.lvz")
    export.add_argument("--png", metavar="FILE", help="the panels as a PNG image")
    export.add_argument("--svg", metavar="FILE", help="the panels as SVG (vector)")
    export.add_argument("--pdf", metavar="FILE", help="a one-page report: panels, config, summary")
    export.add_argument(
        "--csv", metavar="FILE",
        help="the curves, one row per timestep (a recording: one row per record)",
    )  # fmt: skip
    for side, default in (("width", DEFAULT_WIDTH), ("height", DEFAULT_HEIGHT)):
        export.add_argument(
            f"--{side}", type=int, default=default, metavar="PX",
            help=f"{side} of the PNG and SVG in pixels; range [16, {MAX_PIXELS}], default "
            "%(default)s",
        )  # fmt: skip
    export.add_argument(
        "--dpi",
        type=float,
        default=DEFAULT_DPI,
        metavar="N",
        help="resolution recorded in the PNG; text and lines scale with it; range [24, 2400], "
        "default %(default)s",
    )
    export.add_argument(
        "--panel",
        action="append",
        choices=PANEL_NAMES,
        help="only this panel (repeatable; default: the panels the window shows for the trace)",
    )
    export.add_argument(
        "--tensorboard", metavar="LOGDIR",
        help="TensorBoard event files in LOGDIR: per record, each direction's reach, steps per "
        "decade and decay per step, the loss, and the panels as images (a trace: one step)",
    )  # fmt: skip
    export.add_argument("--linear", action="store_true", help="linear axes (default: log)")
    export.add_argument("--normalise", action="store_true", help="divide each row by its max")
    export.add_argument(
        "--quiet", action="store_true",
        help=f"no progress line (shown once an export has taken {SILENT_SECONDS:g} s) and no "
        "'wrote …' line (errors still)",
    )  # fmt: skip


def export_command(args: argparse.Namespace, report: Callable[[str], None]) -> int:
    """Run `lstmviz export`; `report` prints the closing line. 0 written, 130 interrupted
    (nothing written); bad input raises LstmvizError."""
    from lstmviz.plots.export.app import offscreen_for_files

    offscreen_for_files()  # exports need no window
    from lstmviz.core.view import ViewOptions
    from lstmviz.plots.export.writer import ExportCancelled, ExportError, export

    check_flags(args)
    plots = any((args.png, args.svg, args.pdf, args.csv))
    if not plots and args.tensorboard is None:
        raise ExportError("nothing to export: give at least one of --png, --svg, --pdf, --csv, "
                          "--tensorboard")  # fmt: skip
    board = None
    if args.tensorboard is not None:  # its folder is checked before anything is written
        from lstmviz.tensorboard import TensorBoardWriter

        board = TensorBoardWriter(args.tensorboard, "tensorboard")
    progress = Progress("export", after=SILENT_SECONDS, percent=True)
    interrupted = threading.Event()

    def step(fraction: float, what: str) -> bool:
        if not args.quiet and not interrupted.is_set():
            progress.update(round(fraction * STEPS), STEPS, what)
        return not interrupted.is_set()

    def on_sigint(signum, frame) -> None:
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()
        progress.end(ctrl_c=True)
        sys.stderr.write("lstmviz: stopping (nothing will be written); press Ctrl-C again to "
                         "quit at once\n")  # fmt: skip
        sys.stderr.flush()

    restore = _install_sigint(on_sigint)
    try:
        written = [] if not plots else export(
            args.trace,
            png=args.png,
            svg=args.svg,
            pdf=args.pdf,
            csv=args.csv,
            width=args.width,
            height=args.height,
            dpi=args.dpi,
            panels=args.panel,
            view=ViewOptions(log=not args.linear, normalise=args.normalise),
            progress=step,
        )
        if board is not None and not interrupted.is_set():
            written = [*written, board.add_file(args.trace)]
    except (ExportCancelled, KeyboardInterrupt) as exc:
        progress.end(ctrl_c=isinstance(exc, KeyboardInterrupt))
        sys.stderr.write("lstmviz: interrupted; nothing written\n")
        return 130
    except BaseException:
        progress.end()  # the error's line after the progress
        raise
    finally:
        restore()
        if board is not None:
            board.close()
    progress.end()
    names = ", ".join(str(p) for p in written)
    if interrupted.is_set():  # after the export's last step: every file was complete
        sys.stderr.write(f"lstmviz: interrupted after the export had finished; wrote {names}\n")
        return 130
    if not args.quiet:
        report(f"wrote {names}")
    return 0


def _install_sigint(handler) -> Callable[[], None]:
    """Install `handler` for SIGINT; return what puts the previous handler back. Outside the
    main thread, where Python cannot set one, nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.signal(signal.SIGINT, handler)
    return lambda: signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


def check_flags(args: argparse.Namespace) -> None:
    """An empty output name (an unset shell variable) and an input that is not a trace or a
    recording (a model, weights, data: they are run first, then exported): LstmvizError."""
    for fmt in ("png", "svg", "pdf", "csv"):
        if getattr(args, fmt) == "":
            raise ConfigError(f"--{fmt}", "empty file name")
    name = args.trace
    if not name:
        raise ConfigError("TRACE", "empty file name")
    if problem := files.missing(name):
        raise LstmvizError(f"{name}: {problem}")
    suffix = files.suffix_of(name, files.TRACES + files.RECORDINGS)
    if suffix and (mismatch := files.wrong_content(name)):
        raise LstmvizError(f"{name}: not a readable {suffix} file: {mismatch}")
    if suffix is None:
        raise LstmvizError(
            f"{name}: lstmviz export reads a trace (.npz) or a recording (.lvz); for a model, "
            "weights or data, write a trace first: lstmviz run … --out TRACE.npz"
        )
