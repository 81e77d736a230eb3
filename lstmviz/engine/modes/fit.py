"""Training mode with a user's model (`train.run_training_mode` hands it over): Keras fits it on
the user's data while `lstmviz.keras.GradientFlowCallback` records its gradient flow.

    lstmviz run --mode train --model M.keras --inputs DATA.npz --epochs 5 --every 20 \\
        --record run.lvz [--save-model trained.keras] [--out last.npz]

The model is read by lstmviz's own loader, then loaded with `keras.models.load_model` in safe
mode (a Keras 3 `.keras` file; a file Keras refuses is named with Keras's reason), and trained
with its compiled optimizer and loss (Adam and `--loss` when it has none; `--loss` and the
saved optimizer's settings when its loss is a custom one Keras cannot load), `--batch` samples
a batch, shuffled, seeded by `--seed`. The records run on the first `RECORD_SAMPLES` samples of
the data. The final trace is model mode's at the trained weights on those samples.
"""

from __future__ import annotations

import queue
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from lstmviz.core import modes
from lstmviz.core.config import LOSSES, RunConfig
from lstmviz.core.errors import ConfigError, InputError, LstmvizError, ModelError, ref
from lstmviz.engine.modes.model import GIVE_Y, prepare
from lstmviz.engine.native import interrupt
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.io import files
from lstmviz.io.atomic import atomic_path
from lstmviz.io.model_data import load_data
from lstmviz.io.recording import RecordingError
from lstmviz.io.trace import GradientTrace, TraceUpdate

RECORD_SAMPLES = 64  # the samples every record runs on: the first of the data
UPDATES_PER_SECOND = 10  # progress TraceUpdates at most this often (and after the last batch)
MODEL_SUFFIX = ".keras"


def run_fit(
    config: RunConfig, cancelled: Callable[[], bool] = bool, keep: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Fit `config.model` on `config.inputs` for `config.epochs` epochs, a record every
    `config.every` batches into `config.record`. Bad files, data or paths raise here, before
    anything runs.

    Returns an iterator: TraceUpdates (batches done of all epochs, the loss, the records), then
    the model trace at the trained weights, with `stopped`, `units_done` and
    `units_requested` (batches). `cancelled()` is polled after every batch: fit stops there
    and the recording keeps the records made; with `keep()` the model is saved
    (`config.save_model`) and the trace yielded as after a finished fit, else neither.
    """
    import keras

    config.validate().check_flags()
    record = files.check_output(config.record, "record", files.RECORDINGS, "recordings")
    if config.save_model:
        files.check_output(config.save_model, "save_model", (MODEL_SUFFIX,), "saved models")
    _check_distinct(config)
    from lstmviz.keras import check_replaceable

    check_replaceable(record, "record")
    keras.utils.set_random_seed(config.seed)
    model = load_keras_model(config.model, "" if config.loss in LOSSES else config.loss)
    x, y, _ = load_data(config.inputs, config.targets)
    if y is None:
        raise InputError(f"{config.inputs}: training needs targets y ({GIVE_Y})")
    _compile(model, config)
    from lstmviz.keras import GradientFlowCallback
    from lstmviz.weights.model_files import spec_from_keras

    spec = spec_from_keras(model)
    # A compiled loss lstmviz does not know asks for --loss; y must fit the model's output.
    _, x, y, _ = prepare(spec, config, x, y, where=config.inputs)
    batches = -(-len(x) // config.batch) * config.epochs
    if batches < config.every:
        raise ConfigError("every", f"the fit runs {batches} batch{'es' * (batches != 1)} "
                          f"({len(x)} samples, {ref('batch', config.batch)}, "
                          f"{ref('epochs', config.epochs)}), fewer than "
                          f"{ref('every', config.every)}: no record would be written")  # fmt: skip
    data = (x[:RECORD_SAMPLES], y[:RECORD_SAMPLES])
    callback = GradientFlowCallback(data, record, every=config.every, loss=config.loss)
    return _fit_in_a_thread(model, x, y, config, callback, cancelled, keep)


def load_keras_model(path: str, loss: str = ""):
    """The model in `path` as Keras loads it (compiled as it was saved), or a ModelError
    naming the file and the reason. lstmviz's own reader (json and h5py: no code from the file
    runs) reads it first and refuses what model mode does not run (Lambda and custom layers
    among them), so Keras deserialises, in safe mode, only layers Keras itself provides.
    A model compiled with a custom loss Keras cannot load here is loaded uncompiled when
    `loss` (the --loss Keras loss name) is given and compiled with it and a fresh optimizer of
    the saved one's settings (Adam if there is none Keras can make); without `loss` that is a
    ConfigError naming the custom loss."""
    import keras

    from lstmviz.weights.model_files import load_model

    spec = load_model(path)
    if spec.stack:
        raise ModelError(f"{path}: holds LSTM weights only; training needs a whole Keras model "
                         "(.keras)")  # fmt: skip
    try:
        model = _keras_load(path, compile=True)
    except Exception as exc:  # Keras raises many types for files it cannot load
        if not spec.unknown_loss:
            raise _unloadable(path, exc) from None
        if not loss:
            raise ConfigError("loss", f"{path}: the model is compiled with the custom loss "
                              f"{spec.unknown_loss!r}, which Keras cannot load without its code; "
                              f"give {ref('loss')} with a Keras loss name (e.g. mse) to train with "
                              "that loss instead") from None  # fmt: skip
        try:
            model = _keras_load(path, compile=False)
        except Exception as again:  # noqa: BLE001 - as above
            raise _unloadable(path, again) from None
        if isinstance(model, keras.Model):  # the loss given, the optimizer it was saved with
            model.compile(optimizer=_saved_optimizer(path) or keras.optimizers.Adam(),
                          loss=_keras_loss(loss))  # fmt: skip
    if not isinstance(model, keras.Model):
        raise ModelError(f"{path}: holds a {type(model).__name__}, not a keras.Model")
    return model


def _saved_optimizer(path: str):
    """A fresh optimizer with the settings the model in `path` (a .keras file) was compiled
    with, None when the file has none or Keras cannot make it (a custom one)."""
    import json
    import zipfile

    import keras

    try:
        with zipfile.ZipFile(path) as archive:
            compiled = json.loads(archive.read("config.json")).get("compile_config") or {}
        return keras.optimizers.deserialize(compiled["optimizer"])
    except Exception:  # noqa: BLE001 - not a .keras file, no optimizer, or one Keras lacks
        return None


def _keras_loss(name: str) -> str:
    """`name` (--loss) if Keras knows it as a loss, else a ConfigError naming it."""
    import keras

    try:
        keras.losses.get(name)
    except (ValueError, TypeError):
        raise ConfigError("loss", f"unknown loss {name!r} (a Keras loss name)") from None
    return name


def _keras_load(path: str, compile: bool):
    import keras

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras's notes on unbuilt metrics and the like
        return keras.models.load_model(path, safe_mode=True, compile=compile)


def _unloadable(path: str, exc: Exception) -> ModelError:
    """Keras's reason in one line: its config dump left out, a long reason cut at a word."""
    detail = " ".join(f"{type(exc).__name__}: {exc}".split())
    detail = detail.split(" Full object config:")[0]
    if len(detail) > 300:
        detail = detail[:300].rsplit(" ", 1)[0] + " …"
    return ModelError(f"{path}: Keras cannot load this model for training ({detail}); "
                      "training runs a model Keras 3 loads, e.g. a .keras file from "
                      "model.save")  # fmt: skip


def _compile(model, config: RunConfig) -> None:
    """Keep the model's compiled loss and optimizer; a model without a loss takes `--loss`
    (a Keras loss name) and, without an optimizer, Adam."""
    import keras

    if getattr(model, "compiled", False) and model.loss is not None:
        return
    name = config.loss
    if name in LOSSES:
        raise ConfigError("loss", f"{config.model}: the model has no compiled loss; give "
                          f"{ref('loss')} with a Keras loss name (e.g. binary_crossentropy, "
                          "mse)")  # fmt: skip
    optimizer = getattr(model, "optimizer", None) or keras.optimizers.Adam()
    model.compile(optimizer=optimizer, loss=_keras_loss(name))


def _check_distinct(config: RunConfig) -> None:
    """No file written over a file read (or over another one written)."""
    read = [(field, getattr(config, field)) for field in ("model", "inputs", "targets")]
    written = [(field, getattr(config, field)) for field in ("record", "save_model")]
    for n, (field, name) in enumerate(written):
        if not name:
            continue
        for other, source in read + written[:n]:
            if source and Path(name).resolve() == Path(source).resolve():
                raise ConfigError(field, f"{name}: the same file as {ref(other)}")


def save_model(model, path: str) -> None:
    """`model.save` to `path` atomically (a temporary file, then renamed)."""
    try:
        with atomic_path(path, suffix=MODEL_SUFFIX) as tmp:
            model.save(tmp)
    except OSError as exc:
        raise ConfigError("save_model", f"{path}: cannot write ({exc.strerror or exc})") from None


class _Progress:
    """What the fit has done, reported by a Keras callback and read by the generator."""

    def __init__(self, total: int, per_epoch: int, epochs: int, stop: Callable[[], bool]):
        self.total, self.per_epoch, self.epochs = total, per_epoch, epochs
        self.stop = stop
        self.done, self.epoch = 0, 0
        self.updates: queue.Queue = queue.Queue()
        self._last = 0.0

    def callback(self, recorder):
        import keras

        progress = self

        class Report(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                progress.epoch = int(epoch)

            def on_train_batch_end(self, batch, logs=None):
                progress.done = progress.epoch * progress.per_epoch + int(batch) + 1
                now = time.monotonic()
                last = progress.done == progress.total
                if last or now - progress._last >= 1 / UPDATES_PER_SECOND:
                    progress._last = now
                    loss = float((logs or {}).get("loss", np.nan))
                    records = f"{recorder.records} {modes.plural('record', recorder.records)}"
                    message = (f"epoch {progress.epoch + 1}/{progress.epochs} · loss {loss:.4g} · "
                               f"{records}")  # fmt: skip
                    progress.updates.put(TraceUpdate(progress.done, progress.total, message))
                if progress.stop():
                    self.model.stop_training = True

        return Report()


def _fit_in_a_thread(model, x, y, config: RunConfig, callback, cancelled, keep):
    per_epoch = -(-len(x) // config.batch)
    total = per_epoch * config.epochs
    closing = threading.Event()  # the consumer left: stop fitting
    progress = _Progress(total, per_epoch, config.epochs, lambda: cancelled() or closing.is_set())
    every = "batch" if config.every == 1 else f"{config.every} batches"
    yield TraceUpdate(0, total, f"fitting {model.name} on {len(x)} samples, a record every "
                      f"{every}")  # fmt: skip
    failure: list[BaseException] = []

    def keras_fit() -> None:
        model.fit(x, y, batch_size=config.batch, epochs=config.epochs, verbose=0, shuffle=True,
                  callbacks=[callback, progress.callback(callback)])  # fmt: skip

    def fit_and_close() -> None:
        """Fit, then close the recording whatever fit did; what either raises goes to the
        generator, and the end is signalled in every case: the generator waits for it."""
        try:
            for step in (keras_fit, callback.close):
                try:
                    step()
                except BaseException as exc:  # noqa: BLE001 - handed to the generator's thread
                    failure.append(exc)
        finally:
            progress.updates.put(None)

    worker = threading.Thread(target=fit_and_close, name="lstmviz-fit", daemon=True)
    worker.start()
    try:
        while (update := progress.updates.get()) is not None:
            yield update
    finally:
        closing.set()
        worker.join()
    if failure:
        _raise_unless_cancelled(failure[0], config, cancelled)
    stopped = "cancelled" if cancelled() else "completed"
    if stopped == "cancelled":
        if not keep():
            return
        interrupt.wait_for_cancel()
    if config.save_model:
        save_model(model, config.save_model)
    trace = callback.trace()
    trace.arrays.update(stopped=np.array(stopped), units_done=np.int64(progress.done),
                        units_requested=np.int64(total))  # fmt: skip
    yield trace


def _raise_unless_cancelled(exc: BaseException, config: RunConfig, cancelled) -> None:
    """Raise a failure inside fit as the user's problem (bad data for this model, a recording
    that cannot be written), or as it is; return when it is the cancel's own (a record
    interrupted by it)."""
    if isinstance(exc, tf.errors.CancelledError) and cancelled():
        return  # a record interrupted by the cancel: the records before it are kept
    if isinstance(exc, RecordingError):  # it says what the file keeps
        raise RecordingError(f"{ref('record')} {exc.marked}") from None
    if isinstance(exc, LstmvizError):
        raise exc
    if isinstance(exc, ValueError | TypeError | tf.errors.OpError):
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise InputError(f"{config.inputs}: Keras cannot train {config.model} on this data "
                         f"({detail})") from None  # fmt: skip
    raise exc

