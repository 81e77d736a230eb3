"""The one probed-gradient builder: an LSTM run on a GradientTape, its gradients by name.

Probes (cells/lstm.py) are zeros added to h_t and c_t inside the loop; the gradient with respect to
them is the total dL/dh_t, dL/dc_t through the recurrence. Every mode gets its gradients here:

- `compiled_step(loss, batch, input_dim, hidden)`: the compiled forward + backward of one LSTM
  under `loss`, called as `step(x, kernel, recurrent_kernel, bias, h0, c0, target, *loss
  weights)`; it returns a dict of tensors keyed by the names below. One cache (an LRU) of
  compiled steps, keyed by the loss spec, B, I, H and the LSTM kernel.
- `watch_probes`, `gradient_sources`, `named_gradients`, `graph_norms`: its parts, for code that
  records its own tape (the multi-pass full path differentiates one tape across passes).

Names (shapes for x [T, B, I] and H units; `prefix` in front of each for `gradient_sources`):
  loss []; h, c [T, B, H];
  grad_h_direct [T, B, H]: the partial ∂L/∂h_t through the stacked states only;
  grad_h_total, grad_c_total [T, B, H]: dL/dh_t, dL/dc_t through the recurrence (the probes);
  grad_kernel [I, 4H], grad_recurrent_kernel [H, 4H], grad_bias [4H], grad_h0, grad_c0 [B, H];
  norm_h_total, norm_h_direct, norm_c_total [T]: float32 norms over (b, j), computed in the
  graph (`graph_step_norm`: exact with the native kernels; else `trace_arrays.exact_norm` redoes the
  steps whose squares overflow or underflow);
  grad_<name> for every weight the loss itself takes (`ReadoutLoss`: grad_readout_kernel [H, O],
  grad_readout_bias [O]).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from lstmviz.engine.cells.lstm import lstm_sequence
from lstmviz.engine.cells.lstm_backends import lstm_forward
from lstmviz.engine.modes.trace_arrays import NORMS
from lstmviz.engine.native import kernels
from lstmviz.engine.problem.losses import hidden_loss, readout_loss
from lstmviz.engine.quiet_tensorflow import tf

_SPEC = tf.TensorSpec


@dataclass(frozen=True)
class HiddenLoss:
    """A loss on the hidden states h [T, B, H] by name: "mean_h", "last_mse" or "seq_mse"
    (losses.py); the target's shape is the loss's."""

    name: str
    weights: ClassVar[tuple[str, ...]] = ()  # weights of the loss's own, after the target

    def __call__(self, h: tf.Tensor, target: tf.Tensor) -> tf.Tensor:
        return hidden_loss(self.name, h, target)

    def signature(self, hidden: int | None) -> tuple[tf.TensorSpec, ...]:
        return ()


@dataclass(frozen=True)
class ReadoutLoss:
    """Training's task loss: a dense read-out of h (every step when `per_step`, else h[T-1]),
    "mse" or "xent" (softmax cross-entropy) against the target y ([T, B, O] or [B, O])."""

    per_step: bool
    kind: str
    weights: ClassVar[tuple[str, ...]] = ("readout_kernel", "readout_bias")

    def __call__(self, h, target, readout_kernel, readout_bias) -> tf.Tensor:
        return readout_loss(self.per_step, self.kind, h, readout_kernel, readout_bias, target)

    def signature(self, hidden: int | None) -> tuple[tf.TensorSpec, ...]:
        return (
            _SPEC([hidden, None], tf.float32),  # readout_kernel [H, O]
            _SPEC([None], tf.float32),  # readout_bias [O]
        )


LossSpec = HiddenLoss | ReadoutLoss


def signature(
    batch: int | None = None, input_dim: int | None = None, hidden: int | None = None
) -> tuple[tf.TensorSpec, ...]:
    """Input specs (x, kernel, recurrent_kernel, bias, h0, c0, target) of a compiled step.

    T is always free; B, I and H are free when None. Fixed B, I, H give the loops static
    shapes, which TensorFlow turns into cheaper slicing (bench/bench.py); a new B, I or H
    then traces again, a new T does not.
    """
    gates = None if hidden is None else 4 * hidden
    return (
        _SPEC([None, batch, input_dim], tf.float32),  # x [T, B, I]
        _SPEC([input_dim, gates], tf.float32),  # kernel [I, 4H]
        _SPEC([hidden, gates], tf.float32),  # recurrent_kernel [H, 4H]
        _SPEC([gates], tf.float32),  # bias [4H]
        _SPEC([batch, hidden], tf.float32),  # h0 [B, H]
        _SPEC([batch, hidden], tf.float32),  # c0 [B, H]
        _SPEC(None, tf.float32),  # target (any rank; unused by mean_h)
    )


def watch_probes(tape: tf.GradientTape, x, h0) -> tuple[tf.Tensor, tf.Tensor]:
    """Zero probes (probe_h, probe_c) [T, B, H] for x [T, B, I] run from h0 [B, H], watched
    by `tape` (call it inside the tape's `with` block). In a compiled graph with the native
    kernels, `kernels.unread_probes`: zeros never written or read."""
    shape = [tf.shape(x)[0], tf.shape(h0)[0], tf.shape(h0)[1]]
    native_graph = kernels.library() is not None and not tf.executing_eagerly()
    if native_graph and tf.as_dtype(x.dtype) == tf.float32:
        probes = kernels.unread_probes(x, h0)
    else:
        probes = tf.zeros(shape), tf.zeros(shape)
    tape.watch(probes)
    return probes


def gradient_sources(
    probes: tuple | None,
    weights: Mapping[str, tf.Tensor],
    h: tf.Tensor | None = None,
    prefix: str = "",
) -> dict[str, object]:
    """What a tape differentiates for one LSTM, keyed by the name of the gradient each gives:
    `{prefix}grad_h_direct` for the stacked states h, `{prefix}grad_h_total` /
    `grad_c_total` for the probes (a pair of tensors, or of lists of them: one per pass), each
    when given, and `{prefix}grad_<name>` for each of `weights` (kernel, …, h0, c0, a
    read-out's)."""
    sources: dict[str, object] = {}
    if h is not None:
        sources[f"{prefix}grad_h_direct"] = h
    if probes is not None:
        sources[f"{prefix}grad_h_total"], sources[f"{prefix}grad_c_total"] = probes
    sources |= {f"{prefix}grad_{name}": tensor for name, tensor in weights.items()}
    return sources


def named_gradients(
    tape: tf.GradientTape, value: tf.Tensor, sources: Mapping[str, object]
) -> dict[str, object]:
    """`tape.gradient(value, …)` for every source, under the source's key; a source given as a
    list of tensors gets a list of gradients. Sources `value` does not reach get zeros."""
    flat: list[tf.Tensor] = []
    spans: dict[str, tuple[int, int, bool]] = {}
    for key, source in sources.items():
        many = isinstance(source, list | tuple)
        parts = list(source) if many else [source]
        spans[key] = (len(flat), len(flat) + len(parts), many)
        flat += parts
    found = tape.gradient(value, flat, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return {
        key: found[start:end] if many else found[start] for key, (start, end, many) in spans.items()
    }


def anchor_passes(gradients: list, anchors: tuple[int, ...],
                  firsts: list[bool]) -> list[tuple[list, list[int]]]:  # fmt: skip
    """The backward passes of the error of one step (docs/diagnosis.md): (the cotangents of
    the outputs whose loss `gradients` [B, T, …] are, the indices of the directions the pass
    answers). Given `anchors`: one pass a step, every direction; else one pass per kind of
    direction (`firsts`: reads its sequence from the end), each output kept at its last step
    (its first, for backward directions)."""
    if anchors:
        return [([at_step(g, t) for g in gradients], list(range(len(firsts)))) for t in anchors]
    return [([one_step_only(g, first) for g in gradients],
             [k for k, f in enumerate(firsts) if f == first]) for first in sorted(set(firsts))]


def one_step_only(gradient: tf.Tensor, first: bool) -> tf.Tensor:
    """A gradient at a model output [B, T, …] kept at its first (or last) step alone, zero at
    the others: the cotangent of the error of one step (docs/diagnosis.md)."""
    return at_step(gradient, 0 if first else tf.shape(gradient)[1] - 1)


def at_step(gradient: tf.Tensor, step) -> tf.Tensor:
    """A gradient at a model output [B, T, …] kept at step `step` alone, zero elsewhere."""
    steps = tf.shape(gradient)[1]
    keep = tf.one_hot(step, steps, dtype=gradient.dtype)
    ones = tf.ones([gradient.shape.rank - 2], tf.int32)
    return gradient * tf.reshape(keep, tf.concat([[1, steps], ones], 0))


def graph_step_norm(g: tf.Tensor) -> tf.Tensor:
    """[T, B, H] -> [T] (TensorFlow, float32): sqrt of the sum of squares over batch and units.
    With the native kernels the backward op's own norms of what it wrote or was given
    (`kernels.backward_norms`), else one op reading g once (`step_norms.cc`), both exact
    (`kernels.exact_norms`); TensorFlow's square and sum write and read a temporary as large as
    g, and `trace_arrays.exact_norm` fixes the steps where its squares overflow or underflow."""
    library = kernels.library()
    if library is not None:
        fused = kernels.backward_norms(g)
        return library.lstmviz_step_norms(g) if fused is None else fused
    return tf.sqrt(tf.reduce_sum(tf.square(g), axis=[1, 2]))


def graph_last_axis_norm(g: tf.Tensor) -> tf.Tensor:
    """[..., E] -> [...] (TensorFlow, float32): the L2 norm over the last axis, exact where
    float32 squares would under- or overflow: the native per-step norms of g's rows when the
    kernels are loaded (`kernels.exact_norms`), else computed in float64."""
    library = kernels.library()
    if library is not None:
        rows = library.lstmviz_step_norms(tf.reshape(g, [-1, tf.shape(g)[-1]]))
        return tf.reshape(rows, tf.shape(g)[:-1])
    return tf.cast(tf.norm(tf.cast(g, tf.float64), axis=-1), tf.float32)


def graph_norms(named: Mapping[str, tf.Tensor], prefix: str = "") -> dict[str, tf.Tensor]:
    """The per-step norms [T] (norm_h_total, norm_h_direct, norm_c_total, each with `prefix`)
    of the gradients [T, B, H] present in `named`. In the graph rather than in NumPy:
    multi-threaded, and no pass over the big arrays after the run."""
    return {
        prefix + norm: graph_step_norm(named[prefix + grad])
        for grad, norm in NORMS.items()
        if prefix + grad in named
    }


def compiled_step(
    loss: LossSpec, batch: int, input_dim: int, hidden: int, cudnn: bool = False
) -> Callable[..., dict[str, tf.Tensor]]:
    """The compiled forward + backward of `loss` for x [T, batch, input_dim] and `hidden` units
    (traced once per key; any T): `step(x, kernel, recurrent_kernel, bias, h0, c0, target,
    *loss weights)` -> the named tensors of the module docstring.

    With `cudnn` the LSTM runs on cuDNN (GPU only), which has no hook inside its loop: no
    probes, so the dict holds loss, h, grad_h_direct, the weight and initial-state gradients
    and norm_h_direct only.

    Kept per LSTM kernel too (`kernels.kernel_name`), so that a step's norms are exact exactly
    when `kernels.exact_norms()` says so at the time it runs.
    """
    return _compiled_step(loss, batch, input_dim, hidden, cudnn, kernels.kernel_name())


@functools.lru_cache(maxsize=8)  # a long GUI session tries many shapes; keep the recent ones
def _compiled_step(loss: LossSpec, batch: int, input_dim: int, hidden: int, cudnn: bool,
                   kernel: str) -> Callable[..., dict[str, tf.Tensor]]:  # fmt: skip
    """`compiled_step`'s cache; `kernel` is part of its key only."""

    def step(x, kernel, recurrent_kernel, bias, h0, c0, target, *extra):
        weights = {"kernel": kernel, "recurrent_kernel": recurrent_kernel, "bias": bias}
        weights |= {"h0": h0, "c0": c0} | dict(zip(loss.weights, extra, strict=True))
        with tf.GradientTape() as tape:
            tape.watch(list(weights.values()))
            if cudnn:
                h, _ = lstm_forward(x, h0, c0, kernel, recurrent_kernel, bias, backend="cudnn")
                states, probes = {"h": h}, None
            else:
                probes = watch_probes(tape, x, h0)
                h, c = lstm_sequence(x, h0, c0, kernel, recurrent_kernel, bias, *probes)
                states = {"h": h, "c": c}
            value = loss(h, target, *extra)
        named = named_gradients(tape, value, gradient_sources(probes, weights, h))
        return {"loss": value, **states, **named, **graph_norms(named)}

    specs = signature(batch, input_dim, hidden) + loss.signature(hidden)
    return tf.function(step, input_signature=specs)


def numpy_arrays(named: Mapping[str, tf.Tensor]) -> dict[str, np.ndarray]:
    """The named tensors as NumPy: `loss` a float32 scalar, the rest sharing the tensors'
    buffers (read-only; `.numpy()` would copy each [T, B, H])."""
    return {
        key: np.float32(value) if key == "loss" else np.asarray(value)
        for key, value in named.items()
    }
