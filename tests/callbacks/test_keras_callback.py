"""GradientFlowCallback while Keras's fit trains: records at batches N, 2N, …; the last record
is model mode (tested against Keras in tests/engine/test_model_mode.py) at the final weights;
training is exactly as without it; under MirroredStrategy on two logical CPUs one file gets
one record per N batches; a full disk stops fit with a RecordingError, the process unharmed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keras
import numpy as np
import pytest

from lstmviz.analysis.report.summary import model_parts
from lstmviz.core.errors import LstmvizError
from lstmviz.engine.modes.model import model_gradients
from lstmviz.io.recording import load_recording
from lstmviz.keras import GradientFlowCallback
from tests.helpers.models.keras_models import T, token_data, tokens_model
from tests.helpers.references.model_reference import close

L = keras.layers
ROOT = Path(__file__).resolve().parents[2]


def test_records_come_at_every_nth_batch_counted_across_epochs(tmp_path):
    model, (x, y) = tokens_model(), token_data()
    callback = GradientFlowCallback((x[:16], y[:16]), tmp_path / "run.lvz", every=4)
    history = model.fit(x, y, batch_size=8, epochs=3, callbacks=[callback], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    assert callback.step == 15 and callback.records == len(rec) == 3 and rec.finished
    np.testing.assert_array_equal(rec.step, [4, 8, 12])  # 5 batches an epoch
    np.testing.assert_array_equal(rec.epoch, [0, 1, 2])
    assert rec.norm_h_total_by_layer.shape == (3, 3, T) and rec.saliency.shape == (3, T)
    assert list(rec.layer_names) == list(rec.last.layer_names) and len(rec.layer_names) == 3
    assert np.isfinite(rec.train_loss).all() and (rec.record_seconds > 0).all()
    assert len(set(rec.loss.tolist())) == 3  # the weights change between records
    assert history.history["loss"][-1] < history.history["loss"][0]
    for key in ("norm_h_total_by_layer", "norm_c_total_by_layer"):  # rows of the last record
        np.testing.assert_array_equal(rec[key][-1], rec.last[key])
    np.testing.assert_array_equal(rec.loss[-1], rec.last.loss)


def nested_model():
    """A functional model with a nested Sequential and layers only Keras runs (Conv1D,
    MultiHeadAttention, pooling): their weights train too."""
    from tests.helpers.models.model_fixtures import keras3_models

    model = keras3_models()["nested"]
    model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.Adam(0.02))
    return model


def gru_model():
    """Embedding → Bidirectional(GRU) → SimpleRNN → Dense: directions without a cell state."""
    keras.utils.set_random_seed(3)
    model = keras.Sequential([
        keras.Input((T,), dtype="int32"),
        L.Embedding(30, 6, mask_zero=True),
        L.Bidirectional(L.GRU(5, return_sequences=True)),
        L.SimpleRNN(4),
        L.Dense(1, activation="sigmoid"),
    ])  # fmt: skip
    model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.Adam(0.02))
    return model


@pytest.mark.parametrize("build", [tokens_model, nested_model, gru_model],
                         ids=["tokens", "nested", "gru"])  # fmt: skip
def test_the_last_record_is_model_mode_at_the_final_weights(tmp_path, build):
    model = build()
    steps = model.inputs[0].shape[1]
    rng = np.random.default_rng(2)
    x = rng.integers(1, 20, (40, steps)).astype(np.int32)
    y = rng.integers(0, 2, (40, 1)).astype(np.float32)
    data = (x[:12], y[:12])
    callback = GradientFlowCallback(data, tmp_path / "run.lvz", every=5)
    model.fit(x, y, batch_size=8, epochs=3, callbacks=[callback], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    assert rec.step[-1] == 15  # the last batch: the final weights
    expected = model_gradients(model, *data)
    numeric = [k for k in expected.arrays if expected[k].dtype.kind in "fiub"]
    assert set(numeric) - {"model_seconds"} <= set(rec.last.keys())
    for key in numeric:
        if key == "model_seconds":
            continue
        if expected[key].dtype.kind == "f":  # NaN where a direction has no c, in both
            ours, theirs = np.asarray(rec.last[key]), expected[key]
            np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs), err_msg=key)
            close(np.nan_to_num(ours), np.nan_to_num(theirs), 1e-4, key)
        else:
            np.testing.assert_array_equal(rec.last[key], expected[key], err_msg=key)
    first = rec.norm_h_total_by_layer[0]
    assert not np.allclose(first, rec.norm_h_total_by_layer[-1])  # not the initial weights
    # a GRU or SimpleRNN direction records a NaN row of the cell norm, an LSTM's is finite
    lstm = np.array([str(expected[f"layer{k}_cell"]) == "lstm"
                     for k in range(len(expected["layer_names"]))])  # fmt: skip
    assert np.isnan(rec.norm_c_total_by_layer[:, ~lstm]).all()
    assert np.isfinite(rec.norm_c_total_by_layer[:, lstm]).all()
    from lstmviz.plots.export.writer import recording_columns

    headers = [name for name, _ in recording_columns(rec)]
    assert sum("norm_c_total" in h for h in headers) == 3 * lstm.sum()  # mean, min, max


def test_a_second_fit_goes_on_counting_in_the_same_file(tmp_path):
    model, (x, y) = tokens_model(), token_data()
    callback = GradientFlowCallback((x[:8], y[:8]), tmp_path / "run.lvz", every=2)
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    assert list(load_recording(tmp_path / "run.lvz").step) == [2, 4]
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    assert list(rec.step) == [2, 4, 6, 8, 10] and rec.finished


@pytest.mark.slow
def test_a_model_compiled_again_between_fits_is_recorded_with_its_new_loss(tmp_path):
    """The second fit recorded the loss the model was first compiled with (model mode built
    once, for the first compile); the same compile still reuses what was built."""
    model, (x, y) = tokens_model(), token_data()
    data = (x[:8], y[:8])
    callback = GradientFlowCallback(data, tmp_path / "run.lvz", every=5)
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    built = callback._live_model
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    assert callback._live_model is built
    model.compile(loss="mse", optimizer="adam")
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    mse = model.evaluate(*data, verbose=0, return_dict=True)["loss"]
    assert list(rec.step) == [5, 10, 15]
    assert abs(rec.loss[-1] - mse) <= 1e-5 and abs(rec.loss[1] - rec.loss[-1]) > 1e-2
    assert callback._live_model is not built
    # what the file says of the loss follows the records
    assert rec.loss_names == ["binary_crossentropy"] * 2 + ["mean_squared_error"]
    assert rec.last.config.loss == "mean_squared_error"
    assert "loss mean_squared_error" in " ".join(model_parts(rec.last.arrays, rec.last.config))
    assert str(rec.model_summary).splitlines()[-2:] == [
        "Input: token ids (None, 7), vocabulary 30. Loss: mean_squared_error.",
        "Losses by record: binary_crossentropy at steps 5–10, mean_squared_error at step 15."]


def test_loss_may_name_the_compiled_loss_by_any_of_its_keras_names(tmp_path):
    """loss="mse" for a model compiled with mean_squared_error is that loss; another loss, or
    data without y, is refused in the words of the Python API."""
    model, (x, y) = tokens_model(), token_data()
    model.compile(loss="mse", optimizer="adam")
    callback = GradientFlowCallback((x[:8], y[:8]), tmp_path / "run.lvz", every=5, loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    pred = model.predict(x[:8], verbose=0)
    assert abs(load_recording(tmp_path / "run.lvz").loss[-1] - np.mean((pred - y[:8]) ** 2)) < 1e-6
    callback = GradientFlowCallback((x[:8], y[:8]), tmp_path / "b.lvz", every=5, loss="bce")
    with pytest.raises(LstmvizError) as info:
        model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    assert str(info.value).endswith("the model is compiled with mean_squared_error; loss= is "
                                    "for a model without a compiled loss (or with one lstmviz "
                                    "does not know)")  # fmt: skip
    callback = GradientFlowCallback((x[:8], None), tmp_path / "c.lvz", every=5)
    with pytest.raises(LstmvizError) as info:
        model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    assert str(info.value) == ("GradientFlowCallback data: the loss mean_squared_error needs "
                               "targets y (data = (x, y))")


def test_a_relative_path_is_the_folder_current_when_the_callback_was_made(tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    model, (x, y) = tokens_model(), token_data()
    callback = GradientFlowCallback((x[:8], y[:8]), "run.lvz", every=2)
    monkeypatch.chdir(tmp_path / "elsewhere")  # a notebook's %cd between the cells
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    assert list(load_recording(tmp_path / "run.lvz").step) == [2, 4]
    assert not (tmp_path / "elsewhere" / "run.lvz").exists()


def test_every_record_is_the_loss_keras_evaluates_and_model_mode_at_that_batch(tmp_path):
    """Not only the last: each record's loss is Keras's own evaluation of the model on the
    data at that batch's weights, and its rows are model mode run afresh there."""
    model = nested_model()  # Keras-run layers too: lstmviz copies their weights each record
    rng = np.random.default_rng(3)
    x = rng.integers(1, 20, (48, model.inputs[0].shape[1])).astype(np.int32)
    y = rng.integers(0, 2, (48, 1)).astype(np.float32)
    data = (x[:12], y[:12])
    callback = GradientFlowCallback(data, tmp_path / "run.lvz", every=2)
    seen = []

    class AtEachRecord(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if callback.records > len(seen):
                trace = model_gradients(self.model, *data)
                keras_loss = self.model.evaluate(*data, verbose=0, return_dict=True)["loss"]
                seen.append((keras_loss, trace))

    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback, AtEachRecord()], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    assert list(rec.step) == [2, 4, 6] and len(seen) == 3
    for n, (keras_loss, trace) in enumerate(seen):
        assert abs(rec.loss[n] - keras_loss) <= 1e-5 * max(1.0, abs(keras_loss)), n
        for key in ("norm_h_total_by_layer", "norm_h_direct_by_layer", "norm_c_total_by_layer"):
            close(rec[key][n], trace[key], 1e-4, f"{key} of record {n}")
        close(rec.saliency[n], trace.saliency.mean(0), 1e-4, f"saliency of record {n}")


def test_a_fit_interrupted_by_ctrl_c_keeps_its_records_and_its_batches_count(tmp_path):
    """Ctrl-C between two batches: the records so far read back; `close()` marks the file
    finished; the next fit with the callback counts on from the batches done."""
    model, (x, y) = tokens_model(), token_data()  # 5 batches an epoch

    class CtrlC(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 3:
                raise KeyboardInterrupt

    callback = GradientFlowCallback((x[:8], y[:8]), tmp_path / "run.lvz", every=2)
    with pytest.raises(KeyboardInterrupt):
        model.fit(x, y, batch_size=8, epochs=2, callbacks=[callback, CtrlC()], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    assert list(rec.step) == [2] and not rec.finished and callback.step == 3
    callback.close()
    assert load_recording(tmp_path / "run.lvz").finished
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    assert list(rec.step) == [2, 4, 6, 8] and callback.step == 8 and rec.finished


def test_two_callbacks_on_one_path_stop_fit_with_a_recording_error(tmp_path):
    model, (x, y) = tokens_model(), token_data()
    path = tmp_path / "run.lvz"
    callbacks = [GradientFlowCallback((x[:8], y[:8]), path, every=every) for every in (2, 3)]
    with pytest.raises(LstmvizError, match="another writer in this process took the file over"):
        model.fit(x, y, batch_size=8, epochs=1, callbacks=callbacks, verbose=0)
    assert list(load_recording(path).step) == [3]  # the second callback's file


def test_a_fit_too_short_for_a_record_warns(tmp_path):
    model, (x, y) = tokens_model(), token_data()
    callback = GradientFlowCallback((x[:8], y[:8]), tmp_path / "run.lvz", every=6)
    with pytest.warns(UserWarning, match=r"no record: fit ended after 5 training batches, "
                      r"before batch 6.*run.lvz was not written"):  # fmt: skip
        model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    assert not (tmp_path / "run.lvz").exists()


def test_a_file_that_is_not_a_recording_is_never_replaced(tmp_path):
    """A text file or another HDF5 file named .lvz was replaced by the recording, without a
    word. Now: refused, naming the file and what it is, when the callback is made or, for a
    file put there since, before fit trains; an earlier recording is replaced as before."""
    model, (x, y) = tokens_model(), token_data()
    data = (x[:8], y[:8])
    notes = tmp_path / "notes.lvz"
    notes.write_text("my precious notes\n")
    other = tmp_path / "weights.lvz"
    model.save_weights(tmp_path / "w.weights.h5")
    other.write_bytes((tmp_path / "w.weights.h5").read_bytes())
    kinds = ((notes, "it is a text file"), (other, r"an HDF5 file of another kind \(a Keras"))
    for path, what in kinds:
        before = path.read_bytes()
        with pytest.raises(LstmvizError, match=f"{path}: is there already and is not a "
                           f"recording lstmviz may replace .*{what}") as info:  # fmt: skip
            GradientFlowCallback(data, path, every=2)
        assert "\n" not in str(info.value) and path.read_bytes() == before
    late = tmp_path / "late.lvz"
    callback = GradientFlowCallback(data, late, every=2)
    late.write_text("written after the callback was made")
    weights = [w.copy() for w in model.get_weights()]
    with pytest.raises(LstmvizError, match="late.lvz: is there already"):
        model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    assert late.read_text() == "written after the callback was made"
    assert all(np.array_equal(a, b) for a, b in zip(weights, model.get_weights(), strict=True))
    old = tmp_path / "old.lvz"
    model.fit(x, y, batch_size=8, epochs=1, verbose=0,
              callbacks=[GradientFlowCallback(data, old, every=2)])  # fmt: skip
    model.fit(x, y, batch_size=8, epochs=1, verbose=0,
              callbacks=[GradientFlowCallback(data, old, every=5)])  # fmt: skip
    assert list(load_recording(old).step) == [5]  # a new callback starts the file afresh


class AtBatch(keras.callbacks.Callback):
    """Calls `action` at the end of training batch `batch` (0-based) of the first epoch."""

    def __init__(self, batch: int, action):
        super().__init__()
        self.batch, self.action, self.epoch = batch, action, 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == 0 and batch == self.batch:
            self.action()


def recording_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "GradientFlowCallback" in str(w.message)]


@pytest.mark.parametrize("how", ["deleted", "folder", "moved"])
def test_a_recording_that_goes_away_mid_fit_is_said_once_and_fit_goes_on(tmp_path, how):
    """The file deleted (its folder removed, or moved away) while fit wrote it: the callback
    went on writing into a file no one could see, without a word. Now: one warning naming the
    path, no more records, training as without the callback; a moved file is finished."""
    import shutil
    import warnings

    model, (x, y) = tokens_model(), token_data()  # 5 batches an epoch
    path = tmp_path / "runs" / "run.lvz"
    path.parent.mkdir()
    moved = tmp_path / "elsewhere.lvz"
    action = {"deleted": path.unlink, "folder": lambda: shutil.rmtree(path.parent),
              "moved": lambda: path.rename(moved)}[how]  # fmt: skip
    callback = GradientFlowCallback((x[:8], y[:8]), path, every=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(x, y, batch_size=8, epochs=2, verbose=0,
                            callbacks=[callback, AtBatch(2, action)])  # fmt: skip
    said = recording_warnings(caught)
    what = {"deleted": "it was deleted or moved", "moved": "it was deleted or moved",
            "folder": f"the folder {path.parent} was removed"}[how]  # fmt: skip
    assert said == [f"GradientFlowCallback: stopped recording to {path}: {what} after its "
                    "record at batch 2 (1 record); training goes on (a new callback records "
                    "to a new file)"], said  # fmt: skip
    assert len(history.history["loss"]) == 2 and callback.step == 10 and callback.records == 1
    assert not path.exists() and path.parent.exists() == (how != "folder")
    if how == "moved":
        rec = load_recording(moved)
        assert list(rec.step) == [2] and rec.finished


def test_a_recording_deleted_between_two_fits_is_said_once_not_raised(tmp_path):
    """The second fit of a notebook cell run again stopped at its first record with a
    RecordingError traceback ("no such recording any more")."""
    import warnings

    model, (x, y) = tokens_model(), token_data()
    path = tmp_path / "run.lvz"
    callback = GradientFlowCallback((x[:8], y[:8]), path, every=2)
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    assert list(load_recording(path).step) == [2, 4]
    path.unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    assert recording_warnings(caught) == [
        f"GradientFlowCallback: stopped recording to {path}: it was deleted or moved after its "
        "record at batch 4 (2 records); training goes on (a new callback records to a new file)"
    ]
    assert callback.step == 15 and not path.exists()


def test_a_model_that_its_first_batch_builds_is_recorded(tmp_path):
    """No keras.Input: Keras builds the model at the first batch, after fit began."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([L.LSTM(4), L.Dense(2)])
    model.compile(loss="mse", optimizer="adam")
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((24, 5, 3)), rng.standard_normal((24, 2))
    callback = GradientFlowCallback((x[:6], y[:6]), tmp_path / "run.lvz", every=3)
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    assert list(rec.step) == [3]
    close(rec.last.y_pred, model.predict(x[:6], verbose=0), 1e-5, "y_pred")


def test_with_several_steps_per_execution_a_record_follows_each_multiple(tmp_path):
    model, (x, y) = tokens_model(), token_data(80)
    model.compile(loss="binary_crossentropy", optimizer="adam", steps_per_execution=2)
    callback = GradientFlowCallback((x[:8], y[:8]), tmp_path / "run.lvz", every=3)
    model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    # Keras reports batches 2, 4, 6, 8, 10: the first at or after 3, 6 and 9.
    assert list(load_recording(tmp_path / "run.lvz").step) == [4, 6, 10]


def test_an_epoch_ending_part_way_through_an_execution_counts_the_batches_it_ran(tmp_path):
    """5 batches an epoch, 4 per execution: Keras reports batch index 7 for the epoch's last
    execution (batches 5 and 6 never ran); the records were at batches 4, 8, …, 24 of 15."""
    model, (x, y) = tokens_model(), token_data()
    model.compile(loss="binary_crossentropy", optimizer="adam", steps_per_execution=4)
    callback = GradientFlowCallback((x[:8], y[:8]), tmp_path / "run.lvz", every=3)
    model.fit(x, y, batch_size=8, epochs=3, callbacks=[callback], verbose=0)
    rec = load_recording(tmp_path / "run.lvz")
    # Reported: 4, 5 | 9, 10 | 14, 15: the first at or after 3, 6, 9 and 12, then 15.
    assert list(rec.step) == [4, 9, 14, 15] and list(rec.epoch) == [0, 1, 2, 2]
    assert callback.step == 15


def test_bad_arguments_are_one_line_errors(tmp_path):
    x, y = token_data()
    cases = [
        (dict(data=x, path=tmp_path / "a.lvz"), r"data must be \(x, y\)"),
        (dict(data=(None, y), path=tmp_path / "a.lvz"), r"data must be \(x, y\), got x None"),
        (dict(data=(x, y), path=tmp_path / "a.lvz", every=0), "every must be a positive"),
        (dict(data=(x, y), path=tmp_path / "a.lvz", every=True), "every must be a positive"),
        (dict(data=(x, y), path=tmp_path / "a.npz"), "recordings end in .lvz"),
        (dict(data=(x, y), path=tmp_path / "no" / "a.lvz"), "no such folder"),
    ]
    for kwargs, message in cases:
        with pytest.raises(LstmvizError, match=message) as info:
            GradientFlowCallback(**kwargs)
        assert "\n" not in str(info.value)
    with pytest.raises(LstmvizError, match="no model yet: pass the callback to model.fit"):
        GradientFlowCallback((x, y), tmp_path / "a.lvz").trace()
    def own_loss(y_true, y_pred):  # a loss lstmviz does not know by name
        return keras.ops.mean((y_true - y_pred) ** 2)

    model = tokens_model()
    model.compile(loss=own_loss, optimizer="adam")
    callback = GradientFlowCallback((x[:8], y[:8]), tmp_path / "a.lvz", every=1)
    with pytest.raises(LstmvizError, match="give loss=") as info:
        model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
    assert "\n" not in str(info.value) and not (tmp_path / "a.lvz").exists()
    wrong = (x[:8, :5], y[:8])  # the model takes 7 steps
    callback = GradientFlowCallback(wrong, tmp_path / "a.lvz", every=1)
    with pytest.raises(LstmvizError, match=r"x has shape \[8, 5\]"):
        tokens_model().fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)


def run_script(code: str, tmp_path: Path, timeout: float = 600) -> dict:
    """Run `code` in a fresh Python (TensorFlow configured before it initialises); it prints
    one JSON line last."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=timeout,
                          env={"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2",
                               "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


UNCHANGED = """
    import json, random
    import numpy as np, keras, tensorflow as tf
    from lstmviz.keras import GradientFlowCallback
    from lstmviz.io.recording import load_recording

    tf.config.experimental.enable_op_determinism()
    L = keras.layers
    rng = np.random.default_rng(0)
    x = rng.integers(1, 30, (48, 7)).astype("int32")
    y = rng.integers(0, 2, (48, 1)).astype("float32")

    def train(record):
        keras.utils.set_random_seed(7)
        inputs = keras.Input((7,), dtype="int32")
        h = L.Embedding(30, 6)(inputs)
        h = L.LSTM(5, return_sequences=True)(h)
        h = L.MultiHeadAttention(2, 3, dropout=0.3)(h, h)  # rebuilt by lstmviz: dropout seeds
        h = L.Dropout(0.4)(L.GaussianNoise(0.5)(h))
        h = L.LSTM(4)(L.Bidirectional(L.LSTM(3, return_sequences=True))(h))
        model = keras.Model(inputs, L.Dense(1, activation="sigmoid")(h))
        model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.Adam(0.01))
        callbacks = [GradientFlowCallback((x[:16], y[:16]), "run.lvz", every=2)] if record else []
        model.fit(x, y, batch_size=8, epochs=3, shuffle=True, callbacks=callbacks, verbose=0)
        weights = [np.asarray(v) for v in model.weights]
        state = [np.asarray(v) for v in model.optimizer.variables]
        return weights, state, random.random(), float(np.random.random())

    plain, recorded = train(False), train(True)
    again = train(False)
    same = lambda a, b: len(a) == len(b) and all(np.array_equal(p, q) for p, q in zip(a, b))
    print(json.dumps({
        "deterministic": same(plain[0], again[0]),
        "weights": same(plain[0], recorded[0]),
        "optimizer": same(plain[1], recorded[1]),
        "python_random": plain[2] == recorded[2],
        "numpy_random": plain[3] == recorded[3],
        "records": len(load_recording("run.lvz")),
    }))
"""


@pytest.mark.slow
def test_training_is_exactly_the_same_with_the_callback(tmp_path):
    """Same seed, deterministic ops: the final weights, the optimizer's state and the global
    random streams after fit are bit-identical with and without recording."""
    result = run_script(UNCHANGED, tmp_path)
    assert result["deterministic"], "the control: two runs without the callback differ"
    assert result["records"] == 9  # 6 batches an epoch, 3 epochs, every 2
    assert result["weights"] and result["optimizer"], result
    assert result["python_random"] and result["numpy_random"], result


MIRRORED = """
    import json
    import numpy as np, tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from lstmviz.engine.modes.model import model_gradients
    from lstmviz.keras import GradientFlowCallback
    from lstmviz.io.recording import load_recording

    L = keras.layers
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    keras.utils.set_random_seed(3)
    with strategy.scope():
        model = keras.Sequential([keras.Input((6, 3)),
                                  L.Bidirectional(L.LSTM(4, return_sequences=True)),
                                  L.LSTM(3), L.Dense(2, activation="softmax")])
        model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 6, 3)).astype("float32")
    y = rng.integers(0, 2, 32).astype("int32")
    callback = GradientFlowCallback((x[:10], y[:10]), "run.lvz", every=2)
    model.fit(x, y, batch_size=8, epochs=3, callbacks=[callback], verbose=0)
    rec = load_recording("run.lvz")
    expected = model_gradients(model, x[:10], y[:10])
    worst = max(float(np.abs(rec.last[k] - expected[k]).max() / max(np.abs(expected[k]).max(),
                1e-6)) for k in expected.keys() if expected[k].dtype.kind == "f"
                and k != "model_seconds")
    import os
    print(json.dumps({"replicas": strategy.num_replicas_in_sync, "steps": rec.step.tolist(),
                      "files": sorted(os.listdir(".")), "worst": worst,
                      "finished": rec.finished}))
"""


@pytest.mark.slow
def test_under_mirrored_strategy_one_file_gets_one_record_per_n_batches(tmp_path):
    result = run_script(MIRRORED, tmp_path)
    assert result["replicas"] == 2
    assert result["steps"] == [2, 4, 6, 8, 10, 12]  # 4 global batches an epoch, 3 epochs
    assert result["files"] == ["run.lvz"] and result["finished"]
    assert result["worst"] <= 1e-4, result


FULL_DISK = """
    import gc, json
    from lstmviz.core.errors import LstmvizError
    from lstmviz.keras import GradientFlowCallback
    from lstmviz.io.recording import load_recording
    from tests.helpers.models.keras_models import token_data, tokens_model
    from tests.helpers.recordings import fill_the_disk

    fill_the_disk("writing", 3)  # in the middle of the third record
    model, (x, y) = tokens_model(), token_data()
    callback = GradientFlowCallback((x[:8], y[:8]), "run.lvz", every=1)
    errors = []
    for _ in range(2):  # a notebook's cell run again
        try:
            model.fit(x, y, batch_size=8, epochs=3, callbacks=[callback], verbose=0)
        except LstmvizError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    gc.collect()
    history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)  # training goes on
    rec = load_recording("run.lvz")
    print(json.dumps({"errors": errors, "steps": rec.step.tolist(),
                      "loss": history.history["loss"][-1] > 0}))
"""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.slow
def test_a_full_disk_stops_fit_with_a_recording_error_and_the_process_goes_on(tmp_path):
    """The disk fills up in the middle of a record (tests/io/test_recording.py): fit stops at
    that batch with one RecordingError saying what the file keeps, fit with the callback again
    is refused, the model trains on without it, and the process ends normally."""
    result = run_script(FULL_DISK, tmp_path, timeout=180)
    assert result["errors"] == [
        "RecordingError: run.lvz: cannot write the recording (No space left on device); it "
        "keeps its 2 complete records",
        "RecordingError: run.lvz: takes no more records after a failed write (No space left on "
        "device)",
    ], result
    assert result["steps"] == [1, 2] and result["loss"], result


def test_the_overhead_bench_runs_on_a_tiny_shape(capsys):
    import importlib.util

    path = ROOT / "bench" / "bench_record.py"
    spec = importlib.util.spec_from_file_location("bench_record", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--steps", "6", "--batch", "4", "--samples", "4", "--units", "3",
                "--vocabulary", "20", "--batches", "2", "--repeats", "1"])  # fmt: skip
    out = capsys.readouterr().out
    assert "overhead per record" in out and "writing the record" in out, out
