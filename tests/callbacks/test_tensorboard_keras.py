"""The Keras callback's `tensorboard=LOGDIR` (lstmviz.tensorboard), read back with TensorBoard's
EventAccumulator: each record's scalars at its batch equal lstmviz's diagnosis of the record
in the `.lvz`, the loss is the record's, one image per record per panel; a log folder it
cannot write is refused when the callback is made, before fit."""

from __future__ import annotations

import keras
import numpy as np
import pytest

pytest.importorskip("tensorboard")
from lstmviz.core.errors import LstmvizError  # noqa: E402
from lstmviz.io.recording import load_recording  # noqa: E402
from lstmviz.keras import GradientFlowCallback  # noqa: E402
from tests.helpers.tensorboard_events import check_images, read, scalar_series  # noqa: E402

L = keras.layers


def test_the_callback_writes_each_record_at_its_batch(tmp_path):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5, 2)), L.Bidirectional(L.LSTM(3)), L.Dense(1)])
    model.compile(loss="mse", optimizer=keras.optimizers.SGD(0.1))
    x = np.random.default_rng(0).standard_normal((16, 5, 2)).astype(np.float32)
    y = x[:, -1, :1] * 2
    callback = GradientFlowCallback((x[:4], y[:4]), tmp_path / "run.lvz", every=2,
                                    tensorboard=tmp_path / "tb")  # fmt: skip
    model.fit(x, y, batch_size=4, epochs=1, callbacks=[callback], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    events = read(tmp_path / "tb")
    assert [int(s) for s in rec.step] == [2, 4]
    for k, name in enumerate(rec.layer_names):
        for key in ("reach", "steps_per_decade", "decay_per_step"):
            at, values = scalar_series(events, f"lstmviz/{name}/{key}")
            expected = [getattr(d.layers[k].h, key) for d in rec.diagnosis.records]
            assert at == [2, 4]
            np.testing.assert_allclose(values, np.array(expected, np.float64), rtol=1e-6,
                                       equal_nan=True)  # fmt: skip
    np.testing.assert_allclose(scalar_series(events, "lstmviz/loss")[1], rec.loss, rtol=1e-7)
    np.testing.assert_allclose(scalar_series(events, "lstmviz/train_loss")[1], rec.train_loss)
    check_images(events, [2, 4])


def test_a_log_folder_it_cannot_write_is_refused_before_fit(tmp_path):
    (tmp_path / "taken").write_text("x")
    with pytest.raises(LstmvizError, match="GradientFlowCallback tensorboard: .*not a folder"):
        GradientFlowCallback((np.zeros((2, 3, 1)), np.zeros((2, 1))), tmp_path / "run.lvz",
                             tensorboard=tmp_path / "taken")  # fmt: skip
