"""Time every engine mode next to Keras's LSTM forward+backward, same shapes, one process.

    .venv/bin/python bench/bench.py            # the full grid (slow on 2 cores)
    .venv/bin/python bench/bench.py --quick    # three shapes
    .venv/bin/python bench/bench.py --shapes 500x64x128 --modes taped --repeats 9

Each figure is the median of --repeats runs after one warm-up, the modes and Keras interleaved
so that load from other processes hits them alike. Columns: ms, the ratio to Keras's
forward+backward on the same x [T, B, I], the matmul GFLOP/s achieved (FLOPs of the matmuls the
engine does, counted below) and that as a fraction of this machine's peak (a 2048³ float32
matmul, timed here). The taped engine computes far more than Keras: every h_t and c_t, the
direct and total gradient at every state, the weight and initial-state gradients, the norms,
all copied back to NumPy; Keras computes its weight gradients only.

- multipass: P=4 passes of T/4 steps; full, truncated and reference gradients (3 BPTTs).
- batchwise: N=2 batches, each with its own weights; time per batch.
- connectivity: the taped run plus the map C [T, T] (T²/2 backward cell steps); by default
  only for T <= 100 (--connectivity-max-steps).
- masked (only when asked for, --modes masked): `cell.lstm_sequence` alone, forward and every
  gradient (weights, initial state, every state's total gradient), without a mask ("sequence")
  and with one ("sequence+mask": post-padding, lengths T/2..T), and Keras's LSTM called with
  the same mask ("keras+mask").

The header names the CPU's vector extensions and, with the native kernels, what they were built
for (`LSTMVIZ_NATIVE_ARCH=haswell` builds and runs the AVX2 code path on an AVX-512 CPU).

Then how the taped engine's cost grows with T (250 -> 1000 at B=64, H=128: linear is 4×), and
the peak resident memory of a taped run against the size of its trace.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lstmviz.engine.cells.lstm import lstm_sequence  # noqa: E402
from lstmviz.engine.device import device_description  # noqa: E402
from lstmviz.engine.modes.batchwise import batchwise_gradients  # noqa: E402
from lstmviz.engine.modes.multipass import multipass_gradients  # noqa: E402
from lstmviz.engine.modes.taped import connectivity_map, taped_gradients  # noqa: E402
from lstmviz.engine.native.kernels import build_description, cpu_vector_extensions  # noqa: E402
from lstmviz.engine.quiet_tensorflow import tf  # noqa: E402
from lstmviz.weights import random_weights  # noqa: E402

MODES = ("taped", "multipass", "batchwise", "connectivity")
OPT_IN_MODES = ("masked",)  # not in the default run
GRID = [(t, b, h) for t in (100, 500, 2000) for b in (16, 64) for h in (64, 128, 256)]
QUICK = [(100, 16, 64), (500, 64, 128), (2000, 16, 128)]
PASSES, BATCHES = 4, 2


def lstm_flops(steps: int, batch: int, input_dim: int, hidden: int, extra_rows: int = 0) -> float:
    """Matmul FLOPs of one forward+backward: per step x·W and h·U forward, dz·Uᵀ, xᵀ·dz and
    hᵀ·dz backward (2 FLOPs per multiply-add). extra_rows = 1 counts the bias row the engine
    folds into its kernel."""
    inputs = input_dim + extra_rows
    return 2.0 * steps * batch * 4 * hidden * (3 * hidden + 2 * inputs)


def connectivity_flops(steps: int, batch: int, hidden: int) -> float:
    """The map's own matmuls: at step s, T-s stacked deltas through h·U and back (dz·Uᵀ)."""
    return 16.0 * batch * hidden * hidden * steps * (steps + 1) / 2


def peak_matmul_gflops(repeats: int) -> float:
    a = tf.random.normal([2048, 2048])
    matmul = tf.function(lambda: tf.reduce_sum(tf.matmul(a, a)))
    times = timed({"peak": lambda: matmul().numpy()}, repeats)["peak"]
    return 2 * 2048**3 / times / 1e9


def timed(fns: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each callable over `repeats` rounds after a warm-up, interleaved."""
    for fn in fns.values():
        fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(s) for name, s in samples.items()}


def keras_forward_backward(x: np.ndarray, weights, mask: np.ndarray | None = None):
    """Keras's LSTM on x [T, B, I] (fed batch-major, as Keras wants), with `mask` [T, B] when
    given: loss mean(h), grads."""
    import keras

    layer = keras.layers.LSTM(weights.hidden, return_sequences=True)
    layer.build((x.shape[1], x.shape[0], x.shape[2]))
    layer.set_weights([weights.kernel, weights.recurrent_kernel, weights.bias])
    batch_major = tf.constant(x.transpose(1, 0, 2))
    options = {} if mask is None else {"mask": tf.constant(mask.T > 0)}

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(layer(batch_major, **options))
        return tape.gradient(loss, layer.trainable_weights)

    return lambda: [g.numpy() for g in step()]


def sequence_forward_backward(x: np.ndarray, weights, mask: np.ndarray | None = None):
    """`lstm_sequence` on x [T, B, I] from a zero state, with `mask` [T, B] when given,
    compiled: loss mean(h); grads of the weights, the initial state and the probes."""
    batch, hidden = x.shape[1], weights.hidden
    w = [tf.constant(a) for a in (weights.kernel, weights.recurrent_kernel, weights.bias)]
    x, masks = tf.constant(x), [] if mask is None else [tf.constant(mask)]

    @tf.function
    def step():
        state = [tf.zeros((batch, hidden)) for _ in range(2)]
        probes = [tf.zeros((x.shape[0], batch, hidden)) for _ in range(2)]
        with tf.GradientTape() as tape:
            tape.watch(w + state + probes)
            h, _ = lstm_sequence(x, *state, *w, *probes, *masks)
            loss = tf.reduce_mean(h)
        return tape.gradient(loss, w + state + probes)

    return lambda: [g.numpy() for g in step()]


def post_padding(steps: int, batch: int, rng) -> np.ndarray:
    """A [T, B] float32 mask of sequences padded at the end, lengths drawn from T/2..T."""
    lengths = rng.integers(steps // 2, steps + 1, size=batch)
    return (np.arange(steps)[:, None] < lengths[None, :]).astype(np.float32)


def problem(steps: int, batch: int, input_dim: int, hidden: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((steps, batch, input_dim)).astype(np.float32)
    return x, random_weights(input_dim, hidden, rng)


def mode_calls(modes, steps, batch, input_dim, hidden, connectivity_max):
    """name -> (callable, matmul FLOPs, seconds divisor) for one shape."""
    x, w = problem(steps, batch, input_dim, hidden)
    flops = lstm_flops(steps, batch, input_dim, hidden, extra_rows=1)
    calls = {
        "keras": (keras_forward_backward(x, w), lstm_flops(steps, batch, input_dim, hidden), 1)
    }
    if "taped" in modes:
        calls["taped"] = (lambda: taped_gradients(x, w), flops, 1)
    if "multipass" in modes and steps % PASSES == 0:
        x_passes = x.reshape(PASSES, steps // PASSES, batch, input_dim)
        calls["multipass"] = (lambda: multipass_gradients(x_passes, w), 3 * flops, 1)
    if "batchwise" in modes:
        weights = [w, problem(steps, batch, input_dim, hidden, seed=1)[1]]
        xs = np.stack([x, x])
        calls["batchwise"] = (lambda: batchwise_gradients(xs, weights), flops, BATCHES)
    if "connectivity" in modes and steps <= connectivity_max:
        total = flops + connectivity_flops(steps, batch, hidden)
        calls["connectivity"] = (lambda: connectivity_map(x, w), total, 1)
    if "masked" in modes:
        mask = post_padding(steps, batch, np.random.default_rng(2))
        calls["sequence"] = (sequence_forward_backward(x, w), flops, 1)
        calls["sequence+mask"] = (sequence_forward_backward(x, w, mask), flops, 1)
        keras_flops = lstm_flops(steps, batch, input_dim, hidden)
        calls["keras+mask"] = (keras_forward_backward(x, w, mask), keras_flops, 1)
    return calls


def grid_table(shapes, modes, input_dim, repeats, peak, connectivity_max) -> None:
    print(
        f"{'T':>5} {'B':>3} {'H':>4}  {'mode':<16}{'ms':>9} {'× keras':>8} {'GFLOP/s':>8} "
        f"{'of peak':>8}"
    )
    for steps, batch, hidden in shapes:
        calls = mode_calls(modes, steps, batch, input_dim, hidden, connectivity_max)
        seconds = timed({name: fn for name, (fn, _, _) in calls.items()}, repeats)
        keras_s = seconds["keras"]
        for name, (_, flops, per) in calls.items():
            s = seconds[name] / per
            label = name + (" /batch" if per > 1 else "")
            gflops = flops / s / 1e9
            print(
                f"{steps:>5} {batch:>3} {hidden:>4}  {label:<16}{1000 * s:>9.1f} "
                f"{s / keras_s:>8.2f} {gflops:>8.1f} "
                + (f"{gflops / peak:>8.0%}" if np.isfinite(peak) else f"{'—':>8}")
            )
        sys.stdout.flush()


def _status_bytes(key: str) -> int | None:
    """A `VmRSS`/`VmHWM` line of /proc/self/status in bytes (None where there is no /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def memory_probe(steps: int, batch: int, input_dim: int, hidden: int) -> None:
    """Run in a fresh process: print how far one taped run lifts the resident set above where
    it stood before the run, and the trace's size in bytes. The peak is Linux's VmHWM, reset
    just before the run; elsewhere getrusage's ru_maxrss (whose peak may be TF's import)."""
    taped_gradients(*problem(4, batch, input_dim, hidden))  # traced and compiled first
    before = _status_bytes("VmRSS") or 0
    with contextlib.suppress(OSError):
        Path(f"/proc/{os.getpid()}/clear_refs").write_text("5")  # reset VmHWM
    trace = taped_gradients(*problem(steps, batch, input_dim, hidden))
    peak = _status_bytes("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(peak - before, sum(np.asarray(a).nbytes for a in trace.arrays.values()))


def growth_and_memory(input_dim: int, repeats: int) -> None:
    short, long = problem(250, 64, input_dim, 128), problem(1000, 64, input_dim, 128)
    seconds = timed(
        {"250": lambda: taped_gradients(*short), "1000": lambda: taped_gradients(*long)}, repeats
    )
    print(
        f"\ncost growth with T (taped, B=64 H=128): T=250 {1000 * seconds['250']:.1f} ms, "
        f"T=1000 {1000 * seconds['1000']:.1f} ms: {seconds['1000'] / seconds['250']:.2f}× "
        "(linear = 4×)"
    )
    print("\npeak RSS of one taped run above the RSS before it (fresh process) vs its trace:")
    for steps, batch, hidden in ((500, 64, 128), (2000, 64, 256)):
        shape = f"{steps}x{batch}x{hidden}"
        command = [sys.executable, __file__, "--memory-probe", shape, "--input-dim", str(input_dim)]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        grown, size = (int(n) for n in out.split()[-2:])
        print(
            f"  T={steps} B={batch} H={hidden}: trace {size / 2**20:.0f} MiB, "
            f"peak RSS +{grown / 2**20:.0f} MiB ({grown / size:.1f}× the trace)"
        )


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    return [tuple(int(n) for n in item.split("x")) for item in text.split(",") if item]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {QUICK}")
    parser.add_argument("--shapes", help="TxBxH,... e.g. 500x64x128,100x16x64")
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma-separated; also {', '.join(OPT_IN_MODES)}"
    )
    parser.add_argument("--input-dim", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--connectivity-max-steps", type=int, default=100)
    parser.add_argument("--no-extras", action="store_true", help="skip peak, growth and memory")
    parser.add_argument("--memory-probe", metavar="TxBxH", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_probe:
        steps, batch, hidden = parse_shapes(args.memory_probe)[0]
        memory_probe(steps, batch, args.input_dim, hidden)
        return
    shapes = parse_shapes(args.shapes) if args.shapes else QUICK if args.quick else GRID
    modes = tuple(m for m in args.modes.split(",") if m)
    unknown = set(modes) - set(MODES + OPT_IN_MODES)
    if unknown:
        choices = ", ".join(MODES + OPT_IN_MODES)
        parser.error(f"unknown modes {sorted(unknown)} (choose from {choices})")
    info = device_description()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{info['device']} · {os.cpu_count()} cores · TensorFlow {info['tensorflow']} · "
        f"LSTM: {info['lstm_detail']} · I={args.input_dim} · median of {args.repeats} · "
        f"load average {load:.2f} at start"
    )
    built = build_description()
    print(
        f"CPU vector extensions: {cpu_vector_extensions()}"
        + (f" · kernels built with {built}" if built else "")
    )
    peak = float("nan") if args.no_extras else peak_matmul_gflops(args.repeats)
    if not args.no_extras:
        print(f"matmul peak (2048³ float32): {peak:.0f} GFLOP/s")
    grid_table(shapes, modes, args.input_dim, args.repeats, peak, args.connectivity_max_steps)
    if not args.no_extras:
        growth_and_memory(args.input_dim, args.repeats)
    if hasattr(os, "getloadavg"):
        print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
