"""What the recording panels show, computed from a recording's arrays (NumPy only, no Qt).

A recording (`lstmviz.io.recording`, `.lvz`) holds one row per record, S records: `step` [S]
(the training batch of each), `epoch` [S], `loss` [S] (on the recorded data), `train_loss` [S]
(what Keras reported; NaN when it reported nothing), the per-direction norms
`norm_h_total_by_layer` [S, L, T] (likewise `norm_h_direct_by_layer`, `norm_c_total_by_layer`),
`saliency` [S, T], and `layer_names` [L], `model_summary`, `every`. The panels also take `mask`
[T, B] from the last record's trace when the model masks: the recorded samples are the same at
every record, so the steps masked in every sample are too (blank in every panel).

A record is chosen by its index (`None`: the last); a timestep range `(t0, t1)` includes both
ends (`None`: every t).
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import numpy as np

from lstmviz.analysis.layers import blank_masked, direction_steps
from lstmviz.analysis.report.summary import fmt
from lstmviz.analysis.values import Arrays

TimeRange = tuple[int, int] | None
MAX_STEP_TICKS = 8  # training steps labelled on a records axis


def panel_arrays(recording) -> dict[str, np.ndarray]:
    """The arrays the recording panels draw from a `Recording`: its rows, and from its last
    record's trace when that trace is read: `mask` when the model masks, and what tells a
    graph's directions' own lengths and hand-overs (`layer{k}_gates_mean` [G, T_k],
    `layer{k}_initial_from`, `layer{k}_calls`)."""
    arrays = dict(recording.arrays)
    last = recording.last
    if last is not None:
        arrays |= {key: value for key, value in last.arrays.items() if key == "mask"
                   or key.endswith(("_gates_mean", "_initial_from", "_calls"))}  # fmt: skip
    return arrays


def record_count(arrays: Arrays) -> int:
    """S, the number of records (0 for arrays that are no recording's)."""
    return int(np.size(arrays["step"])) if "step" in arrays else 0


def chosen_record(arrays: Arrays, record: int | None) -> int:
    """The index of the record shown: `record` within 0…S-1, the last one for None (or out of
    range); -1 when there are no records."""
    count = record_count(arrays)
    if record is None or not 0 <= record < count:
        return count - 1
    return int(record)


def steps_of(arrays: Arrays) -> int:
    """T, the timesteps of each record's norms (0 without any)."""
    norms = arrays.get("norm_h_total_by_layer")
    return int(np.shape(norms)[-1]) if norms is not None and np.ndim(norms) == 3 else 0


def clip_range(t_range: TimeRange, steps: int) -> tuple[int, int]:
    """`t_range` within 0…steps-1, ends in order; every t for None."""
    if t_range is None or steps <= 0:
        return 0, max(steps - 1, 0)
    lo, hi = sorted(int(v) for v in t_range)
    lo, hi = min(max(lo, 0), steps - 1), min(max(hi, 0), steps - 1)
    return lo, hi


def range_text(t_range: TimeRange, steps: int) -> str:
    """ "all t" or "t 3–9" (for titles and readouts)."""
    if t_range is None:
        return "all t"
    lo, hi = clip_range(t_range, steps)
    return f"t = {lo}" if lo == hi else f"t {lo}–{hi}"


def record_rows(arrays: Arrays, record: int, key: str = "norm_h_total_by_layer") -> np.ndarray:
    """One record's norms per direction over t, [L, T] (float64), the steps masked in every
    sample NaN."""
    return blank_masked(np.asarray(arrays[key])[record], arrays)


def window_norms(arrays: Arrays, t_range: TimeRange = None) -> np.ndarray | None:
    """The total gradient norm of every direction over the timestep range, per record: [L, S]
    (float64). Over a range it is the norm of dL/dh_t over all (t, b, j) in it:
    sqrt(Σ_t ‖dL/dh_t‖²) over the direction's own steps in it (a graph's directions keep their
    lengths). NaN where a step in the range is NaN or Inf; None without norms."""
    norms = arrays.get("norm_h_total_by_layer")
    if norms is None or np.ndim(norms) != 3 or np.shape(norms)[0] == 0:
        return None
    lo, hi = clip_range(t_range, np.shape(norms)[2])
    part = np.array(norms[:, :, lo : hi + 1], np.float64)
    for k in range(part.shape[1]):  # a graph's shorter direction: its NaN padding adds nothing
        steps = direction_steps(arrays, k)
        if steps is not None:
            part[:, k, max(steps - lo, 0) :] = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        return np.sqrt(np.sum(np.square(part), axis=2)).T


def step_ticks(steps: np.ndarray, count: int = MAX_STEP_TICKS) -> list[tuple[float, str]]:
    """Ticks for an axis of records 0…S-1 drawn as cells (record s spans s…s+1): at most
    `count` of them, at every k-th record from the first, labelled with its training step."""
    total = len(steps)
    if total == 0:
        return []
    stride = max(1, int(np.ceil(total / count)))
    return [(r + 0.5, str(int(steps[r]))) for r in range(0, total, stride)]


def record_text(arrays: Arrays, record: int) -> str:
    """ "step 40 (epoch 2)" for the record at index `record` (epochs counted from 1, as Keras
    prints them)."""
    step = int(np.ravel(arrays["step"])[record])
    epoch = arrays.get("epoch")
    if epoch is None:
        return f"step {step}"
    return f"step {step} (epoch {int(np.ravel(epoch)[record]) + 1})"


def has_train_loss(arrays: Arrays) -> bool:
    """Whether the training (Keras's fit, a PyTorch loop) reported a loss at any record."""
    train = arrays.get("train_loss")
    return train is not None and bool(np.isfinite(np.asarray(train, np.float64)).any())


def trained_by(arrays: Arrays) -> str:
    """What trained the model a recording follows, as its writer named it in `model_source`
    and `inputs_source`: "Lightning" where either names it, "PyTorch" for a PyTorch module
    ("PyTorch module …"), else "Keras" (the fit callback's, and recordings older than the
    PyTorch recorder)."""
    model, data = (str(arrays.get(key, "")) for key in ("model_source", "inputs_source"))
    if "lightning" in f"{model} {data}".lower():
        return "Lightning"
    return "PyTorch" if model.startswith("PyTorch") else "Keras"


def recording_summary(arrays: Arrays, sources: bool = True) -> str:
    """One line (HTML) about a recording: its records, steps and epochs, the LSTM directions,
    the loss on the recorded data from the first record to the last, and (`sources`) where
    model and data came from."""
    count = record_count(arrays)
    if count == 0:
        return "no records"
    steps, epochs = np.ravel(arrays["step"]), np.ravel(arrays.get("epoch", [0]))
    every = int(arrays.get("every", 0))
    parts = [f"{count} record{'s' * (count != 1)}" + (f" every {every} batches" if every else ""),
             f"steps {int(steps[0])}–{int(steps[-1])}" if count > 1 else f"step {int(steps[0])}",
             f"epochs {int(epochs.min()) + 1}–{int(epochs.max()) + 1}"
             if epochs.max() > epochs.min() else f"epoch {int(epochs[0]) + 1}"]  # fmt: skip
    names = [str(n) for n in np.ravel(arrays.get("layer_names", []))]
    if names:
        parts.append(f"{len(names)} LSTM direction{'s' * (len(names) != 1)}")
    loss = np.ravel(np.asarray(arrays.get("loss", []), np.float64))
    if loss.size:
        parts.append(f"loss {fmt(loss[0])} → {fmt(loss[-1])}" if loss.size > 1
                     else f"loss {fmt(loss[0])}")  # fmt: skip
    for key, what in (("model_source", "model"), ("inputs_source", "data")) if sources else ():
        source = str(arrays.get(key, ""))
        if source:  # "path: what it holds" (a file's name is enough), or a description
            name, _, rest = source.partition(": ")
            shown = Path(name).name if os.sep in name or "/" in name else name
            parts.append(f"{what} {html.escape(shown)}" + (f" ({html.escape(rest)})" if rest
                                                            else ""))  # fmt: skip
    return " · ".join(parts)


def evolution_lines(arrays: Arrays) -> list[str]:
    """Summary lines (HTML) for a recording's report: the loss over the records, and for each
    direction its total gradient norm over all t at the first and the last record."""
    count = record_count(arrays)
    if count == 0:
        return []
    lines = []
    loss = np.ravel(np.asarray(arrays["loss"], np.float64))
    first, last = record_text(arrays, 0), record_text(arrays, count - 1)
    lines.append(f"loss on the recorded data: {fmt(loss[0])} at {first} → {fmt(loss[-1])} at "
                 f"{last}")  # fmt: skip
    if has_train_loss(arrays):
        train = np.ravel(np.asarray(arrays["train_loss"], np.float64))
        lines.append(f"training loss (Keras): {fmt(train[0])} → {fmt(train[-1])}")
    norms = window_norms(arrays)
    names = [str(n) for n in np.ravel(arrays.get("layer_names", []))]
    if norms is not None:
        for k, name in enumerate(names[: len(norms)]):
            a, b = norms[k, 0], norms[k, -1]
            ratio = f" (× {fmt(b / a)})" if np.isfinite(a) and a > 0 and np.isfinite(b) else ""
            lines.append(f"{html.escape(name)}: ‖dL/dh‖ over all t {fmt(a)} → {fmt(b)}{ratio}")
    seconds = np.ravel(np.asarray(arrays.get("record_seconds", []), np.float64))
    if seconds.size > 1 and np.isfinite(seconds[1:]).any():
        lines.append(f"a record took {fmt(float(np.nanmedian(seconds[1:])))} s (median after "
                     "the first, which compiles)")  # fmt: skip
    return lines
