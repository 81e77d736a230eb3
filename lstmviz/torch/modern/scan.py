"""The totals of a diagonal linear recurrence from its direct gradient, and what a trace keeps.

A layer whose state follows h_t = a_t ⊙ h_{t-1} + b_t (a_t the per-step decay, diagonal:
minGRU's 1 − z_t, minLSTM's f′_t, Mamba's exp(Δ_t·A), LRU's λ) has ∂h_t/∂h_{t-1} = diag(a_t),
so its total gradient is one reverse linear scan of the direct one d_t = ∂L/∂h_t (through the
layer's output only): g_t = d_t + conj(a_{t+1}) ⊙ g_{t+1} (conj: PyTorch's gradient of a
complex state, LRU's). The scan is a plain loop over t, vectorised over the batch and the
channels: a product of decays (a cumulative-product shortcut) under- or overflows over long
sequences, one step at a time never divides.

Tensors are batch-major as the layers hold them: [B, T, *C] (C the state's channels, Mamba's
[D, N]); what a trace keeps of them is made time-major at the end, when it is small.
"""

from __future__ import annotations

import torch


def reverse_scan(direct: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """g [B, T, *C]: g_{T-1} = d_{T-1}, g_t = d_t + conj(a_{t+1}) ⊙ g_{t+1}. `direct` d
    [B, T, *C]; `decay` a [B, T, *C] (or one for every step: LRU's constant λ [*C])."""
    steps = direct.shape[1]
    g = torch.empty_like(direct)
    if steps == 0:
        return g
    per_step = decay.dim() == direct.dim()
    factor = decay.conj() if decay.is_complex() else decay
    g[:, -1] = direct[:, -1]
    for t in range(steps - 2, -1, -1):
        a = factor[:, t + 1] if per_step else factor
        g[:, t] = torch.addcmul(direct[:, t], a, g[:, t + 1])
    return g


class LinearScan(torch.autograd.Function):
    """h [B, T, *C] = `run(a, b)`, a package's scan of h_t = a_t ⊙ h_{t-1} + b_t from h_{-1} =
    0 (mambapy's `pscan`): its numbers forward. Backward, the recurrence's own: the total
    g = `reverse_scan` of the incoming gradient, ∂L/∂b_t = g_t, ∂L/∂a_t = g_t ⊙ h_{t-1} — one
    pass over the state, where the package's tree scan takes several (the trace runs a
    backward twice: the loss's and the anchored one)."""

    @staticmethod
    def forward(ctx, a, b, run, sink):
        h = run(a, b)
        ctx.save_for_backward(a, h)
        ctx.sink = sink
        return h

    @staticmethod
    def backward(ctx, grad):
        a, h = ctx.saved_tensors
        g = reverse_scan(grad, a)
        ctx.sink.keep(g)  # the total: the incoming gradient is the direct one (`Piece.tap`)
        before = torch.zeros_like(h)
        before[:, 1:] = h[:, :-1]
        return g * before, g, None, None


# A float32 norm below this is redone in float64: squares of entries under 1.1e-19 underflow
TINY_NORM = 1e-18


def kept(value: torch.Tensor, reduce: bool, norms: bool = True):
    """(channels [T, B, S], per-step L2 norms [T] float64 or None) of a state or gradient
    [B, T, *C]: the channels flattened (S = ∏C), or, with `reduce`, the norm over the last
    axis (Mamba's N; S = D); a complex one as its modulus (its norm over real and imaginary
    parts), so that a step's norm over S is the state's. A wide state's norms over N are
    taken in float32 (one pass), and redone in float64 for the steps where one is below
    TINY_NORM or not finite (float32 squares of a vanishing gradient flush to 0)."""
    wide = value.detach().abs() if value.is_complex() else value.detach()
    if reduce:
        reduced = torch.linalg.vector_norm(wide, dim=-1)  # [B, T, D]
        redo = ((reduced < TINY_NORM) | ~torch.isfinite(reduced)).any(0).any(-1)  # [T]
        if bool(redo.any()):
            steps = redo.nonzero().squeeze(1)
            reduced = reduced.double()
            reduced[:, steps] = torch.linalg.vector_norm(wide[:, steps], dim=-1,
                                                         dtype=torch.float64)  # fmt: skip
        wide = reduced
    channels = wide.flatten(2).transpose(0, 1)
    if not norms:
        return channels, None
    return channels, torch.linalg.vector_norm(channels, dim=(1, 2), dtype=torch.float64)


def timescale(log_decay: torch.Tensor) -> torch.Tensor:
    """Steps per e-fold, −1/ln ā, from the mean log decay ln ā (≤ 0; the geometric mean of a_t
    over batch and time: the gradient over n steps falls by ∏ a_t = ā^n); inf where ā = 1."""
    log_decay = log_decay.double()
    return torch.where(log_decay >= 0, torch.inf, -1.0 / log_decay)  # ±0 too: inf


def gate_rows(gate: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For a gate in (0, 1) [B, T, *C]: its mean per step [T], the fraction of its (b, c) below
    0.01 or above 0.99 per step [T] (model mode's `gates_saturated`), and the fraction within
    0.05 of a bound over all (t, b, c) (the diagnosis's)."""
    gate = gate.detach()
    dims = (0, *range(2, gate.dim()))  # all but time
    count = gate.numel() // gate.shape[1]
    off = (gate - 0.5).abs()
    near = (off > 0.49).sum(dims, dtype=torch.float64) / count
    loose = (off > 0.45).sum(dtype=torch.float64) / off.numel()
    return gate.mean(dims, dtype=torch.float64), near, loose
