"""A small compiled Keras model over tokens and its data, for the tests that fit one: Embedding
with mask_zero → Bidirectional(LSTM) → Dropout → LSTM → Dense (`tokens_model`), sequences of
`T` tokens with a masked step or two and a binary target (`token_data`), and the recording
of a real fit of it (`fitted`, a module-scoped fixture)."""

from __future__ import annotations

import keras
import numpy as np
import pytest

L = keras.layers
T = 7


def tokens_model(seed: int = 0):
    """Embedding with mask_zero → Bidirectional(LSTM) → Dropout → LSTM → Dense."""
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([
        keras.Input((T,), dtype="int32"),
        L.Embedding(30, 6, mask_zero=True),
        L.Bidirectional(L.LSTM(5, return_sequences=True)),
        L.Dropout(0.3),
        L.LSTM(4),
        L.Dense(1, activation="sigmoid"),
    ])  # fmt: skip
    model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.Adam(0.02))
    return model


def token_data(count: int = 40, seed: int = 1):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 30, (count, T)).astype(np.int32)
    x[:, :2] = np.maximum(x[:, :2], 1)  # a masked step or two, never a fully masked sample
    y = (x[:, :3].sum(1) > 45).astype(np.float32)[:, None]
    return x, y


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A recording of a real fit: Embedding(mask_zero) → Bidirectional(LSTM) → Dropout → LSTM →
    Dense, 3 epochs of 5 batches, a record every 2 batches (7 records)."""
    from lstmviz.keras import GradientFlowCallback

    path = tmp_path_factory.mktemp("fit") / "run.lvz"
    model, (x, y) = tokens_model(), token_data()
    callback = GradientFlowCallback((x[:16], y[:16]), path, every=2)
    model.fit(x, y, batch_size=8, epochs=3, callbacks=[callback], verbose=0)
    return path
