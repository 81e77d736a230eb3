"""Every trace key in one table: its dimensions, its role, and the modes that write it.

No TensorFlow and no Qt. `GradientTrace.check` validates a trace against this table (a key it
does not know fails), the panels and the CSV export find their curves and rows through the
roles, and the window tells live rows from curves by them.

Dimensions are symbols: T (timesteps; P·Tp in a multi-pass run), B (batch), I (input size),
H (hidden units), P and Tp (passes and steps per pass), N (batches of a per-batch run),
S (training steps; a recording's records), L (LSTM directions of a model), O (outputs of a
read-out), E (input width of a model's first recurrent layer), A (anchor steps a direction's
error of one step is followed from). A leading integer multiplies:
`4H` is four times H.
Per-layer keys are patterns with `{k}` (`layer{k}_h`), whose symbols carry the layer's index:
`H{k}` is that layer's width and `T{k}` its steps, so widths and lengths may differ by layer (an
encoder of 15 steps, its decoder of 10). Keys with `{name}` are one per input of a model of
several inputs (`x_{name}`). A key with several shapes lists
them (`x` is [T, B] token ids or [T, B, I] vectors); `None` means any shape.

Roles:
- `curve`: one value per timestep [T], drawn over t (a CSV column);
- `rows`: rows × timesteps [R, T] (one row per pass, batch, training step or layer), filled in
  row by row while a run goes; `row` says what a row is;
- `units`: a gradient [T, B, H] the per-unit heatmap averages over the batch;
- `map`: a [T, T] map (connectivity);
- `series`: one value per unit of work (loss per pass, batch, training step);
- `scalar`, `text`: one number or one string;
- `steps`: a list of timesteps (or training steps) where something holds;
- `data`: everything else: inputs, weights, states, gradients.

A mode with per-unit arrays (`Mode.lead`, e.g. per-batch runs: N) stacks the keys marked
`stacked` along leading axes.

A recording of a training run (`lstmviz.io.recording`, `.lvz`) is not a trace, but its arrays are
checked by the same rules: its keys are listed under the name `RECORDING` in place of a mode
(one row per record, S records), and its last record is a model-mode trace.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from lstmviz.core import modes

CURVE, ROWS, UNITS, MAP, SERIES, SCALAR, TEXT, STEPS, DATA = (
    "curve", "rows", "units", "map", "series", "scalar", "text", "steps", "data",
)  # fmt: skip
LSTM_MODES = frozenset({"taped", "multipass", "batchwise", "train"})  # one LSTM layer
RECORDING = "recording"  # stands for a mode when checking a recording's arrays
# A model direction's cell (`layer{k}_cell`) -> its gate blocks (kernel [I, G·H]) as the trace's
# `layer{k}_gate_names` holds them ("h~" is GRU's candidate h̃); a trace without the key: lstm
CELL_GATES = {"lstm": ("i", "f", "g", "o"), "gru": ("z", "r", "h~"), "simple_rnn": ("h",),
              # modern layers (docs/modern-recurrence.md): what sets their decay
              "mingru": ("z",), "minlstm": ("f", "i"), "mamba": ("exp(ΔA)",), "lru": ("|λ|",),
              "slstm": ("i", "f", "o"), "mlstm": ("i", "f")}
# The diagnosis's gate saturation: a sigmoid gate below this or above 1 - this, a tanh one
# |g| > 1 - this (`layer{k}_gates_saturated_diagnosis`; other activations: activations.py)
GATE_SATURATION_DIAGNOSIS = 0.05
CELL_CLASSES = {"lstm": "LSTM", "gru": "GRU", "simple_rnn": "SimpleRNN",  # Keras's class names
                "mingru": "minGRU", "minlstm": "minLSTM", "mamba": "Mamba", "lru": "LRU",
                "slstm": "sLSTM", "mlstm": "mLSTM"}


@dataclass(frozen=True)
class Key:
    """One trace key (or a per-layer pattern with `{k}`)."""

    name: str
    dims: tuple[tuple[str, ...], ...] | None  # the shapes it may have; None: any
    role: str
    modes: frozenset[str] | None  # the modes that write it; None: any mode
    about: str
    kinds: str = "f"  # numpy dtype kinds allowed: f float, i/u integer, b bool, U text
    stacked: bool = False  # per-unit: gets the mode's leading axes (`Mode.lead`)
    row: str = ""  # rows: what one row is ("pass", "batch", "step", "layer")
    joins: str = ""  # rows [P, Tp] that are the curve `joins` cut into passes
    heatmap: bool = False  # rows: the total gradient norm the rows heatmap shows

    @property
    def pattern(self) -> bool:
        return "{k}" in self.name or "{name}" in self.name


def _k(name, dims, role, modes, about, **extra) -> Key:
    several = dims is not None and bool(dims) and isinstance(dims[0], tuple)
    shapes = None if dims is None else (dims if several else (dims,))
    return Key(name, shapes, role, None if modes is None else frozenset(modes), about, **extra)


SEQ, STATE = ("T", "B", "H"), ("B", "H")
LSTM, TRAIN, PASSES, BATCHES = LSTM_MODES, {"train"}, {"multipass"}, {"batchwise"}
MODEL = {"model"}
_ONE_LAYER = [
    # inputs and weights
    _k("x", ("T", "B", "I"), DATA, LSTM, "input sequence", stacked=True),
    _k("h", SEQ, DATA, LSTM, "hidden state at every step", stacked=True),
    _k("c", SEQ, DATA, LSTM, "cell state at every step", stacked=True),
    _k("kernel", ("I", "4H"), DATA, LSTM, "input weights, gates i, f, c, o", stacked=True),
    _k("recurrent_kernel", ("H", "4H"), DATA, LSTM, "recurrent weights", stacked=True),
    _k("bias", ("4H",), DATA, LSTM, "bias", stacked=True),
    _k("h0", STATE, DATA, LSTM, "initial hidden state", stacked=True),
    _k("c0", STATE, DATA, LSTM, "initial cell state", stacked=True),
    _k("target", None, DATA, LSTM, "the loss's target ([B, H], [P, B, H] or [T, B, H]; "
       "training: the task's y, [B, O] or [T, B, O])", stacked=True),  # fmt: skip
    # states and gradients
    _k("grad_h_total", SEQ, UNITS, LSTM, "dL/dh_t through the recurrence", stacked=True),
    _k("grad_c_total", SEQ, DATA, LSTM, "dL/dc_t through the recurrence", stacked=True),
    _k("grad_h_direct", SEQ, DATA, LSTM, "∂L/∂h_t through the stacked states only",
       stacked=True),  # fmt: skip
    _k("grad_kernel", ("I", "4H"), DATA, LSTM, "dL/dkernel", stacked=True),
    _k("grad_recurrent_kernel", ("H", "4H"), DATA, LSTM, "dL/drecurrent_kernel", stacked=True),
    _k("grad_bias", ("4H",), DATA, LSTM, "dL/dbias", stacked=True),
    _k("grad_h0", STATE, DATA, LSTM, "dL/dh0", stacked=True),
    _k("grad_c0", STATE, DATA, LSTM, "dL/dc0", stacked=True),
    _k("grad_output", SEQ, DATA, BATCHES, "dL/dy_t at the LSTM's output (cuDNN's)", stacked=True),
    # per-timestep norms: sqrt(sum over b, j of g[t, b, j]²)
    _k("norm_h_total", ("T",), CURVE, LSTM, "total ‖dL/dh_t‖"),
    _k("norm_h_direct", ("T",), CURVE, LSTM, "direct ‖∂L/∂h_t‖"),
    _k("norm_c_total", ("T",), CURVE, LSTM, "cell ‖dL/dc_t‖"),
    _k("loss", (), SCALAR, None, "the loss (per-batch runs: the mean over batches)"),
    _k("lstm_kernel", (), TEXT, None, "what computed the LSTM: native or while_loop", kinds="U"),
    _k("nonfinite_steps", None, STEPS, None, "timesteps where a state or a normed gradient "
       "is NaN or Inf", kinds="iu"),  # fmt: skip
    _k("weights_source", (), TEXT, None, "where the weights came from", kinds="U"),
    _k("inputs_source", (), TEXT, None, "where the inputs came from", kinds="U"),
    _k("connectivity", ("T", "T"), MAP, {"taped", "train"}, "C[t, s] = ‖∂L_t/∂h_s‖"),
    # a run stopped early that kept its finished units
    _k("stopped", (), TEXT, None, "completed, cancelled or non-finite", kinds="U"),
    _k("units_done", (), SCALAR, None, "units of work (passes, batches, steps) kept",
       kinds="iu"),  # fmt: skip
    _k("units_requested", (), SCALAR, None, "units of work asked for", kinds="iu"),
]
_MULTIPASS = [
    _k(f"grad_{w}_truncated", dims, DATA, PASSES, f"dL/d{w}, truncated at every pass")
    for w, dims in (("kernel", ("I", "4H")), ("recurrent_kernel", ("H", "4H")), ("bias", ("4H",)))
] + [
    _k("grad_h_truncated", SEQ, DATA, PASSES, "dL/dh_t, truncated at every pass start"),
    _k("grad_c_truncated", SEQ, DATA, PASSES, "dL/dc_t, truncated at every pass start"),
    _k("grad_h_reference", SEQ, DATA, PASSES, "dL/dh_t of one pass over the joined sequence"),
    _k("grad_c_reference", SEQ, DATA, PASSES, "dL/dc_t of one pass over the joined sequence"),
    _k("norm_h_reference", ("T",), CURVE, PASSES, "reference ‖dL/dh_t‖"),
    _k("norm_h_truncated", ("T",), CURVE, PASSES, "truncated ‖dL/dh_t‖"),
    _k("norm_c_truncated", ("T",), CURVE, PASSES, "truncated ‖dL/dc_t‖"),
    _k("norm_h_total_by_pass", ("P", "Tp"), ROWS, PASSES, "full ‖dL/dh_t‖ per pass",
       row="pass", joins="norm_h_total", heatmap=True),  # fmt: skip
    _k("norm_h_truncated_by_pass", ("P", "Tp"), ROWS, PASSES, "truncated ‖dL/dh_t‖ per pass",
       row="pass", joins="norm_h_truncated"),  # fmt: skip
    _k("loss_by_pass", ("P",), SERIES, PASSES, "each pass's loss"),
    _k("max_abs_diff_full_vs_reference", (), SCALAR, PASSES, "max |full − reference|"),
    _k("passes", (), SCALAR, PASSES, "P", kinds="iu"),
    _k("pass_length", (), SCALAR, PASSES, "Tp", kinds="iu"),
]
_BATCHWISE = [
    _k("norm_h_total_by_batch", ("N", "T"), ROWS, BATCHES, "total ‖dL/dh_t‖ per batch",
       row="batch", heatmap=True),  # fmt: skip
    _k("norm_h_direct_by_batch", ("N", "T"), ROWS, BATCHES, "direct ‖∂L/∂h_t‖ per batch",
       row="batch"),  # fmt: skip
    _k("norm_c_total_by_batch", ("N", "T"), ROWS, BATCHES, "cell ‖dL/dc_t‖ per batch",
       row="batch"),  # fmt: skip
    _k("nonfinite_by_batch", ("N", "T"), DATA, BATCHES, "NaN/Inf per batch and step",
       kinds="b"),  # fmt: skip
    _k("loss_by_batch", ("N",), SERIES, BATCHES, "each batch's loss"),
    _k("batch_seconds", ("N",), SERIES, BATCHES, "seconds each batch took"),
    _k("grad_generator_norm", ("N",), SERIES, BATCHES, "‖∂L/∂θ‖ of the hypernetwork"),
    _k("rnn_backend", (), TEXT, BATCHES, "cudnn or while_loop", kinds="U"),
    _k("generator", (), TEXT, BATCHES, "random, hypernetwork or files", kinds="U"),
]
_READOUT = ("readout_kernel", "readout_bias")
_TRAIN = [
    _k("readout_kernel", ("H", "O"), DATA, TRAIN, "dense read-out weights"),
    _k("readout_bias", ("O",), DATA, TRAIN, "dense read-out bias"),
    _k("grad_readout_kernel", ("H", "O"), DATA, TRAIN, "dL/dreadout_kernel"),
    _k("grad_readout_bias", ("O",), DATA, TRAIN, "dL/dreadout_bias"),
    _k("readout_per_step", (), SCALAR, TRAIN, "whether the read-out reads every step",
       kinds="b"),  # fmt: skip
    _k("loss_by_step", ("S",), SERIES, TRAIN, "the task loss at every training step"),
    _k("norm_h_total_by_step", ("S", "T"), ROWS, TRAIN, "total ‖dL/dh_t‖ per training step",
       row="step", heatmap=True),  # fmt: skip
    _k("nonfinite_loss_steps", None, STEPS, TRAIN, "training steps whose loss or dL/dh is "
       "NaN or Inf", kinds="iu"),  # fmt: skip
]
_MODEL = [
    _k("layer_names", ("L",), TEXT, MODEL, "one name per recurrent direction", kinds="U"),
    _k("layer{k}_cell", (), TEXT, MODEL, "the cell of direction k: lstm, gru or simple_rnn",
       kinds="U"),  # fmt: skip
    _k("layer{k}_calls", (), SCALAR, MODEL, "how many calls of its layer made direction k "
       "(a decoder stepped once per token: one per step)", kinds="iu"),  # fmt: skip
    _k("layer{k}_initial_from", (), SCALAR, MODEL, "the direction whose final state is direction "
       "k's initial state (an encoder handing on to its decoder), -1 for none",
       kinds="iu"),  # fmt: skip
    _k("layer{k}_h", ("T{k}", "B", "H{k}"), DATA, MODEL, "hidden state of direction k"),
    _k("layer{k}_c", ("T{k}", "B", "H{k}"), DATA, MODEL, "cell state of direction k (LSTM only)"),
    _k("layer{k}_grad_h_total", ("T{k}", "B", "H{k}"), UNITS, MODEL, "dL/dh_t of direction k"),
    _k("layer{k}_grad_c_total", ("T{k}", "B", "H{k}"), DATA, MODEL,
       "dL/dc_t of direction k (LSTM only)"),  # fmt: skip
    _k("layer{k}_grad_h_direct", ("T{k}", "B", "H{k}"), DATA, MODEL,
       "∂L/∂h_t of direction k through its output only"),  # fmt: skip
    # W{k}: the width of direction k's gate blocks, G·H{k} (LSTM 4H, GRU 3H, SimpleRNN H)
    _k("layer{k}_grad_kernel", ("I{k}", "W{k}"), DATA, MODEL, "dL/dkernel of direction k"),
    _k("layer{k}_grad_recurrent_kernel", ("H{k}", "W{k}"), DATA, MODEL,
       "dL/drecurrent_kernel of direction k"),  # fmt: skip
    _k("layer{k}_grad_bias", (("W{k}",), ("2", "W{k}")), DATA, MODEL,
       "dL/dbias of direction k ([2, 3H]: a GRU's with reset_after)"),  # fmt: skip
    _k("layer{k}_gate_names", ("G{k}",), TEXT, MODEL,
       "the gates of direction k: i, f, g, o (LSTM); z, r, h~ (GRU); h (SimpleRNN)",
       kinds="U"),  # fmt: skip
    _k("layer{k}_gates_mean", ("G{k}", "T{k}"), DATA, MODEL,
       "mean activation of each gate per step"),  # fmt: skip
    _k("layer{k}_gates_saturated", ("G{k}", "T{k}"), DATA, MODEL,
       "fraction of (b, j) with a saturated gate per step"),  # fmt: skip
    _k("layer{k}_gates_unit_mean", ("G{k}", "H{k}"), DATA, MODEL,
       "mean activation of each gate per unit over the unmasked (t, b)"),  # fmt: skip
    _k("layer{k}_gates_saturated_diagnosis", ("G{k}",), DATA, MODEL,
       "fraction of the unmasked (t, b, j) with a gate within 0.05 of a bound"),  # fmt: skip
    # modern layers (minGRU, minLSTM, Mamba, LRU): docs/modern-recurrence.md
    _k("layer{k}_state_names", None, TEXT, MODEL, "the states of direction k, its main one "
       "(under the h keys) first", kinds="U"),  # fmt: skip
    # sLSTM's [T, B, H]; mLSTM's n [T, B, NH·DH] and m [T, B, NH] (its C under the h keys)
    _k("layer{k}_n", None, DATA, MODEL, "normaliser state of direction k (xLSTM)"),
    _k("layer{k}_grad_n_total", None, DATA, MODEL, "dL/dn_t of direction k (xLSTM)"),
    _k("layer{k}_m", None, DATA, MODEL, "stabiliser state of direction k (xLSTM; no gradient "
       "of its own)"),  # fmt: skip
    _k("layer{k}_timescale", ("H{k}",), DATA, MODEL, "the layer's own timescale per channel "
       "in steps (-1/ln of its mean decay)"),  # fmt: skip
    _k("layer{k}_grad_weight_{name}", None, DATA, MODEL, "dL/d the parameter named so of "
       "direction k's layer (complex: [..., 2], real and imaginary parts)"),  # fmt: skip
    _k("norm_h_total_by_layer", ("L", "T"), ROWS, MODEL, "total ‖dL/dh_t‖ per direction",
       row="layer", heatmap=True),  # fmt: skip
    _k("norm_h_direct_by_layer", ("L", "T"), ROWS, MODEL, "direct ‖∂L/∂h_t‖ per direction",
       row="layer"),  # fmt: skip
    _k("norm_c_total_by_layer", ("L", "T"), ROWS, MODEL, "cell ‖dL/dc_t‖ per direction (NaN "
       "for a direction without c)",
       row="layer"),  # fmt: skip
    # the error of one step followed back (docs/diagnosis.md): A anchors per direction
    _k("anchors_by_layer", ("L", "A"), DATA, MODEL, "the anchor steps t* (input positions) "
       "whose loss alone each direction's anchored norms follow", kinds="iu"),  # fmt: skip
    _k("anchor_norm_h_by_layer", ("L", "A", "T"), DATA, MODEL,
       "‖∂L_t*/∂h_t‖ per direction and anchor (the totals for a loss on one step)"),  # fmt: skip
    _k("anchor_norm_c_by_layer", ("L", "A", "T"), DATA, MODEL,
       "‖∂L_t*/∂c_t‖ per direction and anchor (NaN for a direction without c)"),  # fmt: skip
    _k("x", (("T", "B"), ("T", "B", "I")), DATA, MODEL, "token ids [T, B] or inputs [T, B, I]",
       kinds="fiu"),  # fmt: skip
    _k("y", None, DATA, MODEL, "targets, batch-major as Keras takes them", kinds="fiub"),
    _k("y_pred", None, DATA, MODEL, "the model's output, batch-major"),
    _k("loss_by_sample", ("B",), SERIES, MODEL, "each sample's loss"),
    _k("mask", ("T", "B"), DATA, MODEL, "which steps the model does not mask", kinds="b"),
    _k("grad_input", ("T", "B", "E"), DATA, MODEL, "dL/d input of the first recurrent layer"),
    _k("saliency", ("B", "T"), DATA, MODEL, "‖grad_input‖ over E"),
    # a model of several inputs: one of each per input that reaches a recurrent layer
    _k("x_{name}", None, DATA, MODEL, "the input named so, time-major when a sequence",
       kinds="fiu"),  # fmt: skip
    _k("grad_input_{name}", None, DATA, MODEL,
       "dL/d input of the first recurrent layer the input named so feeds"),  # fmt: skip
    _k("saliency_{name}", None, DATA, MODEL, "‖grad_input_{name}‖ over its last axis [B, T]"),
    # a model of several outputs: one of each per output
    _k("y_pred_{name}", None, DATA, MODEL, "the output named so, batch-major"),
    _k("y_{name}", None, DATA, MODEL, "the targets of the output named so", kinds="fiub"),
    _k("model_source", (), TEXT, MODEL, "the model file and its format", kinds="U"),
    _k("model_seconds", (), SCALAR, MODEL, "seconds the forward and backward took"),
    _k("model_summary", (), TEXT, MODEL, "name, class, output shape, parameters per layer",
       kinds="U"),  # fmt: skip
]
_RECORD = {RECORDING}
_RECORDING = [
    _k("step", ("S",), SERIES, _RECORD, "the training batch of each record (N, 2N, …, counted "
       "across epochs)", kinds="iu"),  # fmt: skip
    _k("epoch", ("S",), SERIES, _RECORD, "the epoch of each record (0-based, as Keras counts)",
       kinds="iu"),  # fmt: skip
    _k("loss", ("S",), SERIES, _RECORD, "the loss on the recorded data at each record"),
    _k("train_loss", ("S",), SERIES, _RECORD, "the training loss Keras reported at each record "
       "(its running mean over the epoch; NaN when it reported none)"),  # fmt: skip
    _k("record_seconds", ("S",), SERIES, _RECORD, "seconds each record took"),
    _k("norm_h_total_by_layer", ("S", "L", "T"), DATA, _RECORD,
       "total ‖dL/dh_t‖ per record and direction"),  # fmt: skip
    _k("norm_h_direct_by_layer", ("S", "L", "T"), DATA, _RECORD,
       "direct ‖∂L/∂h_t‖ per record and direction"),  # fmt: skip
    _k("norm_c_total_by_layer", ("S", "L", "T"), DATA, _RECORD,
       "cell ‖dL/dc_t‖ per record and direction"),  # fmt: skip
    # the error of one step (docs/diagnosis.md), where the first record's trace had it
    _k("anchors_by_layer", ("S", "L", "A"), DATA, _RECORD, "the anchor steps t* per record and "
       "direction (-1: the record has none)", kinds="iu"),  # fmt: skip
    _k("anchor_norm_h_by_layer", ("S", "L", "A", "T"), DATA, _RECORD,
       "‖∂L_t*/∂h_t‖ per record, direction and anchor"),  # fmt: skip
    _k("anchor_norm_c_by_layer", ("S", "L", "A", "T"), DATA, _RECORD,
       "‖∂L_t*/∂c_t‖ per record, direction and anchor (NaN without c)"),  # fmt: skip
    _k("saliency", ("S", "T"), DATA, _RECORD, "‖grad_input‖ over E, mean over the samples"),
    _k("layer_names", ("L",), TEXT, _RECORD, "one name per LSTM direction", kinds="U"),
    _k("model_summary", (), TEXT, _RECORD, "the model's layers", kinds="U"),
    _k("model_source", (), TEXT, _RECORD, "the model and its format", kinds="U"),
    _k("inputs_source", (), TEXT, _RECORD, "the recorded data", kinds="U"),
    _k("every", (), SCALAR, _RECORD, "N: a record every N training batches", kinds="iu"),
]
# Training traces also keep the taped keys of step 0 (initial weights, first batch).
_STEP0 = {k.name for k in _ONE_LAYER if k.name not in ("connectivity", "stopped")}
_STEP0 |= {k.name for k in _TRAIN if k.name in (*_READOUT, "grad_readout_kernel",
                                                "grad_readout_bias")}  # fmt: skip
_STEP0 -= {"units_done", "units_requested", "weights_source", "inputs_source"}


def _table() -> dict[str, list[Key]]:
    """Key name -> its entries (a name written by several kinds of mode has one per kind)."""
    table: dict[str, list[Key]] = {}
    for key in (*_ONE_LAYER, *_MULTIPASS, *_BATCHWISE, *_TRAIN, *_MODEL, *_RECORDING):
        table.setdefault(key.name, []).append(key)
    base = {name: keys for name, keys in table.items()}
    for name in (n for n in base if n in _STEP0):
        for key in (k for k in base[name] if k.modes is None or "train" in k.modes):
            step0 = Key(f"step0_{name}", key.dims, key.role, frozenset(TRAIN),
                        f"{key.about}, at step 0", key.kinds)  # fmt: skip
            table.setdefault(step0.name, []).append(step0)
    return table


KEYS = _table()
# `{k}` a direction's index, `{name}` a model input's name
_PATTERNS = [(re.compile("^" + name.replace("{k}", r"(\d+)").replace("{name}", "(.+)") + "$"),
              keys) for name, keys in KEYS.items() if "{k}" in name or "{name}" in name]
_POSITION = {name: i for i, name in enumerate(KEYS)}
# Read by GradientTrace.load and written by save; neither arrays nor in `KEYS`.
META_KEYS = ("mode", "config_json", "format_version")


def lookup(name: str, mode: str | None = None) -> tuple[Key, str] | None:
    """The entry for trace key `name` written by `mode` (any mode when None), and the layer
    index of a per-layer key ("" for others); None when the schema does not know the key."""
    index, keys = "", KEYS.get(name)
    if keys is None:
        for regex, candidates in _PATTERNS:
            match = regex.match(name)
            if match:
                index, keys = match.group(1), candidates
                break
    if keys is None:
        return None
    # A key several kinds of mode write may differ by kind (a model's x holds token ids, a
    # recording's loss is one per record): the entry naming `mode` comes before one for any
    # mode; a mode the schema does not name (a new one reusing keys) gets the first entry.
    for key in keys:
        if mode is None or (key.modes is not None and mode in key.modes):
            return key, index
    for key in keys:
        if key.modes is None:
            return key, index
    return keys[0], index


def order(name: str) -> tuple[int, str]:
    """Sort key: the schema's order (inputs and states before weights, so that a check names
    the odd one out), unknown keys last."""
    found = lookup(name)
    position = _POSITION.get(found[0].name, len(_POSITION)) if found else len(_POSITION)
    return position, name


def role(name: str, mode: str | None = None) -> str | None:
    """The key's role (None: unknown to the schema)."""
    found = lookup(name, mode)
    return None if found is None else found[0].role


def keys_with(role_: str, arrays: Mapping[str, object], mode: str | None = None) -> list[str]:
    """The keys of `arrays` that have role `role_`, in the schema's order."""
    return sorted((k for k in arrays if role(k, mode) == role_), key=order)


def heatmap_rows(arrays: Mapping[str, object]) -> str | None:
    """The key of `arrays` whose rows the rows heatmap shows (the total gradient norm per
    pass, batch, training step or layer), or None."""
    for key in sorted(arrays, key=order):
        found = lookup(key)
        if found is not None and found[0].role == ROWS and found[0].heatmap:
            return key
    return None


def row_name(name: str) -> str:
    """What a row of the rows key `name` is ("pass", "batch", "step", "layer"), or ""."""
    found = lookup(name)
    return "" if found is None else found[0].row


def shapes(name: str, mode: str, lead: tuple[str, ...] = ()) -> list[tuple[str, ...]] | None:
    """The dimension symbols key `name` may have in `mode` (per-layer symbols with their
    index, e.g. H2), with `lead` (the mode's per-unit axes) in front of stacked keys; None: any
    shape. KeyError when the schema does not know the key."""
    found = lookup(name, mode)
    if found is None:
        raise KeyError(name)
    key, index = found
    if key.dims is None:
        return None
    front = lead if key.stacked else ()
    return [(*front, *(d.replace("{k}", index) for d in dims)) for dims in key.dims]


_SYMBOL = re.compile(r"^(\d*)([A-Za-z]+)(\d*)$")


def expected_size(symbol: str, sizes: Mapping[str, tuple[int, str]]) -> tuple[int, str] | None:
    """The size `symbol` must have given the sizes fixed so far ({symbol: (size, key that
    fixed it)}); None when nothing fixes it yet; (-1, why) when no size can fit."""
    if symbol in sizes:
        return sizes[symbol]
    if symbol.isdigit():
        return int(symbol), "the schema"
    factor, base, index = _SYMBOL.match(symbol).groups()
    factor = int(factor or 1)
    for known, (size, source) in sizes.items():
        match = _SYMBOL.match(known)
        if match is None or match.group(2, 3) != (base, index):
            continue
        other = int(match.group(1) or 1)
        if size * factor % other:
            return -1, f"{source} (its axis {known}={size} does not fit {symbol})"
        return size * factor // other, source
    if base == "T" and not index and "P" in sizes and "Tp" in sizes:
        return sizes["P"][0] * sizes["Tp"][0], sizes["Tp"][1]
    if base == "Tp" and "T" in sizes and "P" in sizes:
        if sizes["T"][0] % sizes["P"][0]:
            return -1, f"{sizes['T'][1]} (T={sizes['T'][0]} is not a multiple of P)"
        return sizes["T"][0] // sizes["P"][0], sizes["T"][1]
    return None


def migrate(mode: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Traces written by earlier versions, in today's keys (in place; returns `arrays`):
    per-batch traces kept their norms [N, T] under the plain keys, training traces counted
    their steps in `steps_done` / `steps_requested`."""
    if "N" in modes.find(mode).lead:  # one row per batch
        for name in ("norm_h_total", "norm_h_direct", "norm_c_total"):
            if np.ndim(arrays.get(name)) == 2:
                arrays[f"{name}_by_batch"] = arrays.pop(name)
    for old, new in (("steps_done", "units_done"), ("steps_requested", "units_requested")):
        if old in arrays:
            arrays.setdefault(new, arrays.pop(old))
    return arrays
