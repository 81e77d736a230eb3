"""The public `lstmviz.model_gradients(model, x, y)` next to Keras's own gradient of the same
model, in one process.

    .venv/bin/python bench/bench_model.py                      # the reference model (below)
    .venv/bin/python bench/bench_model.py --steps 200 --batch 64 --units 128 --repeats 7
    .venv/bin/python bench/bench_model.py --cell gru            # the same model of GRUs
    .venv/bin/python bench/bench_model.py --per-step            # a loss on every step
    LSTMVIZ_NATIVE_ARCH=haswell ONEDNN_MAX_CPU_ISA=AVX2 .venv/bin/python bench/bench_model.py

The model: Embedding(20000, 128) → Bidirectional(LSTM(128, return_sequences=True)) → LSTM(128)
→ Dense(1, sigmoid), binary cross-entropy (compiled with Adam: bench_record.py fits it too);
`--cell gru` / `simple_rnn` puts that cell (Keras's defaults) in place of both LSTMs.
`--per-step`: the top LSTM returns sequences and Dense(1, sigmoid) reads every step (a
tagger's shape, a loss on every step): lstmviz then also follows the error of the last step
(the first, for the backward direction) back through every direction, one more backward
each (docs/diagnosis.md); the classifier needs none (its loss is on one step).
Keras: `tape.gradient(loss, model.trainable_weights)` in a `tf.function` (its LSTM on the CPU:
a while loop), the gradients as NumPy. lstmviz: `lstmviz.model_gradients(model, x, y)` as a
user calls it on the live model, the whole trace as NumPy (every direction's h, c, total and
direct dL/dh_t, dL/dc_t, weight gradients, gates, saliency); between its calls the model's
weights change (as between a notebook's training steps), so no call can reuse a result.

First calls: TensorFlow is warmed up on an unrelated small gradient first, so that neither
first call pays its start-up; then Keras's first call, then lstmviz's (tracing included),
each after a full garbage collection: tracing allocates enough to set off Python's, and
whether one of its full passes (some 100 ms with TensorFlow and Keras loaded) falls into a
first call otherwise depends on what happened to be imported before.
Then medians of --repeats calls, the two interleaved, so that load from other processes hits
them alike. The load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lstmviz  # noqa: E402
from lstmviz.engine.device import device_description  # noqa: E402
from lstmviz.engine.native import kernels  # noqa: E402
from lstmviz.engine.quiet_tensorflow import tf  # noqa: E402


def build(vocabulary: int, embed: int, units: int, steps: int, cell: str = "lstm",
          per_step: bool = False):  # fmt: skip
    import keras

    L = keras.layers
    layer = {"lstm": L.LSTM, "gru": L.GRU, "simple_rnn": L.SimpleRNN}[cell]
    keras.utils.set_random_seed(0)
    inp = keras.Input((steps,), dtype="int32")
    x = L.Embedding(vocabulary, embed)(inp)
    x = L.Bidirectional(layer(units, return_sequences=True))(x)
    x = layer(units, return_sequences=per_step)(x)
    model = keras.Model(inp, L.Dense(1, activation="sigmoid")(x))
    model.compile(loss="binary_crossentropy", optimizer="adam")  # bench_record.py fits it
    return model


def _warm_up() -> None:
    """TensorFlow's own start-up (eager context, the first graph function, oneDNN), paid
    before either first call is timed."""
    w = tf.Variable(tf.ones([8, 8]))

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            value = tf.reduce_sum(tf.tanh(tf.matmul(x, w)))
        return tape.gradient(value, w)

    step(tf.ones([4, 8])).numpy()


def _nudge(model, rng) -> None:
    """Change the model's weights a little (as a training step would)."""
    for variable in model.trainable_weights[-2:]:
        variable.assign(variable + rng.normal(0, 1e-3, variable.shape).astype(np.float32))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--vocabulary", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cell", choices=("lstm", "gru", "simple_rnn"), default="lstm")
    parser.add_argument("--per-step", action="store_true", help="a loss on every step")
    args = parser.parse_args(argv)
    import keras

    load = os.getloadavg()[0]
    model = build(args.vocabulary, args.units, args.units, args.steps, args.cell, args.per_step)
    rng = np.random.default_rng(0)
    x = rng.integers(1, args.vocabulary, (args.batch, args.steps)).astype(np.int32)
    shape = (args.batch, args.steps, 1) if args.per_step else (args.batch, 1)
    y = rng.integers(0, 2, shape).astype(np.float32)
    first, times = measure(*calls(model, x, y, keras.losses.BinaryCrossentropy(), rng),
                           args.repeats)  # fmt: skip
    print_machine(load)
    cell = {"lstm": "LSTM", "gru": "GRU", "simple_rnn": "SimpleRNN"}[args.cell]
    top = f"{cell}({args.units}, return_sequences)" if args.per_step else f"{cell}({args.units})"
    print(f"model: Embedding({args.vocabulary}, {args.units}) → Bidirectional({cell}({args.units},"
          f" return_sequences)) → {top} → Dense(1, sigmoid){' per step' * args.per_step}; "
          f"T={args.steps} B={args.batch}; median of {args.repeats}")  # fmt: skip
    print_rows(first, times)


def calls(model, x, y, loss_fn, rng):
    """(Keras's call: `tape.gradient` of `loss_fn` in a tf.function, the gradients as NumPy;
    lstmviz's: `model_gradients` after new weights, returning the seconds it took)."""

    @tf.function
    def keras_step(x, y):
        with tf.GradientTape() as tape:
            value = loss_fn(y, model(x, training=False))
        return tape.gradient(value, model.trainable_weights)

    def keras_call():
        return [tf.convert_to_tensor(g).numpy() for g in keras_step(x, y)]

    def lstmviz_call():
        _nudge(model, rng)  # new weights at every call, outside the timing below
        start = time.perf_counter()
        lstmviz.model_gradients(model, x, y)
        return time.perf_counter() - start

    return keras_call, lstmviz_call


def measure(keras_call, lstmviz_call, repeats: int) -> tuple[dict, dict]:
    """({name: seconds of its first call}, {name: seconds of each later call}): the first
    calls after a warm-up and a full garbage collection each, then `repeats` calls of the two
    interleaved. `lstmviz_call` returns the seconds it timed itself (outside its set-up)."""
    _warm_up()
    gc.collect()
    start = time.perf_counter()
    keras_call()
    first = {"keras": time.perf_counter() - start}
    gc.collect()
    first["lstmviz"] = lstmviz_call()
    times: dict[str, list[float]] = {"keras": [], "lstmviz": []}
    for _ in range(repeats):
        start = time.perf_counter()
        keras_call()
        times["keras"].append(time.perf_counter() - start)
        times["lstmviz"].append(lstmviz_call())
    return first, times


def print_machine(load: float) -> None:
    """The device, cores, TensorFlow, vector extensions, the kernels and the load average."""
    info = device_description()
    built = kernels.build_description() if kernels.library() is not None else info["lstm"]
    print(f"{info['device']} · {os.cpu_count()} cores · TF {info['tensorflow']} · "
          f"{kernels.cpu_vector_extensions()} · LSTM {built} · load {load:.2f} at start, "
          f"{os.getloadavg()[0]:.2f} at the end")  # fmt: skip


def print_rows(first: dict, times: dict) -> None:
    """First call and median of the later ones, each with its ratio to Keras's."""
    keras_ms = 1000 * statistics.median(times["keras"])
    print(f"  {'':24s} {'first call':>18s}   {'median after':>18s}")
    for name, label in (("keras", "Keras tape.gradient"),
                        ("lstmviz", "lstmviz.model_gradients")):  # fmt: skip
        ms, first_ms = 1000 * statistics.median(times[name]), 1000 * first[name]
        print(f"  {label:24s} {first_ms:8.0f} ms {first_ms / 1000 / first['keras']:5.2f}×   "
              f"{ms:8.1f} ms {ms / keras_ms:5.2f}×")  # fmt: skip

if __name__ == "__main__":
    main()
