"""lstmviz.torch.model_gradients on modern recurrent layers next to PyTorch's own forward +
loss.backward() of the same module.

    .venv/bin/python bench/bench_modern.py                     # every kind (below)
    .venv/bin/python bench/bench_modern.py --kinds mamba --steps 512 --batch 8 --repeats 5
    .venv/bin/python bench/bench_modern.py --threads 1             # steadier under load

The modules: 4 layers of one kind with residual connections (x + layer(x), no norm, no
feed-forward), d_model 128, a linear head on every step, MSE against fixed targets, T=512,
B=8, CPU: minGRU(128), minLSTM(128) (mingru-pytorch), MambaBlock (mambapy, d_state 16, its
parallel scan: D·N = 4096 a step, kept per D channel), LRU(128, 128, 128) (lru-pytorch, whose
own forward loops over samples and steps in Python), sLSTMLayer (xlstm, 4 heads, its "vanilla"
cell: a Python loop over the steps), mLSTMLayer (xlstm, 4 heads, context 512: its parallel
form); hybrid: nn.LSTM(128) and minGRU(128) in turn (the classic layers on lstmviz's native
kernels, the module traced twice: docs/modern-recurrence.md). PyTorch: zero_grad, forward,
loss.backward(). lstmviz: the whole trace (every layer's state, total and direct dL/dh_t, the
anchored pass, weight gradients, saliency) as NumPy. Medians of --repeats after a warm-up
call, interleaved.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from bench_torch import median_seconds, print_ratios  # noqa: E402
from torch import nn  # noqa: E402

from lstmviz.engine.native import kernels  # noqa: E402
from lstmviz.torch import model_gradients  # noqa: E402

KINDS = ("mingru", "minlstm", "mamba", "lru", "slstm", "mlstm", "hybrid")


class Sequence(nn.Module):
    """An nn.LSTM's output sequence alone."""

    def __init__(self, width: int):
        super().__init__()
        self.lstm = nn.LSTM(width, width, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def layer(kind: str, width: int, index: int = 0) -> nn.Module:
    if kind == "hybrid":  # nn.LSTM, minGRU, nn.LSTM, …
        return layer("mingru", width) if index % 2 else Sequence(width)
    if kind == "mingru":
        from minGRU_pytorch import minGRU

        return minGRU(width)
    if kind == "minlstm":
        from minGRU_pytorch.minLSTM import minLSTM

        return minLSTM(width)
    if kind == "mamba":
        from mambapy.mamba import MambaBlock, MambaConfig

        return MambaBlock(MambaConfig(d_model=width, n_layers=1, d_state=16))
    if kind == "lru":
        from LRU_pytorch import LRU

        return LRU(width, width, width)
    if kind == "slstm":
        from xlstm import sLSTMLayer, sLSTMLayerConfig

        return sLSTMLayer(sLSTMLayerConfig(embedding_dim=width, num_heads=4, backend="vanilla"))
    from xlstm import mLSTMLayer, mLSTMLayerConfig

    return mLSTMLayer(mLSTMLayerConfig(embedding_dim=width, num_heads=4, context_length=512))


class Residual(nn.Module):
    def __init__(self, kind: str, width: int, depth: int):
        super().__init__()
        self.layers = nn.ModuleList(layer(kind, width, n) for n in range(depth))
        self.head = nn.Linear(width, width)

    def forward(self, x):
        for block in self.layers:
            x = x + block(x)
        return self.head(x)


def torch_backward(net: nn.Module, x, y) -> None:
    net.zero_grad()
    nn.functional.mse_loss(net(x), y).backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch's threads (0: its own)")
    args = parser.parse_args()
    if args.threads:  # one thread is steadier on a shared machine
        torch.set_num_threads(args.threads)
    print(f"T={args.steps} B={args.batch} d_model={args.width}, {args.depth} residual layers, "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads), {os.cpu_count()} "
          f"CPUs ({kernels.cpu_vector_extensions()}); load {os.getloadavg()[0]:.1f}")  # fmt: skip
    for kind in args.kinds:
        torch.manual_seed(0)
        net = Residual(kind, args.width, args.depth)
        x = torch.randn(args.batch, args.steps, args.width)
        y = torch.randn(args.batch, args.steps, args.width)
        runs = {
            "pytorch forward + backward": lambda net=net, x=x, y=y: torch_backward(net, x, y),
            "lstmviz.torch.model_gradients": lambda net=net, x=x, y=y: model_gradients(
                net, x, y, "mse"),  # fmt: skip
        }
        for fn in runs.values():  # the first call: imports, allocations
            fn()
        times = {name: [] for name in runs}
        for _ in range(args.repeats):
            for name, fn in runs.items():
                times[name] += median_seconds(fn, 1)
        print(f"{kind} (load {os.getloadavg()[0]:.1f})")
        print_ratios(times)


if __name__ == "__main__":
    main()
