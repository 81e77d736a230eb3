"""Per-batch weights: N batches, each run through the LSTM with its own weights.

For batch n the generator makes the weights under a GradientTape, the LSTM runs on its backend,
and the LSTM's weight gradients are chained into the generator's variables with
`tape.gradient(weights, variables, output_gradients=dL/dweights)` — the chain rule through the
LSTM, exact, and the reason the weights must enter the LSTM as tensors (assigning them to a
layer's variables instead leaves the generator with no gradient at all).

Backends (`lstmviz.engine.cells.lstm_backends`): on "while_loop" the taped engine gives everything
in one compiled call. On "cudnn" the loss, dL/dy_t (`grad_output`) and the weight, h0 and c0
gradients come from cuDNN; the per-state totals dL/dh_t, dL/dc_t need probes inside the loop, where
cuDNN has no hook, so they come from the taped engine on the same weights.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import numpy as np

from lstmviz.core.config import RunConfig
from lstmviz.core.errors import InputError
from lstmviz.core.numeric import float32_copy
from lstmviz.engine.autodiff.gradients import HiddenLoss, compiled_step, numpy_arrays
from lstmviz.engine.cells.lstm_backends import choose_backend
from lstmviz.engine.modes.taped import compute_taped, config_for
from lstmviz.engine.problem.losses import check_loss
from lstmviz.engine.problem.seeded import (
    Problem,
    batch_major_error,
    check_order,
    check_problem,
    check_weights,
    seeded_problem,
    swapped_argument,
)
from lstmviz.engine.problem.weight_sources import FixedWeights, Hypernetwork, make_generator
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.engine.stopping import Units
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.weights import LSTMWeights

_WEIGHT_GRADS = ("grad_kernel", "grad_recurrent_kernel", "grad_bias")
_CUDNN_KEYS = ("loss", *_WEIGHT_GRADS, "grad_h0", "grad_c0")  # grad_h_direct: grad_output


def lstm_batch(problem: Problem, loss: str, backend: str) -> dict[str, np.ndarray]:
    """The trace arrays of one batch (as `compute_taped`'s, plus grad_output) on `backend`."""
    arrays = compute_taped(problem, loss)
    arrays["grad_output"] = arrays["grad_h_direct"]
    if backend == "cudnn":
        w = problem.weights
        target = np.zeros([0], np.float32) if problem.target is None else problem.target
        _, batch, input_dim = problem.x.shape
        step = compiled_step(HiddenLoss(loss), batch, input_dim, w.hidden, cudnn=True)
        named = numpy_arrays(
            step(problem.x, w.kernel, w.recurrent_kernel, w.bias, problem.h0, problem.c0, target)
        )
        arrays["grad_output"] = named["grad_h_direct"]
        arrays.update({key: named[key] for key in _CUDNN_KEYS})
    return arrays


def batch_step(
    generator, n: int, problem: Problem, loss: str, backend: str
) -> tuple[dict[str, np.ndarray], list]:
    """Batch n with the generator's weights: its trace arrays, and the gradients of the loss
    with respect to `generator.variables` (empty list for fixed weights). backend as in
    `choose_backend`."""
    backend = choose_backend(backend)
    with tf.GradientTape() as tape:
        kernel, recurrent, bias = generator(n, problem.x)
    weights = LSTMWeights(np.asarray(kernel), np.asarray(recurrent), np.asarray(bias))
    problem = check_problem(problem.x, weights, loss, problem.target, problem.h0, problem.c0)
    arrays = lstm_batch(problem, loss, backend)
    if not generator.variables:
        return arrays, []
    upstream = [tf.constant(arrays[k]) for k in _WEIGHT_GRADS]
    grads = tape.gradient([kernel, recurrent, bias], generator.variables, output_gradients=upstream)
    arrays["grad_generator_norm"] = np.float32(tf.linalg.global_norm(grads).numpy())
    return arrays, grads


def seeded_batches(config: RunConfig) -> list[Problem]:
    """N seeded problems; batch n is `seeded_problem` under its own seed drawn from config.seed,
    so each has its own x, target, initial state and Keras-initialised random weights."""
    seeds = np.random.SeedSequence(config.seed).generate_state(config.batches)
    return [seeded_problem(replace(config, seed=int(s))) for s in seeds]


def stack_batches(batches: list[dict], backend: str, generator: str) -> dict[str, np.ndarray]:
    """Per-batch arrays -> [N, ...]; the norms as rows `norm_h_total_by_batch` [N, T] (and
    direct, cell), loss_by_batch [N] and loss (their mean); names as text.

    Each batch's `nonfinite_steps` (a list whose length varies) becomes a row of
    `nonfinite_by_batch` (bool [N, T]); `nonfinite_steps` is then the timesteps that are
    non-finite in any batch."""
    steps = batches[0]["norm_h_total"].shape[-1]
    flags = np.zeros((len(batches), steps), bool)
    for n, batch in enumerate(batches):
        flags[n, batch.get("nonfinite_steps", np.zeros(0, np.int64))] = True
    text = {"lstm_kernel": batches[0]["lstm_kernel"]}
    batches = [{k: v for k, v in b.items() if k not in ("nonfinite_steps", *text)} for b in batches]
    # One copy per distinct array: grad_output is grad_h_direct on the while-loop backend.
    stacked: dict[tuple[int, ...], np.ndarray] = {}
    arrays = {}
    for key in batches[0]:
        parts = [b[key] for b in batches]
        ids = tuple(map(id, parts))
        if ids not in stacked:
            stacked[ids] = np.stack(parts)
        arrays[key] = stacked[ids]
    for name in ("norm_h_total", "norm_h_direct", "norm_c_total"):  # rows, as live updates
        arrays[f"{name}_by_batch"] = arrays.pop(name)
    arrays["nonfinite_by_batch"] = flags
    arrays["nonfinite_steps"] = np.flatnonzero(flags.any(axis=0))
    arrays["loss_by_batch"] = arrays.pop("loss")
    arrays["loss"] = np.float32(arrays["loss_by_batch"].mean())
    arrays |= text
    arrays["rnn_backend"] = np.array(backend)
    arrays["generator"] = np.array(generator)
    return arrays


def run_batchwise(
    config: RunConfig,
    problems: Sequence[Problem] | None = None,
    generator=None,
    cancelled: Callable[[], bool] = bool,
    backend: str = "auto",
    keep: Callable[[], bool] = bool,
) -> Iterator[TraceUpdate | GradientTrace]:
    """Generator: a TraceUpdate after every batch (`norm_h_total_by_batch` [done, T]), then the
    GradientTrace. Defaults: `seeded_batches(config)` and the generator config names.
    `cancelled()` is checked before every batch; a run cancelled after k batches keeps, when
    `keep()`, the trace of those k (see `runner.run`)."""
    problems = seeded_batches(config) if problems is None else list(problems)
    if not problems:
        raise InputError("batchwise needs at least one batch (N >= 1)")
    generator = generator or make_generator(config, [p.weights for p in problems])
    backend = choose_backend(backend)
    total = len(problems)
    yield TraceUpdate(0, total, f"{generator.name} weights on {backend}")
    batches: list[dict] = []

    def one_batch(n: int) -> None:
        start = time.perf_counter()
        arrays, _ = batch_step(generator, n, problems[n], config.loss, backend)
        arrays["batch_seconds"] = np.float32(time.perf_counter() - start)
        batches.append(arrays)

    units = Units(total, cancelled, keep)
    for n in units:
        if not units.run(one_batch, n):
            break
        norms = np.stack([b["norm_h_total"] for b in batches])
        yield TraceUpdate(n + 1, total, f"batch {n + 1}/{total}", {"norm_h_total_by_batch": norms})
    if units.stopped == "cancelled" and not units.keeps():
        return
    arrays = stack_batches(batches, backend, generator.name)
    if units.stopped == "cancelled":
        arrays |= units.keys()
        config = replace(config, batches=units.done)
    yield GradientTrace("batchwise", config, arrays)


def _per_batch(name: str, value, batches: int) -> list:
    """None -> [None] * N; else value must have N rows, one per batch."""
    if value is None:
        return [None] * batches
    value = float32_copy(value, name)
    if value.ndim == 0 or value.shape[0] != batches:
        raise InputError(
            f"{name} must have one row per batch (N={batches}), got {list(value.shape)}"
        )
    return list(value)


def batchwise_gradients(
    x,
    weights: Sequence[LSTMWeights] | Hypernetwork,
    loss: str = "mean_h",
    target=None,
    h0=None,
    c0=None,
    backend: str = "auto",
) -> GradientTrace:
    """Gradients for N batches, each with its own weights.

    x [N, T, B, I] (each batch time-major); `weights`: N LSTMWeights, one per batch (recorded as
    the `files` generator), or a Hypernetwork called on each batch. target [N, ...] (each batch's
    target as `loss` needs it), h0 and c0 [N, B, H] (zeros when None). backend: "auto", "cudnn"
    or "while_loop". The trace's arrays are per batch, [N, ...] (docs/traces.md).
    """
    check_order(x, "x", "batchwise_gradients", (Hypernetwork,))
    x = float32_copy(x, "x")
    if x.ndim != 4 or x.shape[0] < 1:
        raise InputError(f"x must be [N, T, B, I] with N >= 1 batches, got {list(x.shape)}")
    batches = x.shape[0]
    if isinstance(weights, LSTMWeights):
        raise InputError("weights: one LSTMWeights per batch (a list of N), or a Hypernetwork; "
                         "for one set of weights for every batch, use taped_gradients")  # fmt: skip
    if isinstance(weights, Hypernetwork):
        generator = weights
        shapes = [_zero_weights(weights.input_dim, weights.hidden)] * batches
    else:
        generator = FixedWeights("files", weights)
        shapes = generator.weights
        if len(shapes) != batches:
            raise InputError(f"{len(shapes)} weight sets for N={batches} batches; give one each")
        for n, w in enumerate(shapes):
            check_weights(w, f"weights[{n}]")
        sizes = [(w.input_dim, w.hidden) for w in shapes]
        for n, size in enumerate(sizes):
            if size != sizes[0]:
                input_dim, hidden = size
                raise InputError(f"weights[{n}] has I={input_dim}, H={hidden} but weights[0] "
                                 f"I={sizes[0][0]}, H={sizes[0][1]}; every batch's weights "
                                 "need the same sizes")  # fmt: skip
    rows = {k: _per_batch(k, v, batches) for k, v in (("target", target), ("h0", h0), ("c0", c0))}
    steps, batch = x.shape[1:3]
    if steps != batch:
        first = {k: v[0] for k, v in rows.items()}
        found = swapped_argument(loss, shapes[0].hidden, first, (batch, steps), (steps, batch))
        if found:
            name, shape, needed, timed = found
            found = name, [batches, *shape], [batches, *needed], timed
            layouts = ("[N, B, T, I]", "[N, T, B, I]")
            raise batch_major_error("x", layouts, x.shape, "x.transpose(0, 2, 1, 3)", found)
    check_loss(loss)  # before the per-batch checks, whose messages name their batch
    problems = []
    for n, (t, h, c) in enumerate(zip(*rows.values(), strict=True)):
        try:
            problems.append(check_problem(x[n], shapes[n], loss, t, h, c))
        except InputError as exc:
            if target is None and "needs a target of shape [" in str(exc):  # all N batches'
                raise InputError(str(exc).replace("shape [", f"shape [{batches}, ", 1)
                                 + ", one row per batch") from None  # fmt: skip
            raise InputError(f"batch {n}: {exc}") from None
    config = config_for("batchwise", problems[0], loss, batches=batches, generator=generator.name)
    *_, trace = run_batchwise(config, problems, generator, backend=backend)
    return trace


def _zero_weights(input_dim: int, hidden: int) -> LSTMWeights:
    """Stand-in weights that only carry the shapes, for checking a problem's arrays."""
    return LSTMWeights(
        np.zeros((input_dim, 4 * hidden)), np.zeros((hidden, 4 * hidden)), np.zeros(4 * hidden)
    )
