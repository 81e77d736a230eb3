"""One call of a modern recurrent layer, as its traced forward records it.

A traced forward (`mingru.forward`, `ssm.mamba_forward`, `ssm.lru_forward`) computes the
layer's output as the layer does, from the same parameters, with two differences that change
no number: the state h [B, T, *C] reaches the output map through an alias (`tap`) that nothing
else reads — PyTorch's gradient there is the *direct* ∂L/∂h_t — and the input through an alias
(`source`) the layer alone reads (its gradient: dL/d input through the layer). It keeps the
per-step decay a_t = ∂h_t/∂h_{t-1} (diagonal) for the totals (`scan.reverse_scan`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class Sink:
    """Where a scan's backward (`scan.LinearScan`, `mingru`'s log-space one) leaves the total
    g [B, T', *C] it computes anyway: `found` {autograd pass: g}; `passes` (one list shared by
    a trace's pieces) holds the name of the pass running (None: keep nothing)."""

    passes: list
    found: dict = field(default_factory=dict)

    def keep(self, g: torch.Tensor) -> None:
        if self.passes[0] is not None:
            self.found[self.passes[0]] = g


@dataclass
class Piece:
    """One call: batch-major tensors [B, T, *C] as the layer holds them (C: the state's
    channels, Mamba's [D, N]); `decay` [B, T, *C] or one per channel (LRU's λ [C])."""

    name: str
    kind: str  # "mingru", "minlstm", "mamba", "lru", "slstm", "mlstm"
    module: torch.nn.Module
    tap: torch.Tensor  # the state as the output map reads it (requires grad)
    decay: torch.Tensor | None  # a_t, detached (None: not a diagonal linear recurrence)
    source: torch.Tensor  # the input as the layer reads it (requires grad)
    log_decay: torch.Tensor  # [*C] mean over (b, t) of ln |a_t|: the timescale's
    gates: dict[str, torch.Tensor] = field(default_factory=dict)  # name -> [B, T, *C] in (0, 1)
    state_names: tuple[str, ...] = ("h",)
    reduce: bool = False  # more than MAX_CHANNELS a step: kept per D channel, norm over N
    chained_from: int | None = None  # the piece whose final state it continues
    final: torch.Tensor | None = None  # its final state as the recurrence goes on (no tap)
    sink: Sink | None = None  # the totals its scan's backward computed
    # a nonlinear recurrence's state at every step (sLSTM's [4, B, H]): their gradients are
    # the totals; its `tap` is their stack [4, T, B, H]
    steps_states: list | None = None
    extra: dict | None = None  # mLSTM: its recurrent form's states (`xlstm.mlstm_backend`)

    @property
    def steps(self) -> int:
        return int(self.tap.shape[2 if self.extra is not None else 1])

    @property
    def batch(self) -> int:
        return int(self.tap.shape[2 if self.steps_states is not None else 0])


# A state of more than this many channels a step (Mamba's D·N) is kept per D channel
MAX_CHANNELS = 1024


def alias(x: torch.Tensor) -> torch.Tensor:
    """`x` as a tensor of its own in the graph: its gradient is what flows through the alias
    alone (a view: no copy). A tensor without a graph becomes a leaf that requires grad."""
    if x.requires_grad:
        return x.view_as(x)
    return x.detach().requires_grad_(True)
