"""What lstmviz.lightning.GradientFlowCallback costs a Lightning run, on one process and under DDP.

    .venv/bin/python bench/bench_lightning.py                 # the reference sizes (below)
    .venv/bin/python bench/bench_lightning.py --steps 8 --every 4 --units 16 --vocabulary 500 \
        --time 20 --batch 8 --ddp-steps 4 --ddp-every 2      # a quick check that it runs

The model: Embedding(20000, 128) → bidirectional LSTM(128) → LSTM(128) → Linear(1) on the last
step, binary cross-entropy on logits, Adam; T=200, B=64 (three LSTM directions of 128 units).

1. Overhead, one process: `--steps` optimizer steps (100) of `trainer.fit` without the callback
   and with it recording every `--every` (50) steps on `--batch` fixed samples, interleaved,
   `--repeats` times after a warm-up fit of each (PyTorch's and lstmviz's first calls, the
   first record's compilation); prints the median times and with / without.
2. A record under DDP: the same fit on `--ranks` CPU processes (gloo; Lightning starts each
   from this file) recording every `--ddp-every` steps; each rank times its records (its share
   of the probe batch, the gather, and on rank 0 the combine and the write), the first left out
   (compilation), against the single-process records of part 1. Each rank gets its share of
   the cores' threads (cores / ranks), the single process all of them: about 1/N means the
   work is split, not that each rank is N times faster.

Prints the machine (CPU model, AVX-512 flags) and the load average before and after: figures
from a loaded machine are not figures (docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DDP_CHILD = "--ddp-child"  # the argument that makes this file one rank of part 2


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", type=int, default=200, help="T: timesteps")
    parser.add_argument("--batch", type=int, default=64, help="training and probe batch B")
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--vocabulary", type=int, default=20000)
    parser.add_argument("--steps", type=int, default=100, help="optimizer steps per fit")
    parser.add_argument("--every", type=int, default=50, help="a record every N steps")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2, help="DDP processes of part 2")
    parser.add_argument("--ddp-steps", type=int, default=8)
    parser.add_argument("--ddp-every", type=int, default=2)
    parser.add_argument(DDP_CHILD, metavar="OUT", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def make_module(args: argparse.Namespace):
    """The benchmark model as a LightningModule: tokens [B, T] → logits [B, 1]."""
    import lightning.pytorch as pl
    import torch
    from torch import nn

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.embed = nn.Embedding(args.vocabulary, args.units)
            self.bi = nn.LSTM(args.units, args.units, batch_first=True, bidirectional=True)
            self.top = nn.LSTM(2 * args.units, args.units, batch_first=True)
            self.out = nn.Linear(args.units, 1)

        def forward(self, x):
            return self.out(self.top(self.bi(self.embed(x))[0])[0][:, -1])

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.binary_cross_entropy_with_logits(self(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-3)

    return Module()


def data(args: argparse.Namespace, samples: int):
    """(x [samples, T] token ids, y [samples, 1] in {0, 1}), seeded."""
    import torch

    generator = torch.Generator().manual_seed(0)
    x = torch.randint(1, args.vocabulary, (samples, args.time), generator=generator)
    y = torch.randint(0, 2, (samples, 1), generator=generator).float()
    return x, y


def loader(args: argparse.Namespace, steps: int, ranks: int = 1):
    """`steps` batches of B for each of `ranks` ranks, in order."""
    import torch

    dataset = torch.utils.data.TensorDataset(*data(args, args.batch * steps * ranks))
    return torch.utils.data.DataLoader(dataset, batch_size=args.batch)


def timed_callback(args: argparse.Namespace, path: Path, every: int):
    """The callback, timing each record it makes (`.seconds`)."""
    from lstmviz.lightning import GradientFlowCallback

    class Timed(GradientFlowCallback):
        def setup(self, trainer, pl_module, stage):
            super().setup(trainer, pl_module, stage)
            record = self.recorder.record

            def timed(*a, **k):
                start = time.perf_counter()
                trace = record(*a, **k)
                self.seconds.append(time.perf_counter() - start)
                return trace

            self.recorder.record = timed

    callback = Timed(data(args, args.batch), path, every=every, loss_fn="bce_with_logits")
    callback.seconds = []
    return callback



def trainer(steps: int, callbacks: list, **extra):
    import logging

    import lightning.pytorch as pl

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # not its info lines

    return pl.Trainer(accelerator="cpu", max_steps=steps, callbacks=callbacks, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, **extra)  # fmt: skip


def fit_seconds(args: argparse.Namespace, callbacks: list) -> float:
    module = make_module(args)
    run = trainer(args.steps, callbacks, devices=1)
    start = time.perf_counter()
    run.fit(module, loader(args, args.steps))
    return time.perf_counter() - start


def overhead(args: argparse.Namespace, folder: Path) -> list[float]:
    """Part 1: prints the fits' times; returns the single process's record times."""
    records: list[float] = []

    def recorded() -> float:
        callback = timed_callback(args, folder / "one.lvz", args.every)
        seconds = fit_seconds(args, [callback])
        records.extend(callback.seconds[1:])  # the first compiles
        return seconds

    fit_seconds(args, [])  # warm-up of each
    recorded()
    records.clear()
    plain, with_callback = [], []
    for _ in range(args.repeats):
        plain.append(fit_seconds(args, []))
        with_callback.append(recorded())
    a, b = statistics.median(plain), statistics.median(with_callback)
    print(f"one process, {args.steps} optimizer steps, a record every {args.every}:")
    print(f"  fit without the callback {a:.2f} s, with it {b:.2f} s (medians of "
          f"{args.repeats}): with / without = {b / a:.4f} (+{100 * (b / a - 1):.2f}%)")
    if records:
        print(f"  a record: {statistics.median(records):.3f} s (median of {len(records)})")
    return records


def ddp_child(args: argparse.Namespace) -> None:
    """One rank of part 2 (Lightning starts the others from this file with the same arguments):
    writes its record times to OUT/rank{r}.json."""
    import torch

    out = Path(getattr(args, DDP_CHILD.strip("-").replace("-", "_")))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // args.ranks))
    callback = timed_callback(args, out / "ddp.lvz", args.ddp_every)
    run = trainer(args.ddp_steps, [callback], devices=args.ranks, strategy="ddp")
    run.fit(make_module(args), loader(args, args.ddp_steps, args.ranks))
    (out / f"rank{run.global_rank}.json").write_text(json.dumps(callback.seconds))


def under_ddp(args: argparse.Namespace, folder: Path, single: list[float]) -> None:
    """Part 2: starts the DDP run and prints each rank's record time against `single`."""
    argv = list(sys.argv[1:])
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", PYTHONWARNINGS="ignore",
               TF_CPP_MIN_LOG_LEVEL="3")  # fmt: skip
    run = subprocess.run([sys.executable, __file__, *argv, DDP_CHILD, str(folder)], env=env,
                         capture_output=True, text=True)  # fmt: skip
    if run.returncode:
        sys.exit(f"the DDP run failed:\n{run.stdout[-2000:]}{run.stderr[-4000:]}")
    print(f"DDP, {args.ranks} processes (gloo), a record every {args.ddp_every} of "
          f"{args.ddp_steps} steps, the probe batch of {args.batch} split across them:")
    base = statistics.median(single) if single else float("nan")
    for rank in range(args.ranks):
        times = json.loads((folder / f"rank{rank}.json").read_text())[1:]
        if not times:
            print(f"  rank {rank}: no record after the first (raise --ddp-steps)")
            continue
        median = statistics.median(times)
        print(f"  rank {rank}: a record {median:.3f} s (median of {len(times)}), "
              f"{median / base:.3f} of the single process's {base:.3f} s "
              f"(1/{args.ranks} = {1 / args.ranks:.3f})")


def machine() -> str:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    flags = sorted(set(re.findall(r"avx512[a-z]*", text)))
    return (f"{model.group(1) if model else 'unknown CPU'}, {os.cpu_count()} cores; "
            f"{' '.join(flags) or 'no AVX-512'}")


def load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    if getattr(args, DDP_CHILD.strip("-").replace("-", "_")):
        ddp_child(args)
        return
    import lightning
    import torch

    print(f"machine: {machine()}")
    print(f"PyTorch {torch.__version__}, Lightning {lightning.__version__}; T={args.time}, "
          f"B={args.batch}, units {args.units}, vocabulary {args.vocabulary}")
    print(f"load average before: {load()}")
    with tempfile.TemporaryDirectory(prefix="lstmviz-bench-") as folder:
        single = overhead(args, Path(folder))
        under_ddp(args, Path(folder), single)
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
