"""Where each batch's LSTM weights come from: `random`, `hypernetwork` or `files`.

A generator is called as `generator(n, x)` for batch n with that batch's x [T, B, I] and returns
kernel [I, 4H], recurrent_kernel [H, 4H], bias [4H] (arrays or tensors). `variables` lists the
trainable variables behind them (empty unless a model makes the weights): the batchwise engine
calls the generator under a GradientTape and chains the LSTM's weight gradients into them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lstmviz.core.config import RunConfig
from lstmviz.core.errors import ConfigError, WeightsError, ref
from lstmviz.weights import LSTMWeights, random_weights
from lstmviz.weights.loaders import load_weights, weight_files


class FixedWeights:
    """Weights known before the run, one LSTMWeights per batch (`random`, `files`)."""

    variables: tuple = ()

    def __init__(self, name: str, weights: Sequence[LSTMWeights]):
        self.name = name
        self.weights = list(weights)

    def __call__(self, n: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w = self.weights[n]
        return w.kernel, w.recurrent_kernel, w.bias


class Hypernetwork:
    """A small Keras model from batch statistics to LSTM weights.

    metadata(x) = [mean, std] of x over time and batch [2I]; the model is
    Dense(width, tanh) -> Dense(4H·(I+H+1)), and its output is added to a fixed, seeded Keras
    initialisation `base` (flattened kernel, recurrent_kernel, bias), so an untrained
    hypernetwork already gives a well-behaved LSTM. `variables` are the model's trainable ones.
    """

    name = "hypernetwork"

    def __init__(self, input_dim: int, hidden: int, seed: int = 0, width: int = 16):
        import keras

        from lstmviz.engine.quiet_tensorflow import tf

        self.input_dim, self.hidden = input_dim, hidden
        base = random_weights(input_dim, hidden, np.random.default_rng(seed))
        self.base = tf.constant(
            np.concatenate([base.kernel.ravel(), base.recurrent_kernel.ravel(), base.bias])
        )
        init = keras.initializers
        self.model = keras.Sequential(
            [
                keras.Input((2 * input_dim,)),
                keras.layers.Dense(
                    width, activation="tanh", kernel_initializer=init.GlorotUniform(seed)
                ),
                keras.layers.Dense(
                    self.base.shape[0], kernel_initializer=init.RandomNormal(0.0, 0.05, seed)
                ),
            ]
        )

    @property
    def variables(self) -> list:
        return self.model.trainable_variables

    @staticmethod
    def metadata(x: np.ndarray) -> np.ndarray:
        """[mean, std] over time and batch of x [T, B, I] -> [2I] float32."""
        x = np.asarray(x, np.float32)
        return np.concatenate([x.mean(axis=(0, 1)), x.std(axis=(0, 1))]).astype(np.float32)

    def __call__(self, n: int, x: np.ndarray):
        from lstmviz.engine.quiet_tensorflow import tf

        i, h = self.input_dim, self.hidden
        flat = self.base + self.model(self.metadata(x)[None])[0]
        kernel, recurrent, bias = tf.split(flat, [i * 4 * h, h * 4 * h, 4 * h])
        return tf.reshape(kernel, [i, 4 * h]), tf.reshape(recurrent, [h, 4 * h]), bias


def read_batch_weights(path: Path, input_dim: int, hidden: int, layer: str | None) -> LSTMWeights:
    """One batch's weights from any file `lstmviz.load_weights` reads; they must fit I and H.

    Raises WeightsError naming the file."""
    weights = load_weights(path, layer)
    if (weights.input_dim, weights.hidden) != (input_dim, hidden):
        raise WeightsError(
            f"{path}: weights are for I={weights.input_dim}, H={weights.hidden}, "
            f"but the run has I={input_dim}, H={hidden}"
        )
    return weights


def weight_paths(spec: str, batches: int) -> list[Path]:
    """`--weights` for the files generator: comma-separated files, or a folder (its weight
    files — .npz, .keras, .weights.h5, .h5, .safetensors — sorted by name).

    There must be exactly one file per batch.
    """
    paths = weight_files(spec)
    if len(paths) != batches:
        raise ConfigError("weights", f"{len(paths)} weight file(s), but {ref('batches')} is "
                          f"{batches}: give one per batch")  # fmt: skip
    return paths


def make_generator(config: RunConfig, seeded: Sequence[LSTMWeights]):
    """The generator `config.generator` names; `seeded` are the batches' seeded random weights."""
    if config.generator == "random":
        return FixedWeights("random", seeded)
    if config.generator == "hypernetwork":
        return Hypernetwork(config.input_dim, config.hidden, config.seed)
    if not config.weights:
        raise ConfigError("weights", f"{ref('generator', 'files')} needs the weight files (one "
                          "per batch)")  # fmt: skip
    paths = weight_paths(config.weights, config.batches)
    return FixedWeights(
        "files",
        [read_batch_weights(p, config.input_dim, config.hidden, config.layer) for p in paths],
    )
