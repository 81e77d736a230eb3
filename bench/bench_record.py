"""What GradientFlowCallback costs model.fit per record.

    .venv/bin/python bench/bench_record.py                  # the reference shape (below)
    .venv/bin/python bench/bench_record.py --batches 12 --repeats 3

The model: Embedding(20000, 128) → Bidirectional(LSTM(128, return_sequences)) → LSTM(128) →
Dense(1, sigmoid), binary cross-entropy, Adam; T=200. The callback records every batch on 64
fixed samples (three LSTM directions of 128 units). Each repeat fits the same model for
--batches batches of --batch samples without the callback and with it (interleaved, the
first fit of each a warm-up), so the overhead per record is (with − without) / batches; the
file's `record_seconds` (model mode on the current weights) and the time `append` takes to
write the record (the rows and the full trace) split it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_model, also when loaded by path

from bench_model import build  # noqa: E402 (the same model, this folder)

from lstmviz.engine.device import device_description  # noqa: E402
from lstmviz.io.recording import load_recording  # noqa: E402
from lstmviz.keras import GradientFlowCallback  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64, help="fit's batch size")
    parser.add_argument("--samples", type=int, default=64, help="samples a record runs on")
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--vocabulary", type=int, default=20000)
    parser.add_argument("--batches", type=int, default=8, help="batches per fit")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lstmviz-bench-") as folder:
        measure(args, Path(folder))


def measure(args: argparse.Namespace, folder: Path) -> None:
    """Fit without and with the callback, print the figures (the recording goes to `folder`)."""
    model = build(args.vocabulary, args.units, args.units, args.steps)
    rng = np.random.default_rng(0)
    count = args.batch * args.batches
    x = rng.integers(1, args.vocabulary, (count, args.steps)).astype(np.int32)
    y = rng.integers(0, 2, (count, 1)).astype(np.float32)
    data = (x[: args.samples], y[: args.samples])
    callback = GradientFlowCallback(data, folder / "run.lvz", every=1)
    writes: list[float] = []
    append = callback.writer.append

    def timed_append(*a):
        start = time.perf_counter()
        append(*a)
        writes.append(time.perf_counter() - start)

    callback.writer.append = timed_append

    def fit(callbacks) -> float:
        start = time.perf_counter()
        model.fit(x, y, batch_size=args.batch, epochs=1, shuffle=False, verbose=0,
                  callbacks=callbacks)  # fmt: skip
        return time.perf_counter() - start

    fit([])  # warm-up: Keras traces its train step
    fit([callback])  # and lstmviz its model-mode step
    plain, recorded = [], []
    for _ in range(args.repeats):
        plain.append(fit([]))
        recorded.append(fit([callback]))
    rec = load_recording(folder / "run.lvz", trace=False)
    compute = rec.record_seconds[args.batches :]  # after the warm-up's records
    size = os.path.getsize(folder / "run.lvz")
    info = device_description()
    flags = sorted({f for f in Path("/proc/cpuinfo").read_text().split() if f.startswith("avx")})
    print(f"{info['device']} · {os.cpu_count()} cores · TF {info['tensorflow']} · LSTM "
          f"{info['lstm']} · {' '.join(flags)}")  # fmt: skip
    print(f"model: Embedding({args.vocabulary}, {args.units}) → Bidirectional(LSTM({args.units}, "
          f"return_sequences)) → LSTM({args.units}) → Dense(1); T={args.steps}; fit batch "
          f"{args.batch}, records on {args.samples} samples; {args.batches} batches a fit, "
          f"median of {args.repeats}")  # fmt: skip
    per_batch = statistics.median(plain) / args.batches
    overhead = (statistics.median(recorded) - statistics.median(plain)) / args.batches
    print(f"  fit batch without recording  {per_batch * 1000:8.1f} ms")
    print(f"  overhead per record          {overhead * 1000:8.1f} ms")
    print(f"    model mode (record_seconds) {statistics.median(compute) * 1000:7.1f} ms")
    write = statistics.median(writes[args.batches :])
    print(f"    writing the record          {write * 1000:7.1f} ms  (file {size / 2**20:.0f} MiB "
          f"for {len(rec)} records)")  # fmt: skip


if __name__ == "__main__":
    main()
