"""Multi-pass backpropagation: P forward passes of Tp steps, the LSTM state carried between them.

The loss is the mean over passes of each pass's loss (losses.py). It is
differentiated three ways from the same inputs and weights:

- full: every pass recorded on one GradientTape with the state carried as a tensor, so the
  gradient of every pass's loss reaches every earlier pass;
- truncated: the state carried in tf.Variables, assigned after every pass, and each pass
  backpropagated on its own tape, as a stateful Keras RNN trains; reading a variable is where the
  gradient stops (one tape around all passes changes nothing: `assign` is not differentiable);
- reference: the taped engine once over the joined sequence [P·Tp, B, I], with the same loss.

Live updates: a pass runs its truncated forward + backward and the full forward. After pass p
the truncated gradients of passes 0..p are final, so they are yielded pass by pass; the full
gradient needs the losses of all passes and comes, with the reference, after the last pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from lstmviz.core.config import RunConfig
from lstmviz.core.errors import InputError
from lstmviz.core.numeric import float32_copy
from lstmviz.engine.autodiff.gradients import (
    HiddenLoss,
    compiled_step,
    gradient_sources,
    graph_norms,
    named_gradients,
    signature,
    watch_probes,
)
from lstmviz.engine.cells.lstm import lstm_sequence
from lstmviz.engine.modes.taped import compute_taped, config_for
from lstmviz.engine.modes.trace_arrays import NORMS, add_norms, exact_norm, problem_arrays
from lstmviz.engine.problem.losses import hidden_loss
from lstmviz.engine.problem.seeded import (
    Problem,
    batch_major_error,
    check_order,
    check_problem,
    seeded_problem,
    swapped_argument,
)
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.engine.stopping import Units
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.weights import LSTMWeights

_WEIGHT_GRADS = ("grad_kernel", "grad_recurrent_kernel", "grad_bias")
_COMPARED = ("grad_h_total", "grad_c_total", *_WEIGHT_GRADS, "grad_h0", "grad_c0")
_SEQUENCE = tf.TensorSpec([None, None, None], tf.float32)  # x [Tp, B, I], probes [Tp, B, H]
_MULTIPASS_NORMS = NORMS | {
    "grad_h_truncated": "norm_h_truncated",
    "grad_c_truncated": "norm_c_truncated",
    "grad_h_reference": "norm_h_reference",
}

# One pass from a given state, compiled once: lstm_sequence(x [Tp, B, I], h, c [B, H], kernel,
# recurrent_kernel, bias, probe_h, probe_c [Tp, B, H]) -> h, c [Tp, B, H].
_X, *_WEIGHTS, _H0, _C0, _ = signature()
pass_states = tf.function(
    lstm_sequence,
    input_signature=(_X, _H0, _C0, *_WEIGHTS, _SEQUENCE, _SEQUENCE),
    reduce_retracing=True,
)


def pass_targets(loss: str, target: np.ndarray | None, passes: int) -> list[np.ndarray]:
    """Split a multi-pass target into the P per-pass targets the segment losses take.

    last_mse [P, B, H] -> [B, H] each; seq_mse [P·Tp, B, H] -> [Tp, B, H] each; mean_h: empty.
    """
    if target is None:
        return [np.zeros([0], np.float32)] * passes
    if loss == "seq_mse":
        return list(target.reshape(passes, -1, *target.shape[1:]))
    return list(target)


def _max_abs_diff(a: np.ndarray, b: np.ndarray, rows: int = 64) -> np.float32:
    """max |a - b| (NaN if either holds one), a block of rows at a time: no full-size
    temporary for the [T, B, H] arrays."""
    blocks = [np.max(np.abs(a[i : i + rows] - b[i : i + rows])) for i in range(0, len(a), rows)]
    return np.float32(np.max(blocks))


class FullCarry:
    """The full path: the state carried as a tensor, every pass recorded on one GradientTape."""

    def __init__(self, problem: Problem, loss: str):
        w = problem.weights
        self.loss = loss
        self.weights = [tf.constant(a) for a in (w.kernel, w.recurrent_kernel, w.bias)]
        self.state = [tf.constant(problem.h0), tf.constant(problem.c0)]
        names = ("kernel", "recurrent_kernel", "bias", "h0", "c0")
        self.sources = dict(zip(names, [*self.weights, *self.state], strict=True))
        self.tape = tf.GradientTape()  # re-entered once per pass
        with self.tape:
            self.tape.watch(list(self.sources.values()))
        self.probes: list[tuple[tf.Tensor, tf.Tensor]] = []
        self.states: list[tuple[tf.Tensor, tf.Tensor]] = []
        self.losses: list[tf.Tensor] = []
        self.inputs: list[tuple[np.ndarray, np.ndarray]] = []  # (x, target) of every pass
        self.spent = False  # the tape has been differentiated (it can be only once)

    def run_pass(self, x: np.ndarray, target: np.ndarray) -> None:
        """Forward one pass [Tp, B, I] from the carried state; record it on the tape. Its
        results are kept only when it finished (an interrupted pass leaves nothing)."""
        with self.tape:
            probes = watch_probes(self.tape, x, self.state[0])
            h, c = pass_states(x, *self.state, *self.weights, *probes)
            value = hidden_loss(self.loss, h, target)
            state = [h[-1], c[-1]]
        self.state = state
        self.losses.append(value)
        self.probes.append(probes)
        self.states.append((h, c))
        self.inputs.append((x, target))

    def arrays(self, passes: int) -> dict[str, np.ndarray]:
        """Backpropagate the mean of the first `passes` passes' losses through them. Called
        again after an interrupted backward (whose tape is gone), it runs those passes again."""
        if self.spent:
            self._restart(passes)
        self.spent = True
        with self.tape:
            value = tf.reduce_mean(tf.stack(self.losses[:passes]))
        per_pass = [list(pair) for pair in zip(*self.probes[:passes], strict=True)]
        named = named_gradients(self.tape, value, gradient_sources(per_pass, self.sources))
        for key in ("grad_h_total", "grad_c_total"):  # one [P·Tp, B, H] per key
            named[key] = tf.concat(named[key], 0)
        named |= graph_norms(named)
        states = self.states[:passes]
        return {
            "loss": np.float32(value.numpy()),
            "h": np.concatenate([np.asarray(h) for h, _ in states]),
            "c": np.concatenate([np.asarray(c) for _, c in states]),
        } | {key: np.asarray(g) for key, g in named.items()}

    def _restart(self, passes: int) -> None:
        """A new tape with the first `passes` passes run again from the initial state."""
        inputs = self.inputs[:passes]
        self.tape, self.spent = tf.GradientTape(), False
        with self.tape:
            self.tape.watch(list(self.sources.values()))
        self.state = [self.sources["h0"], self.sources["c0"]]
        self.probes, self.states, self.losses, self.inputs = [], [], [], []
        for x, target in inputs:
            self.run_pass(x, target)


class VariableCarry:
    """The truncated path: the state in tf.Variables assigned after every pass (a stateful RNN).

    Each pass is backpropagated on its own (the compiled step, one segment); its loss counts
    1/P, so its gradients are scaled by 1/P (by 1/k for a trace of the first k passes).
    """

    def __init__(self, problem: Problem, loss: str, passes: int):
        w = problem.weights
        self.step = compiled_step(HiddenLoss(loss), *problem.x.shape[1:], w.hidden)
        self.weights = (w.kernel, w.recurrent_kernel, w.bias)
        self.h, self.c = tf.Variable(problem.h0), tf.Variable(problem.c0)
        self.scale = np.float32(1.0 / passes)
        self.passes: list[dict[str, np.ndarray]] = []  # per pass: unscaled gradients, norms
        self.rows: list[np.ndarray] = []  # norm_h_truncated_by_pass rows, scaled by 1/P

    def run_pass(self, x: np.ndarray, target: np.ndarray) -> None:
        """Forward and backward one pass from the variables' state, then assign the new state."""
        named = self.step(x, *self.weights, self.h, self.c, target)
        self.h.assign(named["h"][-1])
        self.c.assign(named["c"][-1])
        keys = ("loss", "grad_h_total", "grad_c_total", "norm_h_total", "norm_c_total")
        done = {key: np.asarray(named[key]) for key in (*keys, *_WEIGHT_GRADS)}
        self.passes.append(done)
        self.rows.append(_scaled_norm(self.scale, done["norm_h_total"], done["grad_h_total"]))

    def live(self) -> dict[str, np.ndarray]:
        """Rows so far: norm_h_truncated_by_pass [passes done, Tp], loss_by_pass [passes done]."""
        return {
            "norm_h_truncated_by_pass": np.stack(self.rows),
            "loss_by_pass": np.array([p["loss"] for p in self.passes], np.float32),
        }

    def arrays(self, passes: int) -> dict[str, np.ndarray]:
        """For the first `passes` passes, each loss counting 1/passes: grad_{h,c}_truncated
        [passes·Tp, B, H] with their norms, grad_{kernel,…}_truncated (summed over passes),
        norm_h_truncated_by_pass, loss_by_pass."""
        scale, done = np.float32(1.0 / passes), self.passes[:passes]
        arrays = {"loss_by_pass": np.array([p["loss"] for p in done], np.float32)}
        for kind in ("h", "c"):
            grads = [scale * p[f"grad_{kind}_total"] for p in done]
            norms = [
                _scaled_norm(scale, p[f"norm_{kind}_total"], g)
                for p, g in zip(done, grads, strict=True)
            ]
            arrays[f"grad_{kind}_truncated"] = np.concatenate(grads)
            arrays[f"norm_{kind}_truncated"] = np.concatenate(norms)
            if kind == "h":
                arrays["norm_h_truncated_by_pass"] = np.stack(norms)
        for name in _WEIGHT_GRADS:
            arrays[f"{name}_truncated"] = np.sum([scale * p[name] for p in done], axis=0)
        return arrays


def _scaled_norm(scale: np.float32, norm: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """The per-step norm of scale·grad from the graph's norm of grad (see exact_norm)."""
    return exact_norm(scale * norm, grad, scale)


def multipass_arrays(
    problem: Problem, loss: str, passes: int, full: FullCarry, truncated: VariableCarry
) -> dict[str, np.ndarray]:
    """The trace of `problem`, the first `passes` passes the carries ran: the full path's
    common keys, the truncated and reference gradients, norms."""
    reference = compute_taped(problem, loss)
    arrays = problem_arrays(problem) | full.arrays(passes) | truncated.arrays(passes)
    arrays["grad_h_direct"] = reference["grad_h_direct"]
    arrays["grad_h_reference"] = reference["grad_h_total"]
    arrays["grad_c_reference"] = reference["grad_c_total"]
    arrays["max_abs_diff_full_vs_reference"] = np.max(
        [_max_abs_diff(arrays[k], reference[k]) for k in _COMPARED]
    )
    # Norms the reference and the truncated passes already have; add_norms keeps them.
    arrays["norm_h_direct"] = reference["norm_h_direct"]
    arrays["norm_h_reference"] = reference["norm_h_total"]
    arrays["passes"] = np.int32(passes)
    arrays["pass_length"] = np.int32(problem.x.shape[0] // passes)
    add_norms(arrays, _MULTIPASS_NORMS)
    for kind in ("total", "truncated"):
        arrays[f"norm_h_{kind}_by_pass"] = arrays[f"norm_h_{kind}"].reshape(passes, -1)
    return arrays


def first_passes(problem: Problem, loss: str, passes: int, pass_length: int) -> Problem:
    """The problem of the first `passes` passes of `problem`: x and, for seq_mse, the target
    cut after them; a last_mse target keeps its first `passes` rows."""
    steps = passes * pass_length
    if steps == problem.x.shape[0]:
        return problem
    target = problem.target
    if target is not None:
        target = target[:steps] if loss == "seq_mse" else target[:passes]
    return Problem(problem.x[:steps], problem.weights, problem.h0, problem.c0, target)


def run_multipass(
    config: RunConfig,
    problem: Problem | None = None,
    cancelled: Callable[[], bool] = bool,
    keep: Callable[[], bool] = bool,
) -> Iterator[TraceUpdate | GradientTrace]:
    """Generator: a TraceUpdate after each of the P = config.passes passes, one after the full
    backward and the reference, then the GradientTrace. `cancelled` is polled before each
    pass and before the full backward; a run cancelled after k passes keeps, when `keep()`,
    the trace of those k passes (as a run of k passes on the same data would give; see
    `runner.run`).

    config.steps is the pass length Tp; the problem (default: seeded from `config`) holds the
    joined sequence x [P·Tp, B, I] and the multi-pass target.
    """
    passes, pass_length = config.passes, config.steps
    problem = problem or seeded_problem(config, steps=passes * pass_length, passes=passes)
    if problem.x.shape[0] != passes * pass_length:
        raise InputError(
            f"x has {problem.x.shape[0]} steps, not passes × steps = {passes} × {pass_length}"
        )
    xs = problem.x.reshape(passes, pass_length, *problem.x.shape[1:])
    targets = pass_targets(config.loss, problem.target, passes)
    full, truncated = FullCarry(problem, config.loss), VariableCarry(problem, config.loss, passes)

    def one_pass(p: int) -> None:
        truncated.run_pass(xs[p], targets[p])
        full.run_pass(xs[p], targets[p])

    units = Units(passes, cancelled, keep)
    for p in units:
        if not units.run(one_pass, p):
            break
        yield TraceUpdate(p + 1, passes + 1, f"pass {p + 1}/{passes}", truncated.live())
    if units.stopped == "completed" and cancelled():  # before the full backward
        units.stopped = "cancelled"
    if units.stopped == "cancelled" and not units.keeps():
        return
    done = units.done
    kept = first_passes(problem, config.loss, done, pass_length)
    arrays = units.finish(lambda: multipass_arrays(kept, config.loss, done, full, truncated))
    if arrays is None:
        return
    if units.stopped == "completed":
        live = ("norm_h_total_by_pass", "norm_h_truncated_by_pass", "loss_by_pass")
        yield TraceUpdate(passes + 1, passes + 1, "full backward", {k: arrays[k] for k in live})
    else:
        arrays |= units.keys()
    yield GradientTrace("multipass", replace(config, passes=done), arrays)


def multipass_gradients(
    x_passes,
    weights: LSTMWeights,
    loss: str = "mean_h",
    target=None,
    h0=None,
    c0=None,
) -> GradientTrace:
    """Full, truncated and reference gradients of an LSTM fed in P passes, x_passes [P, Tp, B, I].

    The loss is the mean over passes of each pass's loss; target: last_mse [P, B, H], seq_mse
    [P·Tp, B, H]. The trace holds the joined x, h, c and gradients [P·Tp, B, H]: grad_h_total /
    grad_c_total (full), grad_h_truncated / grad_c_truncated, grad_h_reference /
    grad_c_reference, grad_h_direct; the full weight gradients (grad_kernel, …; the truncated
    ones end in `_truncated`); norm_h_total_by_pass and norm_h_truncated_by_pass [P, Tp];
    passes, pass_length, loss, loss_by_pass [P] and max_abs_diff_full_vs_reference.
    """
    check_order(x_passes, "x_passes", "multipass_gradients")
    x_passes = float32_copy(x_passes, "x_passes")
    if x_passes.ndim != 4 or 0 in x_passes.shape:
        raise InputError(
            "x_passes must be [P, Tp, B, I] with P >= 1 passes of Tp >= 1 steps, "
            f"got {list(x_passes.shape)}"
        )
    passes, pass_length, batch = x_passes.shape[:3]
    if isinstance(weights, LSTMWeights) and pass_length != batch:
        arguments = {"target": target, "h0": h0, "c0": c0}
        found = swapped_argument(loss, weights.hidden, arguments, (passes * batch, pass_length),
                                 (passes * pass_length, batch), passes)  # fmt: skip
        if found:
            layouts = ("[P, B, Tp, I]", "[P, Tp, B, I]")
            transpose = "x_passes.transpose(0, 2, 1, 3)"
            raise batch_major_error("x_passes", layouts, x_passes.shape, transpose, found)
    joined = x_passes.reshape(passes * pass_length, *x_passes.shape[2:])
    problem = check_problem(joined, weights, loss, target, h0, c0, passes=passes)
    config = replace(config_for("multipass", problem, loss, passes=passes), steps=pass_length)
    *_, trace = run_multipass(config, problem)
    return trace
