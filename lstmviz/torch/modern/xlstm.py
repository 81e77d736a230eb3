"""xLSTM's sLSTM (the `xlstm` package 2.0.6, its pure-PyTorch "vanilla" cell) traced: the
cell's recurrence as the package computes it (`slstm_forward`: one step at a time), every
step's state kept in the graph (`Piece.steps_states`: their gradients are the totals, through
the recurrence) and read by the output through one stack of them (`Piece.tap`: its gradient is
the direct part).

sLSTM (Beck et al., 2024), per head, gates from W x_t + R h_{t-1} + b: m_t = max(log σ(f̃_t) +
m_{t-1}, ĩ_t) (the stabiliser), i_t = min(exp(ĩ_t − m_t), 1), f_t = min(exp(log σ(f̃_t) +
m_{t-1} − m_t), 1), c_t = f_t c_{t-1} + i_t tanh(z̃_t), n_t = f_t n_{t-1} + i_t,
h_t = σ(õ_t) c_t / n_t. The states [4, B, H]: h, c, n, m. The recurrence is not linear (h_{t-1}
feeds the gates): its totals are PyTorch's backward through the steps, taken at every step's
state. The timescale per unit: −1/mean ln f_t, the stabilised forget gate's.

Imports nothing of the package at import time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from lstmviz.torch.modern.piece import Piece, alias

STATES = ("h", "c", "n", "m")


def impl(cell, name: str, record: Callable):
    """The traced `_impl` of one `sLSTMCell_vanilla` (input [S, B, 4H] in its internal layout,
    state [4, B, H] -> all states [4, S + 1, B, H]), as `xlstm.blocks.slstm.src.vanilla.
    slstm_forward` computes it."""
    config = cell.config

    def traced(training, input, state):
        source = alias(input.transpose(0, 1))  # [B, S, 4H]: the gates' inputs, batch-major
        recurrent, bias = cell._recurrent_kernel, cell._bias
        heads, head_dim = recurrent.shape[0], recurrent.shape[2]
        gates_r = recurrent.shape[1] // head_dim
        batch = input.shape[1]
        weights = recurrent.transpose(1, 2).reshape(1, heads, head_dim, gates_r * head_dim)
        states, kept, rows = state, [], {"i": [], "f": [], "o": []}
        for wx in source.transpose(0, 1).unbind(0):
            ry = (states[0].reshape(batch, heads, 1, -1).matmul(weights)
                  .reshape(batch, heads, gates_r, -1).transpose(1, 2).reshape(batch, -1))
            kind = states.dtype
            states, gates = cell.pointwise(wx, ry, bias, states, constants=config.constants)
            states = states.to(dtype=kind)
            kept.append(states)
            for gate, row in zip(("i", "f", "o"), (gates[0], gates[1], gates[3]), strict=True):
                rows[gate].append(row.detach())
        tap = torch.stack(kept, dim=1)  # [4, S, B, H]: the output's and the final state's
        log_f = torch.log(torch.stack(rows["f"], dim=1).clamp_min(1e-38))  # [B, S, H]
        record(Piece(
            name, "slstm", cell, tap, None, source, log_f.mean((0, 1)),
            {gate: torch.stack(row, dim=1) for gate, row in rows.items()},
            state_names=STATES, steps_states=kept,
        ))  # fmt: skip
        return torch.cat([state[:, None], tap], dim=1)

    return traced


def batch_major(value: torch.Tensor) -> torch.Tensor:
    """[4, S, B, H] (a tap, its gradient) -> [B, S, 4, H]."""
    return value.permute(2, 1, 0, 3)


def through_h(totals: torch.Tensor, states: torch.Tensor, o: torch.Tensor) -> torch.Tensor:
    """[B, T, 4, H] the totals of h, c, n, m with c's and n's including their way into the
    same step's h_t = o_t c_t / n_t (PyTorch's gradients at each step's stacked state hold only
    what flows on through the next steps): dL/dc_t += dL/dh_t o_t / n_t, dL/dn_t −= dL/dh_t
    o_t c_t / n_t². `states` [B, T, 4, H] the states, `o` [B, T, H] the output gate."""
    g_h, c, n = totals[:, :, 0], states[:, :, 1], states[:, :, 2]
    out = totals.clone()
    out[:, :, 1] += g_h * o / n
    out[:, :, 2] -= g_h * o * c / n.square()
    return out
