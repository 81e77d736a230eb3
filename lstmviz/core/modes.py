"""The registry of run modes: a mode is one engine module plus one registration here.

No TensorFlow and no Qt: the CLI's `--mode` choices, the GUI's mode list and which dock fields
it enables, `RunConfig.validate`, the trace reader, the runner's dispatch and the summary line
all read this table, so a new mode is an engine generator and a `register(Mode(...))` call.

A mode's generator is named as "module:function" and imported only when a run starts. It is
called as `function(config, problem=…, cancelled=…, keep=…)` (see `lstmviz.engine.runner`)
and yields `TraceUpdate`s, then a `GradientTrace`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

# RunConfig fields every mode reads.
COMMON_PARAMS = frozenset({"mode", "steps", "batch", "hidden", "seed"})


@dataclass(frozen=True)
class Mode:
    """One way of running the engine.

    - `name`: the value of `RunConfig.mode`, `--mode` and a trace's `mode`;
    - `label`: what the window, the figure's title and the summary line call it;
    - `help`: one or two sentences for the tooltip and `--help`;
    - `params`: the RunConfig fields it reads besides `COMMON_PARAMS` (the dock enables only
      these; a file flag it does not read is refused, with the reason in `refuses`);
    - `run`: its generator, "module:function";
    - `problem`: whether the runner hands it a Problem (x, weights, state, target: seeded, or
      read from `--weights` / `--inputs`); other modes draw their own data;
    - `unit`: what one unit of work (one TraceUpdate) is, e.g. "pass"; "" for a single unit;
    - `count`: the RunConfig field that counts those units (kept on Stop: `units_done`);
    - `sizes`: the sizes as the summary line shows them, formatted with the config's fields;
    - `any_loss`: whether `loss` may name any Keras loss (checked when the run starts);
    - `lead`: leading axes of its per-unit arrays (per-batch runs stack every batch's arrays:
      ("N",); see `lstmviz.core.schema`);
    - `fit`: the RunConfig fields it reads in place of `params` when given a `model`: it then
      trains that Keras model (`lstmviz.engine.modes.fit`), and `loss` may name any Keras loss.

    What a mode is, for the rules the config, the front ends and the panels apply (each rule
    reads one of these, never a mode's name):

    - `whole_model`: it runs a whole model, every recurrent direction of it (per-layer keys,
      the model panels; the dock shows the model's layer table and calls the inputs "Data");
    - `trains`: a training run (the loss over steps; a task's read-out loss; `save_model`
      writes what it trained; an inputs file holds its training sequences and fixes no size);
    - `lists_weight_files`: `weights` may name one file per unit, comma-separated or a
      folder, read with generator "files" (any other generator draws its own weights);
    - `steps_per_unit`: `steps` counts one unit's timesteps: the run holds `count` × `steps`
      (an inputs file's T splits into those units);
    - `copies`: how many [T, B, ·] sets of arrays a run keeps at once (the memory estimate);
    - `verifiable`: `lstmviz.analysis.verify` can rebuild its loss and check its gradients.
    """

    name: str
    label: str
    help: str
    params: frozenset[str]
    run: str
    problem: bool = False
    unit: str = ""
    count: str = ""
    sizes: str = "T={steps} B={batch} I={input_dim} H={hidden}"
    lead: tuple[str, ...] = ()
    any_loss: bool = False  # `loss` may be any Keras loss name, not only the hidden-state ones
    requires: tuple[str, ...] = ()  # RunConfig fields a run of this mode cannot do without
    refuses: Mapping[str, str] = field(default_factory=dict)
    fit: frozenset[str] = frozenset()
    whole_model: bool = False
    trains: bool = False
    lists_weight_files: bool = False
    steps_per_unit: bool = False
    copies: int = 1
    verifiable: bool = False

    def uses(self, param: str, fitting: bool = False) -> bool:
        """Whether a run reads RunConfig field `param` (`fitting`: one training a model)."""
        return param in COMMON_PARAMS or param in (self.fit if fitting else self.params)

    def generator(self) -> Callable:
        """Import and return the mode's generator function."""
        module, _, name = self.run.partition(":")
        return getattr(importlib.import_module(module), name)


_MODES: dict[str, Mode] = {}


def register(mode: Mode) -> Mode:
    """Add `mode` (replacing one of the same name); returns it."""
    _MODES[mode.name] = mode
    return mode


def unregister(name: str) -> None:
    _MODES.pop(name, None)


def get(name: str) -> Mode:
    """The mode called `name`; KeyError for an unknown one (callers name the flag)."""
    return _MODES[name]


def find(name: str) -> Mode:
    """The mode called `name`, or for a mode this version does not know (a newer trace's) a
    mode of that name with no rules: not a model, no training, no leading axes."""
    return _MODES.get(name) or Mode(name, name, "", frozenset(), run="")


def names() -> tuple[str, ...]:
    """Every registered mode's name, in registration order."""
    return tuple(_MODES)


def label(name: str) -> str:
    """The mode's label, or `name` itself for a mode this version does not know."""
    mode = _MODES.get(name)
    return mode.label if mode is not None else name


def plural(unit: str, count: int = 2) -> str:
    """ "pass" -> "passes", "batch" -> "batches", "training step" -> "training steps"."""
    if count == 1:
        return unit
    return unit + ("es" if unit.endswith(("s", "ch")) else "s")


def help_text() -> str:
    """Every mode's help, one paragraph each: the tooltip of the mode field, `--mode`'s help."""
    return "\n".join(f"{m.name}: {m.help}" for m in _MODES.values())


_FILES = frozenset({"weights", "layer", "inputs", "time_major"})

register(
    Mode(
        name="taped",
        label="taped",
        help="one LSTM under a GradientTape (the native kernels, or a tf.while_loop where\n"
        "they are not built); probes give dL/dh_t at every step.",
        params=_FILES | {"input_dim", "loss", "random_state", "connectivity"},
        run="lstmviz.engine.modes.taped:run_taped",
        problem=True,
        verifiable=True,
    )
)
register(
    Mode(
        name="multipass",
        label="multi-pass",
        help="several forward passes with the state carried between them; full gradient\n"
        "through all passes next to the truncated one a stateful RNN gives.",
        params=_FILES | {"input_dim", "loss", "random_state", "passes"},
        run="lstmviz.engine.modes.multipass:run_multipass",
        problem=True,
        unit="pass",
        count="passes",
        sizes="P={passes} × T={steps} B={batch} I={input_dim} H={hidden}",
        steps_per_unit=True,
        copies=2,  # full and truncated
        verifiable=True,
    )
)
register(
    Mode(
        name="batchwise",
        label="per-batch weights",
        help="every batch runs with its own LSTM weights.",
        params=frozenset(
            {"input_dim", "loss", "random_state", "batches", "generator", "weights", "layer"}
        ),
        run="lstmviz.engine.modes.batchwise:run_batchwise",
        unit="batch",
        count="batches",
        sizes="T={steps} N={batches} B={batch} I={input_dim} H={hidden}",
        lead=("N",),
        lists_weight_files=True,
        steps_per_unit=True,
    )
)
register(
    Mode(
        name="train",
        label="training",
        help="train on a task and watch the gradient flow change step by step; with --model,\n"
        "fit your own Keras model on your data and record its gradient flow (.lvz).",
        params=frozenset({"task", "train_steps", "connectivity", "inputs"}),
        run="lstmviz.engine.modes.train:run_training_mode",
        unit="training step",
        count="train_steps",
        trains=True,
        verifiable=True,
        refuses={
            "weights": "training starts from seeded weights in this version (or from a whole "
            "model: --model FILE)",
            "time_major": "training sequences are always [N, T, I]; drop it",
        },
        fit=frozenset({"model", "inputs", "targets", "loss", "epochs", "every", "record",
                       "save_model"}),  # fmt: skip
    )
)
register(
    Mode(
        name="model",
        label="model",
        help="a whole saved model (Embedding, stacked and bidirectional LSTMs, a head) under\n"
        "its own loss on your data: every LSTM direction, gate and input step.",
        params=frozenset({"model", "inputs", "targets", "loss", "module", "anchors"}),
        run="lstmviz.engine.modes.model:run_model",
        sizes="T={steps} B={batch}",
        any_loss=True,
        whole_model=True,
        requires=("model",),
        refuses={
            "layer": "model mode runs every LSTM direction of the model (both halves of a "
            "Bidirectional; the gates and per-unit panels pick one to show); drop it",
        },
    )
)
