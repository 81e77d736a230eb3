"""The totals of a diagonal linear recurrence from its direct gradient, and what a trace keeps.

A layer whose state follows h_t = a_t ⊙ h_{t-1} + b_t (a_t the per-step decay, diagonal:
minGRU's 1 − z_t, minLSTM's f′_t, Mamba's exp(Δ_t·A), LRU's λ) has ∂h_t/∂h_{t-1} = diag(a_t),
so its total gradient is one reverse linear scan of the direct one d_t = ∂L/∂h_t (through the
layer's output only): g_t = d_t + conj(a_{t+1}) ⊙ g_{t+1} (conj: PyTorch's gradient of a
complex state, LRU's). The scan is a plain loop over t, vectorised over the batch and the
channels: a product of decays (a cumulative-product shortcut) under- or overflows over long
sequences, one step at a time never divides.

Tensors are time-major here: [T, B, *C] (C the state's channels, Mamba's [D, N]).
"""

from __future__ import annotations

import torch


def reverse_scan(direct: torch.Tensor, decay: torch.Tensor) -> torch.Tensor:
    """g [T, B, *C]: g_{T-1} = d_{T-1}, g_t = d_t + conj(a_{t+1}) ⊙ g_{t+1}. `direct` d
    [T, B, *C]; `decay` a [T, B, *C] (or broadcastable to one step: LRU's constant λ [*C])."""
    steps = len(direct)
    g = torch.empty_like(direct)
    if steps == 0:
        return g
    per_step = decay.dim() == direct.dim()
    factor = decay.conj() if decay.is_complex() else decay
    g[-1] = direct[-1]
    for t in range(steps - 2, -1, -1):
        a = factor[t + 1] if per_step else factor
        torch.addcmul(direct[t], a, g[t + 1], out=g[t])
    return g


def step_norms(value: torch.Tensor) -> torch.Tensor:
    """[T] the L2 norm of each step of `value` [T, B, *C] (complex: over real and imaginary
    parts), summed in float64: float32 squares of a vanishing gradient (< 1e-19) flush to 0."""
    wide = value.abs() if value.is_complex() else value
    return wide.double().square().flatten(1).sum(1).sqrt()


def channel_view(value: torch.Tensor, reduce: bool) -> torch.Tensor:
    """[T, B, S] float of a state or gradient [T, B, *C]: the channels flattened (S = ∏C), or,
    with `reduce`, the norm over the last axis (Mamba's N; S = D); a complex one as its
    modulus (its norm over real and imaginary parts), so that a step's norm over S is the
    state's."""
    wide = value.abs() if value.is_complex() else value
    if reduce:
        wide = wide.double().square().sum(-1).sqrt()
    return wide.flatten(2)


def timescale(log_decay: torch.Tensor) -> torch.Tensor:
    """Steps per e-fold, −1/ln ā, from the mean log decay ln ā (≤ 0; the geometric mean of a_t
    over batch and time: the gradient over n steps falls by ∏ a_t = ā^n); inf where ā = 1."""
    return -1.0 / log_decay.double().clamp(max=0.0)


def gate_rows(gate: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For a gate in (0, 1) [T, B, *C]: its mean per step [T], the fraction of its (b, c) below
    0.01 or above 0.99 per step [T] (model mode's `gates_saturated`), and the fraction within
    0.05 of a bound over all (t, b, c) (the diagnosis's)."""
    flat = gate.flatten(1).float()
    near = (flat < 0.01) | (flat > 0.99)
    loose = (flat < 0.05) | (flat > 0.95)
    return flat.mean(1), near.float().mean(1), loose.float().mean()
