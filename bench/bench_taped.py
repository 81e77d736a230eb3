"""Time the taped engine next to Keras's LSTM forward+backward, same shapes, same process.

    .venv/bin/python bench/bench_taped.py [--steps 500 --batch 64 --input-dim 32 --hidden 128]

Prints the median of --repeats runs after a warm-up, and the ratio taped / Keras. The taped
engine computes more than Keras here: every h_t and c_t, the total and direct gradient at every
state, and the weight and initial-state gradients; Keras computes the weight gradients only.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from lstmviz.engine.taped import taped_gradients
from lstmviz.engine.tfload import device_description, tf
from lstmviz.weights import random_weights


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up: tracing and first-call allocation
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def keras_forward_backward(x_batch_major: np.ndarray, weights):
    import keras

    layer = keras.layers.LSTM(weights.hidden, return_sequences=True)
    layer.build(x_batch_major.shape)
    layer.set_weights([weights.kernel, weights.recurrent_kernel, weights.bias])
    x = tf.constant(x_batch_major)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(layer(x))
        return tape.gradient(loss, layer.trainable_weights)

    return lambda: [g.numpy() for g in step()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--input-dim", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    weights = random_weights(args.input_dim, args.hidden, rng)
    x = rng.standard_normal((args.steps, args.batch, args.input_dim)).astype(np.float32)
    keras_ms = median_ms(keras_forward_backward(x.transpose(1, 0, 2), weights), args.repeats)
    taped_ms = median_ms(lambda: taped_gradients(x, weights, loss="mean_h"), args.repeats)
    info = device_description()
    shape = f"T={args.steps} B={args.batch} I={args.input_dim} H={args.hidden}"
    print(f"{shape} · {info['device']} · TensorFlow {info['tensorflow']}")
    print(f"keras LSTM forward+backward      {keras_ms:8.1f} ms")
    print(f"lstmviz taped_gradients (all)    {taped_ms:8.1f} ms   ratio {taped_ms / keras_ms:.2f}x")


if __name__ == "__main__":
    main()
