"""`lstmviz diagnose` and `lstmviz compare`: their flags and the commands.

    lstmviz diagnose TRACE.npz|REC.lvz|MODEL [--inputs DATA] [--loss NAME] [--json]
    lstmviz compare A B [--inputs DATA] [--loss NAME] [--out FILE.png|.svg|.pdf|.csv] [--json]

A table by default, the JSON contract with `--json` (docs/diagnosis.md). A model (or an LSTM
stack's weights) runs through model mode on `--inputs` first (seeded random data without).
Bad input: one line, exit 2, nothing written (`--out` is checked before anything is read).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from lstmviz.core.errors import ConfigError
from lstmviz.io import files

FIGURES = (".png", ".svg", ".pdf")
OUTPUTS = (*FIGURES, ".csv")


def add_parsers(sub) -> None:
    """Add `diagnose` and `compare` to the subparsers `sub`."""
    diagnose = sub.add_parser(
        "diagnose", help="how far back the gradient reaches: decay per step, reach, verdict",
        description="Per recurrent direction: the decay per step of ‖dL/dh_t‖ and ‖dL/dc_t‖ "
        "back from where the loss enters, steps per decade, reach, trend and a verdict "
        "(docs/diagnosis.md). A recording: every record's.",
    )  # fmt: skip
    diagnose.add_argument("source", metavar="TRACE.npz|REC.lvz|MODEL")
    compare = sub.add_parser(
        "compare", help="compare two runs: log10 of the norms' ratio, both diagnoses",
        description="Two traces, two recordings, or two models run on the same --inputs: "
        "log10(‖B‖/‖A‖) per direction and timestep (aligned at the last step), both diagnoses, "
        "the configuration fields that differ.",
    )  # fmt: skip
    compare.add_argument("a", metavar="A")
    compare.add_argument("b", metavar="B")
    compare.add_argument("--out", metavar="FILE",
                         help="the curves (A solid, B dashed) and the log-ratio heatmap as "
                         ".png, .svg or .pdf; or the ratios as .csv")  # fmt: skip
    for parser in (diagnose, compare):
        parser.add_argument("--inputs", metavar="DATA",
                            help="data a model runs on (.npz with x and y, or .npy)")  # fmt: skip
        parser.add_argument("--loss", metavar="NAME",
                            help="the loss of a model that has none compiled")  # fmt: skip
        parser.add_argument("--json", action="store_true", help="print the JSON contract")


def diagnose_command(args: argparse.Namespace, report: Callable[[str], None]) -> int:
    """Print the diagnosis of `args.source`; 0, or LstmvizError for bad input."""
    from lstmviz.analysis.sources import open_source

    _check_inputs(args)
    source = open_source(args.source, args.inputs, args.loss, "SOURCE")
    diagnosis = source.diagnosis
    report(json.dumps(diagnosis.to_dict()) if args.json else diagnosis.table())
    return 0


def compare_command(args: argparse.Namespace, report: Callable[[str], None]) -> int:
    """Compare `args.a` with `args.b`, print the result, write `--out`; 0, or LstmvizError."""
    from lstmviz.analysis.sources import compare

    out = _check_out(args)
    _check_inputs(args)
    comparison = compare(args.a, args.b, args.inputs, args.loss)
    if out is not None:
        _write(comparison, out)
    report(json.dumps(comparison.to_dict()) if args.json else comparison.table())
    if out is not None and not args.json:
        report(f"wrote {out}")
    return 0


def _check_out(args: argparse.Namespace) -> Path | None:
    if args.out is None:
        return None
    if args.out == "":
        raise ConfigError("--out", "empty file name")
    out = files.check_output(args.out, "--out", OUTPUTS, "a comparison's file names")
    for name in (args.a, args.b):
        if name and Path(name).exists() and out.resolve() == Path(name).resolve():
            raise ConfigError("--out", f"{out}: would overwrite {name}")
    return out


def _check_inputs(args: argparse.Namespace) -> None:
    if args.inputs is not None:
        if args.inputs == "":
            raise ConfigError("--inputs", "empty file name")
        if problem := files.missing(args.inputs):
            raise ConfigError("--inputs", f"{args.inputs}: {problem}")


def _write(comparison, out: Path) -> None:
    """The figure (Qt, offscreen without a display) or the CSV, atomically."""
    if files.suffix_of(out, (".csv",)):
        from lstmviz.analysis.report.tables import comparison_columns
        from lstmviz.io.atomic import atomic_path
        from lstmviz.plots.export.csv import csv_of_columns

        with atomic_path(out, suffix=".csv") as tmp:
            tmp.write_text(csv_of_columns(comparison_columns(comparison)), encoding="utf-8")
        return
    from lstmviz.plots.export.app import offscreen_for_files

    offscreen_for_files()
    from lstmviz.plots.export.compare_figure import write_comparison

    try:
        write_comparison(comparison, out)
    except ValueError as exc:
        raise ConfigError("--out", str(exc)) from None


def check_gui_compare(args: argparse.Namespace) -> None:
    """`lstmviz gui A B --compare`: two traces or two recordings (ConfigError otherwise)."""
    if not args.compare:
        return
    if len(args.files) != 2 or args.run or args.demo:
        raise ConfigError("--compare", "give two files, A and B (traces or recordings), and "
                          "neither --run nor --demo")  # fmt: skip
    kinds = [files.kind(name) for name in args.files]
    if any(kind not in ("trace", "recording") for kind in kinds) or kinds[0] != kinds[1]:
        raise ConfigError("--compare", "the window compares two traces or two recordings (for "
                          "models: lstmviz compare A B --inputs DATA)")  # fmt: skip
