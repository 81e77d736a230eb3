"""Training tasks: seeded sequence problems and users' own sequences (NumPy only).

A `Task` draws one training batch per call: x [T, B, I] (time-major) and the read-out target y,
[B, O] when the read-out looks at the last step only, [T, B, O] when it predicts every step.

- `adding`: I=2 (a value ~ U(0, 1) and a marker channel with exactly two 1s, one in each half
  of the sequence); y [B, 1] is the sum of the two marked values; mean squared error.
- `copy`: copy-memory. I=10 one-hot channels: symbols 0-7, blank 8, go-marker 9. The first L
  steps show L random symbols (L = min(10, (T-1)//2), at least 1), blanks follow, the marker
  comes at step T-L-1, and the last L steps must reproduce the symbols; every other step must
  output blank. y [T, B, 9] one-hot; softmax cross-entropy averaged over steps and batch.
- `sine`: next-step prediction of a noisy sine, frequency ~ U(0.1, 0.6) rad/step, phase
  ~ U(0, 2π), amplitude 1, noise N(0, 0.1²); x [T, B, 1] and y [T, B, 1] (the series one step
  later); mean squared error.
- user sequences (`--inputs FILE`): `.npz` with `x` [N, T, I] and `y` [N, O] (read-out on the
  last step) or [N, T, O] (every step); or `.npy` [N, T+1, I] of series to predict one step
  ahead (x = file[:, :-1], y = file[:, 1:]). Mean squared error. Each batch is B sequences drawn
  without replacement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lstmviz.core.config import TASK_INPUT_DIMS, RunConfig
from lstmviz.core.errors import ConfigError, InputError, ref
from lstmviz.io import files
from lstmviz.io.inputs import read_numpy

Sampler = Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]]

COPY_SYMBOLS = 8  # symbol classes; blank = 8, go-marker = 9


@dataclass(frozen=True)
class Task:
    """What training needs to know about a task. `sample(rng)` -> x [T, B, I], y (float32)."""

    name: str
    input_dim: int
    output_dim: int
    per_step: bool  # read-out at every step (y [T, B, O]) or the last step only (y [B, O])
    loss: str  # "mse" or "xent" (softmax cross-entropy against one-hot y)
    sample: Sampler
    steps: int | None = None  # T of the user's sequences (the built-in tasks take --steps)


def _adding(steps: int, batch: int) -> Sampler:
    if steps < 2:
        raise ConfigError("steps", f"task 'adding' needs at least 2 steps (one marker in each "
                          f"half), not {steps}")  # fmt: skip

    def sample(rng):
        values = rng.uniform(0.0, 1.0, (steps, batch))
        first = rng.integers(0, steps // 2, batch)
        second = rng.integers(steps // 2, steps, batch)
        markers = np.zeros((steps, batch))
        markers[first, np.arange(batch)] = 1.0
        markers[second, np.arange(batch)] = 1.0
        y = (values * markers).sum(axis=0)[:, None]
        return np.stack([values, markers], axis=-1).astype(np.float32), y.astype(np.float32)

    return sample


def _copy(steps: int, batch: int) -> Sampler:
    if steps < 3:
        raise ConfigError("steps", f"task 'copy' needs at least 3 steps (symbols, marker, "
                          f"recall), not {steps}")  # fmt: skip
    length = max(1, min(10, (steps - 1) // 2))
    blank, marker = COPY_SYMBOLS, COPY_SYMBOLS + 1

    def sample(rng):
        symbols = rng.integers(0, COPY_SYMBOLS, (length, batch))
        inputs = np.full((steps, batch), blank)
        inputs[:length] = symbols
        inputs[steps - length - 1] = marker
        outputs = np.full((steps, batch), blank)
        outputs[steps - length :] = symbols
        eye = np.eye(COPY_SYMBOLS + 2, dtype=np.float32)
        return eye[inputs], eye[outputs][..., : COPY_SYMBOLS + 1]

    return sample


def _sine(steps: int, batch: int) -> Sampler:
    def sample(rng):
        omega = rng.uniform(0.1, 0.6, batch)
        phase = rng.uniform(0.0, 2 * np.pi, batch)
        series = np.sin(np.arange(steps + 1)[:, None] * omega + phase)
        series += rng.normal(0.0, 0.1, series.shape)
        series = series[..., None].astype(np.float32)
        return series[:-1], series[1:]

    return sample


def read_task_file(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read user sequences: `.npz` (x, y) or `.npy` (one-step-ahead). Returns x [N, T, I], y."""
    path = Path(path)
    if files.suffix_of(path, files.INPUTS) is None and not files.missing(path):
        raise InputError(f"{path}: training sequences must be .npz (x, y) or .npy [N, T+1, I]")
    data = read_numpy(path, keys=(), optional=("x", "y"))
    if isinstance(data, dict):
        missing = [key for key in ("x", "y") if key not in data]
        if missing:
            raise InputError(
                f"{path}: needs arrays 'x' [N, T, I] and 'y' [N, O] or [N, T, O]; missing "
                f"{', '.join(missing)} (found {', '.join(files.npz_names(path)) or 'nothing'})"
            )
        return data["x"], data["y"]
    if data.ndim != 3 or data.shape[1] < 2:
        raise InputError(
            f"{path}: a .npy of series must be [N, T+1, I] with T >= 1, "
            f"got shape {list(data.shape)}"
        )
    return data[:, :-1], data[:, 1:]


def check_task_data(x, y, batch: int, source: str) -> tuple[np.ndarray, np.ndarray]:
    """Validate user sequences x [N, T, I] and y [N, O] or [N, T, O]; return them as float32."""
    x, y = np.asarray(x), np.asarray(y)
    for name, array in (("x", x), ("y", y)):
        if array.dtype.kind not in "fiub":
            raise InputError(f"{source}: {name} must be numeric, got dtype {array.dtype}")
    if x.ndim != 3 or 0 in x.shape:
        raise InputError(f"{source}: x must be [N, T, I] (non-empty), got shape {list(x.shape)}")
    count, length, _ = x.shape
    if y.ndim not in (2, 3) or y.shape[0] != count or 0 in y.shape:
        raise InputError(
            f"{source}: y must be [N, O] or [N, T, O] with N={count} like x, "
            f"got shape {list(y.shape)}"
        )
    if y.ndim == 3 and y.shape[1] != length:
        raise InputError(f"{source}: x has T={length} steps but y has T={y.shape[1]}")
    if count < batch:
        raise InputError(f"{source}: {count} sequences, fewer than {ref('batch', batch)}")
    for name, array in (("x", x), ("y", y)):
        bad = ~np.isfinite(array.reshape(count, -1)).all(axis=1)
        if bad.any():
            raise InputError(
                f"{source}: {name} holds NaN or Inf (first in sequence {int(np.argmax(bad))})"
            )
    return x.astype(np.float32), y.astype(np.float32)


def _user(x: np.ndarray, y: np.ndarray, batch: int) -> Sampler:
    def sample(rng):
        pick = rng.choice(x.shape[0], batch, replace=False)
        xb = x[pick].transpose(1, 0, 2)
        return xb, (y[pick] if y.ndim == 2 else y[pick].transpose(1, 0, 2))

    return sample


def make_task(config: RunConfig) -> Task:
    """The task `config` asks for: its own sequences (`config.inputs`) or a built-in task."""
    steps, batch = config.steps, config.batch
    if config.inputs:
        x, y = check_task_data(*read_task_file(config.inputs), batch, config.inputs)
        return Task("user", x.shape[2], y.shape[-1], y.ndim == 3, config.task_loss(),
                    _user(x, y, batch), steps=x.shape[1])  # fmt: skip
    loss = config.task_loss()
    if config.task == "adding":
        return Task("adding", TASK_INPUT_DIMS["adding"], 1, False, loss, _adding(steps, batch))
    if config.task == "copy":
        channels = TASK_INPUT_DIMS["copy"]  # the symbols, blank and go-marker
        return Task("copy", channels, COPY_SYMBOLS + 1, True, loss, _copy(steps, batch))
    if config.task == "sine":
        return Task("sine", TASK_INPUT_DIMS["sine"], 1, True, loss, _sine(steps, batch))
    raise InputError(f"unknown task {config.task!r}")
