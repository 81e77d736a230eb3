"""Model mode next to Keras's own gradient of the same model, in one process.

    .venv/bin/python bench/bench_model.py                      # the model of the issue
    .venv/bin/python bench/bench_model.py --steps 200 --batch 64 --units 128 --repeats 5
    .venv/bin/python bench/bench_model.py --cell gru            # the same model of GRUs

The model: Embedding(20000, 128) → Bidirectional(LSTM(128, return_sequences=True)) → LSTM(128)
→ Dense(1, sigmoid), binary cross-entropy (compiled with Adam: bench_record.py fits it too);
`--cell gru` / `simple_rnn` puts that cell (Keras's defaults) in place of both LSTMs.
Keras: `tape.gradient(loss, model.trainable_weights)` in a `tf.function` (its LSTM on the CPU:
a while loop), the gradients as NumPy. lstmviz: `model_arrays`, the whole trace as NumPy (every
direction's h, c, total and direct dL/dh_t, dL/dc_t, weight gradients, gates, saliency).
Medians of --repeats after a warm-up, the two interleaved.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lstmviz.engine import native  # noqa: E402
from lstmviz.engine.device import device_description  # noqa: E402
from lstmviz.engine.model import model_arrays, resolve_loss  # noqa: E402
from lstmviz.engine.tfload import tf  # noqa: E402
from lstmviz.weights.model_files import spec_from_keras  # noqa: E402


def build(vocabulary: int, embed: int, units: int, steps: int, cell: str = "lstm"):
    import keras

    L = keras.layers
    layer = {"lstm": L.LSTM, "gru": L.GRU, "simple_rnn": L.SimpleRNN}[cell]
    keras.utils.set_random_seed(0)
    inp = keras.Input((steps,), dtype="int32")
    x = L.Embedding(vocabulary, embed)(inp)
    x = L.Bidirectional(layer(units, return_sequences=True))(x)
    x = layer(units)(x)
    model = keras.Model(inp, L.Dense(1, activation="sigmoid")(x))
    model.compile(loss="binary_crossentropy", optimizer="adam")  # bench_record.py fits it
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--vocabulary", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cell", choices=("lstm", "gru", "simple_rnn"), default="lstm")
    args = parser.parse_args()
    import keras

    model = build(args.vocabulary, args.units, args.units, args.steps, args.cell)
    rng = np.random.default_rng(0)
    x = rng.integers(1, args.vocabulary, (args.batch, args.steps)).astype(np.int32)
    y = rng.integers(0, 2, (args.batch, 1)).astype(np.float32)
    loss_fn = keras.losses.BinaryCrossentropy()

    @tf.function
    def keras_step(x, y):
        with tf.GradientTape() as tape:
            value = loss_fn(y, model(x, training=False))
        return tape.gradient(value, model.trainable_weights)

    spec = spec_from_keras(model)
    loss = resolve_loss(spec, None)
    runs = {"keras": lambda: [tf.convert_to_tensor(g).numpy() for g in keras_step(x, y)],
            "lstmviz": lambda: model_arrays(spec, loss, x, y)}  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in runs}
    for fn in runs.values():  # warm-up: tracing
        fn()
    for _ in range(args.repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1000)
    info = device_description()
    kernels = native.build_description() if native.library() is not None else info["lstm"]
    print(f"{info['device']} · {os.cpu_count()} cores · TF {info['tensorflow']} · "
          f"{native.cpu_vector_extensions()} · LSTM {kernels}")  # fmt: skip
    cell = {"lstm": "LSTM", "gru": "GRU", "simple_rnn": "SimpleRNN"}[args.cell]
    print(f"model: Embedding({args.vocabulary}, {args.units}) → Bidirectional({cell}({args.units},"
          f" return_sequences)) → {cell}({args.units}) → Dense(1, sigmoid); T={args.steps} "
          f"B={args.batch}; median of {args.repeats}")  # fmt: skip
    keras_ms = statistics.median(times["keras"])
    for name, values in times.items():
        ms = statistics.median(values)
        print(f"  {name:14s} {ms:8.1f} ms  {ms / keras_ms:5.2f}× Keras")


if __name__ == "__main__":
    main()
