"""RunConfig: every parameter of a run, validated in one place for the CLI and the GUI.

No TensorFlow and no Qt here: the GUI builds a RunConfig, the engines read one.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from typing import Any

from lstmviz.errors import ConfigError

MODES = ("taped", "multipass", "batchwise", "train")
# What each mode counts as its units of work (a cancelled run can keep the units done).
UNITS = {"taped": "run", "multipass": "passes", "batchwise": "batches", "train": "training steps"}
LOSSES = ("mean_h", "last_mse", "seq_mse")
GENERATORS = ("random", "hypernetwork", "files")
TASKS = ("adding", "copy", "sine")

# (minimum, maximum) for every integer parameter; the CLI and the GUI spin boxes use these.
# Sizes are capped generously here; what a machine can really hold is checked by
# `check_memory`, which names the estimate in GiB.
RANGES: dict[str, tuple[int, int]] = {
    "steps": (1, 10_000_000),
    "batch": (1, 65_536),
    "input_dim": (1, 65_536),
    "hidden": (1, 16_384),
    "passes": (1, 1000),
    "batches": (1, 1000),
    "seed": (0, 2**31 - 1),
    "train_steps": (1, 100_000),
}

# What every parameter means: the GUI's tooltips and the CLI's --help.
HELP = {
    "mode": "taped: one tf.while_loop LSTM under a GradientTape; probes give dL/dh_t\n"
    "at every step.\n"
    "multipass: several forward passes with the state carried between them; full gradient\n"
    "through all passes next to the truncated one a stateful RNN gives.\n"
    "batchwise: every batch runs with its own LSTM weights.\n"
    "train: train on a task and watch the gradient flow change step by step.",
    "steps": "T, the sequence length (timesteps per pass in multi-pass mode).",
    "batch": "B, sequences processed together; norms sum over them.",
    "input_dim": "I, the size of the input vector x_t at each step (in train mode the task\n"
    "fixes it).",
    "hidden": "H, the number of LSTM units (size of h_t and c_t).",
    "passes": "P, forward passes in multi-pass mode;\n"
    "the state at the end of one pass starts the next.",
    "batches": "N, batches in per-batch mode, each with its own weights.",
    "generator": "Where per-batch weights come from: random draws, a small hypernetwork,\n"
    "or files (one per batch).\n"
    "Every sequence of a batch shares that batch's weights: per-sample weights (one weight\n"
    "set per sequence) cannot run on cuDNN, so they are not offered.",
    "loss": "mean_h: mean of every h_t.\n"
    "last_mse: squared error of the last h_T against a random target.\n"
    "seq_mse: squared error of every h_t against a random target sequence.",
    "task": "The training task (train mode): adding problem, copy memory, or sine prediction.",
    "train_steps": "Optimiser steps in train mode.",
    "connectivity": "Also compute the connectivity map C[t, s] = ‖∂L_t/∂h_s‖ (taped and\n"
    "training runs): how strongly the loss at step t reaches back to the state at step s.\n"
    "About T/2 extra backward passes of work.",
    "seed": "Seeds every random draw (inputs, weights, targets): same seed, same run.",
    "random_state": "Draw h0 and c0 from U(-0.5, 0.5) instead of starting from zeros.",
    "weights": "LSTM weights: seeded random (Keras's initialisers), or a file\n"
    "(File → Open weights…, or drop it on the window).",
    "layer": "Which LSTM layer of the weights file is used. File → Open weights… lists the\n"
    "layers of a file that holds several and lets you pick one.",
    "inputs": "The input sequence: seeded N(0, 1), or an .npy/.npz file [B, T, I].",
    "time_major": "The inputs file is already time-major, [T, B, I].",
}

# Flag names as the CLI spells them, for messages that name the flag.
FLAGS = {name: "--" + name.replace("_", "-") for name in RANGES} | {
    "mode": "--mode",
    "loss": "--loss",
    "generator": "--generator",
    "task": "--task",
}


@dataclass
class RunConfig:
    """Parameters of one run. Sizes: T = steps (per pass in multipass mode), B = batch,
    I = input_dim, H = hidden."""

    mode: str = "taped"
    steps: int = 100
    batch: int = 16
    input_dim: int = 8
    hidden: int = 32
    passes: int = 3
    batches: int = 4
    generator: str = "random"
    loss: str = "mean_h"
    seed: int = 0
    random_state: bool = False
    weights: str | None = None
    layer: str | None = None
    inputs: str | None = None
    time_major: bool = False
    task: str = "adding"
    train_steps: int = 100
    connectivity: bool = False

    def validate(self) -> RunConfig:
        """Raise ConfigError naming the first bad parameter; return self when all are fine."""
        for name, allowed in (
            ("mode", MODES),
            ("loss", LOSSES),
            ("generator", GENERATORS),
            ("task", TASKS),
        ):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(
                    FLAGS[name], f"unknown value {value!r} (choose from {', '.join(allowed)})"
                )
        for name, (lo, hi) in RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(FLAGS[name], f"must be an integer, got {value!r}")
            if not lo <= value <= hi:
                raise ConfigError(FLAGS[name], f"{value} is out of range [{lo}, {hi}]")
        for name in ("random_state", "time_major", "connectivity"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"--{name.replace('_', '-')}", "must be true or false")
        for name in ("weights", "layer", "inputs"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"--{name}", f"must be a file name or layer name, got {value!r}")
        return self

    def estimated_bytes(self) -> int:
        """Rough peak memory of the run: every stored [T, B, ·] array plus TensorFlow's
        working set (gate activations, gradients), about (I + 30·H) floats per step and sample."""
        steps = self.steps * {"multipass": self.passes, "batchwise": self.batches}.get(self.mode, 1)
        copies = 2 if self.mode == "multipass" else 1  # full, truncated and reference
        per_step = self.batch * (self.input_dim + 30 * self.hidden) * 4
        weights = (self.input_dim + self.hidden) * 4 * self.hidden * 4 * 4
        return copies * steps * per_step + weights

    def check_memory(self, available: int | None = None) -> RunConfig:
        """Raise ConfigError('memory', ...) when the run would not fit in available memory."""
        available = available_memory() if available is None else available
        need = self.estimated_bytes()
        if need > 0.8 * available:
            raise ConfigError(
                "memory",
                f"this run needs about {need / 2**30:.1f} GiB (T={self.steps}, B={self.batch}, "
                f"H={self.hidden}) but {available / 2**30:.1f} GiB is available; "
                "reduce --steps, --batch or --hidden",
            )
        return self

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """Build from a dict, ignoring keys this version does not know (newer trace files)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls.from_dict(json.loads(text))


def available_memory() -> int:
    """Bytes of memory available to a new allocation (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
