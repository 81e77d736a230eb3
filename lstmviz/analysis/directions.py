"""Every recurrent direction of a trace, or of one record of a recording, as the diagnosis and
the comparison read it.

Which arrays stand for a direction, by mode:
- model: each entry of `layer_names`; `layer{k}_cell` names its kind (absent: "lstm"); a GRU
  or SimpleRNN direction has no `layer{k}_c` / `_grad_c_total` and a NaN row of
  `norm_c_total_by_layer`; each direction's rows cut to its own T_k (a graph's directions keep
  their lengths; the rows' NaN padding is no value), with `layer{k}_initial_from` (the
  direction whose final state is its initial state, or -1) and `layer{k}_calls`;
- taped, train: the one LSTM, "lstm" (a training trace: its last step's gradients; its
  `norm_h_total_by_step` rows are the steps, `Direction.rows`);
- multipass: the full gradient through every pass (`norm_h_total`, `grad_h_total`);
- batchwise: the batches joined into one batch of N·B samples (each batch's norms are
  `Direction.rows`): the norm over (n, b, j) is sqrt(Σ_n norm_n²), the gradients
  [T, N·B, H], each batch's gates from its own weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lstmviz.analysis.layers import calls_of, direction_steps, initial_from
from lstmviz.core import modes

LSTM_GATES = ("i", "f", "g", "o")
DEFAULT_GATES = {"lstm": LSTM_GATES, "gru": ("z", "r", "h~"), "simple_rnn": ("act",)}


@dataclass
class Direction:
    """One recurrent direction. Norms [T] indexed by input position; `grad_h`, `grad_c`
    [T, B, H] and `gates` {name: [T, B, H]} where the trace holds what they need;
    `gates_saturated` {name: fraction} where a model trace holds only the fractions (its
    `layer{k}_gates_saturated_diagnosis`, thresholds 0.05 / 0.95; without it, the mean over t
    of `layer{k}_gates_saturated`, thresholds 0.01 / 0.99); `forget_unit_mean` [H] the forget
    gate's mean per unit over (t, b) (model mode's `gates_unit_mean`); `forget_mean` [T] its
    mean over (b, j) per step (model mode's `gates_mean`, where `gates_unit_mean` is missing);
    `rows` {label: [R, T]} per-row norms (batches, training steps) and `row_labels` [R].
    A model direction: `index` k, `initial_from` (the index of the direction whose final state
    is its initial state, -1 for none) and `calls` (of its layer); `anchors` [A] the steps
    whose loss alone `anchor_h` and `anchor_c` [A, T] follow back (the error of one step)."""

    name: str
    cell: str
    norm_h: np.ndarray
    norm_c: np.ndarray | None = None
    norm_direct: np.ndarray | None = None
    grad_h: np.ndarray | None = None
    grad_c: np.ndarray | None = None
    gates: dict[str, np.ndarray] | None = None
    gates_saturated: dict[str, float] | None = None
    forget_unit_mean: np.ndarray | None = None
    forget_mean: np.ndarray | None = None
    connectivity: np.ndarray | None = None
    rows: np.ndarray | None = None  # [R, T] ‖dL/dh_t‖ per batch or training step
    row_labels: np.ndarray | None = None  # [R]
    row_kind: str = ""
    notes: list[str] = field(default_factory=list)
    index: int = 0
    initial_from: int = -1
    calls: int = 1
    anchors: np.ndarray | None = None
    anchor_h: np.ndarray | None = None
    anchor_c: np.ndarray | None = None
    own_timescale: np.ndarray | None = None  # [S] a modern layer's `layer{k}_timescale`

    @property
    def T(self) -> int:
        return int(np.shape(self.norm_h)[-1])


def _f32(value) -> np.ndarray:
    return np.asarray(value, np.float32)


def _c_row(row) -> np.ndarray | None:
    """A cell-state norm row, or None when the direction has none (all NaN: GRU, SimpleRNN)."""
    if row is None:
        return None
    row = _f32(row)
    return None if np.isnan(row).all() else row


def trace_directions(trace, full: bool = True) -> list[Direction]:
    """The directions of a GradientTrace (see the module's docstring). `full=False`: the norm
    curves only (no per-unit gradients nor gates: quick for any size)."""
    out = _trace_directions(trace, full)
    if not full:
        for d in out:
            d.grad_h = d.grad_c = d.gates = None
    return out


def _trace_directions(trace, full: bool) -> list[Direction]:
    a = trace.arrays
    mode = modes.find(trace.mode)
    if mode.whole_model:
        return [_model_direction(a, k, str(name)) for k, name in enumerate(a["layer_names"])]
    if mode.lead:  # every batch's arrays stacked
        return [_batchwise(a, full)]
    d = Direction("lstm", "lstm", _f32(a["norm_h_total"]), _c_row(a.get("norm_c_total")),
                  _opt(a.get("norm_h_direct")), a.get("grad_h_total"),
                  a.get("grad_c_total"))  # fmt: skip
    if full:
        d.gates = lstm_gates(a.get("x"), a.get("h"), a.get("h0"), a.get("kernel"),
                             a.get("recurrent_kernel"), a.get("bias"))  # fmt: skip
    d.connectivity = a.get("connectivity")
    if "norm_h_total_by_step" in a:
        d.rows, d.row_kind = _f32(a["norm_h_total_by_step"]), "step"
        d.row_labels = np.arange(1, len(d.rows) + 1)
    return [d]


def _opt(value) -> np.ndarray | None:
    return None if value is None else _f32(value)


def _model_direction(a: dict, k: int, name: str) -> Direction:
    cell = str(a.get(f"layer{k}_cell", "lstm"))
    steps = direction_steps(a, k)  # the rows' values after it are padding
    d = Direction(name, cell, _f32(a["norm_h_total_by_layer"][k][:steps]),
                  _c_row(a["norm_c_total_by_layer"][k][:steps])
                  if "norm_c_total_by_layer" in a else None,
                  _opt(a["norm_h_direct_by_layer"][k][:steps])
                  if "norm_h_direct_by_layer" in a else None,
                  a.get(f"layer{k}_grad_h_total"), a.get(f"layer{k}_grad_c_total"),
                  index=k, initial_from=initial_from(a, k), calls=calls_of(a, k))  # fmt: skip
    if cell != "lstm":
        d.norm_c = d.grad_c = None
    _anchored(d, a, k, steps)
    if f"layer{k}_timescale" in a:
        d.own_timescale = _f32(a[f"layer{k}_timescale"])
    names = a.get(f"layer{k}_gate_names")
    names = [str(n) for n in names] if names is not None else list(DEFAULT_GATES.get(cell, ()))
    # Traces written before model mode recorded the per-unit means and the diagnosis's
    # saturation (and PyTorch traces of older versions) fall back to the per-step summaries.
    fractions = a.get(f"layer{k}_gates_saturated_diagnosis")
    saturated = a.get(f"layer{k}_gates_saturated")
    if fractions is not None and len(names) == len(fractions):
        d.gates_saturated = {n: float(f) for n, f in zip(names, fractions, strict=True)}
    elif saturated is not None and len(names) == len(saturated):
        d.gates_saturated = {n: float(np.nanmean(row))
                             for n, row in zip(names, saturated, strict=True)}
        d.notes.append(f"gate saturation as model mode records it per step (< 0.01 or > 0.99; "
                       f"|g| > 0.99): the trace has no layer{k}_gates_saturated_diagnosis")
    unit_means = a.get(f"layer{k}_gates_unit_mean")
    means = a.get(f"layer{k}_gates_mean")
    if cell == "lstm" and "f" in names:
        if unit_means is not None and len(unit_means) == len(names):
            d.forget_unit_mean = _f32(unit_means[names.index("f")])
        elif means is not None:
            d.forget_mean = _f32(means[names.index("f")])
            d.notes.append(f"one forget-gate timescale for the direction (its mean over the "
                           f"units): the trace has no layer{k}_gates_unit_mean")  # fmt: skip
    return d


def _anchored(d: Direction, a: dict, k: int, steps: int | None, s: int | None = None) -> None:
    """Give `d` the anchored norms of direction k (of record `s` of a recording's arrays),
    where the arrays hold them. A record whose anchors are negative has none (a recording's
    fill rows: `io.recording.rows.anchor_fill`)."""
    if "anchor_norm_h_by_layer" not in a or "anchors_by_layer" not in a:
        return
    pick = (lambda key: a[key][k]) if s is None else (lambda key: a[key][s][k])
    anchors = np.asarray(pick("anchors_by_layer"), np.int64)
    if anchors.size == 0 or (anchors < 0).any():
        return
    d.anchors = anchors
    d.anchor_h = _f32(pick("anchor_norm_h_by_layer"))[:, :steps]
    if d.cell == "lstm" and "anchor_norm_c_by_layer" in a:
        d.anchor_c = _f32(pick("anchor_norm_c_by_layer"))[:, :steps]


def _batchwise(a: dict, full: bool) -> Direction:
    """The batches of a per-batch run joined into one batch (see the module's docstring)."""
    rows = _f32(a["norm_h_total_by_batch"])
    joined = np.sqrt((rows.astype(np.float64) ** 2).sum(axis=0)).astype(np.float32)
    c_rows = a.get("norm_c_total_by_batch")
    direct = a.get("norm_h_direct_by_batch")
    d = Direction("lstm", "lstm", joined,
                  None if c_rows is None else _joined(c_rows),
                  None if direct is None else _joined(direct),
                  _join_batches(a.get("grad_h_total")),
                  _join_batches(a.get("grad_c_total")))  # fmt: skip
    d.rows, d.row_kind, d.row_labels = rows, "batch", np.arange(1, len(rows) + 1)
    if full and all(a.get(key) is not None for key in ("x", "h", "h0", "kernel",
                                                        "recurrent_kernel")):
        per_batch = [lstm_gates(a["x"][n], a["h"][n], a["h0"][n], a["kernel"][n],
                                a["recurrent_kernel"][n], a["bias"][n])
                     for n in range(len(a["x"]))]  # fmt: skip
        d.gates = {g: np.concatenate([p[g] for p in per_batch], axis=1) for g in LSTM_GATES}
    return d


def _joined(rows) -> np.ndarray:
    return np.sqrt((np.asarray(rows, np.float64) ** 2).sum(axis=0)).astype(np.float32)


def _join_batches(g) -> np.ndarray | None:
    """[N, T, B, H] -> [T, N·B, H]."""
    if g is None:
        return None
    g = np.asarray(g)
    return np.moveaxis(g, 0, 1).reshape(g.shape[1], -1, g.shape[-1])


def lstm_gates(x, h, h0, kernel, recurrent_kernel, bias) -> dict[str, np.ndarray] | None:
    """The gate activations of the one LSTM, recomputed from its inputs x [T, B, I], states
    h [T, B, H] and h0 [B, H] and Keras-layout weights (kernel [I, 4H], recurrent_kernel
    [H, 4H], bias [4H], gates i, f, g, o): z_t = x_t W + h_{t-1} U + b, i, f, o = σ(z),
    g = tanh(z). {gate: [T, B, H]}, or None when an array is missing."""
    if any(v is None for v in (x, h, h0, kernel, recurrent_kernel)):
        return None
    x, h = np.asarray(x, np.float32), np.asarray(h, np.float32)
    T, B, H = h.shape
    previous = np.concatenate([np.asarray(h0, np.float32)[None], h[:-1]])
    # as 2-D products: one BLAS call each (a stacked [T, B, ·] product loops over t)
    z = x.reshape(T * B, -1) @ np.asarray(kernel, np.float32)
    z += previous.reshape(T * B, H) @ np.asarray(recurrent_kernel, np.float32)
    if bias is not None:
        z += np.asarray(bias, np.float32)
    z = z.reshape(T, B, 4 * H)
    gates = {}
    for n, name in enumerate(LSTM_GATES):
        part = z[..., n * H : (n + 1) * H]
        with np.errstate(over="ignore"):
            gates[name] = np.tanh(part) if name == "g" else 1 / (1 + np.exp(-part))
    return gates


def record_directions(recording, s: int) -> list[Direction]:
    """The directions of record `s` of a recording: norms only (`norm_h_total_by_layer`
    [S, L, T] and its direct and cell rows); each direction's cell, length and hand-over from
    the last record's trace when it is read, else "lstm" where the cell row is finite."""
    a = recording.arrays
    last = recording.last.arrays if recording.last is not None else {}
    out = []
    for k, name in enumerate(a["layer_names"]):
        steps = direction_steps(last, k) if last else None
        c = (_c_row(a["norm_c_total_by_layer"][s][k][:steps])
             if "norm_c_total_by_layer" in a else None)  # fmt: skip
        cell = str(last.get(f"layer{k}_cell", "lstm" if c is not None else "rnn"))
        direct = a.get("norm_h_direct_by_layer")
        out.append(Direction(str(name), cell, _f32(a["norm_h_total_by_layer"][s][k][:steps]),
                             c if cell == "lstm" else None,
                             None if direct is None else _f32(direct[s][k][:steps]), index=k,
                             initial_from=initial_from(last, k) if last else -1,
                             calls=calls_of(last, k) if last else 1))  # fmt: skip
        _anchored(out[-1], a, k, steps, s)
    return out
