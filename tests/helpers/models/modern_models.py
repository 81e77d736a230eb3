"""Tiny residual modules of each modern recurrent layer lstmviz traces (`modern_module`; "lstm"
a classic nn.LSTM to mix with them), and their probe data, for the distributed tests
(`tests/torch/test_modern_distributed.py`, the ranks of `ddp_recorder.py`): the same weights and
data for a kind and seed in every process. The gates are set so that what a share holds differs
from the other's (Mamba's Δ and mLSTM's gates move with the input, mLSTM's h reads its n).

Sizes: T = 4 steps of W = 4 features, a head of 3 outputs on every step; the probe batch B = 5
(3 + 2 over two ranks: unequal shares, so a share's gradients wrongly scaled or a mean wrongly
weighted shows)."""

from __future__ import annotations

import torch
from torch import nn

from tests.helpers.references.modern_reference import Stack

STEPS, WIDTH, OUTPUTS, PROBE = 4, 4, 3, 5
KINDS = ("mingru", "minlstm", "mamba", "lru", "slstm", "mlstm")


class Classic(nn.Module):
    """A batch-first nn.LSTM (or GRU) of W units as a layer of `Stack`: its outputs alone."""

    def __init__(self, layer: nn.Module):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x)[0]


def _layers(kind: str) -> list[nn.Module]:
    if kind == "lstm":  # a classic layer, to mix with modern ones
        return [Classic(nn.LSTM(WIDTH, WIDTH, batch_first=True))]
    if kind == "mingru":
        from minGRU_pytorch import minGRU

        return [minGRU(WIDTH, expansion_factor=1.5)]  # an inner width of 6, projected back
    if kind == "minlstm":
        from minGRU_pytorch.minLSTM import minLSTM

        return [minLSTM(WIDTH)]
    if kind == "mamba":
        from mambapy.mamba import MambaBlock, MambaConfig

        # D·N = 8·130 > 1024: kept per D channel (the norm over N), its sequential scan; then
        # one of 8·3 channels kept whole, its parallel scan
        blocks = [MambaBlock(MambaConfig(d_model=WIDTH, n_layers=1, d_state=n, pscan=n < 130))
                  for n in (130, 3)]  # fmt: skip
        for block in blocks:  # Δ that moves with the input (so do the decay and its means)
            nn.init.normal_(block.dt_proj.weight, std=2.0)
        return blocks
    if kind == "lru":
        from LRU_pytorch import LRU

        return [LRU(WIDTH, WIDTH, 5)]  # complex state and parameters B, C
    if kind == "slstm":
        from xlstm import sLSTMLayer, sLSTMLayerConfig

        return [sLSTMLayer(sLSTMLayerConfig(embedding_dim=WIDTH, num_heads=2, backend="vanilla"))]
    if kind == "mlstm":
        from xlstm import mLSTMLayer, mLSTMLayerConfig

        # an inner width of 8 (not rounded up to 64): 2 heads of 4, C of 32 channels a step
        layer = mLSTMLayer(mLSTMLayerConfig(embedding_dim=WIDTH, context_length=STEPS, num_heads=2,
                                            round_proj_up_to_multiple_of=4))  # fmt: skip
        cell = layer.mlstm_cell
        nn.init.normal_(cell.fgate.weight, std=0.3)  # gates that move with the input
        nn.init.normal_(cell.igate.weight, std=0.3)
        nn.init.constant_(cell.igate.bias, 4.0)  # m ≥ 4: |q·n| beats e^{−m}, h reads n
        return [layer]
    raise ValueError(f"no modern kind {kind!r}")


def modern_module(kind: str, seed: int = 0) -> Stack:
    """x [B, T, W] -> x + layer(x) for the kind's layers -> a head [B, T, 3] (seeded); kinds
    joined by "+" ("slstm+mamba"): their layers in that order."""
    torch.manual_seed(seed)
    return Stack([layer for one in kind.split("+") for layer in _layers(one)], WIDTH, OUTPUTS)


def modern_probe(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(x [B, T, W], y [B, T, 3]), the same for a seed in every process."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(PROBE, STEPS, WIDTH, generator=generator)
    return x, torch.randn(PROBE, STEPS, OUTPUTS, generator=generator)
