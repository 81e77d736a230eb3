"""Record a model's gradient flow while `model.fit` trains it: `GradientFlowCallback`.

    from lstmviz.keras import GradientFlowCallback
    record = GradientFlowCallback((x[:64], y[:64]), "run.lvz", every=50)
    model.fit(x, y, epochs=5, callbacks=[record])

At the end of every N-th training batch (counted across epochs) the callback runs model mode
(`lstmviz.engine.modes.model`) on the fixed data with the model's current weights and appends a
record to the `.lvz` (`lstmviz.io.recording`): per-direction gradient norms over t, the loss, the
input saliency, and the full model trace of the latest record. Training goes on exactly as without
it: it reads the weights and writes nothing back, runs the model in inference (no dropout, no
noise), and draws from no random stream the training uses.

Imports Keras (and TensorFlow): import it explicitly, `import lstmviz` does not.
"""

from __future__ import annotations

# TensorFlow first, through lstmviz's quiet import of it, then Keras (which imports it).
from lstmviz.engine.quiet_tensorflow import tf  # isort: skip

import contextlib
import json
import os
import random
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import keras
import numpy as np

from lstmviz.core.config import RunConfig, in_python_terms
from lstmviz.core.errors import ConfigError, GraphModel, InputError, LstmvizError, ModelError
from lstmviz.engine.autodiff.forward import weight_names
from lstmviz.engine.modes.model import ModelGradients, compiled, named_arrays, prepare
from lstmviz.io import files
from lstmviz.io.recording import RecordingWriter, check_replaceable, record_rows
from lstmviz.io.trace import GradientTrace
from lstmviz.tensorboard import TensorBoardWriter
from lstmviz.weights.model_files import live_compile_config, spec_from_keras
from lstmviz.weights.model_spec import RECURRENT, LayerSpec, ModelSpec

WHERE = "GradientFlowCallback"


class GradientFlowCallback(keras.callbacks.Callback):
    """Append a record to `path` (`.lvz`; relative to the folder current when the callback is
    made) at the end of every `every`-th training batch.

    `data` = (x, y): the samples every record runs on, held fixed, batch-major as Keras takes
    them (x [B, T] token ids or [B, T, I], y as the model's output); keep B modest (64 samples
    of T=200 through three LSTM directions of 128 units take about half a second a record).
    `loss`: a Keras loss name for a model compiled with a loss lstmviz does not know by name.
    The loss is the model's compiled one otherwise.

    Steps count across epochs and across several `fit` calls with the same callback, which
    append to the same file (a new callback starts the file afresh). After a fit interrupted
    (Ctrl-C) the file stays open, not finished, until the next fit with this callback, `close()`
    or the end of the process. A file deleted or moved meanwhile (or its folder removed) is
    said once, in a warning; the callback then records no more and fit goes on. Under
    `tf.distribute` only one replica context writes (Keras
    calls callbacks once per batch, outside the replicas), and under multi-worker training
    only the chief. `trace()` gives the model trace at the current weights. `tensorboard`: a
    folder to write each record to as TensorBoard scalars and images as well
    (`lstmviz.tensorboard`), checked here.
    """

    def __init__(self, data, path: str | os.PathLike, every: int = 100, loss: str | None = None,
                 tensorboard: str | os.PathLike | None = None):  # fmt: skip
        super().__init__()
        if not isinstance(data, tuple | list) or len(data) != 2:
            raise LstmvizError(f"{WHERE}: data must be (x, y), got {type(data).__name__}")
        if data[0] is None:  # model mode would record on random data instead
            raise LstmvizError(f"{WHERE}: data must be (x, y), got x None")
        if isinstance(every, bool) or not isinstance(every, int | np.integer) or every < 1:
            raise LstmvizError(f"{WHERE}: every must be a positive integer, got {every!r}")
        self.data, self.loss, self.every = data, loss, int(every)
        self.path = files.check_output(path, WHERE, files.RECORDINGS, "recordings")
        check_replaceable(self.path, WHERE)
        self.writer = RecordingWriter(self.path, self.every)
        self.tensorboard = None if tensorboard is None else TensorBoardWriter(
            tensorboard, f"{WHERE} tensorboard")  # fmt: skip
        self._target = Path(self.path).absolute()  # where the writer writes (RecordingWriter)
        self._written: tuple[int, int] | None = None  # (device, inode) of the file it wrote
        self._last_step = 0  # the step of the last record
        self._stopped = False  # the file went away: no more records (`_check_file`)
        self._live_model: _LiveModel | None = None
        self._epoch = 0
        self._steps_before = 0  # training batches of the epochs (and fits) finished
        self._steps_in_epoch = 0
        self._next = self.every  # the step of the next record
        self._said_multiworker = _keras3_multiworker()  # Keras 3 cannot fit there: said once
        if self._said_multiworker:
            warnings.warn(MULTIWORKER, stacklevel=2)

    @property
    def records(self) -> int:
        """Records written so far."""
        return self.writer.records

    @property
    def step(self) -> int:
        """Training batches so far, counted across epochs and fits."""
        return self._steps_before + self._steps_in_epoch

    def trace(self) -> GradientTrace:
        """Model mode at the model's current weights on the callback's data (what a record
        holds in full)."""
        return self._live().trace()

    def close(self) -> None:
        """Mark the recording finished and close it, as the end of fit does: after a fit
        interrupted by Ctrl-C, so that the app and readers see it finished. A later fit with
        this callback appends to it again."""
        self.writer.close()
        if self.tensorboard is not None:
            self.tensorboard.close()

    def _end_epoch(self) -> None:
        """Count the epoch's batches as done: at its end, at the end of fit, and at the start
        of the next fit for an epoch that never ended (a fit interrupted by Ctrl-C)."""
        self._steps_before += self._steps_in_epoch
        self._steps_in_epoch = 0

    # tf_keras's (Keras 2's) fit asks each callback which batch hooks it implements; Keras 3's
    # base class has no such methods. Only the training batches' ends record.
    def _implements_train_batch_hooks(self) -> bool:
        return True

    def _implements_test_batch_hooks(self) -> bool:
        return False

    def _implements_predict_batch_hooks(self) -> bool:
        return False

    def on_train_begin(self, logs=None) -> None:
        self._end_epoch()
        if self._written is None:  # a file put at the path since the callback was made
            check_replaceable(self._target, WHERE)
        self._check_file()
        if not self._said_multiworker and _keras3_multiworker(self.model):
            self._said_multiworker = True
            warnings.warn(MULTIWORKER, stacklevel=2)
        # A model or data it cannot run fails before the first batch; a model that only its
        # first batch builds (no keras.Input) at the first record.
        if self.model.built:
            self._live()

    def on_epoch_begin(self, epoch: int, logs=None) -> None:
        self._epoch = int(epoch)
        self._steps_in_epoch = 0

    def on_train_batch_end(self, batch: int, logs=None) -> None:
        # With steps_per_execution > 1 Keras reports the last batch of each execution, as if
        # it were whole also when the epoch ends part-way through it: capped at the epoch's
        # batches (when Keras knows them), the count is the batches that ran.
        done, steps = int(batch) + 1, (self.params or {}).get("steps")
        self._steps_in_epoch = min(done, int(steps)) if steps else done
        step = self.step
        if step < self._next:
            return
        self._next = (step // self.every + 1) * self.every
        if not self._writes() or not self._check_file():
            return
        start = time.perf_counter()
        live = self._live()
        trace = live.trace()
        train_loss = (logs or {}).get("loss", np.nan)
        rows = record_rows(trace, step, self._epoch, float(train_loss),
                           time.perf_counter() - start, live.loss_text)  # fmt: skip
        self.writer.append(rows, trace)
        self._written, self._last_step = _identity(self._target), step
        if self.tensorboard is not None:  # a failed write warns; training goes on
            self.tensorboard.record(rows, trace, WHERE)

    def on_epoch_end(self, epoch: int, logs=None) -> None:
        self._end_epoch()

    def on_train_end(self, logs=None) -> None:
        self._end_epoch()
        if self._check_file():
            self.writer.close()
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.writer.records == 0 and self._writes():
            batches = f"{self.step} training batch{'es' * (self.step != 1)}"
            warnings.warn(f"{WHERE}: no record: fit ended after {batches}, before batch "
                          f"{self._next}, the first to record (every={self.every}); "
                          f"{self.path} was not written", stacklevel=2)  # fmt: skip

    def _check_file(self) -> bool:
        """Whether records go on: False once the file the callback wrote is no longer at its
        path (deleted, moved, its folder removed, or another file put there), which it says
        once, in a warning naming the path; it then stops recording (the file, wherever it
        is, is closed as finished) and the fit goes on. A file put back is not recreated: its
        records before would be lost, and a new callback starts a new file."""
        if self._stopped or self.writer.ended or self._written is None:
            return not self._stopped
        now = _identity(self._target)
        if now == self._written:
            return True
        if not self._target.parent.is_dir():
            what = f"the folder {self._target.parent} was removed"
        else:
            what = "it was deleted or moved" if now is None else "another file replaced it"
        self._stopped = True
        with contextlib.suppress(LstmvizError):
            self.writer.close()
        count = f"{self.records} record{'s' * (self.records != 1)}"
        warnings.warn(f"{WHERE}: stopped recording to {self.path}: {what} after its record at "
                      f"batch {self._last_step} ({count}); training goes on (a new callback "
                      "records to a new file)", stacklevel=3)  # fmt: skip
        return False

    def _live(self) -> _LiveModel:
        if self.model is None:
            raise LstmvizError(f"{WHERE}: no model yet: pass the callback to model.fit first")
        live = self._live_model
        if live is not None and live.model is not self.model:
            raise LstmvizError(f"{WHERE}: records one model; give another model its own callback")
        # A model compiled again between two fits may have another loss: model mode is built
        # anew then, and reused (compiled once) for as long as the loss stays the same.
        if live is None or live.compiled != _compiled_loss_key(self.model):
            try:
                self._live_model = _LiveModel(self.model, *self.data, self.loss)
            except GraphModel:  # not one chain: Keras runs the graph, lstmviz its recurrences
                self._live_model = _LiveGraph(self.model, *self.data, self.loss)
        return self._live_model

    def _writes(self) -> bool:
        """Whether this process and replica context writes the recording."""
        context = tf.distribute.get_replica_context()
        if context is not None:
            replica = tf.get_static_value(context.replica_id_in_sync_group)
            if replica is not None and int(replica) != 0:
                return False
        return bool(self.model.distribute_strategy.extended.should_checkpoint)


def _compiled_loss_key(model) -> str:
    """What of the model's compile model mode takes its loss from (`live_compile_config`'s
    loss and loss weights), as text to compare: cheap (a tenth of a millisecond), so it is
    checked at every record."""
    config = live_compile_config(model)
    return json.dumps([config.get("loss"), config.get("loss_weights")], sort_keys=True,
                      default=repr)  # fmt: skip


# Keras 3 (3.15 on TensorFlow 2.21) cannot fit under a MultiWorkerMirroredStrategy of several
# workers, with or without lstmviz (keras-team/keras#20585). A model made in the strategy's
# scope fails before any callback runs ("ValueError: Attempt to convert a value (PerReplica:{…})
# with an unsupported type … to a Tensor"), so the callback says it when it is made; one made
# outside and fit in the scope reaches `on_train_begin`, and fails after it.
MULTIWORKER = (f"{WHERE}: Keras {keras.__version__} cannot fit under a multi-worker "
               "MultiWorkerMirroredStrategy (its fit fails on a PerReplica value, with or without "
               "lstmviz: keras-team/keras#20585); tf_keras can (TF_USE_LEGACY_KERAS=1), and the "
               "callback records there, on the chief")  # fmt: skip


def _keras3_multiworker(model=None) -> bool:
    """Whether a Keras 3 fit is to run under a multi-worker MultiWorkerMirroredStrategy:
    `model` a Keras 3 model whose strategy (or the scope fit runs in) is one of several
    workers; without a model, as the callback is made, TF_CONFIG names several workers and no
    parameter server, and tf_keras (whose models fit there) is not loaded."""
    if int(keras.__version__.split(".")[0]) < 3:
        return False
    if model is None:
        try:
            cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster") or {}
            workers = len(cluster.get("chief", [])) + len(cluster.get("worker", []))
        except (ValueError, AttributeError, TypeError):
            return False
        return workers > 1 and "ps" not in cluster and "tf_keras" not in sys.modules
    if not isinstance(model, keras.Model):
        return False  # tf_keras's
    kinds = (tf.distribute.MultiWorkerMirroredStrategy,
             tf.distribute.experimental.MultiWorkerMirroredStrategy)  # fmt: skip
    strategy = getattr(model, "distribute_strategy", None)
    if not isinstance(strategy, kinds):
        strategy = tf.distribute.get_strategy()  # fit inside the strategy's scope
    if not isinstance(strategy, kinds):
        return False
    try:
        cluster = strategy.cluster_resolver.cluster_spec()
        return sum(cluster.num_tasks(job) for job in cluster.jobs if job in ("chief", "worker")) > 1
    except (AttributeError, ValueError, TypeError):
        return True


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at `path`, or None when there is none."""
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


@contextlib.contextmanager
def _random_streams_kept() -> Iterator[None]:
    """Python's and NumPy's global random states as they were: rebuilding a layer in Keras
    draws seeds from Python's `random`, a stream the training's own layers may draw from."""
    python, numpy = random.getstate(), np.random.get_state()
    try:
        yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy)


class _LiveModel:
    """Model mode for one live model on fixed data: one compiled ModelGradients, called with
    the model's current weights read from its variables at every record."""

    def __init__(self, model, x, y, loss: str | None):
        if not model.built:
            raise ModelError(f"{WHERE}: the model is not built yet")
        self.model = model
        self.compiled = _compiled_loss_key(model)  # the compile it was built for
        with _random_streams_kept(), warnings.catch_warnings():
            # a tf_keras model is read through an .h5 of it, which tf_keras calls legacy
            warnings.filterwarnings("ignore", "You are saving your model as an HDF5 file")
            spec = spec_from_keras(model)
            config = RunConfig(mode="model", loss=loss or "mean_h", model=None)
            try:
                self.loss, x, y, _ = prepare(spec, config, x, y, where=f"{WHERE} data",
                                             give_y="data = (x, y)")  # fmt: skip
            except ConfigError as exc:  # about the callback's `loss`, not a flag
                raise in_python_terms(LstmvizError(f"{WHERE}: {exc.template}")) from None
            except InputError as exc:
                raise in_python_terms(exc) from None
            # the compiled computation model_gradients keeps for this structure and loss
            self.gradients = compiled(spec, self.loss)
            args = ", ".join(f"{key}={value!r}" for key, value in self.loss.args)
            self.loss_text = f"{self.loss.name}({args})" if args else self.loss.name
            layers = _live_layers(model)
            self.weights = _weight_readers(spec, layers)
            self.keras_layers = _keras_layer_pairs(spec, layers, self.gradients)
        self.spec, self.x, self.y = spec, x, y
        width = 1 if x.ndim == 2 else int(x.shape[2])
        hidden = spec.lstm_layers()[0].directions()[0].hidden
        self.config = RunConfig(mode="model", steps=int(x.shape[1]), batch=int(x.shape[0]),
                                input_dim=width, hidden=hidden, loss=self.loss.name,
                                model=None)  # fmt: skip
        shapes = ", ".join(f"{name} {list(a.shape)}" for name, a in (("x", x), ("y", y))
                           if a is not None)  # fmt: skip
        self.source = f"{WHERE} data: {shapes}"

    def trace(self) -> GradientTrace:
        start = time.perf_counter()
        for ours, theirs in self.keras_layers:
            ours.assign(tf.convert_to_tensor(theirs))
        if self.keras_layers:
            self.gradients.forget_keras_weights()
        weights = [tf.cast(read(), tf.float32) for read in self.weights]
        arrays = self._arrays(self.gradients(self.x, self.y, weights))
        arrays["model_seconds"] = np.float32(time.perf_counter() - start)
        return GradientTrace("model", self.config, arrays)

    def _arrays(self, named: dict) -> dict[str, np.ndarray]:
        """The model-mode trace arrays, as `lstmviz.engine.modes.model.model_arrays` gives them."""
        arrays = named_arrays(self.spec, named, self.x, self.y)
        arrays["model_source"] = np.array(self.spec.source)
        arrays["inputs_source"] = np.array(self.source)
        return arrays


class _LiveGraph:
    """Model mode for one live model Keras runs as a graph (`engine.modes.graph_model`), on fixed
    data: its compiled computation reads the model's variables at every record."""

    def __init__(self, model, x, y, loss):
        from lstmviz.engine.modes.graph_model import graph_data, graph_losses, live_graph

        self.model, self.compiled = model, _compiled_loss_key(model)
        self.graph = live_graph(model)
        try:
            self.losses = graph_losses(self.graph, loss)
            self.data = graph_data(self.graph, self.losses, x, y, f"{WHERE} data")
        except ConfigError as exc:  # about the callback's `loss`, not a flag
            raise in_python_terms(LstmvizError(f"{WHERE}: {exc.template}")) from None
        except InputError as exc:
            raise in_python_terms(exc) from None
        self.loss_text = ", ".join(getattr(loss, "name", "custom") for loss in self.losses)
        self.config = self.data.sized(RunConfig(mode="model", loss="mean_h", model=None))
        self.data.source = f"{WHERE} data: {self.data.shapes()}"

    def trace(self) -> GradientTrace:
        from lstmviz.engine.modes.graph_model import graph_run

        with _random_streams_kept():
            *_, trace = graph_run(self.graph, self.losses, self.data, self.config)
        return trace


def _live_layers(model) -> dict[str, object]:
    """The model's layers by the names a ModelSpec gives them: nested models flattened in
    place, a name already taken prefixed with its models' names ("sub/dense")."""
    found: dict[str, object] = {}

    def walk(container, prefix: str) -> None:
        for layer in container.layers:
            if isinstance(layer, keras.layers.InputLayer):
                continue
            if isinstance(layer, keras.Model):
                walk(layer, f"{prefix}{layer.name}/")
                continue
            found[layer.name if layer.name not in found else f"{prefix}{layer.name}"] = layer

    walk(model, "")
    return found


def _variable_of(layer, spec: LayerSpec, key: str) -> Callable[[], object]:
    """A reader of the live variable behind the spec's weight `key` of `layer`."""
    owner = layer
    if spec.kind == "bidirectional":
        half, key = key.split("/", 1)
        owner = layer.forward_layer if half == "forward" else layer.backward_layer
    if spec.kind in RECURRENT:
        owner = owner.cell
    elif spec.kind == "time_distributed_dense":
        owner = layer.layer
    return lambda: getattr(owner, key)


def _weight_readers(spec: ModelSpec, layers: dict) -> list[Callable[[], object]]:
    """One reader per weight of the forward, in `weight_names` order, each checked against
    the spec's copy (same shape, same values) so that no weight is read from the wrong
    variable."""
    by_name = {layer.name: layer for layer in spec.layers}
    readers = []
    for name, key in weight_names(spec):
        layer_spec = by_name[name]
        if name not in layers:
            raise ModelError(f"{WHERE}: layer {layer_spec.label} is not in the model")
        try:
            read = _variable_of(layers[name], layer_spec, key)
            value = np.asarray(tf.convert_to_tensor(read()), np.float32)  # the spec's dtype
        except (AttributeError, ValueError, TypeError):
            value = None
        if value is None or not np.array_equal(value, layer_spec.weights[key]):
            raise ModelError(f"{WHERE}: cannot find the variable of {key} in layer "
                             f"{layer_spec.label}")  # fmt: skip
        readers.append(read)
    return readers


def _keras_layer_pairs(spec: ModelSpec, layers: dict, gradients: ModelGradients) -> list:
    """(variable of lstmviz's copy, live variable) for the layers only Keras runs: their
    copies in the forward are brought up to date before every record."""
    pairs = []
    for layer_spec in spec.layers:
        if layer_spec.kind != "keras":
            continue
        ours = gradients.forward.keras[layer_spec.name].weights
        theirs = layers[layer_spec.name].weights if layer_spec.name in layers else []
        if len(ours) != len(theirs) or any(
            tuple(a.shape) != tuple(b.shape) for a, b in zip(ours, theirs, strict=False)
        ):
            raise ModelError(f"{WHERE}: cannot match the weights of layer {layer_spec.label}")
        pairs += list(zip(ours, theirs, strict=True))
    return pairs
