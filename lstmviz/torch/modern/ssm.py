"""Selective state-space layers traced: mambapy's `MambaBlock` (1.2.0, its parallel scan
`pscan` or its sequential loop) and lru-pytorch's `LRU` (0.1.3), their forwards as the
packages compute them with the state tapped (`piece.Piece`).

Mamba: x_t = exp(Δ_t A) ⊙ x_{t-1} + Δ_t B_t u_t, the state x [B, T, D, N] (D = d_inner, N =
d_state), read by y_t = x_t C_t + D ⊙ u_t; the decay exp(Δ_t·A) per (d, n). A state of more
than `piece.MAX_CHANNELS` a step is kept per D channel (the norm over N). The gate rows show
each D channel's slowest decay, exp(Δ_t·max_n A_dn) [B, T, D] (A < 0).

LRU: x_t = λ ⊙ x_{t-1} + γ ⊙ (B u_t), complex, read by y_t = Re(C x_t) + D u_t; the decay λ
is constant (|λ| = exp(−exp(ν))). The package loops over samples and steps in Python (and
starts every sample after the first from zero, its given state only the first): the traced
forward runs the same recurrence over the batch at once, one step at a time.

Imports nothing of the packages at import time (mambapy's `pscan` is read when a call runs).
Its backward is the linear recurrence's own (`scan.LinearScan`): the same gradients.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from lstmviz.core.errors import ModelError
from lstmviz.torch.modern.piece import MAX_CHANNELS, Piece, Sink, alias
from lstmviz.torch.modern.scan import LinearScan


def mamba_forward(module, name: str, record: Callable, passes: list):
    """The traced forward of one mambapy MambaBlock (x [B, T, d_model] -> [B, T, d_model])."""
    from mambapy.pscan import pscan

    config = module.config

    def traced(x):
        x = alias(x)
        length = x.shape[1]
        xz = module.in_proj(x)
        u, z = xz.chunk(2, dim=-1)
        u = module.conv1d(u.transpose(1, 2))[:, :, :length].transpose(1, 2)
        u = F.silu(u)
        a_matrix = -torch.exp(module.A_log.float())  # [D, N]
        d_skip = module.D.float()
        delta, b, c = torch.split(module.x_proj(u), [config.dt_rank, config.d_state,
                                                     config.d_state], dim=-1)  # fmt: skip
        delta, b, c = module._apply_layernorms(delta, b, c)
        delta = (module.dt_proj.weight @ delta.transpose(1, 2)).transpose(1, 2)
        delta = F.softplus(delta + module.dt_proj.bias)  # [B, T, D]
        decay = torch.exp(delta.unsqueeze(-1) * a_matrix)  # [B, T, D, N]
        bx = delta.unsqueeze(-1) * b.unsqueeze(2) * u.unsqueeze(-1)
        sink = Sink(passes)
        if config.pscan:
            states = LinearScan.apply(decay, bx, pscan, sink)
        else:  # the package's sequential scan
            state = torch.zeros_like(bx[:, 0])
            steps = []
            for t in range(length):
                state = decay[:, t] * state + bx[:, t]
                steps.append(state)
            states = torch.stack(steps, dim=1)
        tap = states.view_as(states)
        size = a_matrix.shape[0] * a_matrix.shape[1]
        slowest = a_matrix.detach().amax(-1)  # [D]: the A nearest 0 of each channel
        record(Piece(
            name, "mamba", module, tap, decay.detach(), x,
            delta.detach().mean((0, 1))[:, None] * a_matrix.detach(),
            {"exp(ΔA)": torch.exp(delta.detach() * slowest)}, state_names=("x",),
            reduce=size > MAX_CHANNELS, sink=sink,
        ))  # fmt: skip
        y = (tap @ c.unsqueeze(-1)).squeeze(3) + d_skip * u
        return module.out_proj(y * F.silu(z))

    return traced


def lru_forward(module, name: str, record: Callable):
    """The traced forward of one lru-pytorch LRU (input [B, T, I] -> [B, T, out_features])."""

    def traced(input, state=None):
        if input.dim() != 3:
            raise ModelError(f"lstmviz.torch: {name}: the LRU is traced on a batch of sequences "
                             f"[B, T, I]; got {list(input.shape)}")  # fmt: skip
        x = alias(input)
        start = module.state.to(module.B.device) if state is None else state
        modulus = torch.exp(-torch.exp(module.nu_log))
        phase = torch.exp(module.theta_log)
        lam = torch.complex(modulus * torch.cos(phase), modulus * torch.sin(phase))
        gammas = torch.exp(module.gamma_log).unsqueeze(-1)
        drive = x.to(module.B.dtype) @ (gammas * module.B).transpose(0, 1)  # [B, T, S]
        # the package's loop: the first sample from the state, every other from zero
        state = torch.zeros_like(drive[:, 0])
        state = torch.cat([start.to(drive.dtype).expand_as(state[:1]), state[1:]])
        steps = []
        for t in range(x.shape[1]):
            state = lam * state + drive[:, t]
            steps.append(state)
        states = torch.stack(steps, dim=1)
        tap = states.view_as(states)
        record(Piece(name, "lru", module, tap, lam.detach(), x,
                     torch.log(modulus.detach()), {"|λ|": modulus.detach()},
                     state_names=("x",)))  # fmt: skip
        module.state = torch.zeros_like(start)  # as the package leaves it
        output = (tap @ module.C.transpose(0, 1)).real + x @ module.D.transpose(0, 1)
        return output.to(torch.get_default_dtype())

    return traced
