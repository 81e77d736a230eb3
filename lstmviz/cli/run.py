"""`lstmviz run`: the RunConfig its flags describe, checked (the flags that make no sense
together, an --out that cannot be written, a file the run would overwrite), the run driven in a
thread with a progress line and Ctrl-C answered at once, the trace (and trained weights) saved,
and the notes on stderr (flags ignored, sizes the files fixed, NaN or Inf)."""

from __future__ import annotations

import argparse
import contextlib
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from lstmviz.core import modes
from lstmviz.core.config import OPTIONAL, RunConfig, flag
from lstmviz.core.errors import ConfigError, LstmvizError
from lstmviz.core.progress import Progress
from lstmviz.engine.native.interrupt import cancel_run
from lstmviz.io import files

GRACE_SECONDS = 1.0  # after Ctrl-C, how long a run may take to stop before it is abandoned


class Abandoned(Exception):
    """The engine thread did not stop in time; the process must end without waiting for it."""


def run_command(args: argparse.Namespace, report: Callable[[str], None]) -> int:
    """Run what the flags describe and write its trace; 0, 130 when interrupted (Abandoned
    when the engine thread did not stop in time), or LstmvizError for bad input. `report`
    prints the line saying what was written."""
    config = _config_from_args(args)
    _check_flags(args, config)
    _note_unread(config)
    out = Path(args.out) if args.out else None
    from lstmviz.engine.native import kernels
    from lstmviz.engine.runner import run

    kernels.library()  # an installed copy's first run builds its kernels, before the progress line
    cancel, keeping = threading.Event(), threading.Event()
    items = run(config, cancel.is_set, keeping.is_set)  # validates, loads files
    return _drive(items, config, args, out, cancel, keeping, report)


def _config_from_args(args: argparse.Namespace) -> RunConfig:
    """The RunConfig the flags describe: values checked, and flags that make no sense together
    refused (`RunConfig.check_flags`)."""
    skip = ("command", "out", "quiet", "keep_partial")
    values = {k: v for k, v in vars(args).items() if k not in skip}
    if args.save_model is not None and not modes.get(args.mode).trains:
        training = ", ".join(m for m in modes.names() if modes.get(m).trains)
        raise ConfigError("--save-model", f"only applies to --mode {training} (a task's trained "
                          "weights, or the model of --model FILE)")  # fmt: skip
    if _weights_out(args) is not None:
        values["save_model"] = None  # not the fit's model: `_save_weights` writes them
    return RunConfig(**values).validate().check_flags()


def _weights_out(args: argparse.Namespace) -> str | None:
    """--save-model of a training run on a task (no --model): where its trained weights go;
    None when not asked, or when a --model fit saves its model itself."""
    if modes.get(args.mode).trains and not args.model and args.save_model is not None:
        return args.save_model
    return None


def _note_unread(config: RunConfig) -> None:
    """One line on stderr naming the flags set away from their defaults that the mode does not
    read (sizes, choices; the files the mode does not read are refused by `check_flags`): a
    script that passes --passes to every mode still runs, and says what it ignored."""
    mode, defaults = modes.get(config.mode), RunConfig()
    unread = [flag(name) for name in vars(defaults) if name not in OPTIONAL
              and getattr(config, name) != getattr(defaults, name)
              and not mode.uses(name, config.fitting())]  # fmt: skip
    if unread:
        sys.stderr.write(f"lstmviz: note: --mode {config.mode} does not read "
                         f"{', '.join(unread)}; ignored\n")  # fmt: skip


def _note_fixed(asked: RunConfig, ran: RunConfig) -> None:
    """One line on stderr naming the sizes set on the command line that the run's files
    replaced (inputs fix T and B, weights I and H, a model its T): `--steps 5` on a model of
    12 steps runs 12, and says so."""
    mode, defaults = modes.get(asked.mode), RunConfig()
    replaced = [f"{flag(name)} {getattr(ran, name)} (not {getattr(asked, name)})"
                for name in ("steps", "batch", "input_dim", "hidden")
                if mode.uses(name, asked.fitting())
                and getattr(asked, name) != getattr(defaults, name)
                and getattr(ran, name) != getattr(asked, name)]  # fmt: skip
    if replaced:
        sys.stderr.write(f"lstmviz: note: the files fix the sizes: ran {', '.join(replaced)}\n")


def _note_layer(trace) -> None:
    """One line on stderr when `--layer` named a Bidirectional: which half ran (the trace's
    `weights_source` says so, as the window's status line does)."""
    from lstmviz.weights.loaders import bidirectional_pick

    if picked := bidirectional_pick(str(trace.arrays.get("weights_source", ""))):
        sys.stderr.write(f"lstmviz: note: --layer {picked}\n")


def _check_flags(args: argparse.Namespace, config: RunConfig) -> None:
    """The CLI's own flags, and an --out that cannot be written: ConfigError before anything
    runs. (Parameters are checked by RunConfig, files by the loaders and the engines.)"""
    if args.out is None:
        if config.fitting():
            return  # training a model writes its recording; the trace only when asked
        raise ConfigError("--out", "give the trace file to write: --out TRACE.npz")
    if not args.out:
        raise ConfigError("--out", "empty file name")
    out = files.check_output(args.out, "--out", files.TRACES, "trace files")
    _check_unread("--out", out, config)
    if (weights := _weights_out(args)) is not None:
        weights = files.check_trained_weights_output(weights)
        if weights.resolve() == out.resolve():
            raise ConfigError("--save-model", f"{weights}: the same file as --out")
        _check_unread("--save-model", weights, config)


def _check_unread(option: str, out: Path, config: RunConfig) -> None:
    """ConfigError when the file `out` to write is one the run reads."""
    if out.exists():
        for source, path in _read_files(config):
            if path.exists() and out.samefile(path):
                raise ConfigError(option, f"{out}: would overwrite the {source} file {path}")


def _read_files(config: RunConfig) -> list[tuple[str, Path]]:
    """(flag, path) for every file the run reads: inputs, targets, the model, the weights
    (per-batch weights: each file of the list, or of the folder, as the files generator finds
    them)."""
    from lstmviz.engine.problem.weight_sources import weight_paths  # no TensorFlow

    found = [(flag(name), Path(getattr(config, name)))
             for name in ("inputs", "targets", "model") if getattr(config, name)]  # fmt: skip
    if config.weights:
        listed = modes.get(config.mode).lists_weight_files
        paths = weight_paths(config.weights, config.batches) if listed else [config.weights]
        found += [("--weights", Path(path)) for path in paths]
    return found


def _drive(items, config: RunConfig, args: argparse.Namespace, out: Path | None, cancel,
           keeping, report: Callable[[str], None]) -> int:  # fmt: skip
    """Run the engine generator in a worker thread; the main thread shows progress
    (`lstmviz.core.progress`: one line redrawn on a terminal, a few plain lines in a log) and
    answers Ctrl-C at once (TensorFlow holds a thread for a whole compiled call, during which
    Python cannot raise KeyboardInterrupt in it).

    First Ctrl-C: ask the generator to stop (it polls `cancel` between passes, batches and
    steps and the chunks of a connectivity map; the native LSTM kernels stop at their next
    timestep) and, with --keep-partial, keep (`keeping`: the generator's `keep()`) the units
    finished as a complete trace, or a taped run's trace without its unfinished map; otherwise
    (one unit, not finished: nothing to keep) give the run GRACE_SECONDS to stop, then leave.
    Second Ctrl-C: leave at once. Nothing is written unless a complete trace is saved
    (atomically).
    Training a model (--model): the first Ctrl-C stops fit after its current batch, and the
    recording keeps the records made; the model and the trace are written with --keep-partial.
    """
    from lstmviz.io.trace import GradientTrace

    keep = bool(args.keep_partial)
    fitting = config.fitting()
    results: queue.Queue = queue.Queue()

    def work() -> None:
        try:
            for item in items:
                results.put(("item", item))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            results.put(("error", exc))
        finally:
            results.put(("end", None))

    def on_sigint(signum, frame) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        unit = modes.get(config.mode).unit
        # a taped run's connectivity map is under way: its one unit is done (`latest` update)
        mapping = not unit and config.connectivity and latest and latest.done >= latest.total
        if keep and (unit or mapping or fitting):
            keeping.set()  # before the cancel: the run reads it once it sees the cancel
        cancel_run(cancel.set)
        what = "nothing will be written"
        if keeping.is_set():
            finished = f"the finished {modes.plural(unit)}"
            what = f"keeping {'the trace without its connectivity map' if mapping else finished}"
        elif keep:  # one unit, not finished: there is nothing to keep
            what = "nothing to keep: the run has not finished"
        if fitting:
            what = f"after this batch; {args.record} keeps its records"
        progress.end(ctrl_c=True)
        sys.stderr.write(f"lstmviz: stopping ({what}); press Ctrl-C again to quit at once\n")
        sys.stderr.flush()

    worker = threading.Thread(target=work, name="lstmviz-run", daemon=True)
    progress, trace, latest = Progress(config.mode), None, None
    with _sigint(on_sigint):
        worker.start()
        try:
            deadline = None
            while True:
                if cancel.is_set() and deadline is None and not (keeping.is_set() or fitting):
                    deadline = time.monotonic() + GRACE_SECONDS
                try:
                    kind, value = results.get(timeout=0.05)
                except queue.Empty:
                    if deadline is not None and time.monotonic() > deadline:
                        raise Abandoned from None
                    continue
                if kind == "end":
                    break
                if kind == "error":
                    progress.end()  # the error's line after the progress
                    raise value
                if isinstance(value, GradientTrace):
                    trace = value
                    continue
                latest = value
                if not args.quiet:
                    progress.update(value.done, value.total, value.message)
        except (KeyboardInterrupt, Abandoned) as exc:
            progress.end(ctrl_c=isinstance(exc, KeyboardInterrupt))
            what = f"{args.record} keeps the records made" if fitting else "nothing written"
            sys.stderr.write(f"lstmviz: interrupted; {what}\n")
            if worker.is_alive():
                raise Abandoned from None
            return 130
    progress.end()
    if fitting:
        return _fitted(trace, config, args, out, cancel.is_set(), report)
    if cancel.is_set():
        if not keeping.is_set() or trace is None:
            sys.stderr.write("lstmviz: interrupted; nothing written\n")
            return 130
        _save(trace, out)
        saved = _save_weights(trace, args)
        weights = saved and f" and their weights in {saved}"
        if config.connectivity and not trace.config.connectivity:  # a taped run's map stopped
            what = f"during the connectivity map; kept the trace without the map in {out}"
        elif "units_done" in trace:
            done, asked = int(trace["units_done"]), int(trace["units_requested"])
            units = modes.plural(modes.get(config.mode).unit, asked)
            what = f"after {done} of {asked} {units}; kept them as a complete trace in {out}"
        else:  # the cancel came after the last unit
            what = f"after the run had finished; kept its trace in {out}"
        sys.stderr.write(f"lstmviz: interrupted {what}{weights}\n")
        return 130
    if trace is None:
        sys.stderr.write("lstmviz: run was cancelled; nothing written\n")
        return 130
    _save(trace, out)
    saved = _save_weights(trace, args)
    _note_fixed(config, trace.config)
    _note_layer(trace)
    _warn_nonfinite(trace)
    if not args.quiet:
        report(f"wrote {out}{saved and f', {saved}'} (loss {float(trace['loss']):.6g})")
    return 0


def _save_weights(trace, args: argparse.Namespace) -> str:
    """Write a task run's trained weights where --save-model asks (`_weights_out`); return
    the path written, or "" when none was asked for."""
    if (path := _weights_out(args)) is None:
        return ""
    from lstmviz.engine.modes.trained_weights import save_trained_weights

    try:
        return str(save_trained_weights(trace, path))
    except LstmvizError as exc:  # names the path; the trace is written already
        raise ConfigError("--save-model", f"{exc} ({args.out} is written)") from None


def _fitted(trace, config: RunConfig, args: argparse.Namespace, out: Path | None,
            cancelled: bool, report: Callable[[str], None]) -> int:  # fmt: skip
    """After training a model: say what was written (the recording; the model and the trace
    when there is one, --out when given). 0, or 130 when Ctrl-C stopped the fit."""
    from lstmviz.io.recording import load_recording

    written = []
    if Path(config.record).exists():
        steps = load_recording(config.record, trace=False).step
        which = f"batch {steps[0]}" if len(steps) == 1 else f"batches {steps[0]}…{steps[-1]}"
        count = f"{len(steps)} {modes.plural('record', len(steps))}"
        written.append(f"{config.record} ({count}: {which})")
    if trace is not None:
        if config.save_model:
            written.append(config.save_model)
        if out is not None:
            _save(trace, out)
            written.append(str(out))
    what = f"wrote {', '.join(written)}" if written else "nothing written"
    if trace is not None and not Path(config.record).exists():
        what += f" (no record: fit ran fewer than --every {config.every} batches)"
    if cancelled:
        if trace is not None:
            done, asked = int(trace["units_done"]), int(trace["units_requested"])
            what = f"after {done} of {asked} batches; {what}"
        sys.stderr.write(f"lstmviz: interrupted; {what}\n")
        return 130
    if not args.quiet:
        report(f"{what} (loss {float(trace['loss']):.6g})")
    return 0


@contextlib.contextmanager
def _sigint(handler):
    """Install `handler` for SIGINT (main thread only), restoring the previous one after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _save(trace, out: Path) -> None:
    """Save atomically; Ctrl-C while saving abandons the temporary file (KeyboardInterrupt)."""
    try:
        trace.save(out)
    except OSError as exc:
        raise ConfigError("--out", f"{out}: cannot write ({exc.strerror or exc})") from None


def _warn_nonfinite(trace) -> None:
    """One warning line on stderr when a trace holds NaN or Inf (the run still succeeded);
    one more when training stopped early because the loss went non-finite."""
    stopped = trace.arrays.get("nonfinite_loss_steps")
    if stopped is not None and stopped.size:
        sys.stderr.write(
            f"lstmviz: warning: training loss or gradient became NaN or Inf at step "
            f"{int(stopped[0]) + 1}; training stopped after {int(trace['units_done'])} of "
            f"{int(trace['units_requested'])} steps and the trace keeps them\n"
        )
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

