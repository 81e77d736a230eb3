"""The `lstmviz` command's parser: `gui` and `run` flags here (each `run` flag's help from
RunConfig's one definition of it: `help_for`, `RANGES`, the defaults), `export`'s in
`cli/export.py`, `diagnose`'s and `compare`'s in `cli/diagnose.py`."""

from __future__ import annotations

import argparse
import sys

from lstmviz.cli import diagnose as cli_diagnose
from lstmviz.cli import export as cli_export
from lstmviz.core import modes
from lstmviz.core.config import GENERATORS, LOSSES, RANGES, TASKS, RunConfig, flag, help_for


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line and exits 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"lstmviz: error: {message}\n")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    defaults = RunConfig()
    parser = _Parser(
        prog="lstmviz", description="Gradient flow through an LSTM.",
        epilog="Exit codes: 0 success, 2 bad input (one line naming the flag or file; nothing "
        "written), 130 interrupted. `lstmviz COMMAND --help` for each command's flags.",
    )  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    gui = sub.add_parser("gui", help="open the desktop app")
    gui.add_argument(
        "files", nargs="*", metavar="FILE",
        help="open as if dropped on the window: a trace (.npz), a recording (.lvz, followed "
        "while it grows), a model, weights or inputs",
    )  # fmt: skip
    gui.add_argument("--run", action="store_true", help="start a run once the files are open")
    gui.add_argument("--compare", action="store_true", help="FILE A and B: compare them")
    gui.add_argument("--demo", action="store_true", help="start a demo run at once")
    gui.add_argument("--layer", metavar="NAME", help="the LSTM layer of a weights file with "
                     "several (as run --layer; the window otherwise asks)")  # fmt: skip
    gui.add_argument("--module", metavar="PKG.MOD:FACTORY", help="as run --module")
    gui.add_argument(
        "--screenshot", metavar="PNG",
        help="save the window as PNG when the run (or the opening) is done, then quit",
    )  # fmt: skip

    run = sub.add_parser("run", help="compute a gradient trace headless")

    def option(name: str, more: str = "", **kwargs) -> None:
        """Add the flag of RunConfig field `name`, its help from the one definition of each
        part: what it means (`help_for`, then `more`), its range (`RANGES`: an integer) and
        its default (RunConfig's)."""
        text = " ".join(f"{help_for(name)} {more}".split()).rstrip(".") + "."
        limits = []
        if name in RANGES:
            limits.append("range [{}, {}]".format(*RANGES[name]))
            kwargs["type"] = int
        kwargs["default"] = getattr(defaults, name)
        if kwargs["default"] is not None and not isinstance(kwargs["default"], bool):
            limits.append("default %(default)s")
        if limits:
            text += " " + ", ".join(limits).capitalize() + "."
        run.add_argument(flag(name), help=text, **kwargs)

    option("mode", choices=modes.names())
    for name in ("steps", "batch", "input_dim", "hidden", "passes", "batches", "seed"):
        option(name, metavar="N")
    option("train_steps", metavar="S")
    option("generator", choices=GENERATORS)
    option(
        "loss", "Model mode: a Keras loss name (e.g. binary_crossentropy), used when the model "
        f"has no compiled loss ({', '.join(LOSSES)} for a stack without a head)", metavar="NAME",
    )  # fmt: skip
    option("task", choices=TASKS)
    option("random_state", action="store_true")
    run.add_argument(
        "--weights",
        metavar="FILE",
        help="LSTM weights: .keras, .weights.h5, .h5, .hdf5, .npz, .safetensors (.pt, .pth "
        "with PyTorch); with --generator files: one file per batch, comma-separated, or a "
        "folder of them",
    )
    run.add_argument(
        "--layer", metavar="NAME",
        help="which LSTM layer of a file with several; a Bidirectional's name picks its "
        "forward half, NAME/backward its backward half",
    )  # fmt: skip
    run.add_argument(
        "--inputs", metavar="FILE",
        help="input sequences: .npy, or .npz with x; [B, T, I]; model mode: .npz with x (and y), "
        "or an x .npy, batch-major as Keras takes them",
    )
    option("time_major", action="store_true")
    option("model", metavar="FILE")
    option("module", metavar="PKG.MOD:FACTORY")
    option("anchors", metavar="every:K|T1,T2,…")
    run.add_argument("--targets", metavar="Y.npy",
                     help="model mode: targets y when --inputs is an x .npy")  # fmt: skip
    option("connectivity", action="store_true")
    option("epochs", metavar="E")
    option("every", metavar="N")
    option("record", metavar="REC.lvz")
    option("save_model", "A training run on a task (no --model): its trained LSTM and "
           "read-out, as .weights.h5 (Keras's save_weights) or .npz", metavar="OUT")  # fmt: skip
    run.add_argument(
        "--out", metavar="TRACE.npz",
        help="the trace to write (required, except when training a model: then the model "
        "trace at the trained weights, if given)",
    )  # fmt: skip
    run.add_argument("--quiet", action="store_true",
                     help="no progress line and no 'wrote …' line (errors and warnings still)")
    run.add_argument(
        "--keep-partial",
        action="store_true",
        help="on Ctrl-C, save the passes, batches or training steps done so far as a "
        "complete trace",
    )

    cli_export.add_parser(sub)
    cli_diagnose.add_parsers(sub)
    return parser

