"""Command line: `lstmviz gui`, `lstmviz run`, `lstmviz export`.

Exit codes: 0 ok, 2 bad input, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lstmviz.config import GENERATORS, LOSSES, MODES, TASKS, RunConfig
from lstmviz.errors import ConfigError, LstmvizError


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"lstmviz: error: {message}\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    defaults = RunConfig()
    parser = _Parser(prog="lstmviz", description="Gradient flow through an LSTM.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    gui = sub.add_parser("gui", help="open the desktop app")
    gui.add_argument("--demo", action="store_true", help="start a demo run at once")
    gui.add_argument("--screenshot", metavar="PNG", help="save a screenshot when idle, then quit")

    run = sub.add_parser("run", help="compute a gradient trace headless")
    run.add_argument("--mode", choices=MODES, default=defaults.mode)
    for name in ("steps", "batch", "input_dim", "hidden", "passes", "batches", "seed"):
        flag = "--" + name.replace("_", "-")
        run.add_argument(flag, type=int, default=getattr(defaults, name), metavar="N")
    run.add_argument("--train-steps", type=int, default=defaults.train_steps, metavar="S")
    run.add_argument("--generator", choices=GENERATORS, default=defaults.generator)
    run.add_argument("--loss", choices=LOSSES, default=defaults.loss)
    run.add_argument("--task", choices=TASKS, default=defaults.task)
    run.add_argument(
        "--random-state", action="store_true", help="draw h0 and c0 from the seed (else zeros)"
    )
    run.add_argument(
        "--weights",
        metavar="FILE",
        help="with --generator files: one .npz per batch, comma-separated, or a folder of them",
    )
    run.add_argument("--layer", metavar="NAME")
    run.add_argument("--inputs", metavar="FILE")
    run.add_argument("--time-major", action="store_true")
    run.add_argument("--connectivity", action="store_true")
    run.add_argument("--out", required=True, metavar="TRACE.npz")
    run.add_argument("--quiet", action="store_true", help="no progress line")

    from lstmviz.export import DEFAULT_DPI, DEFAULT_HEIGHT, DEFAULT_WIDTH, PANEL_NAMES

    export = sub.add_parser("export", help="write a trace's plots as PNG, SVG, PDF or CSV")
    export.add_argument("trace", metavar="TRACE.npz")
    export.add_argument("--png", metavar="FILE", help="the panels as a PNG image")
    export.add_argument("--svg", metavar="FILE", help="the panels as SVG (vector)")
    export.add_argument("--pdf", metavar="FILE", help="a one-page report: panels, config, summary")
    export.add_argument("--csv", metavar="FILE", help="the curves, one row per timestep")
    export.add_argument("--width", type=int, default=DEFAULT_WIDTH, metavar="PX")
    export.add_argument("--height", type=int, default=DEFAULT_HEIGHT, metavar="PX")
    export.add_argument(
        "--dpi",
        type=float,
        default=DEFAULT_DPI,
        metavar="N",
        help="resolution recorded in the PNG; text and lines scale with it",
    )
    export.add_argument(
        "--panel",
        action="append",
        choices=PANEL_NAMES,
        help="only this panel (repeatable; default: all)",
    )
    export.add_argument("--linear", action="store_true", help="linear axes (default: log)")
    export.add_argument("--normalise", action="store_true", help="divide each row by its max")
    return parser


def _config_from_args(args: argparse.Namespace) -> RunConfig:
    values = {k: v for k, v in vars(args).items() if k not in ("command", "out", "quiet")}
    return RunConfig(**values).validate()


def _run(args: argparse.Namespace) -> int:
    config = _config_from_args(args)
    out = Path(args.out)
    if out.suffix != ".npz":
        raise ConfigError("--out", f"{out}: trace files end in .npz")
    if not out.parent.is_dir():
        raise ConfigError("--out", f"{out.parent}: no such folder")
    from lstmviz.engine.runner import run
    from lstmviz.trace import GradientTrace

    start = time.perf_counter()
    trace = None
    for item in run(config):
        if isinstance(item, GradientTrace):
            trace = item
        elif not args.quiet:
            elapsed = time.perf_counter() - start
            sys.stderr.write(
                f"\r[{config.mode}] {item.done}/{item.total} {item.message} · {elapsed:.1f} s\033[K"
            )
            sys.stderr.flush()
    if not args.quiet:
        sys.stderr.write("\n")
    if trace is None:
        sys.stderr.write("lstmviz: run was cancelled; nothing written\n")
        return 130
    trace.save(out)
    _warn_nonfinite(trace)
    if not args.quiet:
        print(f"wrote {out} (loss {float(trace['loss']):.6g})")
    return 0


def _export(args: argparse.Namespace) -> int:
    # Exports need no window: render offscreen unless a platform was asked for on a display.
    display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if not display or not os.environ.get("QT_QPA_PLATFORM"):
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    from lstmviz.export import ExportError, export

    if not any((args.png, args.svg, args.pdf, args.csv)):
        raise ExportError("nothing to export: give at least one of --png, --svg, --pdf, --csv")
    written = export(
        args.trace,
        png=args.png,
        svg=args.svg,
        pdf=args.pdf,
        csv=args.csv,
        width=args.width,
        height=args.height,
        dpi=args.dpi,
        panels=args.panel,
        log=not args.linear,
        normalise=args.normalise,
    )
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


def _warn_nonfinite(trace) -> None:
    """One warning line on stderr when a trace holds NaN or Inf (the run still succeeded)."""
    bad = trace.arrays.get("nonfinite_steps")
    if bad is None or not bad.size:
        return
    where = ""
    if "h" in trace:
        finite = np.isfinite(trace.h).reshape(-1, *trace.h.shape[-3:]).all(axis=(0, 2, 3))
        if not finite.all():
            where = f", first non-finite state at t={int(np.argmin(finite))}"
    sys.stderr.write(
        f"lstmviz: warning: NaN or Inf at {bad.size} timestep(s){where} (exploding gradients "
        "or non-finite weights or inputs); see nonfinite_steps in the trace\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already reported in one line
        return int(exc.code or 0)
    try:
        if args.command == "gui":
            from lstmviz.gui.app import main as gui_main

            return gui_main(demo=args.demo, screenshot=args.screenshot)
        if args.command == "export":
            return _export(args)
        return _run(args)
    except LstmvizError as exc:
        sys.stderr.write(f"lstmviz: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("\nlstmviz: interrupted; nothing written\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
