"""lstmviz.torch.model_gradients on a PyTorch seq2seq whose decoder steps an nn.LSTM once per
token, next to PyTorch's own forward + loss.backward() of the same module.

    .venv/bin/python bench/bench_torch_seq2seq.py            # the model below, median of 5
    .venv/bin/python bench/bench_torch_seq2seq.py --steps 10 --batch 8 --repeats 1

The module (the PyTorch tutorial's shape): embeddings of 128 for vocabularies of 1000; a
2-layer LSTM(256) encoder over the source; a decoder stepping a 2-layer LSTM(256) once per target
token from the encoder's (h, c), teacher forcing, its state handed on; Linear(256, 1000); cross
entropy over every target token. B = 64, 50 + 50 steps, CPU. PyTorch: zero_grad, forward,
backward. lstmviz: the whole trace (the encoder's 2 directions of 50 steps, the decoder's 2 of
50 calls each, their totals across the hand-over, weight gradients, gates) as NumPy. Medians of
--repeats after a warm-up, interleaved; the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from lstmviz.engine.native import kernels  # noqa: E402
from lstmviz.torch import model_gradients  # noqa: E402


class Seq2Seq(nn.Module):
    def __init__(self, vocabulary: int, embed: int, units: int):
        super().__init__()
        self.source = nn.Embedding(vocabulary, embed)
        self.target = nn.Embedding(vocabulary, embed)
        self.encoder = nn.LSTM(embed, units, num_layers=2, batch_first=True)
        self.decoder = nn.LSTM(embed, units, num_layers=2, batch_first=True)
        self.head = nn.Linear(units, vocabulary)

    def forward(self, source, target):
        _, state = self.encoder(self.source(source))
        steps = []
        for t in range(target.shape[1]):  # teacher forcing: the true previous token
            out, state = self.decoder(self.target(target[:, t:t + 1]), state)
            steps.append(self.head(out))
        return torch.cat(steps, 1)


def loss_fn(logits, y):
    return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="source and target lengths")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--units", type=int, default=256)
    parser.add_argument("--vocabulary", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    torch.manual_seed(0)
    net = Seq2Seq(args.vocabulary, 128, args.units).eval()
    shape = (args.batch, args.steps)
    source = torch.randint(1, args.vocabulary, shape)
    target = torch.randint(1, args.vocabulary, shape)
    y = torch.randint(0, args.vocabulary, shape)

    def pytorch():
        net.zero_grad()
        loss_fn(net(source, target), y).backward()

    def ours():
        model_gradients(net, (source, target), y, loss_fn=loss_fn)

    times: dict[str, list[float]] = {"pytorch": [], "lstmviz": []}
    for fn in (pytorch, ours):  # warm-up: tracing, TensorFlow's start
        fn()
    for _ in range(args.repeats):
        for name, fn in (("pytorch", pytorch), ("lstmviz", ours)):
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    built = kernels.build_description() if kernels.library() is not None else "while loops"
    print(f"CPU · {os.cpu_count()} cores · torch {torch.__version__} · "
          f"{kernels.cpu_vector_extensions()} · LSTM {built} · load {load:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at the end")  # fmt: skip
    print(f"seq2seq: 2-layer LSTM({args.units}) encoder → 2-layer LSTM({args.units}) decoder "
          f"stepped per token; T={args.steps}+{args.steps} B={args.batch}; median of "
          f"{args.repeats}")  # fmt: skip
    base = statistics.median(times["pytorch"])
    for name, label in (("pytorch", "PyTorch forward+backward"),
                        ("lstmviz", "lstmviz.torch.model_gradients")):  # fmt: skip
        ms = 1000 * statistics.median(times[name])
        print(f"  {label:30s} {ms:8.1f} ms {ms / 1000 / base:5.2f}×")


if __name__ == "__main__":
    main()
