"""Training mode: the shared LSTM cell plus a dense read-out, trained with Adam on a task.

Every training step is one compiled forward + backward with probes, so besides the update it
gives the total dL/dh_t of the task loss at every step (`norm_h_total_by_step` [S, T]).

The final trace (mode "train") holds, besides `loss_by_step` [S] and `norm_h_total_by_step`:
- the taped keys of a taped trace (x, target, h0, c0, kernel, recurrent_kernel, bias, loss, h, c,
  grad_h_direct, grad_h_total, grad_c_total, grad_kernel, …, norm_h_total, …) for the *final*
  weights on the last batch, plus `readout_kernel` [H, O], `readout_bias` [O] and their
  gradients; `target` is the task's y ([B, O] or [T, B, O]), `loss` the task loss;
- the same keys prefixed `step0_` for step 0: the initial weights (`step0_kernel`, …) on the
  first batch, before the first update (so `step0_norm_h_total` == `norm_h_total_by_step[0]`);
- `readout_per_step` (bool) and, with `config.connectivity`, `connectivity` [T, T] for the
  final weights (see `lstmviz.engine.connectivity`).
With the config (seed, task, sizes) this is enough to redraw or rerun the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from lstmviz.config import RunConfig
from lstmviz.engine.arrays import add_norms
from lstmviz.engine.cell import lstm_sequence
from lstmviz.engine.connectivity import connectivity
from lstmviz.engine.native import kernel_name
from lstmviz.engine.tasks import Task, make_task
from lstmviz.engine.tfload import tf
from lstmviz.errors import ConfigError
from lstmviz.trace import GradientTrace, TraceUpdate, step_norm
from lstmviz.weights import random_weights

LEARNING_RATE = 0.01  # Adam, Keras's other defaults
UPDATES_PER_SECOND = 30  # live TraceUpdates at most this often (and after the last step)
MAX_HISTORY = 50_000_000  # train_steps × steps: norm_h_total_by_step stays below 200 MB

WEIGHT_KEYS = ("kernel", "recurrent_kernel", "bias", "readout_kernel", "readout_bias")
_GRAD_KEYS = ("grad_h_direct", "grad_h_total", "grad_c_total") + tuple(
    f"grad_{key}" for key in WEIGHT_KEYS
)


def readout_loss(per_step: bool, loss: str, h, readout_kernel, readout_bias, y):
    """The task loss of the dense read-out on h [T, B, H] (every step, or h[T-1] only)."""
    out = tf.tensordot(h if per_step else h[-1], readout_kernel, 1) + readout_bias
    if loss == "xent":
        return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=out))
    return tf.reduce_mean(tf.square(out - y))


_MATRIX = tf.TensorSpec([None, None], tf.float32)
_VECTOR = tf.TensorSpec([None], tf.float32)
_SIGNATURE = (
    tf.TensorSpec([None, None, None], tf.float32),  # x [T, B, I]
    tf.TensorSpec(None, tf.float32),  # y [B, O] or [T, B, O]
    _MATRIX,  # kernel [I, 4H]
    _MATRIX,  # recurrent_kernel [H, 4H]
    _VECTOR,  # bias [4H]
    _MATRIX,  # readout_kernel [H, O]
    _VECTOR,  # readout_bias [O]
)
_COMPILED: dict[tuple[bool, str], Callable] = {}


def task_gradients(per_step: bool, loss: str) -> Callable:
    """Compiled once per read-out kind, for all shapes: (x, y, *weights in WEIGHT_KEYS order)
    -> (loss, h, c, grads in _GRAD_KEYS order); h0 = c0 = 0."""
    if (per_step, loss) not in _COMPILED:

        def taped(x, y, kernel, recurrent_kernel, bias, readout_kernel, readout_bias):
            state = tf.zeros([tf.shape(x)[1], tf.shape(recurrent_kernel)[0]])
            probe_h = tf.zeros([tf.shape(x)[0], tf.shape(state)[0], tf.shape(state)[1]])
            probe_c = tf.zeros_like(probe_h)
            sources = [
                probe_h,
                probe_c,
                kernel,
                recurrent_kernel,
                bias,
                readout_kernel,
                readout_bias,
            ]
            with tf.GradientTape() as tape:
                tape.watch(sources)
                h, c = lstm_sequence(
                    x, state, state, kernel, recurrent_kernel, bias, probe_h, probe_c
                )
                value = readout_loss(per_step, loss, h, readout_kernel, readout_bias, y)
            grads = tape.gradient(
                value, [h, *sources], unconnected_gradients=tf.UnconnectedGradients.ZERO
            )
            return value, h, c, grads

        _COMPILED[per_step, loss] = tf.function(
            taped, input_signature=_SIGNATURE, reduce_retracing=True
        )
    return _COMPILED[per_step, loss]


def initial_weights(task: Task, hidden: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Keras's initialisers: the LSTM's (`random_weights`), a Glorot-uniform read-out, zero bias."""
    lstm = random_weights(task.input_dim, hidden, rng)
    limit = np.sqrt(6.0 / (hidden + task.output_dim))
    return {
        "kernel": lstm.kernel,
        "recurrent_kernel": lstm.recurrent_kernel,
        "bias": lstm.bias,
        "readout_kernel": rng.uniform(-limit, limit, (hidden, task.output_dim)).astype(np.float32),
        "readout_bias": np.zeros(task.output_dim, np.float32),
    }


class Trainer:
    """The weights as tf.Variables and Adam. `gradients(x, y)` -> (loss, h, c, grads in
    _GRAD_KEYS order) at the current weights; `step(x, y)` the same, then one Adam update
    (compiled, traced once per run). x [T, B, I]."""

    def __init__(self, task: Task, weights: dict[str, np.ndarray]):
        self.variables = [tf.Variable(weights[key], name=key) for key in WEIGHT_KEYS]
        self.optimizer = tf.keras.optimizers.Adam(LEARNING_RATE)
        self._taped = task_gradients(task.per_step, task.loss)
        self._apply = tf.function(
            lambda grads: self.optimizer.apply_gradients(zip(grads, self.variables, strict=True))
        )

    def gradients(self, x, y):
        return self._taped(x, y, *self.variables)

    def step(self, x, y):
        result = self.gradients(x, y)
        self.apply(result)
        return result

    def apply(self, result) -> None:
        """One Adam update with the weight gradients of a `gradients` result."""
        self._apply(result[3][3:])

    def weights(self) -> dict[str, np.ndarray]:
        return {key: v.numpy() for key, v in zip(WEIGHT_KEYS, self.variables, strict=True)}


def taped_arrays(x, y, weights: dict[str, np.ndarray], result) -> dict[str, np.ndarray]:
    """A taped trace's keys for one batch from a Trainer result (loss, h, c, grads)."""
    value, h, c, grads = result
    state = np.zeros((x.shape[1], weights["recurrent_kernel"].shape[0]), np.float32)
    arrays = {"x": x, "target": y, "h0": state, "c0": state, **weights}
    arrays["lstm_kernel"] = np.array(kernel_name())
    arrays.update(loss=np.float32(value.numpy()), h=h.numpy(), c=c.numpy())
    arrays.update({key: g.numpy() for key, g in zip(_GRAD_KEYS, grads, strict=True)})
    add_norms(arrays)
    return arrays


def run_train(config: RunConfig, cancelled: Callable[[], bool] = bool) -> TrainingRun:
    """Train for `config.train_steps` steps on `config.task` (or the sequences in
    `config.inputs`); bad parameters or task data raise here, before anything runs.

    Returns a TrainingRun, an iterator that yields TraceUpdates with `loss_by_step` [done],
    `norm_h_total_by_step` [done, T] and the latest row as `norm_h_total` [T], at most
    UPDATES_PER_SECOND times a second and after the last step (the arrays are views whose rows
    never change afterwards), then the trace. `cancelled()` is polled before every step; a
    cancelled run ends without a trace, but `partial_trace()` then gives a complete trace of
    the steps done. A step whose loss or dL/dh is NaN or Inf stops training cleanly (that
    step's update is not applied): the trace of the steps done, that one included, is yielded
    with `stopped` = "non-finite" and `nonfinite_loss_steps`. Pausing is simply not asking for
    the next item.
    """
    total, steps = config.train_steps, config.steps
    if total * steps > MAX_HISTORY:
        raise ConfigError(
            "--train-steps",
            f"{total} steps × T={steps} is more than {MAX_HISTORY:,} history cells; "
            "train for fewer steps or shorter sequences",
        )
    if config.weights:
        raise ConfigError("--weights", "training starts from seeded weights in this version")
    return TrainingRun(config, make_task(config), cancelled)


class TrainingRun:
    """One training run, driven by iterating it (see `run_train`).

    `steps_done` counts finished steps. After the iteration stopped, at any point between
    two items or after a cancelled run, `partial_trace()` builds the complete trace of the
    steps done so far (as the final trace would be had training been asked for that many steps,
    without the connectivity map); the CLI's `--keep-partial` and the GUI's Stop use it. It runs
    one more forward + backward (the final weights on the last batch) and must not be called
    while another thread is iterating the run.
    """

    def __init__(self, config: RunConfig, task: Task, cancelled: Callable[[], bool] = bool):
        self.config, self.task, self.cancelled = config, task, cancelled
        total = config.train_steps
        self.rng = np.random.default_rng(config.seed)
        self.initial = initial_weights(task, config.hidden, self.rng)
        self.trainer: Trainer | None = None  # built on the first item: TF work stays lazy
        self.losses = np.zeros(total, np.float32)
        self.norms = np.zeros((total, config.steps), np.float32)
        self.steps_done = 0
        self.stopped = ""  # "", "completed", "cancelled" or "non-finite"
        self._first: dict[str, np.ndarray] | None = None
        self._batch = None  # the last (x, y)
        self._bad_result = None  # gradients of a step that went non-finite (not applied)
        self._items = self._training()

    def __iter__(self) -> TrainingRun:
        return self

    def __next__(self) -> TraceUpdate | GradientTrace:
        return next(self._items)

    def close(self) -> None:
        """Stop the run where it is, as a generator's `close()` does."""
        self._items.close()

    def _training(self) -> Iterator[TraceUpdate | GradientTrace]:
        config, task = self.config, self.task
        total = config.train_steps
        self.trainer = Trainer(task, self.initial)
        yield TraceUpdate(0, total, f"training on {task.name}, T={config.steps}")
        last_update = time.monotonic()
        for step in range(total):
            if self.cancelled():
                self.stopped = "cancelled"
                return
            x, y = task.sample(self.rng)
            try:
                result = self.trainer.gradients(x, y)
            except tf.errors.CancelledError:  # interrupt.interrupt() after a cancel
                if not self.cancelled():
                    raise
                self.stopped = "cancelled"
                return
            self.losses[step] = result[0].numpy()
            self.norms[step] = step_norm(result[3][1].numpy())
            self._batch = (x, y)
            if step == 0:
                self._first = taped_arrays(x, y, self.initial, result)
            finite = np.isfinite(self.losses[step]) and np.isfinite(self.norms[step]).all()
            if finite:
                self.trainer.apply(result)
            else:
                self._bad_result = result
            self.steps_done = done = step + 1
            now = time.monotonic()
            if not finite or step == total - 1 or now - last_update >= 1 / UPDATES_PER_SECOND:
                last_update = now
                message = f"loss {self.losses[step]:.4g}"
                if not finite:
                    message = f"loss or dL/dh is NaN or Inf at step {step}; training stopped"
                yield TraceUpdate(
                    done,
                    total,
                    message,
                    {
                        "loss_by_step": self.losses[:done],
                        "norm_h_total_by_step": self.norms[:done],
                        "norm_h_total": self.norms[step],
                    },
                )
            if not finite:
                self.stopped = "non-finite"
                yield self.partial_trace()
                return
        self.stopped = "completed"
        trace = self._trace()
        if config.connectivity:
            if self.cancelled():
                self.stopped = "cancelled"
                return
            trace.arrays["connectivity"] = connectivity(trace.arrays)
        yield trace

    def partial_trace(self) -> GradientTrace | None:
        """The complete trace of the steps done so far (None before the first step)."""
        if not self.steps_done:
            return None
        return self._trace()

    def _trace(self) -> GradientTrace:
        done, total = self.steps_done, self.config.train_steps
        x, y = self._batch
        if self._bad_result is not None:  # the weights the bad step saw, its gradients
            arrays = taped_arrays(x, y, self.trainer.weights(), self._bad_result)
        else:
            arrays = taped_arrays(x, y, self.trainer.weights(), self.trainer.gradients(x, y))
        arrays.update({f"step0_{key}": value for key, value in self._first.items()})
        losses = self.losses[:done].copy()
        arrays.update(
            loss_by_step=losses,
            norm_h_total_by_step=self.norms[:done].copy(),
            readout_per_step=np.bool_(self.task.per_step),
            units_done=np.int64(done),
            units_requested=np.int64(total),
            stopped=np.array(self.stopped or "cancelled"),
            nonfinite_loss_steps=np.flatnonzero(
                ~np.isfinite(losses) | ~np.isfinite(self.norms[:done]).all(axis=1)
            ),
        )
        config = replace(self.config, input_dim=self.task.input_dim, train_steps=done)
        return GradientTrace("train", config, arrays)


def partial_trace(run: TrainingRun) -> GradientTrace | None:
    """Stop a paused training run (one not being iterated) and return the complete trace of the
    steps done so far, with the connectivity map when the config asks for it, or None when no
    step has finished. The run is closed either way."""
    try:
        trace = run.partial_trace()
    finally:
        run.close()
    if trace is not None and run.config.connectivity:
        trace.arrays["connectivity"] = connectivity(trace.arrays)
    return trace


def train(**params) -> GradientTrace:
    """Train and return the trace. Parameters as RunConfig's (task, train_steps, steps, batch,
    hidden, seed, inputs, connectivity); e.g. `train(task="adding", train_steps=150, steps=30)`."""
    config = RunConfig(mode="train", **params).validate()
    *_, trace = run_train(config)
    return trace
