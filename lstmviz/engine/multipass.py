"""Multi-pass backpropagation: P forward passes of Tp steps, the LSTM state carried between them.

The loss is the mean over passes of each pass's loss (DESIGN.md; losses.py). It is
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

from lstmviz.config import RunConfig
from lstmviz.engine.arrays import NORMS, add_norms, exact_norm, problem_arrays
from lstmviz.engine.cell import lstm_sequence
from lstmviz.engine.losses import hidden_loss
from lstmviz.engine.problem import Problem, check_problem, seeded_problem
from lstmviz.engine.taped import (
    SIGNATURE,
    compute_taped,
    config_for,
    graph_step_norm,
    taped_step_function,
)
from lstmviz.engine.tfload import tf
from lstmviz.errors import InputError
from lstmviz.trace import GradientTrace, TraceUpdate
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
_X, _WEIGHTS, _STATE = SIGNATURE[0], SIGNATURE[1:4], SIGNATURE[4:6]
pass_states = tf.function(
    lstm_sequence,
    input_signature=(_X, *_STATE, *_WEIGHTS, _SEQUENCE, _SEQUENCE),
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


def _joined(parts) -> np.ndarray:
    """Per-pass tensors [Tp, B, H] -> one NumPy array [P·Tp, B, H]."""
    return np.concatenate([np.asarray(part) for part in parts])


class FullCarry:
    """The full path: the state carried as a tensor, every pass recorded on one GradientTape."""

    def __init__(self, problem: Problem, loss: str):
        w = problem.weights
        self.loss = loss
        self.weights = [tf.constant(a) for a in (w.kernel, w.recurrent_kernel, w.bias)]
        self.state = [tf.constant(problem.h0), tf.constant(problem.c0)]
        self.sources = [*self.weights, *self.state]
        self.tape = tf.GradientTape()  # re-entered once per pass
        with self.tape:
            self.tape.watch(self.sources)
        self.probes: list[list[tf.Tensor]] = []
        self.states: list[tuple[tf.Tensor, tf.Tensor]] = []
        self.losses: list[tf.Tensor] = []

    def run_pass(self, x: np.ndarray, target: np.ndarray) -> None:
        """Forward one pass [Tp, B, I] from the carried state; record it on the tape."""
        shape = [x.shape[0], *self.state[0].shape]
        probes = [tf.zeros(shape), tf.zeros(shape)]
        with self.tape:
            self.tape.watch(probes)
            h, c = pass_states(x, *self.state, *self.weights, *probes)
            self.losses.append(hidden_loss(self.loss, h, target))
            self.state = [h[-1], c[-1]]
        self.probes.append(probes)
        self.states.append((h, c))

    def arrays(self) -> dict[str, np.ndarray]:
        """Backpropagate the mean of the passes' losses through all of them."""
        with self.tape:
            value = tf.reduce_mean(tf.stack(self.losses))
        probes = [p for pair in self.probes for p in pair]
        grads = self.tape.gradient(
            value, probes + self.sources, unconnected_gradients=tf.UnconnectedGradients.ZERO
        )
        names = (*_WEIGHT_GRADS, "grad_h0", "grad_c0")
        grads_h, grads_c = grads[0 : len(probes) : 2], grads[1 : len(probes) : 2]
        return {
            "loss": np.float32(value.numpy()),
            "h": _joined(h for h, _ in self.states),
            "c": _joined(c for _, c in self.states),
            "grad_h_total": _joined(grads_h),
            "grad_c_total": _joined(grads_c),
            "norm_h_total": _joined(graph_step_norm(g) for g in grads_h),
            "norm_c_total": _joined(graph_step_norm(g) for g in grads_c),
        } | {name: g.numpy() for name, g in zip(names, grads[len(probes) :], strict=True)}


class VariableCarry:
    """The truncated path: the state in tf.Variables assigned after every pass (a stateful RNN).

    Each pass is backpropagated on its own (taped engine, one segment): its loss counts 1/P.
    """

    def __init__(self, problem: Problem, loss: str, passes: int):
        w = problem.weights
        self.step = taped_step_function(loss, *problem.x.shape[1:], w.hidden)
        self.weights = (w.kernel, w.recurrent_kernel, w.bias)
        self.h, self.c = tf.Variable(problem.h0), tf.Variable(problem.c0)
        self.scale = np.float32(1.0 / passes)
        self.grads: dict[str, list[np.ndarray]] = {}
        self.losses: list[float] = []
        self.norms: dict[str, list[np.ndarray]] = {"grad_h": [], "grad_c": []}

    def run_pass(self, x: np.ndarray, target: np.ndarray) -> None:
        """Forward and backward one pass from the variables' state, then assign the new state."""
        value, h, c, grads, norms = self.step(x, *self.weights, self.h, self.c, target)
        self.h.assign(h[-1])
        self.c.assign(c[-1])
        named = dict(zip(("grad_h", "grad_c", *_WEIGHT_GRADS), grads[1:6], strict=True))
        for name, g in named.items():
            self.grads.setdefault(name, []).append(self.scale * np.asarray(g))
        self.losses.append(float(value.numpy()))
        # The step's graph norms [3, Tp] (h total, h direct, c total), scaled as the grads are.
        norms = self.scale * np.asarray(norms)
        for name, row in (("grad_h", 0), ("grad_c", 2)):
            self.norms[name].append(exact_norm(norms[row], self.grads[name][-1]))

    def live(self) -> dict[str, np.ndarray]:
        """Rows so far: norm_h_truncated_by_pass [passes done, Tp], loss_by_pass [passes done]."""
        return {
            "norm_h_truncated_by_pass": np.stack(self.norms["grad_h"]),
            "loss_by_pass": np.array(self.losses, np.float32),
        }

    def arrays(self) -> dict[str, np.ndarray]:
        """grad_{h,c}_truncated [P·Tp, B, H], grad_{kernel,…}_truncated (summed over passes)."""
        g = self.grads
        return (
            self.live()
            | {
                "grad_h_truncated": np.concatenate(g["grad_h"]),
                "grad_c_truncated": np.concatenate(g["grad_c"]),
                "norm_c_truncated": np.concatenate(self.norms["grad_c"]),
            }
            | {f"{name}_truncated": np.sum(g[name], axis=0) for name in _WEIGHT_GRADS}
        )


def multipass_arrays(
    problem: Problem, loss: str, passes: int, full: FullCarry, truncated: VariableCarry
) -> dict[str, np.ndarray]:
    """The trace: the full path's common keys, the truncated and reference gradients, norms."""
    reference = compute_taped(problem, loss)
    arrays = problem_arrays(problem) | full.arrays() | truncated.arrays()
    arrays["grad_h_direct"] = reference["grad_h_direct"]
    arrays["grad_h_reference"] = reference["grad_h_total"]
    arrays["grad_c_reference"] = reference["grad_c_total"]
    arrays["max_abs_diff_full_vs_reference"] = np.max(
        [_max_abs_diff(arrays[k], reference[k]) for k in _COMPARED]
    )
    # Norms the reference and the truncated passes already have; add_norms keeps them.
    arrays["norm_h_direct"] = reference["norm_h_direct"]
    arrays["norm_h_reference"] = reference["norm_h_total"]
    arrays["norm_h_truncated"] = arrays["norm_h_truncated_by_pass"].reshape(-1)
    arrays["passes"] = np.int32(passes)
    arrays["pass_length"] = np.int32(problem.x.shape[0] // passes)
    add_norms(arrays, _MULTIPASS_NORMS)
    for kind in ("total", "truncated"):
        arrays[f"norm_h_{kind}_by_pass"] = arrays[f"norm_h_{kind}"].reshape(passes, -1)
    return arrays


def run_multipass(
    config: RunConfig, problem: Problem | None = None, cancelled: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Generator: a TraceUpdate after each of the P = config.passes passes, one after the full
    backward and the reference, then the GradientTrace. `cancelled` is polled before each.

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
    for p in range(passes):
        if cancelled():
            return
        truncated.run_pass(xs[p], targets[p])
        full.run_pass(xs[p], targets[p])
        yield TraceUpdate(p + 1, passes + 1, f"pass {p + 1}/{passes}", truncated.live())
    if cancelled():
        return
    arrays = multipass_arrays(problem, config.loss, passes, full, truncated)
    live = ("norm_h_total_by_pass", "norm_h_truncated_by_pass", "loss_by_pass")
    yield TraceUpdate(passes + 1, passes + 1, "full backward", {k: arrays[k] for k in live})
    yield GradientTrace("multipass", config, arrays)


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
    x_passes = np.asarray(x_passes, dtype=np.float32)
    if x_passes.ndim != 4 or 0 in x_passes.shape:
        raise InputError(
            "x_passes must be [P, Tp, B, I] with P >= 1 passes of Tp >= 1 steps, "
            f"got {list(x_passes.shape)}"
        )
    passes, pass_length = x_passes.shape[:2]
    joined = x_passes.reshape(passes * pass_length, *x_passes.shape[2:])
    problem = check_problem(joined, weights, loss, target, h0, c0, passes=passes)
    config = replace(config_for("multipass", problem, loss, passes=passes), steps=pass_length)
    *_, trace = run_multipass(config, problem)
    return trace
