"""Model mode on long sequences: time against T, and peak memory against the trace's size.

    .venv/bin/python bench/bench_long.py                        # T = 5,000 and 20,000
    .venv/bin/python bench/bench_long.py --steps 5000,20000 --batch 8 --units 128 --repeats 3

The model: Embedding(1000, 32) → Bidirectional(LSTM(H, return_sequences=True)) → LSTM(H) →
Dense(1, sigmoid), binary cross-entropy, any sequence length; B sequences of T token ids.
Each T runs in a fresh process (`--probe`): `lstmviz.model_gradients(model, x, y)` on two
short sequences first (tracing for any length, the native kernels loaded), then the T-step
calls (median of --repeats); the peak resident memory of the first T-step call above the
resident memory before it (Linux's VmHWM, reset just before) against the bytes of the trace
it returns and the memory guard's estimate (`model_bytes`, beyond which a run is refused).
Linear growth in T is 4× from 5,000 to 20,000.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_model, also when loaded by path

from bench_model import build  # noqa: E402 (the model of bench_model.py, any length)

VOCABULARY, EMBED = 1000, 32


def _status_bytes(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0


def probe(steps: int, batch: int, units: int, repeats: int) -> dict:
    """In this process: the seconds of each T-step call, the first one's peak memory growth,
    its trace's bytes and the memory guard's estimate."""
    import lstmviz
    from lstmviz.engine.modes.model import model_bytes
    from lstmviz.weights.model_files import spec_from_keras

    model = build(VOCABULARY, EMBED, units, None)
    rng = np.random.default_rng(0)
    x = rng.integers(1, VOCABULARY, (batch, steps)).astype(np.int32)
    y = rng.integers(0, 2, (batch, 1)).astype(np.float32)
    for short in (50, 60):  # traced for any length (the second length), kernels loaded
        lstmviz.model_gradients(model, x[:, :short], y)
    seconds = []
    before = _status_bytes("VmRSS")
    with contextlib.suppress(OSError):
        Path(f"/proc/{os.getpid()}/clear_refs").write_text("5")  # reset VmHWM
    for k in range(repeats):
        start = time.perf_counter()
        trace = lstmviz.model_gradients(model, x, y)
        seconds.append(time.perf_counter() - start)
        if k == 0:
            peak = _status_bytes("VmHWM") - before
            size = sum(np.asarray(a).nbytes for a in trace.arrays.values())
        del trace
    guard = model_bytes(spec_from_keras(model), steps, batch)
    return {"seconds": seconds, "peak": peak, "trace": size, "guard": guard}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="5000,20000", help="comma-separated lengths T")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--probe", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(args.probe, args.batch, args.units, args.repeats)))
        return
    print(f"Embedding({VOCABULARY}, {EMBED}) → Bidirectional(LSTM({args.units}, sequences)) → "
          f"LSTM({args.units}) → Dense(1); B={args.batch}; median of {args.repeats}; "
          f"load {os.getloadavg()[0]:.2f} at start")  # fmt: skip
    medians = {}
    for steps in (int(t) for t in args.steps.split(",")):
        command = [sys.executable, __file__, "--probe", str(steps), "--batch", str(args.batch),
                   "--units", str(args.units), "--repeats", str(args.repeats)]  # fmt: skip
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        result = json.loads(out.strip().splitlines()[-1])
        medians[steps] = statistics.median(result["seconds"])
        mib = 2**20
        print(f"  T={steps:>6}: {medians[steps]:7.2f} s (each: "
              f"{', '.join(f'{s:.2f}' for s in result['seconds'])}); trace "
              f"{result['trace'] / mib:,.0f} MiB, peak RSS +{result['peak'] / mib:,.0f} MiB "
              f"({result['peak'] / result['trace']:.2f}× the trace), guard's estimate "
              f"{result['guard'] / mib:,.0f} MiB")  # fmt: skip
        sys.stdout.flush()
    lengths = sorted(medians)
    if len(lengths) > 1:
        short, long = lengths[0], lengths[-1]
        print(f"  growth T={short} → {long}: {medians[long] / medians[short]:.2f}× "
              f"(linear: {long / short:.2f}×); load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
