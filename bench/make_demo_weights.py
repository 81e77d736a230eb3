"""Rebuild the demo files in resources/: a tiny LSTM trained on the adding task, and inputs.

    .venv/bin/python bench/make_demo_weights.py

Writes `resources/demo_lstm.keras` (Input [T, 2] -> LSTM(16, name="lstm") -> Dense(1), trained a
few epochs) and `resources/demo_inputs.npy` (8 adding-task sequences, batch-major [8, 20, 2]).
Use them with `lstmviz run --weights resources/demo_lstm.keras --inputs
resources/demo_inputs.npy --out t.npz`.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
STEPS, HIDDEN = 20, 16


def adding_task(count: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """[count, STEPS, 2]: random values and a two-hot marker; the target is the marked sum."""
    values = rng.uniform(0, 1, (count, STEPS))
    marks = np.zeros((count, STEPS))
    for row in marks:
        row[rng.choice(STEPS, 2, replace=False)] = 1.0
    x = np.stack([values, marks], axis=-1).astype(np.float32)
    return x, (values * marks).sum(axis=1, keepdims=True).astype(np.float32)


def build(keras):
    return keras.Sequential(
        [keras.Input((STEPS, 2)), keras.layers.LSTM(HIDDEN, name="lstm"), keras.layers.Dense(1)]
    )


def main() -> None:
    import keras

    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x, y = adding_task(2048, rng)
    model = build(keras)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    history = model.fit(x, y, batch_size=64, epochs=20, verbose=0)
    saved = build(keras)  # uncompiled: the file holds no optimizer state
    saved.set_weights(model.get_weights())
    RESOURCES.mkdir(exist_ok=True)
    saved.save(RESOURCES / "demo_lstm.keras")
    np.save(RESOURCES / "demo_inputs.npy", adding_task(8, rng)[0])
    print(f"wrote {RESOURCES}/demo_lstm.keras (final mse {history.history['loss'][-1]:.4f})")


if __name__ == "__main__":
    main()
