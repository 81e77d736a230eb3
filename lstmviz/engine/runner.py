"""One entry point for every mode: `run(config)` yields TraceUpdates, then a GradientTrace."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from lstmviz.config import RunConfig
from lstmviz.errors import ConfigError
from lstmviz.trace import GradientTrace, TraceUpdate


def run(
    config: RunConfig, cancelled: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Validate `config` and drive its mode's generator. `cancelled()` is polled between units
    of work (passes, batches, steps); when it turns true the generator stops without a trace."""
    config.validate()
    if config.mode == "train":  # reads its own task sequences from config.inputs
        from lstmviz.engine.train import run_train

        return run_train(config, cancelled=cancelled)
    if config.weights or config.inputs:
        raise ConfigError(
            "--weights" if config.weights else "--inputs",
            "loading files is not available in this version",
        )
    if config.mode == "taped":
        from lstmviz.engine.taped import run_taped

        return run_taped(config, cancelled=cancelled)
    raise ConfigError("--mode", f"mode {config.mode!r} is not available in this version")
