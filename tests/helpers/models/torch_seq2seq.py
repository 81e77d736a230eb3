"""A PyTorch seq2seq whose decoder nn.LSTM is stepped once per token (`Seq2Seq`; its sizes `B`,
`I`, `H`, `V`, `SOURCE`, `TARGET`), its token data (`tokens`) and loss (`sequence_xent`),
for the tests of lstmviz.torch on models that call their recurrent layers many times."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

B, I, H, V = 2, 3, 3, 5  # batch, input width, units, vocabulary
SOURCE, TARGET = 4, 3  # encoder steps, decoder steps


class Seq2Seq(nn.Module):
    """Encoder nn.LSTM over the source; decoder nn.LSTM stepped once per target token from the
    encoder's (h_n, c_n), (h, c) handed on, teacher forcing; a Linear head on every step.
    `bridge`: the decoder's h0 is tanh(Linear(h_n)) (no hand-over by identity: no link, but
    the gradient still flows back). `read`: what the head and the next step take — "output"
    (the decoder's output), "state" (its h_n: a state gradient between calls) or "fed" (each
    step's input adds the previous step's output: an input that depends on the call before)."""

    def __init__(self, layers: int = 1, bridge: bool = False, read: str = "output"):
        super().__init__()
        self.src = nn.Embedding(V, I)
        self.tgt = nn.Embedding(V, I)
        self.encoder = nn.LSTM(I, H, num_layers=layers, batch_first=True)
        self.decoder = nn.LSTM(I, H, num_layers=layers, batch_first=True)
        self.bridge = nn.Linear(H, H) if bridge else None
        self.head = nn.Linear(H, V)
        self.read = read

    def forward(self, src, tgt_in):
        _, (h, c) = self.encoder(self.src(src))
        if self.bridge is not None:
            h = torch.tanh(self.bridge(h))
        emb = self.tgt(tgt_in)
        logits = []
        out = None
        for t in range(tgt_in.shape[1]):
            step = emb[:, t : t + 1]
            if self.read == "fed" and out is not None:
                step = step + 0.5 * out[..., :I]
            out, (h, c) = self.decoder(step, (h, c))
            logits.append(self.head(h[-1] if self.read == "state" else out[:, 0]))
        return torch.stack(logits, 1)  # [B, TARGET, V]


def sequence_xent(output, y):
    return F.cross_entropy(output.reshape(-1, V), y.reshape(-1))


def tokens(seed: int):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, V, (B, SOURCE), generator=gen)
    tgt = torch.randint(0, V, (B, TARGET + 1), generator=gen)
    return src, tgt[:, :-1], tgt[:, 1:]
