"""Training mode: its entry `run_training_mode` (a user's model goes to `fit`), and the built-in
tasks: the shared LSTM cell plus a dense read-out, trained with Adam on a task.

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
  final weights (see `lstmviz.engine.autodiff.connectivity`);
- `stopped` ("completed", "cancelled" or "non-finite"), `units_done` and `units_requested`
  (the steps done and asked for; `runner.run`), `nonfinite_loss_steps`.
With the config (seed, task, sizes) this is enough to redraw or rerun the run.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import fields, replace
from pathlib import Path

import numpy as np

from lstmviz.core import modes
from lstmviz.core.config import (
    NAME_FIELDS,
    OPTIONAL,
    TASK_INPUT_DIMS,
    RunConfig,
    in_python_terms,
)
from lstmviz.core.errors import ConfigError, LstmvizError
from lstmviz.engine.autodiff.connectivity import connectivity
from lstmviz.engine.autodiff.gradients import ReadoutLoss, compiled_step, numpy_arrays
from lstmviz.engine.modes.trace_arrays import add_norms, exact_norm
from lstmviz.engine.modes.trained_weights import WEIGHT_KEYS, save_trained_weights
from lstmviz.engine.native.kernels import exact_norms, kernel_name
from lstmviz.engine.problem.tasks import Task, make_task
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.engine.stopping import Units
from lstmviz.io import files
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.weights import random_weights

LEARNING_RATE = 0.01  # Adam, Keras's other defaults
UPDATES_PER_SECOND = 30  # live TraceUpdates at most this often (and after the last step)
MAX_HISTORY = 50_000_000  # train_steps × steps: norm_h_total_by_step stays below 200 MB

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


class TaskModel:
    """The task's model: its LSTM and read-out weights as tf.Variables, trained by Adam, for
    batches x [T, batch, I] from h0 = c0 = 0.

    `gradients(x, y)` -> the named tensors of the compiled step (gradients.py) at the current
    weights; `apply(named)` one Adam update with their weight gradients (compiled, traced once
    per run)."""

    def __init__(self, task: Task, weights: dict[str, np.ndarray], batch: int):
        self.variables = [tf.Variable(weights[key], name=key) for key in WEIGHT_KEYS]
        self.optimizer = tf.keras.optimizers.Adam(LEARNING_RATE)
        hidden = weights["recurrent_kernel"].shape[0]
        loss = ReadoutLoss(task.per_step, task.loss)
        self._step = compiled_step(loss, batch, task.input_dim, hidden)
        self.state = np.zeros((batch, hidden), np.float32)
        self._apply = tf.function(
            lambda grads: self.optimizer.apply_gradients(zip(grads, self.variables, strict=True))
        )

    def gradients(self, x, y) -> dict[str, tf.Tensor]:
        kernel, recurrent_kernel, bias, readout_kernel, readout_bias = self.variables
        return self._step(
            x, kernel, recurrent_kernel, bias, self.state, self.state, y, readout_kernel,
            readout_bias,
        )  # fmt: skip

    def apply(self, named: dict[str, tf.Tensor]) -> None:
        """One Adam update with the weight gradients of a `gradients` result."""
        self._apply([named[f"grad_{key}"] for key in WEIGHT_KEYS])

    def weights(self) -> dict[str, np.ndarray]:
        return {key: v.numpy() for key, v in zip(WEIGHT_KEYS, self.variables, strict=True)}


def taped_arrays(x, y, weights: dict[str, np.ndarray], named, state) -> dict[str, np.ndarray]:
    """A taped trace's keys for one batch from a `TaskModel.gradients` result (the named
    tensors)."""
    arrays = {"x": x, "target": y, "h0": state, "c0": state, **weights}
    arrays["lstm_kernel"] = np.array(kernel_name())
    # The state is fixed at zero: its gradients are not part of a training trace.
    arrays |= {k: v for k, v in numpy_arrays(named).items() if k not in ("grad_h0", "grad_c0")}
    add_norms(arrays, exact=exact_norms())
    return arrays


def run_training_mode(
    config: RunConfig, cancelled: Callable[[], bool] = bool, keep: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Training mode's generator (the registry's `run`): a user's model (`config.model`:
    `fit.run_fit`, Keras fitting it), else the built-in task (`run_train`)."""
    if config.fitting():
        from lstmviz.engine.modes.fit import run_fit

        return run_fit(config, cancelled, keep)
    return run_train(config, cancelled, keep)


def run_train(
    config: RunConfig, cancelled: Callable[[], bool] = bool, keep: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Train for `config.train_steps` steps on `config.task` (or the sequences in
    `config.inputs`); bad parameters or task data raise here, before anything runs.

    Returns an iterator that yields TraceUpdates with `loss_by_step` [done],
    `norm_h_total_by_step` [done, T] and the latest row as `norm_h_total` [T], at most
    UPDATES_PER_SECOND times a second and after the last step (the arrays are views whose rows
    never change afterwards), then the trace. `cancelled()` is polled before every step (a
    step is the unit of work of `runner.run`); a run cancelled after k steps keeps, when
    `keep()`, the complete trace of those k, as a run asked for k steps gives (with the
    connectivity map when the config asks for it). A step whose loss or dL/dh is NaN or Inf
    stops training cleanly (that step's update is not applied): the trace of the steps done,
    that one included, is yielded with `stopped` = "non-finite" and `nonfinite_loss_steps`.
    Pausing is simply not asking for the next item.
    """
    if not isinstance(config, RunConfig):
        raise ConfigError("config", f"run_train takes a lstmviz.RunConfig(mode='train', ...), "
                          f"not a {type(config).__name__}")  # fmt: skip
    config.validate().check_flags()  # e.g. no weights files: training starts from seeded weights
    task = make_task(config)
    if task.steps is not None:  # the user's sequences: their own T
        config = replace(config, steps=task.steps)
    config.check_memory()  # with the sequences' T: a notebook calls this generator too
    total, steps = config.train_steps, config.steps
    if total * steps > MAX_HISTORY:
        raise ConfigError(
            "train_steps",
            f"{total} steps × T={steps} is more than {MAX_HISTORY:,} history cells; "
            "train for fewer steps or shorter sequences",
        )
    return TrainingRun(config, task).items(cancelled, keep)


class TrainingRun:
    """The state of one training run: the weights, the batches drawn, the history so far."""

    def __init__(self, config: RunConfig, task: Task):
        self.config, self.task = config, task
        self.rng = np.random.default_rng(config.seed)
        self.initial = initial_weights(task, config.hidden, self.rng)
        self.losses = np.zeros(config.train_steps, np.float32)
        self.norms = np.zeros((config.train_steps, config.steps), np.float32)
        self.model: TaskModel | None = None  # built on the first item: TF work stays lazy
        self.first: dict[str, np.ndarray] | None = None  # step 0's taped arrays
        self.batch = None  # the last (x, y)
        self.bad = None  # the named tensors of a step that went non-finite (not applied)

    def step(self, n: int) -> None:
        """Training step n: draw a batch, its gradients, then (when finite) the update."""
        x, y = self.task.sample(self.rng)
        named = self.model.gradients(x, y)
        loss = np.float32(named["loss"])
        norm = exact_norm(np.asarray(named["norm_h_total"]), named["grad_h_total"],
                          exact=exact_norms())  # fmt: skip
        self.losses[n], self.norms[n], self.batch = loss, norm, (x, y)
        if n == 0:
            self.first = taped_arrays(x, y, self.initial, named, self.model.state)
        if np.isfinite(loss) and np.isfinite(norm).all():
            self.model.apply(named)
        else:
            self.bad = named

    def items(
        self, cancelled: Callable[[], bool], keep: Callable[[], bool]
    ) -> Iterator[TraceUpdate | GradientTrace]:
        config, total = self.config, self.config.train_steps
        self.model = TaskModel(self.task, self.initial, config.batch)
        yield TraceUpdate(0, total, f"training on {self.task.name}, T={config.steps}")
        last_update = time.monotonic()
        units = Units(total, cancelled, keep)
        for n in units:
            if not units.run(self.step, n):
                break
            done, now = n + 1, time.monotonic()
            if self.bad is not None or done == total or now - last_update >= 1 / UPDATES_PER_SECOND:
                last_update = now
                message = f"loss {self.losses[n]:.4g}"
                if self.bad is not None:
                    # steps count from 1 here as in the panels and the CLI's warning
                    message = (
                        f"loss or dL/dh is NaN or Inf at training step {done}; training stopped"
                    )
                rows = {
                    "loss_by_step": self.losses[:done],
                    "norm_h_total_by_step": self.norms[:done],
                    "norm_h_total": self.norms[n],
                }
                yield TraceUpdate(done, total, message, rows)
            if self.bad is not None:
                units.stopped = "non-finite"
                break
        if units.stopped == "non-finite":  # the bad step's own arrays: nothing to compute
            yield self.trace(units)
            return
        if units.stopped == "completed" and config.connectivity and cancelled():
            units.stopped = "cancelled"  # before the connectivity map
        if units.stopped == "cancelled" and not units.keeps():
            return
        trace = units.finish(lambda: self.trace(units))
        if trace is None:
            return
        if config.connectivity and units.stopped == "completed":
            # stopped between the map's chunks: as stopped before it (the trace without the
            # map, when kept); a run stopped before has the map of its steps, computed whole
            mapped = connectivity(trace.arrays, cancelled)
            if mapped is None:
                units.stopped = "cancelled"
                if not units.keeps():
                    return
                trace = GradientTrace("train", replace(trace.config, connectivity=False),
                                      trace.arrays | units.keys())  # fmt: skip
            else:
                trace.arrays["connectivity"] = mapped
        elif config.connectivity:
            trace.arrays["connectivity"] = connectivity(trace.arrays)
        yield trace

    def trace(self, units: Units) -> GradientTrace:
        """The complete trace of the `units.done` steps done."""
        done, state = units.done, self.model.state
        x, y = self.batch
        # The final weights on the last batch (a bad step: the weights it saw, its gradients).
        named = self.model.gradients(x, y) if self.bad is None else self.bad
        arrays = taped_arrays(x, y, self.model.weights(), named, state)
        arrays.update({f"step0_{key}": value for key, value in self.first.items()})
        losses = self.losses[:done].copy()
        arrays.update(
            loss_by_step=losses,
            norm_h_total_by_step=self.norms[:done].copy(),
            readout_per_step=np.bool_(self.task.per_step),
            nonfinite_loss_steps=np.flatnonzero(
                ~np.isfinite(losses) | ~np.isfinite(self.norms[:done]).all(axis=1)
            ),
            **units.keys(),
        )
        config = replace(self.config, input_dim=self.task.input_dim, train_steps=done)
        return GradientTrace("train", config, arrays)


def train(**params) -> GradientTrace:
    """Train and return the trace. Parameters as RunConfig's (task, train_steps, steps, batch,
    hidden, seed, inputs, connectivity); e.g. `train(task="adding", train_steps=150, steps=30)`;
    `save_model="w.weights.h5"` (or `.npz`) writes the trained weights there after the run
    (`lstmviz.save_trained_weights`), as `--save-model` does. With `model` (and `inputs`,
    `record`, `epochs`, `every`, `save_model="m.keras"`), fit that Keras model as
    `lstmviz run --mode train --model` does. A bad or unknown parameter, or a `save_model` name
    that cannot be written, raises ConfigError naming the keyword before anything runs."""
    known = known_keywords()
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise in_python_terms(ConfigError(unknown[0], f"train() takes no parameter "
                                          f"{unknown[0]!r} (it takes {', '.join(known)})"))
    for name in NAME_FIELDS:  # their values are printed in full in validate's message
        value = params.get(name)
        if value is not None and not isinstance(value, str | os.PathLike):
            hint = "a layer name" if name == "layer" else "a file name (np.save an array first)"
            raise in_python_terms(ConfigError(name, f"train() takes {hint}, not a "
                                              f"{type(value).__name__}"))  # fmt: skip
    # paths as their text; NumPy numbers RunConfig makes the Python ones they equal
    params = {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in params.items()}
    weights_out = None  # a task run's trained weights: written here, not by the run
    if not params.get("model") and params.get("save_model"):
        weights_out = params.pop("save_model")
    # the runner, as the command line's and the app's runs: it checks the memory the run
    # needs, and its mode's generator fits a model=
    from lstmviz.engine.runner import run

    try:
        config = RunConfig(mode="train", **params).validate()
        _check_read(params, config)
        config.check_flags()
        if weights_out is not None:
            _check_weights_out(weights_out, config)
        *_, trace = run(config)
    except LstmvizError as exc:
        raise in_python_terms(exc) from None
    if weights_out is not None:
        save_trained_weights(trace, weights_out)
    return trace


def _check_read(params: dict, config: RunConfig) -> None:
    """ConfigError naming the first keyword of `params` (sorted) the run would not read, a
    size or choice the command line notes and ignores; file keywords the mode does not read
    are `check_flags`'s."""
    mode, fitting = modes.get("train"), config.fitting()
    # save_model: a fit's model, else the trained weights `train` writes itself
    reads = sorted(name for name in known_keywords()
                   if mode.uses(name, fitting) or name == "save_model")  # fmt: skip
    run = "training a model (model=FILE)" if fitting else "training on a task"
    for name in sorted(params):
        if name in OPTIONAL or mode.uses(name, fitting):
            continue
        why = f" (it reads {', '.join(reads)})"
        if name == "loss":
            what = "your sequences" if config.inputs else config.task
            why = (f": the task has its own loss ({what}: {config.task_loss()}); loss= is for "
                   "training a model (model=FILE)")  # fmt: skip
        elif name == "input_dim":
            why = (": the sequences of inputs= fix I" if config.inputs else f": the task fixes I "
                   f"({config.task}: {TASK_INPUT_DIMS[config.task]}), your sequences (inputs=) "
                   "their own")  # fmt: skip
        raise ConfigError(name, f"{run} does not read it{why}")


def known_keywords() -> list[str]:
    """Every keyword `train` knows: RunConfig's fields but `mode` (those a training run does
    not read are refused with the reason: `_check_read`, `check_flags`)."""
    return sorted(f.name for f in fields(RunConfig) if f.name != "mode")




def _check_weights_out(path: str, config: RunConfig) -> None:
    """ConfigError naming `save_model` when a task run's trained weights cannot be written
    to `path`: not a `.weights.h5` or `.npz` name, no folder to write in, or the file of
    sequences the run reads."""
    out = files.check_trained_weights_output(path)
    read = Path(config.inputs) if config.inputs else None
    if read is not None and out.exists() and read.exists() and out.samefile(read):
        raise ConfigError("save_model", f"{out}: would overwrite the sequences it trains on "
                          f"({config.inputs})")  # fmt: skip
