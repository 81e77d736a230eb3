"""Model mode for a PyTorch module: `model_gradients(module, x, y, loss_fn)`.

One forward of the module under `capture` (eval mode; its recurrent modules and cells run
once, as often as the forward calls them — on lstmviz's native kernels, `fused`, where they
apply, else PyTorch's own ops — and hand leaves on), the loss, one `torch.autograd.grad` of it
with respect to those leaves (the direct ∂L/∂output of each call, from the layers above), then,
from the last call to the first: lstmviz's backward recurrences of the call (`fused.backward`,
the native backward ops, or `probed.call_gradients`; every layer and direction, the totals
dL/dh_t and dL/dc_t), its dL/d input and dL/d(initial state) passed back through PyTorch into
the calls before it — or, where the call continues an earlier call's state (a chain), that
dL/d(initial state) is the earlier call's state cotangent. The parameters' `.grad` are never touched
(nothing is differentiated with respect to them in PyTorch).

A module that also holds modern layers (minGRU, Mamba, …: `lstmviz.torch.modern`) runs them on
their traced forwards here, nothing kept (autograd carries the gradient through them), then
once more in `modern.model.run`, which traces them (the classic layers plain PyTorch there): two
forwards and two backwards, the directions of both in one trace in the order the forward first
calls them (`modern.mixed`).

Keys are model mode's (docs/pytorch.md): one entry per direction (`chains`: one chain of calls
of one layer and direction), named `{attribute path}/l{k}[/forward|/backward]` (a cell
`{attribute path}`; `#{n}` when a layer makes several chains), every per-step array [T_k, B, ·]
indexed by input position within each call, the calls in order; `layer{k}_calls`,
`layer{k}_initial_from`; the [L, T] summaries over T = max T_k, NaN after a direction's end.
Weight gradients are in Keras's layout: grad_kernel = (∂L/∂weight_ih)ᵀ [I, G·H],
grad_recurrent_kernel = (∂L/∂weight_hh)ᵀ, grad_bias = ∂L/∂bias_ih (= ∂L/∂bias_hh for an LSTM,
whose two biases add); a direction's are its calls' part of them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lstmviz.core.config import PYTORCH_LOSSES, RunConfig, anchor_steps, anchors_text
from lstmviz.core.errors import InputError, LstmvizError
from lstmviz.core.schema import CELL_GATES
from lstmviz.engine.modes.trace_arrays import NORMS, exact_norm
from lstmviz.engine.native.kernels import kernel_name
from lstmviz.io.trace import GradientTrace
from lstmviz.torch import fused, modern
from lstmviz.torch.capture import WHERE, Call, capture, recurrent_modules
from lstmviz.torch.chains import Chain, chains, join
from lstmviz.torch.inputs import Provenance, first_feeds, input_names, time_major, unmark
from lstmviz.torch.modern import mixed
from lstmviz.torch.modern.model import capture as modern_forwards
from lstmviz.torch.modern.model import last_steps, run
from lstmviz.torch.modern.outcome import checked, first_tensor, outcome_arrays
from lstmviz.torch.probed import PER_DIRECTION, call_gradients
from lstmviz.torch.runs import reads_earlier, runs

# name -> (loss, per-sample loss with reduction="none" reduced to [B])
LOSSES: dict[str, Callable] = dict(zip(PYTORCH_LOSSES[1:], (
    F.mse_loss, F.l1_loss, F.cross_entropy, F.nll_loss, F.binary_cross_entropy_with_logits,
    F.binary_cross_entropy), strict=True))  # fmt: skip


def model_gradients(module: nn.Module, x, y=None, loss_fn=None, anchors=None) -> GradientTrace:
    """The gradient flow of `module` under its loss on x (and y): a GradientTrace with the
    model-mode keys. `x` a tensor (or NumPy array) the module takes, or a tuple of its
    arguments; `loss_fn` a callable (y_pred, y) -> scalar tensor, or a name: mse, l1,
    cross_entropy, nll, bce_with_logits, bce (mean reduction), or "mean" (the mean of the
    output; the default when y is None). The module is left as it was. `anchors`, where the
    loss enters at every step: the steps of the output whose error alone is followed back
    (docs/diagnosis.md) — a list of steps or "every:K"; None: the last (the first for
    backward directions)."""
    return Tracer(module, loss_fn, y is not None, anchors).trace(x, y)


class Tracer:
    """model_gradients for one module and loss, called again with new data or weights (the
    recorder's: TensorFlow's compiled graphs are kept between calls)."""

    def __init__(self, module: nn.Module, loss_fn=None, has_targets: bool = True, anchors=None):
        if not isinstance(module, nn.Module):
            raise LstmvizError(f"{WHERE}: expects a torch.nn.Module, got {type(module).__name__}")
        self.module = module
        checked(anchor_steps, anchors, None)  # its form, before any run
        self.anchors = anchors
        self.loss, self.loss_name = _loss(loss_fn, has_targets)

    def trace(self, x, y=None, source: str = "") -> GradientTrace:
        start = time.perf_counter()
        args = _arguments(self.module, x)
        y = _tensor(y, self.module) if y is not None else None
        if modern.alone(self.module, bool(recurrent_modules(self.module))):  # minGRU, Mamba…
            return modern.trace(self.module, args, y, self.loss, self.loss_name, self.anchors,
                                source, summary(self.module), start)  # fmt: skip
        has_modern = bool(modern.found(self.module)[0])  # modern layers too: `_with_modern`
        several = sum(torch.is_tensor(a) for a in args) > 1  # each input's own keys
        # the modern layers on their traced forwards here too: the same numbers, and a scan's
        # backward the linear recurrence's own, cheaper than their packages' (nothing kept)
        forwards = (modern_forwards(self.module) if has_modern
                    else contextlib.nullcontext(([], None)))  # fmt: skip
        with capture(self.module) as calls, forwards as (pieces, _):
            try:
                with Provenance(args) if several else contextlib.nullcontext():
                    output = self.module(*args)
            finally:
                unmark(args)
            if not calls:
                raise LstmvizError(f"{WHERE}: the forward ran none of the module's recurrent "
                                   "layers")  # fmt: skip
            y_pred = first_tensor(output)
            value, per_sample = self.loss(output, y, y_pred)
            found = chains(calls)
            feeds = first_feeds(calls, found, len(args)) if several else {}
            feeds = feeds if len(feeds) > 1 else {}
            # whether each call's input comes from an earlier call's outputs: every pass's
            reads = [reads_earlier(calls, n) for n in range(len(calls))]
            results, grads = _backward(calls, found, value, reads, feeds=tuple(sorted(
                {0, *feeds.values()})))  # fmt: skip
            arrays = _arrays(calls, found, results, grads[0])
            other = last_steps(pieces)  # a modern side's last direction: its steps, or None
            arrays |= _anchored(calls, found, reads, value, y_pred, arrays, self.anchors, other)
            if feeds:
                _several_inputs(arrays, args, feeds, found, calls, grads,
                                input_names(self.module, len(args)))  # fmt: skip
        both = bool(pieces)  # modern calls ran (layers the forward did not call: nothing to join)
        steps = len(arrays["norm_h_total_by_layer"][0])
        model_x = None if feeds else _model_x(args[0], calls[0], len(grads[0]))
        if model_x is not None and (len(model_x) == steps or both):  # (both: `merged` checks)
            arrays["x"] = model_x
        first = calls[0]
        batch, input_dim, hidden = first.layout.batch, int(first.x.shape[2]), first.hidden
        if both:
            arrays, shape = _with_modern(arrays, found, self.module, args, y, self.loss,
                                         self.anchors)  # fmt: skip
            steps, (batch, input_dim, hidden) = arrays["norm_h_total_by_layer"].shape[1], (
                shape or (batch, input_dim, hidden))  # fmt: skip
        arrays |= outcome_arrays(value, per_sample, y_pred, y, self.module, summary(self.module),
                                 source)  # fmt: skip
        arrays["model_seconds"] = np.float32(time.perf_counter() - start)
        config = RunConfig(mode="model", steps=steps, batch=batch, input_dim=input_dim,
                           hidden=hidden, loss=self.loss_name, model=None,
                           anchors=checked(anchors_text, self.anchors))  # fmt: skip
        return GradientTrace("model", config, arrays)


def _with_modern(arrays: dict, found: list[Chain], module: nn.Module, args: tuple, y, loss,
                 anchors) -> tuple[dict, tuple[int, int, int] | None]:  # fmt: skip
    """A module of classic and modern layers: the classic directions' `arrays` joined with the
    modern layers' (`modern.model.run`: a second forward and backward, the classic layers run
    as plain PyTorch there, as the modern ones did here) in the order the forward first calls
    them (`modern.mixed`); and (batch, input dim, hidden) of the first direction when it is a
    modern one, else None."""
    last = arrays["norm_h_total_by_layer"][-1]  # the classic side's last direction: its steps
    done = run(module, args, y, loss, anchors, int(np.isfinite(last).sum()) or len(last))
    ordered = mixed.order([chain.calls[0] for chain in found], done.firsts, done.before)
    arrays = mixed.merged(arrays, done.arrays, ordered)
    if ordered[0][0] == "classic":
        return arrays, None
    return arrays, (done.first.batch, int(done.first.source.shape[-1]),
                    int(arrays["layer0_h"].shape[-1]))  # fmt: skip


def _backward(
    calls: list[Call], found: list[Chain], value: torch.Tensor, reads: list[bool],
    cotangent=None, feeds: tuple[int, ...] = (0,), weights: bool = True,
) -> tuple[list, dict[int, np.ndarray]]:
    """Every call's directions (per call, one dict per row, as `probed.call_gradients` gives
    them) and, for each direction k in `feeds`, dL/d its input [T_k, B, I] (its calls' inputs
    in call order), from the loss `value` (or from the tensor `value` with the gradient
    `cotangent`).
    Calls run from the last to the first: each one's dL/d input
    and dL/d(initial state) go back through PyTorch into the outputs of the calls before it,
    except a chain's hand-over, which is the earlier call's state cotangent (`d_chain`). A run
    of calls (`runs`) has one backward, at its last call. A call's dL/d input is computed where
    it is asked for (`feeds`) or goes on into an earlier call (`reads[n]`: `reads_earlier`)."""
    targets = [t for call in calls for t in call.outputs]
    spans, at = [], 0
    for call in calls:
        spans.append((at, at + len(call.outputs)))
        at += len(call.outputs)
    fed = dict.fromkeys(n for k in feeds for n in found[k].calls)
    firsts = [n for n in fed if calls[n].source.requires_grad]
    first_at = {n: len(targets) + i for i, n in enumerate(firsts)}
    wanted = targets + [calls[n].source for n in firsts]
    # None: the loss does not reach it (zero)
    grads = list(torch.autograd.grad(value, wanted, cotangent, allow_unused=True,
                                     retain_graph=True))  # fmt: skip
    chained: list[list[torch.Tensor] | None] = [None] * len(calls)
    results: list = [None] * len(calls)
    dxs: dict[int, np.ndarray] = {}
    joined = runs(calls, grads, spans)
    inside = {m for run in joined.values() for m in run[:-1]}
    wants_dx = [n in fed or read for n, read in enumerate(reads)]
    for n in range(len(calls) - 1, -1, -1):
        if n in inside:  # its run's backward ran at the run's last call
            continue
        run = joined.get(n, [n])
        if len(run) > 1:
            given = [grads[slice(*spans[m])] for m in run]
            rows, dx_run, dh0, dc0 = fused.backward_run(
                [calls[m] for m in run], given, chained[n], weights,
                any(wants_dx[m] for m in run))  # fmt: skip
        else:
            one, dx, dh0, dc0 = _call_gradients(calls[n], grads[slice(*spans[n])], chained[n],
                                                weights, wants_dx[n])  # fmt: skip
            rows, dx_run = [one], [dx]
        outputs, cotangents = [], []
        for m, one, dx in zip(run, rows, dx_run, strict=True):
            results[m] = one
            if dx is None:
                continue
            dxs[m] = _numpy(dx)
            if calls[m].source.requires_grad:
                outputs.append(calls[m].source)
                cotangents.append(calls[m].layout.from_time(dx.to(calls[m].source.dtype)))
        head = calls[run[0]]
        states = [dh0] + ([] if dc0 is None else [dc0])
        if head.chained_from is not None:  # the recurrence goes on into the earlier call
            m = head.chained_from
            chained[m] = states if chained[m] is None else [
                a + b for a, b in zip(chained[m], states, strict=True)]  # fmt: skip
        else:
            for tensor, d in zip(head.hx, states, strict=False):
                if tensor.requires_grad:
                    outputs.append(tensor)
                    cotangents.append((d[0] if head.cell else d).to(tensor.dtype))
        members = set(run)
        below = [i for m in range(n) if m not in members for i in range(*spans[m])]
        below += [first_at[m] for m in firsts if m < n and m not in members]
        if not outputs or not below:
            continue
        more = torch.autograd.grad(outputs, [wanted[i] for i in below], cotangents,
                                   allow_unused=True, retain_graph=True)  # fmt: skip
        for i, g in zip(below, more, strict=True):
            if g is not None:
                grads[i] = g if grads[i] is None else grads[i] + g
    inputs = {}
    for n in fed:
        extra = grads[first_at[n]] if n in first_at else None
        extra = 0 if extra is None else _numpy(calls[n].layout.to_time(extra))
        inputs[n] = dxs[n] + extra
    return results, {k: np.concatenate([inputs[n] for n in dict.fromkeys(found[k].calls)], 0)
                     for k in feeds}  # fmt: skip


def _several_inputs(arrays: dict, args: tuple, feeds: dict[int, int], found: list[Chain],
                    calls: list[Call], grads: dict, names: list[str]) -> None:  # fmt: skip
    """A module of several inputs: per input that reaches a recurrent layer `x_{name}`,
    `grad_input_{name}` [T_k, B, I] (of the first direction k it feeds) and `saliency_{name}`
    [B, T_k], in place of `grad_input` and `saliency` (as a Keras graph's trace)."""
    del arrays["grad_input"], arrays["saliency"]
    for i, k in sorted(feeds.items()):
        grad = grads[k].astype(np.float32, copy=False)
        first = calls[found[k].calls[0]]
        arrays[f"x_{names[i]}"] = time_major(args[i], first, len(grad))
        arrays[f"grad_input_{names[i]}"] = grad
        wide = np.sqrt(np.square(grad.astype(np.float64)).sum(-1))  # [T_k, B]
        arrays[f"saliency_{names[i]}"] = wide.T.astype(np.float32)


def _anchored(calls: list[Call], found: list[Chain], reads: list[bool], value: torch.Tensor,
              y_pred: torch.Tensor, arrays: dict, anchors=None, other=None) -> dict:  # fmt: skip
    """The error of one step followed back, as `engine.modes.model.anchored_norms` gives it
    (`anchors_by_layer` [L, A], `anchor_norm_h_by_layer`, `anchor_norm_c_by_layer` [L, A, T]):
    the totals when the output has no time axis of the last direction's length (a loss on one
    step), else one more backward per anchor of the output with the loss's gradient kept at
    that step alone: `anchors` (a list or "every:K", the same steps for every direction), or
    by default one, the last step for forward directions and the first for backward ones. In a
    module with modern layers too, a batch-first output of the steps of their last direction
    (`other`) has a time axis as well: both sides follow the same output steps."""
    rows_h, rows_c = arrays["norm_h_total_by_layer"], arrays["norm_c_total_by_layer"]
    lengths = [int(np.isfinite(row).sum()) or len(row) for row in rows_h]
    firsts = [chain.name.rsplit("/", 1)[-1] == "backward" for chain in found]
    default = np.array([[0 if first else n - 1] for first, n in zip(firsts, lengths,
                                                                   strict=True)])  # fmt: skip
    out = {"anchors_by_layer": default}
    axis = _time_axis(y_pred, calls[-1], lengths[-1])
    if axis is None and other is not None and y_pred.dim() >= 3 and y_pred.requires_grad and (
            tuple(y_pred.shape[:2]) == (calls[-1].layout.batch, other)):  # fmt: skip
        axis = 1
    if axis is None:
        return out | {"anchor_norm_h_by_layer": rows_h[:, None],
                      "anchor_norm_c_by_layer": rows_c[:, None]}  # fmt: skip
    d_output = torch.autograd.grad(value, y_pred, retain_graph=True)[0]
    size, steps = y_pred.shape[axis], rows_h.shape[1]
    given = checked(anchor_steps, anchors, size)
    # (the output step a pass keeps, the directions it answers): a given step for all, else one
    # pass per kind of direction, at its own end
    passes = [(t, range(len(found))) for t in given or ()] or [
        (0 if first else size - 1, [k for k, f in enumerate(firsts) if f == first])
        for first in sorted(set(firsts))]  # fmt: skip
    rows: dict[str, list[list]] = {"h": [[] for _ in found], "c": [[] for _ in found]}
    for step, ks in passes:
        keep = torch.zeros_like(d_output)
        keep.select(axis, step).fill_(1)
        results, _ = _backward(calls, found, y_pred, reads, d_output * keep, (), weights=False)
        for k in ks:
            one = join(found[k], calls, results)
            exact = all(calls[n].saved is not None for n in found[k].calls)
            for state in rows:
                rows[state][k].append(_norm_row(one, f"norm_{state}_total",
                                                f"grad_{state}_total", exact, steps))  # fmt: skip
    if given:
        out["anchors_by_layer"] = np.tile(np.array(given, np.int64), (len(found), 1))
    return out | {f"anchor_norm_{state}_by_layer": np.array(found_rows, np.float32)
                  for state, found_rows in rows.items()}  # fmt: skip


def _time_axis(y_pred: torch.Tensor, last: Call, steps: int) -> int | None:
    """The axis of the output that is the last direction's time (of `steps`): the module's
    batch_first says which of 0 and 1 to try first; None when neither is (one output a
    sequence)."""
    if y_pred.dim() < 3 or not y_pred.requires_grad:
        return None
    for axis in (1, 0) if last.layout.batch_first else (0, 1):
        if y_pred.shape[axis] == steps and y_pred.shape[1 - axis] == last.layout.batch:
            return axis
    return None


def _call_gradients(call: Call, given: list, chain: list | None, weights: bool = True,
                    dx: bool = True):  # fmt: skip
    """(the call's directions, dL/dx [T, B, I], dL/dh_0 (, dL/dc_0) [L·D, B, H] or None) from
    the gradients PyTorch left at its outputs (None: zero) and the chain's ([dL/dh_0, dL/dc_0]
    of the call continuing its state, or None): by its native backward ops when it ran on
    them (dL/dx None unless `dx`), else by `probed.call_gradients`; the three gradients as
    tensors on the call's device."""
    if call.saved is not None:
        return fused.backward(call, given, chain, weights, dx)
    given = [torch.zeros_like(t) if g is None else g
             for t, g in zip(call.outputs, given, strict=True)]  # fmt: skip
    arrays = [_numpy(g) for g in given]
    if call.cell:  # a cell's outputs are its states
        d_out = np.zeros([1, *arrays[0].shape], arrays[0].dtype)
        d_states = [g[None] for g in arrays]
    else:
        d_out, d_states = _numpy(call.layout.to_time(given[0])), arrays[1:]
    chain = None if chain is None else [_numpy(c) for c in chain]
    directions, dx, dh0, dc0 = call_gradients(call, d_out, d_states, chain)
    device = call.source.device
    return directions, *(None if a is None else torch.tensor(a, device=device)
                         for a in (dx, dh0, dc0))  # fmt: skip


def _arrays(calls: list[Call], found: list[Chain], results: list, grad_input: np.ndarray) -> dict:
    """The model-mode arrays of the directions (norms redone where float32 lost them); the
    [L, T] summaries take T = the longest direction's steps, NaN after each one's end."""
    directions = [join(chain, calls, results) for chain in found]
    lengths = [len(one["h"]) for one in directions]
    steps = max(lengths)
    arrays: dict[str, np.ndarray] = {}
    norms: dict[str, list] = {norm: [] for norm in NORMS.values()}
    bad = np.zeros(steps, bool)
    # the native backward ops' norms are exact (`kernels.exact_norms`)
    exact = [all(calls[n].saved is not None for n in chain.calls) for chain in found]
    for k, (chain, one) in enumerate(zip(found, directions, strict=True)):
        for grad, norm in NORMS.items():  # a cell without c: a NaN row of norm_c_total
            row = _norm_row(one, norm, grad, exact[k], steps)
            bad[: lengths[k]] |= ~np.isfinite(row[: lengths[k]]) if norm in one else False
            norms[norm].append(row)
        for key in PER_DIRECTION:
            if key in one and key not in norms:
                arrays[f"layer{k}_{key}"] = one[key].astype(np.float32, copy=False)
        arrays[f"layer{k}_cell"] = np.array(chain.kind)
        arrays[f"layer{k}_gate_names"] = np.array(CELL_GATES[chain.kind])
        arrays[f"layer{k}_calls"] = np.int64(len(chain.pieces))
        arrays[f"layer{k}_initial_from"] = np.int64(chain.initial_from)
    for key, rows in norms.items():
        arrays[f"{key}_by_layer"] = np.stack(rows)
    arrays["layer_names"] = np.array([chain.name for chain in found])
    first = len(grad_input)
    if first < steps:  # the first direction is shorter than the longest: NaN after its end
        grad_input = np.concatenate([grad_input, np.full([steps - first, *grad_input.shape[1:]],
                                                         np.nan, grad_input.dtype)])  # fmt: skip
    arrays["grad_input"] = grad_input.astype(np.float32, copy=False)
    # [B, T], in float64: float32 squares of a vanishing gradient (< 1e-19) flush to 0
    wide = np.sqrt(np.square(grad_input.astype(np.float64)).sum(-1))
    arrays["saliency"] = wide.T.astype(np.float32)
    masks = [_mask(calls[n]) for n in dict.fromkeys(found[0].calls)]
    if any(m is not None for m in masks):
        mask = np.concatenate([np.ones([calls[n].layout.steps, calls[n].layout.batch], bool)
                               if m is None else m for n, m in
                               zip(dict.fromkeys(found[0].calls), masks, strict=True)])  # fmt: skip
        arrays["mask"] = np.concatenate([mask, np.zeros([steps - first, mask.shape[1]], bool)])
    arrays["lstm_kernel"] = np.array(kernel_name())
    arrays["nonfinite_steps"] = np.flatnonzero(bad)
    return arrays


def _norm_row(one: dict, norm: str, grad: str, exact: bool, steps: int) -> np.ndarray:
    """[steps] the per-step norm `norm` of a joined direction (`exact_norm` redoes what float32
    lost unless the native ops summed it exactly), NaN after its end or where it has none."""
    row = np.full(steps, np.nan, np.float32)
    if one.get(norm) is not None:
        row[: len(one[norm])] = exact_norm(one[norm].astype(np.float32), one[grad], exact=exact)
    return row


def _mask(call: Call) -> np.ndarray | None:
    lengths = call.layout.lengths()
    if lengths is None:
        return None
    return np.arange(call.layout.steps)[:, None] < lengths[None, :]


def _loss(loss_fn, has_targets: bool):
    """(loss(output, y, y_pred) -> (value, per-sample [B] or None), its name)."""
    if loss_fn is None and has_targets:
        raise LstmvizError(f"{WHERE}: give loss_fn: a callable (y_pred, y) -> loss, or a name "
                           f"({', '.join(LOSSES)})")  # fmt: skip
    if loss_fn is None or loss_fn == "mean":
        return (lambda output, y, y_pred: (y_pred.mean(), None)), "mean"
    if isinstance(loss_fn, str):
        if loss_fn not in LOSSES:
            raise LstmvizError(f"{WHERE}: unknown loss {loss_fn!r}; give a callable (y_pred, y) "
                               f"-> loss, or one of {', '.join(PYTORCH_LOSSES)}")  # fmt: skip
        named = LOSSES[loss_fn]

        def by_name(output, y, y_pred):
            if y is None:
                raise InputError(f"{WHERE}: the loss {loss_fn} needs targets y")
            if loss_fn in ("cross_entropy", "nll") and y.is_floating_point() is False:
                y = y.long()
            elif y.dtype != y_pred.dtype and y.is_floating_point() is False:
                y = y.to(y_pred.dtype)
            each = named(y_pred, y, reduction="none")
            per_sample = each.reshape(len(each), -1).mean(1) if each.dim() else None
            return each.mean(), per_sample

        return by_name, loss_fn
    if not callable(loss_fn):
        raise LstmvizError(f"{WHERE}: loss_fn must be a callable or a loss name")

    def given(output, y, y_pred):
        value = loss_fn(output, y)
        if not torch.is_tensor(value) or value.numel() != 1:
            raise LstmvizError(f"{WHERE}: loss_fn must return a scalar tensor")
        return value.reshape(()), None

    name = getattr(loss_fn, "__name__", type(loss_fn).__name__)
    return given, name if name.replace("_", "").isalnum() else "custom_loss"  # not "<lambda>"


def _tensor(value, module: nn.Module) -> torch.Tensor:
    """`value` as a tensor: NumPy floats in the module's dtype, integers as int64."""
    if torch.is_tensor(value):
        return value
    array = np.asarray(value)
    if array.dtype.kind == "f":
        dtype = next((p.dtype for p in module.parameters()), torch.float32)
        return torch.as_tensor(array, dtype=dtype)
    if array.dtype.kind in "iu":
        return torch.as_tensor(array.astype(np.int64))
    return torch.as_tensor(array)


def _arguments(module: nn.Module, x) -> tuple:
    if isinstance(x, tuple | list):
        return tuple(_tensor(a, module) if isinstance(a, np.ndarray) else a for a in x)
    return (x if not isinstance(x, np.ndarray) else _tensor(x, module),)


def _numpy(value: torch.Tensor) -> np.ndarray:
    return value.detach().cpu().numpy()


def _model_x(x, first: Call, steps: int) -> np.ndarray | None:
    """The model's input x time-major ([T, B] or [T, B, I]) when it is a tensor of the first
    direction's T (`steps`) and B (batch-major when its module is batch_first), else None."""
    if not torch.is_tensor(x) or x.dim() not in (2, 3):
        return None
    batch = first.layout.batch
    if first.layout.batch_first and tuple(x.shape[:2]) == (batch, steps):
        return np.ascontiguousarray(_numpy(x.transpose(0, 1)))
    if tuple(x.shape[:2]) == (steps, batch):
        return _numpy(x)
    if tuple(x.shape[:2]) == (batch, steps):
        return np.ascontiguousarray(_numpy(x.transpose(0, 1)))
    return None


def summary(module: nn.Module) -> str:
    """A table of the module's children (name, class, parameters) and the total."""
    rows = [("Layer", "Class", "Params")]
    children = module.named_children()
    if hasattr(module, "recurrent_names"):  # a program: its recurrent modules by name
        children = [(name, child) for child, name in module.recurrent_names.items()]
    for name, child in children:
        rows.append((name, _class_text(child), f"{sum(p.numel() for p in child.parameters()):,}"))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    program = hasattr(module, "recurrent_names")
    lines = ["PyTorch program: its recurrent modules" if program else
             f"PyTorch module {type(module).__name__}"]  # fmt: skip
    for n, row in enumerate(rows):
        lines.append("  ".join([row[0].ljust(widths[0]), row[1].ljust(widths[1]),
                                row[2].rjust(widths[2])]).rstrip())  # fmt: skip
        if n == 0:
            lines.append("-" * len(lines[-1]))
    if not program:  # a program's weights are its graph's too
        lines.append(f"Total params: {sum(p.numel() for p in module.parameters()):,}")
    lines += modern.notes(module)  # modern layers left out
    return "\n".join(lines)


def _class_text(child: nn.Module) -> str:
    if isinstance(child, nn.LSTMCell | nn.GRUCell | nn.RNNCell):
        return f"{type(child).__name__}({child.hidden_size})"
    if isinstance(child, nn.LSTM | nn.GRU | nn.RNN):
        extra = [f"layers={child.num_layers}"] * (child.num_layers > 1)
        extra += ["bidirectional"] * child.bidirectional
        return f"{type(child).__name__}({child.hidden_size}{''.join(', ' + e for e in extra)})"
    return type(child).__name__
