"""Command line: `lstmviz gui`, `lstmviz run`. Exit codes: 0 ok, 2 bad input, 130 interrupted."""

from __future__ import annotations

import argparse
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
        return _run(args)
    except LstmvizError as exc:
        sys.stderr.write(f"lstmviz: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("\nlstmviz: interrupted; nothing written\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
