"""Independent references for the modern recurrent layers (tests/torch/test_modern_*.py): each
layer stepped one step at a time in Python from its published equations with its own
parameters (none of lstmviz's code), every state kept with `retain_grad` (its .grad after
`loss.backward()` is the total dL/dh_t) and read by the output map through an alias of its own
(whose .grad is the direct ∂L/∂h_t), and a residual stack around them.

Each `*_steps(layer, x)` returns (output [B, T, ·], states, reads): per step t the state
[B, *C] and the alias the output read.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def _kept(state: torch.Tensor, states: list, reads: list) -> torch.Tensor:
    read = state.view_as(state)
    if state.requires_grad:  # (not under no_grad)
        state.retain_grad()
        read.retain_grad()
    states.append(state)
    reads.append(read)
    return read


def _g(x: torch.Tensor) -> torch.Tensor:
    """minGRU's candidate activation (appendix B.3): x + 0.5 for x ≥ 0, σ(x) below."""
    return torch.where(x >= 0, x + 0.5, torch.sigmoid(x))


def mingru_steps(layer, x):
    """h_t = (1 − z_t) h_{t-1} + z_t g(h̃_t), z_t = σ(k_t), h_{-1} = 0."""
    hidden, gate = layer.to_hidden_and_gate(x).chunk(2, dim=-1)
    states, reads, h = [], [], None
    for t in range(x.shape[1]):
        z, cand = torch.sigmoid(gate[:, t]), _g(hidden[:, t])
        h = z * cand if h is None else (1 - z) * h + z * cand
        _kept(h, states, reads)
    return layer.to_out(torch.stack(reads, 1)), states, reads


def minlstm_steps(layer, x):
    """h_t = f′_t h_{t-1} + i′_t g(h̃_t), f′ = σ(f) / (σ(f) + σ(i)), i′ = 1 − f′."""
    hidden, f_gate, i_gate = layer.to_hidden_and_f_i_gate(x).chunk(3, dim=-1)
    states, reads, h = [], [], None
    for t in range(x.shape[1]):
        f, i = torch.sigmoid(f_gate[:, t]), torch.sigmoid(i_gate[:, t])
        cand = _g(hidden[:, t])
        h = i / (f + i) * cand if h is None else f / (f + i) * h + i / (f + i) * cand
        _kept(h, states, reads)
    return layer.to_out(torch.stack(reads, 1)), states, reads


def mamba_inputs(block, x):
    """(u, z, Δ [B, T, D], B_t, C_t [B, T, N], A [D, N], D [D]) of a mambapy MambaBlock: its
    projections, the short causal convolution, softplus(Δ + bias)."""
    length = x.shape[1]
    u, z = block.in_proj(x).chunk(2, dim=-1)
    u = F.silu(block.conv1d(u.transpose(1, 2))[:, :, :length].transpose(1, 2))
    cfg = block.config
    delta, b, c = torch.split(block.x_proj(u), [cfg.dt_rank, cfg.d_state, cfg.d_state], dim=-1)
    delta = F.softplus(delta @ block.dt_proj.weight.T + block.dt_proj.bias)
    return u, z, delta, b, c, -torch.exp(block.A_log), block.D


def mamba_steps(block, x):
    """s_t = exp(Δ_t A) ⊙ s_{t-1} + Δ_t B_t u_t [B, D, N], y_t = s_t C_t + D u_t, out =
    out_proj(y ⊙ silu(z))."""
    u, z, delta, b, c, a, d = mamba_inputs(block, x)
    states, reads, s = [], [], torch.zeros(x.shape[0], *a.shape, dtype=x.dtype)
    ys = []
    for t in range(x.shape[1]):
        dt = delta[:, t, :, None]
        s = torch.exp(dt * a) * s + dt * b[:, t, None, :] * u[:, t, :, None]
        read = _kept(s, states, reads)
        ys.append((read * c[:, t, None, :]).sum(-1) + d * u[:, t])
    return block.out_proj(torch.stack(ys, 1) * F.silu(z)), states, reads


def lru_steps(layer, x):
    """s_t = λ ⊙ s_{t-1} + γ ⊙ (B u_t) (complex), y_t = Re(C s_t) + D u_t, s_{-1} = 0."""
    modulus = torch.exp(-torch.exp(layer.nu_log))
    phase = torch.exp(layer.theta_log)
    lam = torch.polar(modulus, phase)
    gamma = torch.exp(layer.gamma_log)
    states, reads, s, ys = [], [], 0, []
    for t in range(x.shape[1]):
        s = lam * s + gamma * (x[:, t].to(layer.B.dtype) @ layer.B.T)
        read = _kept(s, states, reads)
        ys.append((read @ layer.C.T).real + x[:, t] @ layer.D.T)
    return torch.stack(ys, 1), states, reads


class Stack(nn.Module):
    """x -> x + layer(x) for each layer -> a linear head on every step."""

    def __init__(self, layers, width: int, out: int = 3):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.head = nn.Linear(width, out)

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return self.head(x)


def reference(stack: Stack, steps, x, y):
    """The stack stepped by `steps` (one `*_steps` per layer), MSE loss, backward: (output,
    per layer (totals, directs) [T, B, *C] from the retained gradients, dL/d the first layer's
    input through it [T, B, I], {parameter: grad})."""
    for p in stack.parameters():
        p.grad = None
    first, kept = None, []
    for layer, step in zip(stack.layers, steps, strict=True):
        read = x.detach().requires_grad_() if first is None else x.view_as(x)
        if first is None:
            read.retain_grad()
            first = read
        out, states, reads = step(layer, read)
        x = x + out  # the residual path is not the layer's: first.grad is through it alone
        kept.append((states, reads))
    output = stack.head(x)
    F.mse_loss(output, y).backward()
    per_layer = [(torch.stack([s.grad for s in states]), torch.stack([r.grad for r in reads]))
                 for states, reads in kept]  # fmt: skip
    grads = {p: p.grad.clone() for p in stack.parameters()}
    for p in stack.parameters():
        p.grad = None
    return output.detach(), per_layer, first.grad.transpose(0, 1), grads


def channels(value: torch.Tensor, reduce: bool = False) -> np.ndarray:
    """[T, B, S] as a trace keeps a state's gradient: channels flattened, a complex one's
    modulus, or with `reduce` the norm over the last axis."""
    value = value.abs() if value.is_complex() else value
    if reduce:
        value = value.square().sum(-1).sqrt()
    return value.flatten(2).detach().double().numpy()



def slstm_steps(cell, x):
    """xLSTM's sLSTM (Beck et al. 2024, eqs. 8–17, the stabilised exponential gates) on its
    cell's weights: x [B, T, 4H] the gates' inputs (gate-major: i, f, z, o, each head by head),
    raw_t = x_t + R h_{t-1} + b per head, m_t = max(log σ(f̃) + m_{t-1}, ĩ) (ĩ at the first
    step), i = min(exp(ĩ − m_t), 1), f = min(exp(log σ(f̃) + m_{t-1} − m_t), 1), c_t = f c + i
    tanh(z̃), n_t = f n + i, h_t = σ(õ) c_t / n_t. Returns (h [B, T, H], states: per step
    (h, c, n) kept, reads: per step h's alias the output reads)."""
    batch, steps, _ = x.shape
    heads, _, head_dim = cell._recurrent_kernel.shape
    width = heads * head_dim
    r = cell._recurrent_kernel.view(heads, 4, head_dim, head_dim)  # [k, gate, j, i]
    bias = cell._bias.view(4 * width)
    h = c = n = m = torch.zeros(batch, width, dtype=x.dtype)
    states, reads, outs = [], [], []
    for t in range(steps):
        ry = torch.einsum("bki,kgji->bgkj", h.view(batch, heads, head_dim), r)
        raw = x[:, t] + ry.reshape(batch, 4 * width) + bias
        i_raw, f_raw, z_raw, o_raw = raw.view(batch, 4, width).unbind(1)
        log_f = m + F.logsigmoid(f_raw)
        m_new = i_raw if t == 0 else torch.maximum(i_raw, log_f)
        i_gate = torch.clamp(torch.exp(i_raw - m_new), max=1.0)
        f_gate = torch.clamp(torch.exp(log_f - m_new), max=1.0)
        c = f_gate * c + i_gate * torch.tanh(z_raw)
        n = f_gate * n + i_gate
        h = torch.sigmoid(o_raw) * c / n
        m = m_new
        if h.requires_grad:
            for state in (h, c, n):
                state.retain_grad()
        states.append((h, c, n))
        read = h.view_as(h)
        if read.requires_grad:
            read.retain_grad()
        reads.append(read)
        outs.append(read)
    return torch.stack(outs, 1), states, reads
