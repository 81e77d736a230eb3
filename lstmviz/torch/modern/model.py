"""Model mode for a module whose recurrent layers are modern ones (`layers.KNOWN`).

One forward with every such layer's forward traced (`capture`: eval mode, each call's `Piece`),
the loss, one `torch.autograd.grad` of it with respect to every call's tapped state, the first
layer's input and the traced layers' parameters: the direct ∂L/∂h_t of each call, the saliency
and the weight gradients (PyTorch's backward; through a scan, the linear recurrence's own:
`scan.LinearScan`). The totals follow from the direct gradients by the reverse scan
(`scan.reverse_scan`; a scan's backward keeps the one it ran, `piece.Sink`). Where the
output has a time axis, the error of its last step (or the given anchors) is followed back
with one more autograd pass to the taps (docs/diagnosis.md), as `lstmviz.torch.tracer`
does for LSTMs.

Keys are model mode's (docs/modern-recurrence.md): per direction k `layer{k}_h`,
`layer{k}_grad_h_total`, `layer{k}_grad_h_direct` [T, B, S] (the state's channels flattened,
or, for a state of more than `piece.MAX_CHANNELS` channels a step, per D channel the norm over
N; a complex state as its modulus), `layer{k}_state_names`, `layer{k}_timescale` [S],
`layer{k}_cell`, the decay's gates (`layer{k}_gate_names`, `_gates_mean`, `_gates_saturated`
[G, T], `_gates_saturated_diagnosis` [G]), `layer{k}_grad_weight_{parameter}` (a complex
parameter's as [..., 2], real and imaginary parts); the [L, T] norm rows the diagnosis reads.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from lstmviz.core.config import RunConfig, anchor_steps, anchors_text
from lstmviz.core.errors import LstmvizError, ModelError
from lstmviz.io.trace import GradientTrace
from lstmviz.torch.modern import layers, mingru, scan, ssm, xlstm
from lstmviz.torch.modern.mixed import classic_calls
from lstmviz.torch.modern.outcome import WHERE, checked, first_tensor, outcome_arrays
from lstmviz.torch.modern.piece import Piece


@contextlib.contextmanager
def capture(module: nn.Module) -> Iterator[tuple[list[Piece], list]]:
    """Within: `module` in eval mode with its modern layers' forwards traced, their Pieces
    recorded into the list yielded (in call order) with the pass names their scans'
    backwards read (`piece.Sink`: set [0] to name the autograd pass about to run); a modern
    layer lstmviz does not trace runs its own forward, and where that fails (a CUDA kernel on
    the CPU) the error is one line naming the layer and why it is not traced. After: every
    training flag, forward and PyTorch's CPU random state as before."""
    traced, skipped = layers.found(module)
    flags = {sub: sub.training for sub in module.modules()}
    rng = torch.get_rng_state()
    pieces: list[Piece] = []
    passes: list = [None]

    def record(piece: Piece) -> int:
        pieces.append(piece)
        return len(pieces) - 1

    def continued(tensor):
        n = getattr(tensor, "lstmviz_piece", None)
        if n is None or n >= len(pieces) or pieces[n].final is None:
            return None
        return n, pieces[n].final

    patched = []

    def patch(sub: nn.Module, attr: str, traced_fn) -> None:
        patched.append((sub, attr, sub.__dict__.get(attr)))
        setattr(sub, attr, traced_fn)

    try:
        module.eval()
        for name, sub, kind in traced:
            if kind in ("mingru", "minlstm"):
                patch(sub, "forward", mingru.forward(sub, name, kind, record, continued, passes))
            elif kind == "mamba":
                patch(sub, "forward", ssm.mamba_forward(sub, name, record, passes))
            elif kind == "slstm":  # the cell's recurrence, under its layer's own forward
                patch(sub, "_impl", xlstm.impl(sub, name, record))
            elif kind == "mlstm":  # the cell's parallel form, under its layer's own forward
                patch(sub, "backend_fn", xlstm.mlstm_backend(sub, name, record))
            else:
                patch(sub, "forward", ssm.lru_forward(sub, name, record))
        for name, sub, why in skipped:
            patch(sub, "forward", _untraced(sub, name, why))
        yield pieces, passes
    finally:
        for sub, attr, own in patched:
            if own is None:
                sub.__dict__.pop(attr, None)
            else:
                setattr(sub, attr, own)
        for sub, flag in flags.items():
            sub.training = flag
        torch.set_rng_state(rng)


def _untraced(sub: nn.Module, name: str, why: str):
    own = type(sub).forward.__get__(sub)

    def forward(*args, **kwargs):
        try:
            return own(*args, **kwargs)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"{WHERE}: {name} is not traced ({why}), and its forward failed: "
                             f"{first}") from None  # fmt: skip

    return forward


def trace(module: nn.Module, args: tuple, y, loss: Callable, loss_name: str, anchors,
          source: str, summary: str, start: float) -> GradientTrace:  # fmt: skip
    """The GradientTrace of `module` on `args` (its arguments) and `y` under `loss` (output,
    y, y_pred) -> (value, per-sample [B] or None); `summary` the module's table."""
    done = run(module, args, y, loss, anchors)
    arrays, first = done.arrays, done.first
    steps = arrays["norm_h_total_by_layer"].shape[1]
    arrays |= outcome_arrays(done.value, done.per_sample, done.y_pred, y, module, summary, source)
    if "x" in arrays and len(arrays["x"]) != steps:
        del arrays["x"]
    arrays["lstm_kernel"] = np.array("pytorch")
    arrays["model_seconds"] = np.float32(time.perf_counter() - start)
    config = RunConfig(mode="model", steps=steps, batch=first.batch,
                       input_dim=int(first.source.shape[-1]),
                       hidden=int(arrays["layer0_h"].shape[-1]), loss=loss_name, model=None,
                       anchors=checked(anchors_text, anchors))  # fmt: skip
    return GradientTrace("model", config, arrays)


class Run(NamedTuple):
    """One traced forward and its backward (`run`): `arrays` the directions' (`layer{k}_…`,
    the [L, T] rows, `layer_names`, `nonfinite_steps`, the anchored rows, `grad_input`
    [T, B, E], `saliency` [B, T], `x` [T, B(, I)] when the input is a batch-first tensor of
    the first direction's B and T); the loss `value`, `per_sample` [B] or None, `y_pred`;
    `first` the first call; `firsts` each direction's first call (an index into the calls);
    `before` per call of a classic layer or cell, how many modern calls ran before it."""

    arrays: dict
    value: torch.Tensor
    per_sample: torch.Tensor | None
    y_pred: torch.Tensor
    first: Piece
    firsts: list[int]
    before: list[int]


def run(module: nn.Module, args: tuple, y, loss: Callable, anchors, other: int | None = None
        ) -> Run:  # fmt: skip
    """The modern layers of `module` traced on `args` and `y` under `loss`; classic layers the
    module holds run as plain PyTorch (autograd carries the gradient through them), `other`
    the steps of their last direction (the output may follow those: `_anchored`)."""
    traced, skipped = layers.found(module)
    if not traced:
        raise ModelError(f"{WHERE}: nothing lstmviz traces: "
                         + "; ".join(f"{name} ({why})" for name, _, why in skipped))  # fmt: skip
    with capture(module) as (pieces, passes), classic_calls(module, pieces) as before:
        output = module(*args)
        if not pieces:
            raise LstmvizError(f"{WHERE}: the forward ran none of the module's recurrent layers")
        y_pred = first_tensor(output)
        value, per_sample = loss(output, y, y_pred)
        params = list(dict.fromkeys(p for _, sub, _ in traced for p in sub.parameters()
                                    if p.requires_grad))  # fmt: skip
        stepped = [t for p in pieces for t in p.steps_states or ()]
        wanted = [p.tap for p in pieces] + [pieces[0].source] + params + stepped
        passes[0] = "loss"
        grads = torch.autograd.grad(value, wanted, allow_unused=True, retain_graph=True)
        passes[0] = None
        direct = list(grads[: len(pieces)])
        found = chains(pieces)
        arrays = _directions(pieces, found, direct,
                             _stepped(pieces, grads[len(wanted) - len(stepped):]))  # fmt: skip
        weights = grads[len(pieces) + 1 : len(pieces) + 1 + len(params)]
        arrays |= _weights(found, pieces, dict(zip(params, weights, strict=True)))
        arrays |= _input(grads[len(pieces)], pieces[0])
        arrays |= _anchored(pieces, found, value, y_pred, arrays, anchors, passes, other)
    model_x = _model_x(args[0], pieces[0].steps, pieces[0].batch)
    if model_x is not None:
        arrays["x"] = model_x
    return Run(arrays, value, per_sample, y_pred, pieces[0],
               [members[0] for _, members in found], before)  # fmt: skip


def last_steps(pieces: list[Piece]) -> int | None:
    """The steps of the last direction (by its first call) of these calls; None: no call."""
    return sum(pieces[n].steps for n in chains(pieces)[-1][1]) if pieces else None


def chains(pieces: list[Piece]) -> list[tuple[str, list[int]]]:
    """The directions: (name, the pieces that make it in call order); a piece continuing an
    earlier one's state joins its direction; a layer making several directions numbers them
    `#0`, `#1`, …"""
    found: list[tuple[str, list[int]]] = []
    where: dict[int, int] = {}
    for n, piece in enumerate(pieces):
        if piece.chained_from is not None and piece.chained_from in where:
            k = where[piece.chained_from]
            found[k][1].append(n)
        else:
            k = len(found)
            found.append((piece.name, [n]))
        where[n] = k
    counts, seen = Counter(name for name, _ in found), Counter()
    named = []
    for name, members in found:
        if counts[name] > 1:
            name, seen[name] = f"{name}#{seen[name]}", seen[name] + 1
        named.append((name, members))
    return named


def _joined(members: list[int], value: Callable) -> torch.Tensor:
    """[B, T, *C] the pieces' `value(n)` [B, T, *C] (n: a piece's index) joined along time in
    call order (no copy for a direction of one call)."""
    if len(members) == 1:
        return value(members[0])
    return torch.cat([value(n) for n in members], dim=1)


def _decay(piece: Piece) -> torch.Tensor:
    """[B, T, *C] the piece's decay (LRU's λ [C] repeated over batch and steps)."""
    return piece.decay.expand_as(piece.tap) if piece.decay.dim() < piece.tap.dim() else piece.decay


def _stepped(pieces: list[Piece], grads) -> dict[int, torch.Tensor]:
    """{piece: totals [B, T, 4, H]} of the nonlinear recurrences (sLSTM) from the gradients
    of their every step's state (None: zero), in the order `Piece.steps_states` lists them."""
    out, at = {}, 0
    for n, piece in enumerate(pieces):
        if piece.steps_states is None:
            continue
        found = grads[at : at + len(piece.steps_states)]
        at += len(piece.steps_states)
        totals = xlstm.batch_major(torch.stack([torch.zeros_like(s) if g is None else g
                                                for s, g in zip(piece.steps_states, found,
                                                                strict=True)], 1))  # fmt: skip
        out[n] = xlstm.through_h(totals, xlstm.batch_major(piece.tap.detach()),
                                 piece.gates["o"])  # fmt: skip
    return out


def _batch_major(piece: Piece, value: torch.Tensor) -> torch.Tensor:
    """A tensor of the tap's shape as [B, T, *C] (sLSTM's [4, T, B, H] as [B, T, 4, H])."""
    return xlstm.batch_major(value) if piece.steps_states is not None else value


def _totals(pieces: list[Piece], members: list[int], direct: list, name: str,
            stepped: dict) -> tuple:  # fmt: skip
    """(direct, total) [B, T, *C] of one direction from its pieces' direct gradients (None:
    the loss does not reach that piece: zero); a nonlinear recurrence's totals from `stepped`
    (`_stepped`); the totals the scans' backwards left for the autograd pass `name` where every
    piece has them (they include what flows back from the later calls of a chain), else by
    `scan.reverse_scan`."""
    d = _joined(members, lambda n: _batch_major(pieces[n], torch.zeros_like(pieces[n].tap)
                                                if direct[n] is None else direct[n]))  # fmt: skip
    if pieces[members[0]].steps_states is not None:
        return d, _joined(members, lambda n: stepped[n])
    sinks = [pieces[n].sink for n in members]
    if all(sink is not None and name in sink.found for sink in sinks):
        return d, _joined(members, lambda n: pieces[n].sink.found.pop(name)[
            :, -pieces[n].steps:])  # fmt: skip
    if len(members) == 1 and pieces[members[0]].decay.dim() < d.dim():
        decay = pieces[members[0]].decay  # constant: broadcast
    else:
        decay = _joined(members, lambda n: _decay(pieces[n]))
    return d, scan.reverse_scan(d, decay)


def _components(piece: Piece, h, d, g) -> tuple:
    """(h, d, g) of the main state and {state: (value, total or None)} of the others:
    sLSTM's [B, T, 4, H] split into h and c, n, m (the stabiliser m carries no gradient of
    its own: h does not depend on it)."""
    if piece.steps_states is None:
        return h, d, g, {}
    others = {name: (h[:, :, i], g[:, :, i] if name != "m" else None)
              for i, name in enumerate(xlstm.STATES) if i}  # fmt: skip
    return h[:, :, 0], d[:, :, 0], g[:, :, 0], others


def _directions(pieces: list[Piece], found: list, direct: list, stepped: dict) -> dict:
    steps = max(sum(pieces[n].steps for n in members) for _, members in found)
    arrays: dict[str, np.ndarray] = {}
    rows = {"norm_h_total": [], "norm_h_direct": [], "norm_c_total": []}
    for k, (_, members) in enumerate(found):
        first = pieces[members[0]]
        if first.extra is not None:  # mLSTM: C under the h keys, from its recurrent form
            h, d, g, others = xlstm.mlstm_totals(first, direct[members[0]])
        else:
            d, g = _totals(pieces, members, direct, "loss", stepped)
            h = _joined(members, lambda n: _batch_major(pieces[n], pieces[n].tap))
            h, d, g, others = _components(first, h, d, g)
        reduce = first.reduce and first.extra is None  # an mLSTM's C comes reduced
        for key, value in (("h", h), ("grad_h_total", g), ("grad_h_direct", d)):
            channels, norms = scan.kept(value, reduce, norms=key != "h")
            arrays[f"layer{k}_{key}"] = np.ascontiguousarray(_numpy(channels), np.float32)
            if norms is not None:
                rows[f"norm_{key[5:]}"].append(_padded(_numpy(norms), steps))
        c_row = np.full(steps, np.nan, np.float32)
        for state, (value, total) in others.items():
            arrays[f"layer{k}_{state}"] = np.ascontiguousarray(_numpy(
                scan.kept(value, False, norms=False)[0]), np.float32)  # fmt: skip
            if total is not None:
                channels, norms = scan.kept(total, False)
                arrays[f"layer{k}_grad_{state}_total"] = np.ascontiguousarray(
                    _numpy(channels), np.float32)  # fmt: skip
                if state == "c":
                    c_row = _padded(_numpy(norms), steps)
        rows["norm_c_total"].append(c_row)
        arrays[f"layer{k}_cell"] = np.array(first.kind)
        arrays[f"layer{k}_state_names"] = np.array(first.state_names)
        arrays[f"layer{k}_timescale"] = _timescale(pieces, members)
        arrays[f"layer{k}_calls"] = np.int64(len(members))
        arrays[f"layer{k}_initial_from"] = np.int64(-1)
        arrays |= _gates(k, pieces, members)
    for key, found_rows in rows.items():
        arrays[f"{key}_by_layer"] = np.stack(found_rows)
    arrays["layer_names"] = np.array([name for name, _ in found])
    bad = ~np.isfinite(arrays["norm_h_total_by_layer"]) & ~np.isnan(arrays["norm_c_total_by_layer"])
    arrays["nonfinite_steps"] = np.flatnonzero(bad.any(0))
    return arrays


def _padded(row: np.ndarray, steps: int) -> np.ndarray:
    out = np.full(steps, np.nan, np.float32)
    out[: len(row)] = row
    return out


def _timescale(pieces: list[Piece], members: list[int]) -> np.ndarray:
    """[S] steps per e-fold of each channel from its mean log decay over the direction's (b, t)
    (weighted by each call's steps); a state kept per D channel: its slowest mode over N."""
    weights = torch.tensor([float(pieces[n].steps) for n in members], dtype=torch.float64)
    stacked = torch.stack([pieces[n].log_decay.double() for n in members])
    mean = (weights[:, None] * stacked.flatten(1)).sum(0) / weights.sum()
    tau = scan.timescale(mean.reshape(stacked.shape[1:]))
    first = pieces[members[0]]
    if first.extra is not None:  # mLSTM: one per head, for each of its channels
        tau = tau.repeat_interleave(first.extra["C"][0, 0, 0].numel())  # C as it is kept
    elif first.reduce:
        tau = tau.amax(-1)
    return _numpy(tau.flatten()).astype(np.float32)


def _gates(k: int, pieces: list[Piece], members: list[int]) -> dict:
    first = pieces[members[0]]
    means, saturated, diagnosis = [], [], []
    for gate in first.gates:
        value = _joined(members, lambda n, gate=gate: _gate(pieces[n], gate))
        mean, near, loose = scan.gate_rows(value)
        means.append(mean)
        saturated.append(near)
        diagnosis.append(loose)
    return {
        f"layer{k}_gate_names": np.array(list(first.gates)),
        f"layer{k}_gates_mean": _numpy(torch.stack(means)).astype(np.float32),
        f"layer{k}_gates_saturated": _numpy(torch.stack(saturated)).astype(np.float32),
        f"layer{k}_gates_saturated_diagnosis": _numpy(torch.stack(diagnosis)).astype(np.float32),
    }


def _gate(piece: Piece, gate: str) -> torch.Tensor:
    """[B, T, ·] a gate of the piece (LRU's |λ| [C], one for every step, repeated over batch
    and steps)."""
    value = piece.gates[gate]
    return value.expand_as(piece.tap.real) if value.dim() == 1 else value


def _weights(found: list, pieces: list[Piece], grads: dict) -> dict:
    """`layer{k}_grad_weight_{parameter}` of each layer's parameters, on the layer's first
    direction (a layer making several directions: its whole gradient there)."""
    arrays, seen = {}, set()
    for k, (_, members) in enumerate(found):
        module = pieces[members[0]].module
        if id(module) in seen:
            continue
        seen.add(id(module))
        for name, param in module.named_parameters():
            grad = grads.get(param)
            grad = torch.zeros_like(param) if grad is None else grad
            value = torch.view_as_real(grad) if grad.is_complex() else grad
            key = name.replace(".", "_")
            arrays[f"layer{k}_grad_weight_{key}"] = _numpy(value).astype(np.float32, copy=False)
    return arrays


def _input(grad, first: Piece) -> dict:
    """`grad_input` [T, B, E] (dL/d input of the first direction, through it) and `saliency`."""
    grad = torch.zeros_like(first.source) if grad is None else grad
    grad = np.ascontiguousarray(_numpy(grad.transpose(0, 1)))
    wide = np.sqrt(np.square(grad.astype(np.float64)).sum(-1))  # float64: no underflow
    return {"grad_input": grad.astype(np.float32, copy=False),
            "saliency": wide.T.astype(np.float32)}  # fmt: skip


def _anchored(pieces: list[Piece], found: list, value: torch.Tensor, y_pred: torch.Tensor,
              arrays: dict, anchors, passes: list, other: int | None = None) -> dict:  # fmt: skip
    """`anchors_by_layer` [L, A], `anchor_norm_h_by_layer`, `anchor_norm_c_by_layer`
    [L, A, T]: the totals where the output has no time axis of the last direction's length
    (or of `other`, a module's classic layers' last direction), else per anchor step of the
    output (given, or its last) one more autograd pass with the loss's gradient kept at that
    step alone."""
    rows_h, rows_c = arrays["norm_h_total_by_layer"], arrays["norm_c_total_by_layer"]
    lengths = [int(np.isfinite(row).sum()) or len(row) for row in rows_h]
    batch = pieces[-1].batch
    timed = (y_pred.dim() >= 3 and y_pred.requires_grad and y_pred.shape[0] == batch
             and y_pred.shape[1] in (lengths[-1], other))  # fmt: skip
    if not timed:
        checked(anchor_steps, anchors, None)
        return {"anchors_by_layer": np.array([[n - 1] for n in lengths], np.int64),
                "anchor_norm_h_by_layer": rows_h[:, None],
                "anchor_norm_c_by_layer": rows_c[:, None]}  # fmt: skip
    size = y_pred.shape[1]
    given = checked(anchor_steps, anchors, size) or [size - 1]
    d_output = torch.autograd.grad(value, y_pred, retain_graph=True)[0]
    taps = [p.tap for p in pieces]
    stepped = [t for p in pieces for t in p.steps_states or ()]
    found_h = np.full([len(found), len(given), rows_h.shape[1]], np.nan, np.float32)
    found_c = np.full_like(found_h, np.nan)
    for a, step in enumerate(given):
        keep = torch.zeros_like(d_output)
        keep[:, step] = 1
        passes[0] = f"anchor {step}"
        grads = torch.autograd.grad(y_pred, taps + stepped, d_output * keep, allow_unused=True,
                                    retain_graph=True)  # fmt: skip
        passes[0] = None
        direct, totals = list(grads[: len(taps)]), _stepped(pieces, grads[len(taps):])
        for k, (_, members) in enumerate(found):
            if pieces[members[0]].extra is not None:
                found_h[k, a, : pieces[members[0]].steps] = _numpy(xlstm.mlstm_totals(
                    pieces[members[0]], direct[members[0]], norms_only=True))  # fmt: skip
                continue
            _, g = _totals(pieces, members, direct, f"anchor {step}", totals)
            if pieces[members[0]].steps_states is not None:  # sLSTM: h and c
                found_c[k, a, : g.shape[1]] = _numpy(scan.kept(g[:, :, 1], False)[1])
                g = g[:, :, 0]
            found_h[k, a, : g.shape[1]] = _numpy(scan.kept(g, False)[1])
    return {"anchors_by_layer": np.tile(np.array(given, np.int64), (len(found), 1)),
            "anchor_norm_h_by_layer": found_h, "anchor_norm_c_by_layer": found_c}


def _model_x(x, steps: int, batch: int) -> np.ndarray | None:
    """The model's input time-major ([T, B] ids or [T, B, I]) when it is a batch-first tensor
    of the first direction's B and T, else None."""
    if not torch.is_tensor(x) or x.dim() not in (2, 3) or tuple(x.shape[:2]) != (batch, steps):
        return None
    return np.ascontiguousarray(_numpy(x.transpose(0, 1)))


def _numpy(value: torch.Tensor) -> np.ndarray:
    return value.detach().cpu().numpy()
