"""lstmviz.torch.model_gradients next to PyTorch's own forward + loss.backward() of the same
module, and the unrolled reference people write to get dL/dh_t (LSTMCell steps, retain_grad).

    .venv/bin/python bench/bench_torch.py                      # the reference model (below)
    .venv/bin/python bench/bench_torch.py --steps 200 --batch 64 --units 128 --repeats 5

The module: Embedding(20000, 128) → LSTM(128, bidirectional) → LSTM(128) → Linear(2), cross
entropy on the last step, batch_first, CPU. PyTorch: zero_grad, forward, loss.backward() (the
fused LSTM kernels; only ∂L/∂output is reachable). lstmviz: the whole trace (every direction's
h, c, total and direct dL/dh_t, dL/dc_t, weight gradients, gates, saliency) as NumPy. Unrolled:
the same module's weights stepped by torch._VF.lstm_cell in Python, every h_t and c_t kept with
retain_grad(), one backward (the totals it gives are lstmviz's). Medians of --repeats after a
warm-up, interleaved.
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


class Net(nn.Module):
    def __init__(self, vocabulary: int, embed: int, units: int):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, embed)
        self.bi = nn.LSTM(embed, units, bidirectional=True, batch_first=True)
        self.top = nn.LSTM(2 * units, units, batch_first=True)
        self.head = nn.Linear(units, 2)

    def forward(self, x):
        out, _ = self.bi(self.embed(x))
        out, _ = self.top(out)
        return self.head(out[:, -1])


def torch_backward(net: Net, x, y) -> None:
    net.zero_grad()
    nn.functional.cross_entropy(net(x), y).backward()


def unrolled(net: Net, x, y) -> None:
    """Every state kept (retain_grad) through the cells stepped in Python."""
    kept = []

    def direction(lstm: nn.LSTM, inputs, suffix: str, backwards: bool):
        w = [getattr(lstm, f"{k}_l0{suffix}") for k in ("weight_ih", "weight_hh", "bias_ih",
                                                        "bias_hh")]  # fmt: skip
        h = c = inputs.new_zeros(inputs.shape[0], lstm.hidden_size)
        outs = [None] * inputs.shape[1]
        order = range(inputs.shape[1] - 1, -1, -1) if backwards else range(inputs.shape[1])
        for t in order:
            h, c = torch._VF.lstm_cell(inputs[:, t], (h, c), *w)
            h.retain_grad()
            c.retain_grad()
            kept.extend((h, c))
            outs[t] = h
        return torch.stack(outs, 1)

    net.zero_grad()
    e = net.embed(x)
    e.retain_grad()
    bi = torch.cat([direction(net.bi, e, "", False), direction(net.bi, e, "_reverse", True)], 2)
    top = direction(net.top, bi, "", False)
    nn.functional.cross_entropy(net.head(top[:, -1]), y).backward()


def median_seconds(fn, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--vocabulary", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-unrolled", action="store_true", help="skip the slow reference")
    args = parser.parse_args()
    torch.manual_seed(0)
    net = Net(args.vocabulary, args.units, args.units)
    x = torch.randint(1, args.vocabulary, (args.batch, args.steps))
    y = torch.randint(0, 2, (args.batch,))
    runs = {
        "pytorch forward + backward": lambda: torch_backward(net, x, y),
        "lstmviz.torch.model_gradients": lambda: model_gradients(net, x, y, "cross_entropy"),
    }
    if not args.no_unrolled:
        runs["unrolled LSTMCell + retain_grad"] = lambda: unrolled(net, x, y)
    for fn in runs.values():  # warm-up: TensorFlow traces its graphs once per shape
        fn()
    times = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, fn in runs.items():
            times[name] += median_seconds(fn, 1)
    cpu = os.cpu_count()
    print(f"T={args.steps} B={args.batch} H={args.units}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), {cpu} CPUs, LSTM kernel "
          f"{'native' if kernels.library() is not None else 'while_loop'}; load "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    print_ratios(times)


def print_ratios(times: dict[str, list[float]]) -> None:
    """Each run's median (ms), its ratio to PyTorch's forward + backward and every time."""
    base = statistics.median(times["pytorch forward + backward"])
    for name, values in times.items():
        m = statistics.median(values)
        print(f"  {name:34s} {1000 * m:8.0f} ms  ({m / base:4.2f}×)  "
              f"[{', '.join(f'{1000 * v:.0f}' for v in values)}]")


if __name__ == "__main__":
    main()
