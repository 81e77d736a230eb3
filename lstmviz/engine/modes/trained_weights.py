"""Save a training run's weights as Keras `.weights.h5` or NumPy `.npz`, atomically.

`.weights.h5` is what Keras's `model.save_weights` writes for `keras_model(I, H, O, per_step)`:
`Sequential([Input((None, I)), LSTM(H, return_sequences=per_step, name="lstm"),
Dense(O, name="readout")])`; build that model and call `load_weights`. (Keras models take
batch-major sequences [B, T, I]; lstmviz is time-major [T, B, I].)
`.npz` holds `kernel` [I, 4H], `recurrent_kernel` [H, 4H], `bias` [4H] (Keras's layout, so
lstmviz reads it as LSTM weights), `readout_kernel` [H, O] and `readout_bias` [O].
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from lstmviz.core.errors import InputError
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.io import files
from lstmviz.io.atomic import atomic_path, atomic_write
from lstmviz.io.trace import GradientTrace

# A training run's weights, in its trace and in the files written of them.
WEIGHT_KEYS = ("kernel", "recurrent_kernel", "bias", "readout_kernel", "readout_bias")


def keras_model(input_dim: int, hidden: int, output_dim: int, per_step: bool):
    """The Keras model with the layout of a training run (weights freshly initialised)."""
    keras = tf.keras
    return keras.Sequential(
        [
            keras.Input((None, input_dim)),
            keras.layers.LSTM(hidden, return_sequences=per_step, name="lstm"),
            keras.layers.Dense(output_dim, name="readout"),
        ]
    )


def save_trained_weights(trace: GradientTrace, path: str | os.PathLike) -> Path:
    """Write the final weights of a "train" trace to `path` (.weights.h5 or .npz). A path that
    cannot be written raises InputError naming it and the reason, leaving nothing behind."""
    path = Path(path)
    missing = [key for key in WEIGHT_KEYS if key not in trace]
    if missing:
        raise InputError(f"trace of mode {trace.mode!r} has no trained weights ({missing[0]})")
    weights = [np.asarray(trace[key], np.float32) for key in WEIGHT_KEYS]
    # case-insensitive, as the names of the files lstmviz reads and writes (`files.suffix_of`)
    suffix = files.suffix_of(path, files.TRAINED_WEIGHTS)
    if suffix is None:
        raise InputError(f"{path}: trained weights are saved as .weights.h5 or .npz")
    try:
        if suffix == ".npz":
            with atomic_write(path) as handle:
                np.savez(handle, **dict(zip(WEIGHT_KEYS, weights, strict=True)))
        else:
            (input_dim, _), (hidden, output_dim) = weights[0].shape, weights[3].shape
            model = keras_model(input_dim, hidden, output_dim, bool(trace["readout_per_step"]))
            model.set_weights(weights)
            with atomic_path(path, suffix=".weights.h5") as tmp:
                model.save_weights(tmp)
    except OSError as exc:  # its filename is the temporary one: name the path asked for
        raise InputError(f"{path}: cannot write trained weights ({exc.strerror or exc})") from None
    return path
