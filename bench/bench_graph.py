"""`lstmviz.model_gradients` on an encoder–decoder with attention (a graph Keras runs, lstmviz
its recurrent calls) next to Keras's own gradient of the same model, in one process.

    .venv/bin/python bench/bench_graph.py                # the model below, median of 5
    .venv/bin/python bench/bench_graph.py --steps 20 --batch 8 --repeats 1   # a quick look

The model (the Keras seq2seq tutorial's shape): an Embedding(8000, 128) on each of two inputs;
an LSTM(128) encoder returning its sequences and its state; an LSTM(128) decoder started from
that state; AdditiveAttention of the decoder's outputs over the encoder's; Concatenate;
Dense(2000, softmax); sparse categorical cross-entropy. T = 50 + 50, B = 64.
Keras: `tape.gradient(loss, model.trainable_weights)` in a `tf.function` (its LSTMs on the CPU:
while loops), the gradients as NumPy. lstmviz: `lstmviz.model_gradients(model, x, y)` on the
live model, the whole trace as NumPy; the weights change between its calls. First calls after
a warm-up and a full garbage collection, then medians of --repeats calls, interleaved; the load
average at the start and the end (bench_model.py says why).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_model import calls, measure, print_machine, print_rows  # noqa: E402


def build(vocabulary: int, classes: int, units: int, source: int, target: int):
    import keras

    L = keras.layers
    keras.utils.set_random_seed(0)
    enc_in = keras.Input((source,), dtype="int32", name="enc")
    dec_in = keras.Input((target,), dtype="int32", name="dec")
    enc = L.Embedding(vocabulary, units)(enc_in)
    dec = L.Embedding(vocabulary, units)(dec_in)
    seq, h, c = L.LSTM(units, return_sequences=True, return_state=True, name="encoder")(enc)
    out = L.LSTM(units, return_sequences=True, name="decoder")(dec, initial_state=[h, c])
    both = L.Concatenate()([out, L.AdditiveAttention()([out, seq])])
    model = keras.Model([enc_in, dec_in], L.Dense(classes, activation="softmax")(both))
    model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    return model


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="source and target lengths")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--units", type=int, default=128)
    parser.add_argument("--vocabulary", type=int, default=8000)
    parser.add_argument("--classes", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    import keras

    load = os.getloadavg()[0]
    model = build(args.vocabulary, args.classes, args.units, args.steps, args.steps)
    rng = np.random.default_rng(0)
    shape = (args.batch, args.steps)
    x = {"enc": rng.integers(1, args.vocabulary, shape).astype(np.int32),
         "dec": rng.integers(1, args.vocabulary, shape).astype(np.int32)}  # fmt: skip
    y = rng.integers(0, args.classes, shape).astype(np.int32)
    keras_call, lstmviz_call = calls(model, x, y, keras.losses.SparseCategoricalCrossentropy(),
                                     rng)  # fmt: skip
    first, times = measure(keras_call, lstmviz_call, args.repeats)
    print_machine(load)
    print(f"model: 2 × Embedding({args.vocabulary}, {args.units}) → LSTM({args.units}) encoder "
          f"→ LSTM({args.units}) decoder from its state → AdditiveAttention → Concatenate → "
          f"Dense({args.classes}, softmax); T={args.steps}+{args.steps} B={args.batch}; "
          f"median of {args.repeats}")  # fmt: skip
    print_rows(first, times)

if __name__ == "__main__":
    main()
