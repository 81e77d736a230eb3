"""minGRU and minLSTM ("Were RNNs all we needed?", 2024; the `mingru-pytorch` package 0.2.1)
traced: their forward as the package computes it, with the state tapped (`piece.Piece`).

minGRU: z_t = σ(k_t), h̃_t = g(x_t W_h), h_t = (1 − z_t) ⊙ h_{t-1} + z_t ⊙ h̃_t, so
∂h_t/∂h_{t-1} = diag(1 − z_t). minLSTM: f′_t = σ(f_t) / (σ(f_t) + σ(i_t)), i′_t = 1 − f′_t,
h_t = f′_t ⊙ h_{t-1} + i′_t ⊙ h̃_t: the decay is f′_t. The gates depend on x_t alone. The state
h [B, T, D_inner] is what `to_out` reads; `return_next_prev_hidden` hands on its last step.

A call whose `prev_hidden` is the state an earlier call of the same layer handed on continues
that call (the sequential mode stepped per token, or parallel chunks): the recurrence reads the
earlier call's state itself, not what was handed on, so that the direct gradient is only what
reaches h_t from outside the recurrence, and the calls make one direction. The package's
parallel minLSTM starts from g(prev_hidden) (its `log_g`), its sequential mode from
prev_hidden: the decay at such a call's first step includes g′ then.

Imports nothing of the package at import time (its functions are read when a call runs).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from lstmviz.torch.modern.piece import Piece, Sink, alias
from lstmviz.torch.modern.scan import reverse_scan


def forward(module, name: str, kind: str, record: Callable, continued: Callable, passes: list):
    """The traced forward of one minGRU (`kind` "mingru") or minLSTM ("minlstm") module:
    `record(piece)` takes each call's Piece and returns its index; `continued(tensor)` the
    (piece index, state the recurrence goes on from) of a state an earlier call handed on,
    or None; `passes` the trace's pass names (`piece.Sink`)."""
    from minGRU_pytorch.minGRU import g, heinsen_associative_scan_log, log_g

    def traced(x, prev_hidden=None, return_next_prev_hidden=False):
        x = alias(x)
        seq_len = x.shape[1]
        chain = continued(prev_hidden) if prev_hidden is not None else None
        if chain is not None:
            prev_hidden = chain[1]
        if kind == "mingru":
            hidden, gate = module.to_hidden_and_gate(x).chunk(2, dim=-1)
            log_decay = -F.softplus(gate)  # ln(1 − z)
            gates = {"z": torch.sigmoid(gate.detach())}
        else:
            hidden, f_gate, i_gate = module.to_hidden_and_f_i_gate(x).chunk(3, dim=-1)
            diff = F.softplus(-f_gate) - F.softplus(-i_gate)
            log_decay = -F.softplus(diff)  # ln f′
            f_prime = log_decay.detach().exp()
            gates = {"f": f_prime, "i": 1 - f_prime}
        decay = log_decay.detach().exp()
        sink = Sink(passes)
        if seq_len == 1:  # the package's sequential mode
            out = _step(kind, g(hidden), gate if kind == "mingru" else (f_gate, i_gate),
                        prev_hidden)  # fmt: skip
        else:
            log_values = log_g(hidden) - F.softplus(-gate if kind == "mingru" else -diff)
            log_coeffs = log_decay
            if prev_hidden is not None:
                start = prev_hidden.log() if kind == "mingru" else log_g(prev_hidden)
                log_values = torch.cat((start, log_values), dim=1)
                log_coeffs = F.pad(log_coeffs, (0, 0, 1, 0))
                if kind == "minlstm":  # h_{-1} = g(prev_hidden): its slope joins the decay
                    # (1 for a state the layer made: those are positive)
                    decay = decay.clone()
                    decay[:, :1] *= _g_slope(prev_hidden.detach())
            out = _LinearScan.apply(log_coeffs, log_values, heinsen_associative_scan_log, sink)
            out = out[:, -seq_len:]
        tap = out.view_as(out)
        index = record(Piece(
            name, kind, module, tap, decay, x, log_decay.detach().mean((0, 1)), gates,
            chained_from=None if chain is None else chain[0], final=out[:, -1:],
            sink=sink if seq_len > 1 else None,
        ))  # fmt: skip
        result = module.to_out(tap)
        if not return_next_prev_hidden:
            return result
        handed = tap[:, -1:]
        handed.lstmviz_piece = index  # which call's state it is (`continued`)
        return result, handed

    return traced


class _LinearScan(torch.autograd.Function):
    """h [B, T, D] = the package's scan in log space (`heinsen`) of h_t = a_t h_{t-1} + b_t,
    a_t = exp(log_coeffs_t), b_t = exp(log_values_t), h_{-1} = 0: the same numbers forward.
    Backward, the linear recurrence's own: the total g = `scan.reverse_scan` of the incoming
    gradient, then ∂L/∂log b_t = g_t b_t and ∂L/∂log a_t = g_t a_t h_{t-1} — a tenth of the
    time of logcumsumexp's backward, which the trace would run twice."""

    @staticmethod
    def forward(ctx, log_coeffs, log_values, heinsen, sink):
        h = heinsen(log_coeffs, log_values)
        ctx.save_for_backward(log_coeffs, log_values, h)
        ctx.sink = sink
        return h

    @staticmethod
    def backward(ctx, grad):
        log_coeffs, log_values, h = ctx.saved_tensors
        a = log_coeffs.exp()
        g = reverse_scan(grad, a)
        ctx.sink.keep(g)  # the total (from h_{-1} on when the call starts from a state)
        before = F.pad(h[:, :-1], (0, 0, 1, 0))  # h_{t-1}, zero before the first step
        return g * a * before, g * log_values.exp(), None, None


def _step(kind: str, hidden: torch.Tensor, gate, prev_hidden):
    """One step as the package's sequential mode computes it (hidden already g(·))."""
    if kind == "mingru":
        z = gate.sigmoid()
        return torch.lerp(prev_hidden, hidden, z) if prev_hidden is not None else hidden * z
    f, i = gate[0].sigmoid(), gate[1].sigmoid()
    f_prime, i_prime = f / (f + i), i / (f + i)
    if prev_hidden is None:
        return hidden * i_prime
    return prev_hidden * f_prime + hidden * i_prime


def _g_slope(x: torch.Tensor) -> torch.Tensor:
    """g′(x) of the package's g(x) = x + 0.5 (x ≥ 0), σ(x) (x < 0)."""
    s = torch.sigmoid(x)
    return torch.where(x >= 0, torch.ones_like(x), s * (1 - s))
