"""RunConfig: every parameter of a run, validated in one place for the CLI and the GUI.

No TensorFlow and no Qt here: the GUI builds a RunConfig, the engines read one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import Any

from lstmviz.errors import ConfigError

MODES = ("taped", "multipass", "batchwise", "train")
LOSSES = ("mean_h", "last_mse", "seq_mse")
GENERATORS = ("random", "hypernetwork", "files")
TASKS = ("adding", "copy", "sine")

# (minimum, maximum) for every integer parameter; the CLI and the GUI spin boxes use these.
RANGES: dict[str, tuple[int, int]] = {
    "steps": (1, 100_000),
    "batch": (1, 4096),
    "input_dim": (1, 4096),
    "hidden": (1, 4096),
    "passes": (1, 1000),
    "batches": (1, 1000),
    "seed": (0, 2**31 - 1),
    "train_steps": (1, 100_000),
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
