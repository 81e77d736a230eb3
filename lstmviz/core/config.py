"""RunConfig: every parameter of a run, validated in one place for the CLI and the GUI.

No TensorFlow and no Qt here: the GUI builds a RunConfig, the engines read one.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np

from lstmviz.core import modes
from lstmviz.core.errors import ConfigError, LstmvizError, cli_term, ref

LOSSES = ("mean_h", "last_mse", "seq_mse")
# A PyTorch module's losses by name (`lstmviz.torch.tracer.LOSSES`), "mean" (of its output; no
# targets), and the Keras names they answer to as well
PYTORCH_LOSSES = ("mean", "mse", "l1", "cross_entropy", "nll", "bce_with_logits", "bce")
PYTORCH_KERAS_NAMES = {"mean_h": "mean", "mean_squared_error": "mse", "mean_absolute_error": "l1",
                       "mae": "l1", "binary_crossentropy": "bce"}  # fmt: skip
GENERATORS = ("random", "hypernetwork", "files")
TASK_INPUT_DIMS = {"adding": 2, "copy": 10, "sine": 1}  # I of each built-in task
TASKS = tuple(TASK_INPUT_DIMS)
# The read-out loss of each built-in task ("xent": softmax cross-entropy against one-hot
# targets); users' own sequences (`inputs`) train with "mse".
TASK_LOSSES = {"adding": "mse", "copy": "xent", "sine": "mse"}

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
    "epochs": (1, 1_000_000),
    "every": (1, 100_000_000),
}

# What every parameter means: the GUI's tooltips and the CLI's --help (`help_for`; the modes'
# own help comes from the registry).
HELP = {
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
    "anchors": "Model mode, where the loss enters at every step (a tagger, the lower layers of\n"
    "a stack): the steps whose error alone is followed back (docs/diagnosis.md).\n"
    "Empty: the last step (the first for backward directions); every:K every K-th step\n"
    "back from the last; or steps by input position, e.g. 10,20,30. One more backward\n"
    "pass each.",
    "seed": "Seeds every random draw (inputs, weights, targets): same seed, same run.",
    "random_state": "Draw h0 and c0 from U(-0.5, 0.5) instead of starting from zeros.",
    "weights": "LSTM weights: seeded random (Keras's initialisers), or a file\n"
    "(File → Open weights…, or drop it on the window).",
    "layer": "Which LSTM layer of the weights file is used (the window lists the file's layers\n"
    "with their sizes: pick one or type its name); a Bidirectional's own name picks its\n"
    "forward half, NAME/backward the other. I and H follow the layer.",
    "inputs": "The input sequence: seeded N(0, 1), or an .npy/.npz file [B, T, I].",
    "time_major": "The inputs file is already time-major, [T, B, I].",
    "model": "A saved model (model mode): Keras .keras, a Keras 2 .h5, or a weights-only\n"
    "file of stacked LSTM layers (.weights.h5, .npz, PyTorch .safetensors).",
    "targets": "The targets y (model mode) as a .npy, when the inputs file holds x only.",
    "module": "Model mode, a PyTorch checkpoint (--model CKPT.pt: a state dict, or a dict\n"
    "holding one): the function or class that makes its module, as an import path from the\n"
    "working folder (pkg.mod:factory), called with no arguments or with the checkpoint's\n"
    "hyper-parameters it takes.",
    "epochs": "Epochs of Keras's fit when training your model (--mode train --model FILE).",
    "every": "N: when training your model, a record of its gradient flow every N training\n"
    "batches (counted across epochs).",
    "record": "The recording (.lvz) training your model writes: one record every N batches,\n"
    "readable while fit runs.",
    "save_model": "Where training your model saves it when done (.keras, written atomically).",
}



MAX_ANCHORS = 256  # each is one more backward pass of the whole model


def anchor_steps(value, steps: int | None, where: str = "anchors") -> list[int] | None:
    """The anchor steps `value` names for a model output of `steps` steps (None: only check
    the form): None or "" the default (None: the last step, the first for backward
    directions); "every:K" every K-th step back from the last, ascending; a list of input
    positions, or their text "10,20,30". Raises ConfigError naming `where`."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, int | np.integer | bool):
        raise ConfigError(where, f"{value!r} is ambiguous: give [{value}] for that step, or "
                          f'"every:{value}" for one every {value} steps')  # fmt: skip
    every = None
    if isinstance(value, str) and value.strip().startswith("every:"):
        every = value.strip()[len("every:"):]
    if every is not None:
        if not every.strip().isdigit() or int(every) < 1:
            raise ConfigError(where, f"every:K needs a whole K ≥ 1, got {value!r}")
        return None if steps is None else list(range(steps - 1, -1, -int(every)))[::-1][
            -MAX_ANCHORS:]  # fmt: skip
    parts = value.split(",") if isinstance(value, str) else value
    try:
        found = [int(p) for p in parts]
    except (TypeError, ValueError):
        raise ConfigError(where, f"{value!r} is neither every:K nor a list of steps such as "
                          "10,20,30") from None  # fmt: skip
    if not found or min(found) < 0 or len(found) > MAX_ANCHORS:
        raise ConfigError(where, f"{value!r}: give 1 to {MAX_ANCHORS} steps, each ≥ 0")
    if steps is not None and max(found) >= steps:
        raise ConfigError(where, f"step {max(found)} is past the output's {steps} steps "
                          f"(0 to {steps - 1})")  # fmt: skip
    return sorted(set(found))


def anchors_text(anchors) -> str | None:
    """The API's `anchors` (a list of steps, "every:K", or None) as RunConfig keeps it."""
    if anchors is None or isinstance(anchors, str):
        return anchors
    anchor_steps(anchors, None)  # a single number: refused as ambiguous
    try:
        return ",".join(str(int(t)) for t in anchors)
    except (TypeError, ValueError):
        raise ConfigError("anchors", f"{anchors!r} is neither a list of steps nor "
                          "every:K") from None  # fmt: skip


def help_for(name: str) -> str:
    """What the RunConfig field `name` means (tooltip, --help)."""
    return modes.help_text() if name == "mode" else HELP[name]


def flag(name: str) -> str:
    """The CLI flag of RunConfig field `name` ("--train-steps")."""
    return cli_term(name)


# Optional fields a mode may not read: given to a mode that does not, they are refused.
OPTIONAL = ("weights", "layer", "inputs", "time_major", "connectivity", "model", "targets",
            "record", "save_model", "module")
# `module`: "pkg.mod:factory", dotted names on both sides of the colon
MODULE_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
# Fields that name a file (or, `layer`, a layer in one): None when not given, never empty.
NAME_FIELDS = ("weights", "layer", "inputs", "model", "targets", "record", "save_model")
FILE_FIELDS = tuple(name for name in NAME_FIELDS if name != "layer")


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
    model: str | None = None
    targets: str | None = None
    epochs: int = 1
    every: int = 10
    record: str | None = None
    save_model: str | None = None
    module: str | None = None
    anchors: str | None = None

    def __post_init__(self) -> None:
        self._plain_numbers()

    def _plain_numbers(self) -> None:
        """NumPy integers (number fields) and booleans (switches), as a notebook computes them,
        become the Python values they equal: the runs and the saved config JSON take those."""
        for name in RANGES:
            if isinstance(getattr(self, name), np.integer):
                setattr(self, name, int(getattr(self, name)))
        for name in SWITCHES:
            if isinstance(getattr(self, name), np.bool_):
                setattr(self, name, bool(getattr(self, name)))

    def fitting(self) -> bool:
        """Whether this run trains a user's model: a mode that can (`Mode.fit`), given one."""
        return bool(self.model) and bool(modes.get(self.mode).fit)

    def weight_files_listed(self) -> bool:
        """Whether `weights` names one file per unit (a comma list or a folder): a mode that
        lists weight files (`Mode.lists_weight_files`), with generator "files"."""
        return modes.get(self.mode).lists_weight_files and self.generator == "files"

    def validate(self, limits: bool = True) -> RunConfig:
        """Raise ConfigError naming the first bad parameter; return self when all are fine.

        `limits=False` leaves out the upper bounds of RANGES, which bound the runs the CLI and
        the app start: a trace the API computed may be bigger, and its config still describes
        it (`GradientTrace.load`)."""
        self._plain_numbers()  # a field set after the config was made
        for name, allowed in (
            ("mode", modes.names()),
            ("loss", LOSSES),
            ("generator", GENERATORS),
            ("task", TASKS),
        ):
            value = getattr(self, name)
            if name == "loss" and (modes.get(self.mode).any_loss or self.fitting()):
                if not isinstance(value, str) or not value.replace("_", "").isalnum():
                    raise ConfigError("loss", f"{value!r} is not a loss name")
                continue  # a Keras loss name, checked when the run starts
            if value not in allowed:
                raise ConfigError(
                    name, f"unknown value {value!r} (choose from {', '.join(allowed)})"
                )
        for name, (lo, hi) in RANGES.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(name, f"must be an integer, got {value!r}")
            if value < lo or (limits and value > hi):
                raise ConfigError(name, f"{value} is out of range [{lo}, {hi}]")
        for name in SWITCHES:
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, "must be true or false")
        for name in NAME_FIELDS:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ConfigError(name, f"must be a file name or layer name, got {value!r}")
        if self.module is not None and not isinstance(self.module, str):
            raise ConfigError("module", f"must be an import path pkg.mod:factory, got "
                              f"{self.module!r}")  # fmt: skip
        anchor_steps(self.anchors, None)
        return self

    def check_flags(self) -> RunConfig:
        """Raise ConfigError for parameters that make no sense together (the CLI, the runner
        and the GUI all ask here): an empty file name, a file option the mode does not read,
        `layer` without `weights`, `time_major` without `inputs`, training a model without its
        data or a recording to write. Return self when all is well."""
        self._check_names()
        mode, fitting = modes.get(self.mode), self.fitting()
        for name in mode.requires:
            if not getattr(self, name):
                raise ConfigError(name, f"{ref('mode', self.mode)} needs {ref(name, 'FILE')}")
        for name in OPTIONAL:
            if getattr(self, name) and not mode.uses(name, fitting):
                raise ConfigError(name, _refusal(mode, name, fitting))
        if self.module is not None and not MODULE_PATH.fullmatch(self.module):
            raise ConfigError("module", f"{self.module!r} is not an import path: give "
                              "pkg.mod:factory (a module importable from the working folder, "
                              "a colon, the function or class in it)")  # fmt: skip
        if fitting:
            for name, what, more in (
                ("inputs", "DATA", f" (.npz with x and y, or X.npy with {ref('targets')})"),
                ("record", "REC.lvz", ""),
            ):
                if not getattr(self, name):
                    raise ConfigError(name, f"training a model ({ref('mode', self.mode)} "
                                      f"{ref('model', 'FILE')}) needs {ref(name, what)}{more}")
        if self.layer and not self.weights:
            raise ConfigError("layer", f"only applies together with {ref('weights', 'FILE')}")
        if self.time_major and not self.inputs:
            raise ConfigError("time_major", f"only applies together with {ref('inputs', 'FILE')}")
        if mode.lists_weight_files and self.weights and self.generator != "files":
            raise ConfigError("weights", f"in {self.mode} mode weights files need "
                              f"{ref('generator', 'files')}")  # fmt: skip
        if self.targets and not self.inputs:
            raise ConfigError("targets", f"only applies together with {ref('inputs', 'FILE')}")
        return self

    def _check_names(self) -> None:
        """Refuse an empty name (`--inputs ""` from an unset shell variable would otherwise
        mean "no file", a random run), also in the comma-separated list of batchwise weights
        files (`a.npz,` would count an empty entry). Not in `validate`, which loading a trace
        runs: a trace of an earlier version may hold an empty name and must still open."""
        for name in NAME_FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            listed = name == "weights" and modes.get(self.mode).lists_weight_files
            entries = value.split(",") if listed else [value]
            if not all(entry.strip() for entry in entries):
                what = "layer name" if name == "layer" else "file name"
                where = f" in the list {value!r}" if len(entries) > 1 else ""
                raise ConfigError(name, f"empty {what}{where}")

    def for_mode(self) -> RunConfig:
        """A copy with the optional fields its mode does not read cleared (the GUI keeps every
        field's value while another mode is shown; a run sees only what its mode reads)."""
        mode, fitting = modes.get(self.mode), self.fitting()
        unused = {name: getattr(RunConfig, name) for name in OPTIONAL
                  if not mode.uses(name, fitting)}  # fmt: skip
        if mode.trains and not self.inputs and not fitting:  # the task fixes I
            unused["input_dim"] = TASK_INPUT_DIMS.get(self.task, self.input_dim)
        return replace(self, **unused)

    def estimated_bytes(self) -> int:
        """Rough peak memory of the run: every stored [T, B, ·] array plus TensorFlow's
        working set (gate activations, gradients), about (I + 30·H) floats per step and sample."""
        mode = modes.get(self.mode)
        steps = self.steps * (getattr(self, mode.count) if mode.steps_per_unit else 1)
        copies = mode.copies  # multipass: full and truncated
        per_step = self.batch * (self.input_dim + 30 * self.hidden) * 4
        weights = (self.input_dim + self.hidden) * 4 * self.hidden * 4 * 4
        # seeded weights, before the run: the orthogonal recurrent kernel is the QR of a [4H, H]
        # float64 matrix, which holds it, Q and Q's sign-corrected copy at once
        seeding = 3 * 4 * self.hidden**2 * 8 if not self.weights else 0
        return max(copies * steps * per_step + weights, seeding)

    def check_memory(self, available: int | None = None) -> RunConfig:
        """Raise ConfigError('memory', ...) when the run would not fit in available memory. A
        whole model's run is checked by its engine instead, once the model's layers and its
        data's sizes are known (`engine.modes.model.run_model`)."""
        if not self.model:
            run = self.for_mode()  # the sizes the run has (training a task: the task's I)
            check_fits(run.estimated_bytes(), run.sizes(),
                       f"{ref('steps')}, {ref('batch')} or {ref('hidden')}", available)
        return self

    def task_loss(self) -> str:
        """The read-out loss a training run of this config uses (TASK_LOSSES)."""
        return "mse" if self.inputs else TASK_LOSSES.get(self.task, "mse")

    def sizes(self) -> str:
        """The run's sizes as its mode names them, e.g. "P=3 × T=15 B=16 I=2 H=16"."""
        return modes.get(self.mode).sizes.format(**asdict(self))

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


# The fields a flag sets without a value ("--time-major") and those whose flag takes a word of
# a fixed list ("--mode model"; "--loss" takes Keras's names too), as `keyword` writes them
SWITCHES = tuple(f.name for f in fields(RunConfig) if f.type == "bool")
WORD_CHOICES = ("mode", "generator", "task")
# Export and plot arguments whose keywords are not their field's name
_KEYWORDS = {"size": "width/height"}


def keyword(name: str, value: str | None = None) -> str:
    """The Python API's words for field `name` (`errors.Term`): the field an error is about
    as itself ("train_steps: …"), one mentioned as its keyword argument: "steps=5",
    "inputs=FILE", "give loss=", "mode='model'", "with time_major=True"."""
    name = _KEYWORDS.get(name, name)
    if value is None:
        return name
    if name in WORD_CHOICES and value:
        return f"{name}=" + ", ".join(repr(word) for word in value.split(", "))
    if name in SWITCHES and not value:
        return f"{name}=True"
    return f"{name}={value}"


def in_python_terms(exc: LstmvizError) -> LstmvizError:
    """`exc` (its class and attributes) worded for a Python caller (`keyword`)."""
    return exc.worded(keyword)


def _refusal(mode: modes.Mode, name: str, fitting: bool) -> str:
    """Why `mode` refuses the optional field `name` (the run trains a model when `fitting`)."""
    if name == "module":
        whole = [m for m in modes.names() if modes.get(m).whole_model]
        return (f"only applies to {ref('mode', ', '.join(whole))} {ref('model', 'CKPT.pt')} (the "
                "module of a PyTorch checkpoint)")  # fmt: skip
    if name in mode.refuses:
        return mode.refuses[name]
    if fitting and mode.uses(name):
        return f"does not apply when training a model ({ref('model', 'FILE')})"
    plain = [m for m in modes.names() if modes.get(m).uses(name)]
    where = [ref("mode", ", ".join(plain))] if plain else []
    where += [f"{ref('mode', m)} {ref('model', 'FILE')}" for m in modes.names()
              if m not in plain and modes.get(m).uses(name, True)]  # fmt: skip
    return f"only applies to {' or '.join(where)}"


def check_fits(need: int, sizes: str, reduce: str, available: int | None = None) -> None:
    """ConfigError('memory', ...) when `need` bytes exceed 80% of the memory available."""
    available = available_memory() if available is None else available
    if need > 0.8 * available:  # the rest for Python, TensorFlow and the window
        raise ConfigError("memory", f"this run needs about {need / 2**30:.1f} GiB ({sizes}), more "
                          f"than the {0.8 * available / 2**30:.1f} GiB it may use (80% of the "
                          f"{available / 2**30:.1f} GiB available); reduce {reduce}")  # fmt: skip


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
