"""The seeded inputs of a run: sequence, weights, initial state and target (NumPy only).

Everything comes from one `numpy.random.Generator` seeded with `RunConfig.seed`, drawn in a
fixed order, so the same seed gives the same run on every machine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from lstmviz.core import modes
from lstmviz.core.config import LOSSES, RunConfig
from lstmviz.core.errors import ConfigError, InputError, WeightsError, ref
from lstmviz.core.numeric import float32_copy
from lstmviz.engine.problem.losses import check_target, target_shape
from lstmviz.weights import LSTMWeights, random_weights


@dataclass
class Problem:
    """x [T, B, I], weights, h0 and c0 [B, H], target (shape set by the loss, or None)."""

    x: np.ndarray
    weights: LSTMWeights
    h0: np.ndarray
    c0: np.ndarray
    target: np.ndarray | None


def check_weights(weights, name: str = "weights") -> None:
    """Raise WeightsError naming `name` unless `weights` is an LSTMWeights."""
    if not isinstance(weights, LSTMWeights):
        raise WeightsError(f"{name} must be lstmviz.LSTMWeights(kernel, recurrent_kernel, bias), "
                           f"not a {type(weights).__name__}")  # fmt: skip


def check_problem(
    x, weights: LSTMWeights, loss: str, target=None, h0=None, c0=None, passes: int | None = None
) -> Problem:
    """Validate shapes (x time-major [T, B, I]) and fill in zero initial states.

    With `passes` = P, x is P equal passes joined (T = P·Tp) and the target is per pass
    (losses.py). The arrays are copied: the trace does not change when the caller's do."""
    check_weights(weights)
    x = float32_copy(x, "x")
    if x.ndim != 3 or 0 in x.shape:
        raise InputError(f"x must be a non-empty time-major array [T, B, I], got {list(x.shape)}")
    steps, batch, input_dim = x.shape
    if passes is not None and (passes < 1 or steps % passes):
        raise InputError(f"{steps} steps cannot be split into {passes} equal passes")
    if input_dim != weights.input_dim:
        raise InputError(
            f"x has input size I={input_dim} but the kernel expects I={weights.input_dim}"
        )
    if passes is None and steps != batch:
        found = swapped_argument(loss, weights.hidden, {"target": target, "h0": h0, "c0": c0},
                                 (batch, steps), (steps, batch))  # fmt: skip
        if found:
            raise batch_major_error("x", ("[B, T, I]", "[T, B, I]"), x.shape,
                                    "x.transpose(1, 0, 2)", found)  # fmt: skip
    states = []
    for name, state in (("h0", h0), ("c0", c0)):
        if state is None:
            state = np.zeros((batch, weights.hidden), np.float32)
        state = float32_copy(state, name)
        if state.shape != (batch, weights.hidden):
            raise InputError(
                f"{name} must have shape [B, H] = {[batch, weights.hidden]}, "
                f"got {list(state.shape)}"
            )
        states.append(state)
    target = check_target(loss, target, steps, batch, weights.hidden, passes)
    return Problem(x, weights, states[0], states[1], target)


def check_order(x, x_name: str, call: str, weights_types: tuple[type, ...] = ()) -> None:
    """Raise InputError when x is the weights (an LSTMWeights, a list of them, or one of
    `weights_types`): the caller of `call` gave the weights where x goes."""
    if isinstance(x, (LSTMWeights, *weights_types)):
        what = "an LSTMWeights" if isinstance(x, LSTMWeights) else f"a {type(x).__name__}"
    elif isinstance(x, list | tuple) and x and all(isinstance(w, LSTMWeights) for w in x):
        what = "a list of LSTMWeights"
    else:
        return
    raise InputError(f"{x_name} is {what}: give {x_name} first, then the weights: "
                     f"{call}({x_name}, weights, loss=…)")  # fmt: skip


def swapped_argument(
    loss: str,
    hidden: int,
    arguments: dict,
    other: tuple[int, int],
    given: tuple[int, int],
    passes: int | None = None,
) -> tuple[str, list[int], list[int], bool] | None:
    """An argument of `arguments` (target, h0, c0: arrays or None) whose shape fits x read the
    `other` way but not as `given`: (name, its shape, the shape x as given needs, whether it
    has a time axis too), else None. One without a time axis (h0, c0, a last_mse target) is
    preferred: its B can only be x's first axis, while a seq_mse target may be the one whose T
    and B are swapped.

    `other` and `given` are (steps, batch) of the two readings of x (steps joined over
    `passes`); a target's shape is `target_shape`'s, h0's and c0's [B, H]."""
    known = isinstance(loss, str) and loss in LOSSES

    def wanted(name: str, steps: int, batch: int) -> tuple[int, ...] | None:
        if name != "target":
            return (batch, hidden)
        return target_shape(loss, steps, batch, hidden, passes) if known else None

    found = []
    for name, value in arguments.items():
        if value is None:
            continue
        try:
            shape = np.shape(value)
        except ValueError:  # a ragged list: its own check names it
            continue
        if wanted(name, *other) == shape != wanted(name, *given):
            timed = name == "target" and loss == "seq_mse"
            found.append((name, list(shape), list(wanted(name, *given) or ()), timed))
    return min(found, key=lambda f: f[3], default=None)


def batch_major_error(
    x_name: str, layouts: tuple[str, str], x_shape, transpose: str, found: tuple
) -> InputError:
    """The error for an x that `found` (from `swapped_argument`) shows to be batch-major
    (`layouts`: that layout and the one wanted), or, when the argument has a time axis too,
    shows that one of the two is."""
    given, wanted = layouts
    name, shape, needed, timed = found
    if timed:
        return InputError(
            f"{x_name} {list(x_shape)} and {name} {shape} disagree on which axis is T and which "
            f"is B: if {x_name} is batch-major {given}, give {transpose}; if {x_name} is "
            f"time-major {wanted}, {name} must be {needed}"
        )
    return InputError(
        f"{x_name} looks batch-major {given} = {list(x_shape)}, as {name} {shape} has "
        f"B={shape[-2]}; give {x_name} time-major {wanted}: {transpose} (or, for {x_name} "
        f"as given, {name} {needed})"
    )


def seeded_problem(
    config: RunConfig, steps: int | None = None, passes: int | None = None
) -> Problem:
    """Random weights (Keras's initialisers), x ~ N(0, 1), targets ~ U(-0.5, 0.5).

    h0 and c0 are zero unless `config.random_state`, then U(-0.5, 0.5). `steps` overrides
    config.steps (multi-pass runs draw the joined sequence, P·Tp steps, with `passes` = P).
    """
    steps = config.steps if steps is None else steps
    rng = np.random.default_rng(config.seed)
    weights = random_weights(config.input_dim, config.hidden, rng)
    x = rng.standard_normal((steps, config.batch, config.input_dim))
    state_shape = (config.batch, config.hidden)
    h0 = c0 = None
    if config.random_state:
        h0 = rng.uniform(-0.5, 0.5, state_shape)
        c0 = rng.uniform(-0.5, 0.5, state_shape)
    shape = target_shape(config.loss, steps, config.batch, config.hidden, passes)
    target = None if shape is None else rng.uniform(-0.5, 0.5, shape)
    return check_problem(x, weights, config.loss, target, h0, c0, passes)


def loaded_problem(config: RunConfig) -> tuple[RunConfig, Problem, dict[str, str]]:
    """The problem with weights and/or x read from `config.weights` / `config.inputs`.

    Loaded weights fix I and H, loaded inputs fix T, B and I; the returned config's sizes follow
    the files. Everything else comes from the seed exactly as in `seeded_problem` (the loaded
    parts are still drawn, then replaced, so the seeded parts equal a seeded run's). Also
    returns one line per loaded file: `weights_source`, `inputs_source`.
    """
    from lstmviz.io.inputs import describe_inputs, load_inputs
    from lstmviz.weights.loaders import read_weights

    sources: dict[str, str] = {}
    sizes: dict[str, int] = {}
    mode = modes.get(config.mode)
    passes = getattr(config, mode.count) if mode.steps_per_unit else None
    weights = x = None
    if config.weights:
        weights, sources["weights_source"] = read_weights(config.weights, config.layer)
        sizes.update(input_dim=weights.input_dim, hidden=weights.hidden)
    if config.inputs:
        x = load_inputs(config.inputs, config.time_major)
        steps, batch, input_dim = (int(n) for n in x.shape)
        if weights is not None and input_dim != weights.input_dim:
            raise InputError(
                f"{config.inputs}: inputs have I={input_dim} but the weights in {config.weights} "
                f"expect I={weights.input_dim}"
            )
        if passes is not None and steps % passes:
            raise InputError(
                f"{config.inputs}: T={steps} steps cannot be split into "
                f"{ref(mode.count, passes)} equal {modes.plural(mode.unit)}"
            )
        sizes.update(steps=steps // (passes or 1), batch=batch, input_dim=input_dim)
        sources["inputs_source"] = describe_inputs(config.inputs, x, config.time_major)
    try:
        config = replace(config, **sizes).validate()
    except ConfigError as exc:
        from_inputs = config.inputs and exc.field in ("steps", "batch", "input_dim")
        where = config.inputs if from_inputs else config.weights
        raise InputError(f"{where}: {exc.marked}") from None
    seeded = seeded_problem(config, steps=config.steps * (passes or 1), passes=passes)
    problem = check_problem(
        seeded.x if x is None else x,
        seeded.weights if weights is None else weights,
        config.loss,
        seeded.target,
        seeded.h0,
        seeded.c0,
        passes,
    )
    return config, problem, sources
