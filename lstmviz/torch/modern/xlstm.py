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

from lstmviz.torch.modern.piece import MAX_CHANNELS, Piece, alias
from lstmviz.torch.modern.scan import reverse_scan

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


def mlstm_backend(cell, name: str, record: Callable):
    """The traced `backend_fn` of one `mLSTMCell` (queries, keys, values [B, NH, S, DH], gate
    pre-activations [B, NH, S, 1] -> h̃ [B, NH, S, DH]): the package's parallel form's function
    computed in chunks (`chunked`: its numbers to rounding, a tenth of its time forward and
    backward at S = 512; the parallel form itself when the call asks for another mask or
    stabiliser), h̃ read through a tap (its gradient: what the output passes back), and the
    states the parallel form never forms — C̃_t [NH, DH, DH], ñ_t [NH, DH], m_t per head —
    from the recurrent form (`recurrent_step_stabilized_simple`'s equations), without
    gradient: C̃_t = f̃_t C̃_{t-1} + ĩ_t k_t v_tᵀ/√DH, ñ_t = f̃_t ñ_{t-1} + ĩ_t k_t/√DH,
    h̃_t = q_tᵀ C̃_t / (max(|q_tᵀ ñ_t|, e^{−m_t}) + ε), f̃_t = exp(log σ(f_t) + m_{t-1} − m_t)."""
    from xlstm.blocks.mlstm.backends import parallel_stabilized_simple

    def traced(queries, keys, values, igate_preact, fgate_preact, lower_triangular_matrix=None,
               **kwargs):  # fmt: skip
        batch, heads, steps, head_dim = values.shape
        source = alias(values.transpose(1, 2).reshape(batch, steps, heads * head_dim))
        values = source.view(batch, steps, heads, head_dim).transpose(1, 2)
        if _causal(lower_triangular_matrix, steps) and kwargs.get("stabilize_rowwise", True):
            h = chunked(queries, keys, values, igate_preact, fgate_preact,
                        eps=kwargs.get("eps", 1e-6))  # fmt: skip
        else:
            h = parallel_stabilized_simple(queries, keys, values, igate_preact, fgate_preact,
                                           lower_triangular_matrix=lower_triangular_matrix,
                                           **kwargs)  # fmt: skip
        tap = h.view_as(h)
        reduce = heads * head_dim * head_dim > MAX_CHANNELS
        states = _mlstm_states(queries.detach(), keys.detach(), values.detach(),
                               igate_preact.detach(), fgate_preact.detach(), reduce)  # fmt: skip
        f = states["f"]  # [B, S, NH]
        record(Piece(
            name, "mlstm", cell, tap, f[..., None, None], source, torch.log(f).mean((0, 1)),
            {"i": states["i"].clamp(max=1.0), "f": f}, state_names=("C", "n", "m"),
            reduce=reduce, extra=states,
        ))  # fmt: skip
        return tap

    return traced


def _causal(mask: torch.Tensor | None, steps: int) -> bool:
    """Whether the parallel form would mask with the plain causal mask: none given, one
    smaller than the steps (it then makes its own) or a lower-triangular one of ones."""
    if mask is None or steps < mask.size(-1):
        return True
    corner = mask[..., :steps, :steps]
    return bool(torch.equal(corner, torch.ones_like(corner).tril()))


def chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, i_pre: torch.Tensor,
            f_pre: torch.Tensor, chunk: int = 64, eps: float = 1e-6) -> torch.Tensor:  # fmt: skip
    """h̃ [B, NH, S, DH] of `parallel_stabilized_simple` (causal mask, rows stabilised) from
    q, k, v [B, NH, S, DH] and the gate pre-activations [B, NH, S, 1], in chunks of `chunk`
    steps: the same function and stabiliser, m_t = max_{s≤t}(L_t − L_s + ĩ_s) with
    L_t = Σ_{r≤t} log σ(f̃_r), so the same numbers to rounding (and the same autograd
    gradients, the stabiliser's included), in O(S·chunk) a head where the parallel form's
    [S, S] matrices cost O(S²) forward and backward. Within a chunk the parallel form's
    [l, l] block; the steps before it through the chunk-start state Ĉ = Σ_{s<a}
    e^{L_{a−1} − L_s + ĩ_s − m_{a−1}} k_s v_sᵀ/√DH (and n̂ likewise), every exponent ≤ 0."""
    log_f = torch.nn.functional.logsigmoid(f_pre[..., 0])  # [B, NH, S]
    i_pre = i_pre[..., 0]
    cum = torch.cumsum(log_f, dim=-1)
    m = cum + torch.cummax(i_pre - cum, dim=-1).values
    k = k / q.shape[-1] ** 0.5
    out, c_hat, n_hat, before = [], None, None, None
    # split, not sliced: a slice's backward would write a zero tensor of the whole length
    for q_c, k_c, v_c, i_c, cum_c, m_c in zip(*(t.split(chunk, -2) for t in (q, k, v)),
                                             *(t.split(chunk, -1) for t in (i_pre, cum, m)),
                                             strict=True):  # fmt: skip
        size = q_c.shape[-2]
        log_w = cum_c[..., :, None] - cum_c[..., None, :] + i_c[..., None, :] - m_c[..., :, None]
        causal = torch.ones(size, size, dtype=torch.bool, device=q.device).tril()
        w = torch.exp(torch.where(causal, log_w, -torch.inf))  # [B, NH, l, l]
        e = (q_c @ k_c.transpose(-2, -1)) * w
        num, qn = e @ v_c, e.sum(-1)
        if c_hat is not None:  # the steps before the chunk
            g = torch.exp(cum_c - before[0] + before[1] - m_c)  # [B, NH, l]
            num = num + g[..., None] * (q_c @ c_hat)
            qn = qn + g * (q_c @ n_hat[..., None])[..., 0]
        den = torch.maximum(qn.abs(), torch.exp(-m_c)) + eps
        out.append(num / den[..., None])
        if size < chunk:  # the last chunk
            break
        last = w[..., -1, :, None]  # [B, NH, l, 1]: the chunk's steps as its last row weighs them
        kv, ks = k_c.transpose(-2, -1) @ (last * v_c), (last * k_c).sum(-2)
        if c_hat is None:
            c_hat, n_hat = kv, ks
        else:
            g_end = g[..., -1, None]
            c_hat, n_hat = g_end[..., None] * c_hat + kv, g_end * n_hat + ks
        before = (cum_c[..., -1, None], m_c[..., -1, None])
    return torch.cat(out, dim=-2)


def _mlstm_states(q, k, v, i_pre, f_pre, reduce: bool,
                  eps: float = 1e-6) -> dict[str, torch.Tensor]:  # fmt: skip
    """The recurrent form's states, batch-major: C [B, S, NH, DH, DH] (with `reduce` each
    row's norm [B, S, NH, DH]: C is formed one step at a time and not kept), n [B, S, NH, DH],
    m, f (f̃), i (ĩ), denominator [B, S, NH], q [B, S, NH, DH], num (q_tᵀ C̃_t)
    [B, S, NH, DH]. The stabiliser, from m_{−1} = 0, unrolled: m_t = L_t + max(0,
    max_{s≤t}(ĩ_s − L_s)), L_t = Σ_{r≤t} log σ(f_r); C̃ is formed with a last column of
    ones beside v_t, which makes that column ñ and q_tᵀ C̃_t's last entry q_t·ñ_t."""
    batch, heads, steps, head_dim = q.shape
    log_f = torch.nn.functional.logsigmoid(f_pre)[..., 0]  # [B, NH, S]
    i_pre = i_pre[..., 0]
    cum = torch.cumsum(log_f, dim=-1)
    m = cum + torch.cummax(i_pre - cum, dim=-1).values.clamp(min=0.0)
    f = torch.exp(log_f + torch.nn.functional.pad(m[..., :-1], (1, 0)) - m)
    i = torch.exp(i_pre - m)
    ik = (i[..., None] * k / head_dim**0.5)[..., None]  # [B, NH, S, DH, 1]
    v1 = torch.cat([v, v.new_ones(batch, heads, steps, 1)], -1)[..., None, :]
    c = q.new_zeros(batch, heads, head_dim, head_dim + 1)  # [C̃ | ñ]
    kept, ns, nums = [], [], []
    for f_t, ik_t, v_t, q_t in zip(f[..., None, None].unbind(2), ik.unbind(2), v1.unbind(2),
                                   q[..., None, :].unbind(2), strict=True):  # fmt: skip
        c.mul_(f_t).addcmul_(ik_t, v_t)
        kept.append(torch.linalg.vector_norm(c[..., :-1], dim=-1) if reduce
                    else c[..., :-1].clone())  # fmt: skip
        ns.append(c[..., -1].clone())
        nums.append(q_t @ c)  # [B, NH, 1, DH + 1]
    num = torch.cat(nums, dim=-2).transpose(1, 2)  # [B, S, NH, DH + 1]
    f, i, m = (x.transpose(1, 2) for x in (f, i, m))
    return {"C": torch.stack(kept, dim=1), "n": torch.stack(ns, dim=1), "m": m, "f": f, "i": i,
            "denominator": torch.maximum(num[..., -1].abs(), torch.exp(-m)) + eps,
            "num": num[..., :-1], "q": q.transpose(1, 2)}  # fmt: skip


def mlstm_totals(piece: Piece, d_h, norms_only: bool = False) -> tuple:
    """(C, its direct and total gradients — [B, S, NH, DH, DH], or with `piece.reduce` each
    row's norm [B, S, NH, DH] —, {"n": (n, total), "m": (m, None)}) of an mLSTM call from
    dL/dh̃ [B, NH, S, DH] (None: zero): the direct parts are h̃'s derivatives,
    ∂h̃_j/∂C̃_ij = q_i / den (C̃_t's direct part q_t ⊗ u_t, u_t = dL/dh̃_t / den_t: its row i's
    norm |q_i| ‖u_t‖) and, where |q·ñ| is the larger, ∂h̃_j/∂ñ = −num_j sign(q·ñ) q / den²;
    the totals one reverse scan each with the decay f̃, C's one step at a time in place (no
    [S, DH, DH] of it kept). `norms_only`: the total's per-step norms [S] (float64) alone."""
    s = piece.extra
    d_h = torch.zeros_like(piece.tap) if d_h is None else d_h
    d_h = d_h.detach().transpose(1, 2)  # [B, S, NH, DH]
    den = s["denominator"][..., None]
    u = d_h / den
    q = s["q"]
    total = q.new_zeros(q.shape[0], q.shape[2], q.shape[3], q.shape[3])  # [B, NH, DH, DH]
    later = s["f"][:, 1:, :, None, None].unbind(1) + (None,)  # f̃_{t+1}
    rows, norms = [], []
    for t, q_t, u_t in zip(range(q.shape[1] - 1, -1, -1), q[..., None].unbind(1)[::-1],
                           u[..., None, :].unbind(1)[::-1], strict=True):  # fmt: skip
        if later[t] is not None:
            total.mul_(later[t])
        total.addcmul_(q_t, u_t)
        if norms_only:
            norms.append(torch.linalg.vector_norm(total, dtype=torch.float64))
        else:
            rows.append(torch.linalg.vector_norm(total, dim=-1) if piece.reduce
                        else total.clone())  # fmt: skip
    if norms_only:
        return torch.stack(norms[::-1])
    if piece.reduce:
        d_c = q.abs() * torch.linalg.vector_norm(u, dim=-1, keepdim=True)
    else:
        d_c = q[..., :, None] * u[..., None, :]
    total_c = torch.stack(rows[::-1], dim=1)
    qn = (s["q"] * s["n"]).sum(-1, keepdim=True)
    by_n = (qn.abs() >= torch.exp(-s["m"])[..., None]).to(d_h.dtype)
    d_den = -(d_h * s["num"]).sum(-1, keepdim=True) / den.square()
    total_n = reverse_scan(d_den * torch.sign(qn) * by_n * s["q"], piece.decay[..., 0])
    return s["C"], d_c, total_c, {"n": (s["n"], total_n), "m": (s["m"], None)}
