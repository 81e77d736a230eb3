"""One entry point for every mode: `run(config)` yields TraceUpdates, then a GradientTrace."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator

import numpy as np

from lstmviz.core import modes
from lstmviz.core.config import RunConfig, in_python_terms
from lstmviz.core.errors import ConfigError, LstmvizError
from lstmviz.io.trace import GradientTrace, TraceUpdate


def run(
    config: RunConfig, cancelled: Callable[[], bool] = bool, keep: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Validate `config`, load its files, and return its mode's generator: TraceUpdates, then
    finally a GradientTrace. Bad input and files raise here, before anything runs.

    Stopping: `cancelled()` is polled between units of work — the passes (multipass), batches
    (batchwise) and training steps (train); a taped run is one unit — and before and during a
    taped run's connectivity map (between its chunks). When it turns true the generator stops.
    If `keep()` is true at that moment and at least one unit has finished, it first yields the
    complete GradientTrace of the units done: exactly the trace the mode gives when asked for
    that many units on the same data (multipass: the loss the mean over the passes done, full
    and reference gradients over them, truncated ones scaled for them; a taped run cancelled
    before or during its connectivity map: the trace without the map). Its config says the units
    done (`passes`, `batches`, `train_steps`), and it records `stopped` ("cancelled"),
    `units_done` and `units_requested` (int64); training records them in every trace
    ("completed", "cancelled" or "non-finite"). Without `keep()`, or with nothing finished, it
    ends without a trace. To cancel, set what `cancelled()` reads and stop the native kernels
    in one step with `interrupt.cancel_run`: a kernel interrupted in a unit raises
    tf.errors.CancelledError there and the unit does not count; the kept trace's kernels are
    not interrupted.

    With `config.weights` / `config.inputs` the trace's config takes its sizes from the files,
    and the trace records `weights_source` / `inputs_source` (text). In batchwise mode with
    `--generator files`, `config.weights` lists one weights file per batch instead.
    """
    if not isinstance(config, RunConfig):
        raise ConfigError("config", "run takes a lstmviz.RunConfig(mode=…, …), not a "
                          f"{type(config).__name__}")  # fmt: skip
    config.validate().check_flags()
    mode = modes.get(config.mode)
    problem, sources = None, {}
    if mode.problem and (config.weights or config.inputs):
        from lstmviz.engine.problem.seeded import loaded_problem

        config, problem, sources = loaded_problem(config)
    elif config.weights and config.weight_files_listed():
        config, sources = _sized_by_weight_files(config)
    config.check_memory()
    from lstmviz.engine.quiet_tensorflow import spend_native_notices

    spend_native_notices()
    extra = {"problem": problem} if mode.problem else {}
    items = mode.generator()(config, cancelled=cancelled, keep=keep, **extra)
    return _recorded(items, sources)


@functools.wraps(run)
def run_in_python_terms(
    config: RunConfig, cancelled: Callable[[], bool] = bool, keep: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    # `lstmviz.run`: `run`, its refusals naming RunConfig's fields ("steps: …", "inputs=FILE")
    # where the command line and the app, which call `run` itself, name their flags.
    try:
        return run(config, cancelled, keep)
    except LstmvizError as exc:
        raise in_python_terms(exc) from None


def _sized_by_weight_files(config: RunConfig) -> tuple[RunConfig, dict[str, str]]:
    """Batchwise mode's files generator: the weight files fix I and H, as a weights file does
    in the other modes (the first file's sizes; each file is checked against them as the run
    reads it); and the trace's `weights_source` names them."""
    from dataclasses import replace

    from lstmviz.engine.problem.weight_sources import weight_paths
    from lstmviz.weights.loaders import bidirectional_pick, read_weights

    paths = weight_paths(config.weights, config.batches)
    weights, described = read_weights(paths[0], config.layer)
    names = ", ".join(p.name for p in paths)
    source = f"{paths[0]}: {len(paths)} files, batch 1, 2, … in this order: {names}"
    if picked := bidirectional_pick(described):  # which half of each file's Bidirectional
        source += f", layer {picked}"
    config = replace(config, input_dim=weights.input_dim, hidden=weights.hidden).validate()
    return config, {"weights_source": source}


def _recorded(
    items: Iterator[TraceUpdate | GradientTrace], sources: dict[str, str]
) -> Iterator[TraceUpdate | GradientTrace]:
    """Pass `items` on, adding `sources` to the final trace as text arrays."""
    for item in items:
        if isinstance(item, GradientTrace):
            item.arrays.update({key: np.array(text) for key, text in sources.items()})
        yield item
