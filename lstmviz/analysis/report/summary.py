"""The one-line summary of a trace (window and figure) and the texts it is made of."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np

from lstmviz.analysis.layers import (
    CELL_TEXT,
    calls_of,
    cell_of,
    chain_sources,
    direction_steps,
    has_cell_state,
    input_names,
    layer_names,
)
from lstmviz.analysis.values import Arrays, max_abs, nonfinite_count
from lstmviz.core import modes
from lstmviz.core.config import RunConfig

_MODEL_STATE = re.compile(r"layer\d+_(h|c|grad_h_total|grad_c_total|grad_h_direct)")
LSTM_KERNEL_TEXT = {"native": "native kernels", "while_loop": "tf.while_loop"}  # lstm_kernel


WARNING_STYLE = "color:#c00"  # NaN/Inf found: a red the window's light background shows well


def plain(text: str) -> str:
    """Rich text as plain text: tags dropped, entities decoded, word joiners gone."""
    return html.unescape(re.sub(r"<[^>]+>", "", text)).replace("\u2060", "")


def fmt(value: float) -> str:
    """Three significant digits; "—" for NaN or Inf."""
    return "—" if not np.isfinite(value) else f"{value:.3g}"


def stopped_early(arrays: Arrays) -> bool:
    """A trace of a run stopped early that kept its finished units of work."""
    return "units_requested" in arrays and str(arrays.get("stopped", "")) != "completed"



def nonfinite_text(steps, what: str = "t") -> str:
    """ "NaN/Inf at t = 3, 4, 9 (3 steps)" (the first eight listed)."""
    steps = [int(v) for v in np.ravel(steps)]
    shown = ", ".join(str(v) for v in steps[:8]) + (", …" if len(steps) > 8 else "")
    return f"NaN/Inf at {what} = {shown} ({len(steps)} step{'s' if len(steps) != 1 else ''})"


def trained_on(config: RunConfig, stem: bool = False) -> str:
    """What a training run trained on: the user's sequences (their file's name) or the built-in
    task (a run on sequences keeps the task field at its default, unread). `stem`: the same as
    the start of a file name ("walk.2024" for walk.2024.npy, "adding" for the task)."""
    if config.inputs:
        name = Path(config.inputs).name
        return Path(name).stem if stem else name
    return config.task if stem else f"{config.task} task"


def _has_norm(key: str, arrays: Arrays) -> bool:
    """Whether `key` is a state or a gradient whose per-step norm the trace holds (a model's:
    per direction), so that `nonfinite_steps` speaks for it; a model's gradient at its input
    has its norm in `saliency` (which is checked)."""
    if _MODEL_STATE.fullmatch(key):
        return "norm_h_total_by_layer" in arrays
    if key == "grad_input" or key.startswith("grad_input_"):
        return "saliency" + key.removeprefix("grad_input") in arrays
    return key in ("h", "c") or (key.startswith("grad_") and "norm_" + key[5:] in arrays)


def summary_text(mode: str, arrays: Arrays, config: RunConfig | None, seconds: float | None) -> str:
    """One line (HTML) for a run of `mode` (its name): the mode, sizes, loss, multi-pass check,
    kernel, time, and the NaN/Inf check of the arrays (said only once there are arrays). A
    model run: the model file, its LSTM directions and layers, the loss's name and value, where
    the data came from (or "random data"), time, NaN/Inf."""
    parts = [f"<b>{html.escape(modes.label(mode))}</b>"]
    whole_model = modes.find(mode).whole_model
    if whole_model:
        parts += model_parts(arrays, config)
    elif config is not None and config.mode in modes.names():
        parts.append(config.sizes())
    loss = arrays.get("loss", arrays.get("loss_by_step"))  # a training: its final weights
    if loss is not None and np.size(loss) and not whole_model:
        parts.append(f"loss {fmt(float(np.ravel(loss)[-1]))}")
    check = reference_part(arrays)
    if check:
        parts.append(check)
    if stopped_early(arrays):
        done, asked = int(arrays.get("units_done", 0)), int(arrays["units_requested"])
        unit = modes.find(mode).unit
        parts.append(f"stopped early: {done} of {asked} {modes.plural(unit or 'unit')} kept")
    if not arrays:  # a run that has just started: its kernel and time are not known yet
        return " · ".join([*parts, "running…"])
    kernel = str(arrays.get("lstm_kernel", "while_loop"))  # traces before it was recorded
    kernel = LSTM_KERNEL_TEXT.get(kernel, html.escape(kernel))
    backend = arrays.get("rnn_backend")
    if backend is not None:
        kernel = "LSTM on <b>cuDNN</b>" if backend == "cudnn" else kernel
    parts.append(kernel)
    if "generator" in arrays:
        parts.append(f"generator {arrays['generator']}")
    if "grad_generator_norm" in arrays:
        gen = np.ravel(np.asarray(arrays["grad_generator_norm"], np.float64))
        parts.append(f"‖∂L/∂θ_generator‖ mean {fmt(float(gen.mean()))}")
    for key, name in (("weights_source", "weights"), ("inputs_source", "inputs")):
        if key in arrays and not whole_model:
            source = str(arrays[key])
            path, _, rest = source.partition(": ")
            detail = rest.split(";")[0]
            parts.append(f"{name}: {html.escape(Path(path).name)} ({html.escape(detail)})")
    # a no-break space: a wrapped summary line never parts the number from its unit
    parts.append("loaded from file" if seconds is None else f"{seconds:.2f}\u00a0s")
    check = nonfinite_part(arrays)
    if check:
        parts.append(check)
    return " · ".join(_unbroken_shapes(part) for part in parts)


def _unbroken_shapes(text: str) -> str:
    """A shape such as "[32, 1]" with no-break spaces: a wrapped line does not part it."""
    return re.sub(r"\[[^\]<>]*\]", lambda m: m[0].replace(" ", "\u00a0"), text)


def model_parts(arrays: Arrays, config: RunConfig | None) -> list[str]:
    """The model run's part of the summary line: file, recurrent directions (by cell: "3 GRU
    directions", "3 recurrent directions (GRU, LSTM)") and layers, the loss,
    the data (a live run's come from its config, before there are arrays)."""
    parts = []
    source = str(arrays.get("model_source", "")) or (config.model if config else "") or ""
    if source:  # right after the mode's name ("model"), which says what it is
        parts.append(html.escape(Path(source.split(": ")[0]).name))
    names = [str(n) for n in np.ravel(arrays.get("layer_names", []))]
    if names:
        layers = len({n.rsplit("/", 1)[0] if n.endswith(("/forward", "/backward")) else n
                      for n in names})  # fmt: skip
        cells = sorted({CELL_TEXT.get(cell_of(arrays, k), "?") for k in range(len(names))})
        kind = cells[0] if len(cells) == 1 else "recurrent"
        mixed = f" ({', '.join(cells)})" if len(cells) > 1 else ""
        parts.append(f"{len(names)} {kind} direction{'s' * (len(names) != 1)}{mixed} in "
                     f"{layers} layer{'s' * (layers != 1)}")  # fmt: skip
        parts += [html.escape(chain) for chain in chain_parts(arrays)]
        inputs = [name for name in input_names(arrays) if name]
        if len(inputs) > 1:
            parts.append(f"inputs {html.escape(', '.join(inputs))}")
    if config is not None and arrays:
        parts.append(config.sizes())
    loss = arrays.get("loss")
    name = html.escape(config.loss) if config is not None and config.loss else "loss"
    if loss is not None and np.size(loss):
        parts.append(f"loss {name} {fmt(float(np.ravel(loss)[-1]))}")
    data = str(arrays.get("inputs_source", ""))
    if data.startswith("random data"):
        parts.append(html.escape(data.split(":")[0]))
    elif data:
        path, _, rest = data.partition(": ")
        name = Path(path).name  # a file's, or what held the data ("GradientFlowCallback data")
        said = name if name.endswith(" data") else f"data {name}"
        parts.append(f"{html.escape(said)} ({html.escape(rest)})")
    elif config is not None and not arrays:  # a live run, before its results
        parts.append(f"data {html.escape(Path(config.inputs).name)}" if config.inputs
                     else f"random data (seed {config.seed})")  # fmt: skip
    return parts


def chain_parts(arrays: Arrays) -> list[str]:
    """Each chain of hand-overs as its directions with their steps (and calls, when more than
    one): "enc (6 steps) → dec (4 steps, 4 calls)"."""
    names, paths = layer_names(arrays), chain_sources(arrays)
    ends = [k for k, path in enumerate(paths) if path and not any(k in p for p in paths)]

    def one(k: int) -> str:
        calls = calls_of(arrays, k)
        more = f", {calls} calls" if calls > 1 else ""
        return f"{names[k]} ({direction_steps(arrays, k)} steps{more})"

    return [" → ".join(one(s) for s in [*reversed(paths[k]), k]) for k in ends]


def _own_steps(arrays: Arrays, key: str) -> np.ndarray:
    """The values of rows `key` ([L, T] or a recording's [S, L, T]; anchored [·, L, A, T])
    within each direction's own steps: a graph's shorter directions are padded with NaN,
    which is no value; a cell norm only of the directions with a cell state (a GRU's or
    SimpleRNN's row is NaN)."""
    rows = np.asarray(arrays[key])
    if rows.ndim < 2:
        return rows
    axis = -3 if key.startswith("anchor_") else -2  # [L, A, T] anchored: A per direction
    kept = range(rows.shape[axis])
    if key.startswith(("norm_c_total", "anchor_norm_c")):
        kept = [k for k in kept if has_cell_state(arrays, k)]
    parts = [np.take(rows, k, axis)[..., : direction_steps(arrays, k)].ravel() for k in kept]
    return np.concatenate(parts) if parts else np.zeros(0, rows.dtype)


def reference_part(arrays: Arrays) -> str:
    """A multi-pass trace's check of its full gradient against the one-pass reference ("" for
    other traces), relative to the largest |dL/dh_t|."""
    if "max_abs_diff_full_vs_reference" not in arrays:
        return ""
    diff = float(arrays["max_abs_diff_full_vs_reference"])
    scale = max_abs(arrays["grad_h_total"]) if "grad_h_total" in arrays else 1
    mark = "✓" if diff <= 1e-4 * max(scale, 1e-2) else "✗"
    # one unit on a wrapped line: no break at its spaces nor after the "|" (word joiner)
    return f"full = one-pass reference {mark} (max\u00a0|\u2060Δ|\u2060\u00a0{diff:.1e})"


def nonfinite_part(arrays: Arrays) -> str:
    """The summary's NaN/Inf check ("" before a run's first results: nothing to vouch for)."""
    # An engine's trace lists the steps where a state or a gradient with a norm is NaN or Inf
    # (`nonfinite_steps`); only the other float arrays need a look (scanning the big [T, B, H]
    # ones again would stall the window for a long multi-pass trace).
    checked = "nonfinite_steps" in arrays
    floats = {k: v for k, v in arrays.items() if np.asarray(v).dtype.kind == "f"}
    for key in ("norm_h_total_by_layer", "norm_h_direct_by_layer", "norm_c_total_by_layer",
                "anchor_norm_h_by_layer", "anchor_norm_c_by_layer"):
        if key in floats:
            floats[key] = _own_steps(arrays, key)
    bad = {k: nonfinite_count(v) for k, v in floats.items()
           if not (checked and _has_norm(k, arrays))}  # fmt: skip
    bad = {k: n for k, n in bad.items() if n}
    steps = np.ravel(arrays.get("nonfinite_steps", []))
    loss_steps = np.ravel(arrays.get("nonfinite_loss_steps", []))
    if steps.size or loss_steps.size:
        found = []
        if steps.size:
            found.append(nonfinite_text(steps))
        if loss_steps.size:
            found.append(nonfinite_text(loss_steps + 1, "training step"))  # counted from 1
        by_batch = arrays.get("nonfinite_by_batch")
        if by_batch is not None and np.ndim(by_batch) == 2:
            batches = np.flatnonzero(np.asarray(by_batch).any(axis=1)) + 1
            listed = ", ".join(str(b) for b in batches[:8]) + (", …" if batches.size > 8 else "")
            found.append(f"in batch{'es' if batches.size != 1 else ''} {listed}")
        if str(arrays.get("stopped", "")) == "non-finite":
            found.append("training stopped there")
        return f"<span style='{WARNING_STYLE}'>⚠ {'; '.join(found)}</span>"
    if bad:
        listed = ", ".join(f"{n} in {k}" for k, n in list(bad.items())[:3])
        return f"<span style='{WARNING_STYLE}'>⚠ non-finite values: {listed}</span>"
    if checked or floats:
        return "no NaN/Inf ✓"
    return ""


def summary_tip(arrays: Arrays) -> str:
    """The summary's tooltip: where the weights and inputs came from, which kernel ran."""
    lines = [str(arrays[key]) for key in ("weights_source", "inputs_source") if key in arrays]
    if "rnn_backend" in arrays:
        lines.append(
            "rnn_backend: which kernel ran the LSTM: cudnn (tf.raw_ops.CudnnRNNV3, on a GPU) or\n"
            "while_loop (the taped engine's cell). cuDNN takes one weight set per batch:\n"
            "per-sample weights (one set per sequence) cannot run on it."
        )
    if "grad_generator_norm" in arrays:
        lines.append(
            "‖∂L/∂θ_generator‖: global norm of the hypernetwork's variable gradients, per batch: "
            + ", ".join(fmt(float(v)) for v in np.ravel(arrays["grad_generator_norm"])[:20])
        )
    return "\n\n".join(lines)
