"""One entry point for every mode: `run(config)` yields TraceUpdates, then a GradientTrace."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from lstmviz.config import RunConfig
from lstmviz.trace import GradientTrace, TraceUpdate


def run(
    config: RunConfig, cancelled: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Validate `config`, load its files, and drive its mode's generator. `cancelled()` is
    polled between units of work (passes, batches, steps); when it turns true the generator
    stops without a trace. Bad input and files raise here, before anything runs.

    With `config.weights` / `config.inputs` the trace's config takes its sizes from the files,
    and the trace records `weights_source` / `inputs_source` (text). In batchwise mode with
    `--generator files`, `config.weights` lists one weights file per batch instead.
    """
    config.validate().check_flags()
    if config.mode == "train":  # reads its own task sequences from config.inputs
        from lstmviz.engine.train import run_train

        return run_train(config.check_memory(), cancelled=cancelled)
    weight_list = config.mode == "batchwise" and config.generator == "files"
    problem, sources = None, {}
    if (config.weights and not weight_list) or config.inputs:
        from lstmviz.engine.problem import loaded_problem

        config, problem, sources = loaded_problem(config)
    config.check_memory()
    if config.mode == "taped":
        from lstmviz.engine.taped import run_taped

        items = run_taped(config, problem, cancelled)
    elif config.mode == "multipass":
        from lstmviz.engine.multipass import run_multipass

        items = run_multipass(config, problem, cancelled)
    else:  # batchwise
        from lstmviz.engine.batchwise import run_batchwise

        items = run_batchwise(config, cancelled=cancelled)
    return _recorded(items, sources, cancelled)


def _recorded(
    items: Iterator[TraceUpdate | GradientTrace],
    sources: dict[str, str],
    cancelled: Callable[[], bool],
) -> Iterator[TraceUpdate | GradientTrace]:
    """Pass `items` on, adding `sources` to the final trace as text arrays. A computation
    stopped by `interrupt.interrupt()` after `cancelled()` turned true ends the run quietly."""
    from lstmviz.engine.tfload import tf

    try:
        for item in items:
            if isinstance(item, GradientTrace):
                item.arrays.update({key: np.array(text) for key, text in sources.items()})
            yield item
    except tf.errors.CancelledError:
        if not cancelled():
            raise
