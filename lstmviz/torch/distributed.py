"""Model mode under `torch.distributed`: each rank traces its share of the probe batch, and rank
0 puts the record together as one process would have computed it on the whole batch.

The probe batch (B samples) is split along axis 0 of x and y (every tensor or array of the data
whose first axis is B; the rest goes to every rank whole) into contiguous shares of
`shares(B, N)` samples, rank r the r-th. Each rank runs model mode on its share; rank 0
gathers the shares' arrays (`torch.distributed.gather_object`) and combines them (`combine`):

- per-sample arrays are concatenated in rank order: states [T, B, S] (an LSTM's h and c, a
  modern layer's every state `layer{k}_{state}` of its `state_names`: a per-D-channel norm
  over N, a complex state's modulus are per sample too), the inputs and mask [T, B, ·], y,
  y_pred and loss_by_sample [B, …];
- gradients are linear in the loss, and the loss is taken to be the mean over the samples of
  per-sample losses (the named losses and "mean" are; a callable `loss_fn` must be too, as
  PyTorch's losses with their default reduction="mean" are): a share of b_r samples gives
  gradients B / b_r times the whole batch's, so every gradient of rank r is scaled by
  s_r = b_r / B: per-sample gradients are concatenated (the totals and direct gradients of
  every state [T, B, S]; a norm over N or a modulus scales as the gradient does), weight
  gradients (`grad_kernel`…, a modern layer's `grad_weight_{parameter}`, a complex one's
  [..., 2] alike) and the loss summed;
- the per-(direction, step) norms over (b, j) are sqrt(Σ_r (s_r ‖g_r‖)²), in float64;
- the gate summaries (means over the unmasked (b, j) of a step, or (t, b); a modern layer's
  over every sample, padding too) are averaged with each rank's counts of those as weights;
- a modern layer's `timescale` [S], −1/ln ā with ln ā the mean log decay over (b, t), from
  the mean of the shares' ln ā = −1/τ_r weighted by s_r, in float64. A Mamba state kept per D
  channel has the slowest mode's: ln ā_dn = mean(Δ_d)·A_dn with Δ_d > 0, so the slowest n is
  that of the largest A_dn in every share and the rule is exact there too;
- `nonfinite_steps` is the union of the ranks', `model_seconds` the slowest rank's; names,
  cell kinds, state names, call counts and the model's summary are the first rank's.

So a record equals the single-process record on the whole batch to float32 rounding. A loss
that is a sum over samples, or any loss whose samples interact (a batch statistic), would not;
nor would a layer whose samples interact (lru-pytorch's LRU starts the first sample of its
batch from its `state` or the one it is given, every other from zero: a share's first sample
too — equal while that state is zero and none is given; the package zeroes it after every
call). Every rank's trace must hold the same keys, with the same names, cell kinds and state
names; a key with no rule here is refused (an LstmvizError naming it), never passed on.

Without an initialised process group (or with one process) nothing here changes anything.
FSDP (a module whose parameters are sharded across ranks) is not supported: each rank would
need the full parameters while it traces (`FullyShardedDataParallel.summon_full_params`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import numpy as np
import torch

from lstmviz.core.errors import LstmvizError
from lstmviz.io.trace import GradientTrace

# per direction (`layer{k}_{name}`): how a share's array joins the others; a modern layer's
# every state `{state}` of its `layer{k}_state_names` joins as "h" does, `grad_{state}_total`
# as "grad_h_total", and every `grad_weight_{parameter}` as "grad_kernel"
_CONCAT_T_B = ("h", "c")  # [T, B, S] states: side by side along B
_SCALED_T_B = ("grad_h_total", "grad_c_total", "grad_h_direct")  # gradients along B, scaled
_SUMMED = ("grad_kernel", "grad_recurrent_kernel", "grad_bias")  # each share's part, scaled
_STEP_MEANS = ("gates_mean", "gates_saturated")  # [G, T]: over the unmasked (b, j) of a step
_MEANS = ("gates_unit_mean", "gates_saturated_diagnosis")  # over every unmasked (t, b)
_SAME = ("cell", "gate_names", "calls", "initial_from", "state_names")
# norms over (b, j) per direction and step [L, T] (the anchored ones [L, A, T]: of the loss at
# one step t* alone)
_NORMS = ("norm_h_total_by_layer", "norm_h_direct_by_layer", "norm_c_total_by_layer",
          "anchor_norm_h_by_layer", "anchor_norm_c_by_layer")  # fmt: skip
# whole-model keys
_ALONG_B = {"x": 1, "mask": 1, "y": 0, "y_pred": 0, "loss_by_sample": 0}  # key -> its B axis
_SCALED_ALONG_B = {"grad_input": 1, "saliency": 0}
_SCALED_INPUTS = ("grad_input_", "saliency_")  # per input of several: [T, B, I], [B, T]
_FIRST = ("layer_names", "lstm_kernel", "model_summary", "model_source", "inputs_source",
          "anchors_by_layer")  # fmt: skip


def world() -> tuple[int, int]:
    """(this process's rank, the number of ranks); (0, 1) without an initialised process group."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def unwrap(module):
    """The module a DistributedDataParallel (or DataParallel) wraps, else `module`: traced
    directly, its forward does not take part in DDP's gradient synchronisation."""
    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    while isinstance(module, wrappers):
        module = module.module
    return module


def shares(batch: int, ranks: int, where: str) -> list[int]:
    """The samples of each rank's share of a probe batch of `batch` [ranks]: contiguous, the
    first `batch % ranks` one larger. An LstmvizError when a rank would get none."""
    if batch < ranks:
        raise LstmvizError(f"{where}: the probe batch holds {batch} sample"
                           f"{'s' * (batch != 1)}, fewer than the {ranks} ranks it is split "
                           f"across; give at least {ranks}")  # fmt: skip
    return [len(part) for part in np.array_split(np.arange(batch), ranks)]


def batch_size(data, where: str) -> int:
    """B of the probe data (x, or a tuple of the module's arguments): axis 0 of its first
    tensor or array."""
    items = data if isinstance(data, tuple | list) else (data,)
    for item in items:
        if (torch.is_tensor(item) or isinstance(item, np.ndarray)) and item.ndim > 0:
            return int(item.shape[0])
    raise LstmvizError(f"{where}: under torch.distributed the probe data is split along the "
                       "batch axis (axis 0) of its tensors; it has no tensor")  # fmt: skip


def share(data, batch: int, start: int, stop: int):
    """`data` (a tensor, array, tuple or list of them, or None) with every tensor or array
    whose axis 0 is `batch` cut to samples start:stop; anything else as it is."""
    if data is None:
        return None
    if isinstance(data, tuple | list):
        return type(data)(share(item, batch, start, stop) for item in data)
    if (torch.is_tensor(data) or isinstance(data, np.ndarray)) and data.ndim > 0 and (
            data.shape[0] == batch):  # fmt: skip
        return data[start:stop]
    return data


@contextlib.contextmanager
def agreed(ranks: int) -> Iterator[None]:
    """Run the body on every rank and raise on every rank what any raised: the rank that
    failed raises its own exception, the others an LstmvizError with its message (so none
    waits forever in the next collective, and every rank stops with the same reason). One
    `all_gather_object` after the body; nothing with one process."""
    if ranks == 1:
        yield
        return
    error: BaseException | None = None
    try:
        yield
    except Exception as exc:  # handed to the other ranks, then raised again here
        error = exc
    messages: list = [None] * ranks
    torch.distributed.all_gather_object(messages, None if error is None else str(error))
    if error is not None:
        raise error
    for rank, message in enumerate(messages):
        if message is not None:
            raise LstmvizError(f"rank {rank}: {message}")


def gather(trace: GradientTrace | None, error: str | None, rank: int, ranks: int) -> list:
    """Every rank's (arrays, config) or error message on rank 0 ([ranks]); [] elsewhere."""
    part = (error,) if trace is None else (dict(trace.arrays), trace.config)
    parts = [None] * ranks if rank == 0 else None
    torch.distributed.gather_object(part, parts, dst=0)
    return parts or []


def combine(parts: list[tuple[dict, object]], sizes: list[int], where: str) -> GradientTrace:
    """The whole batch's model trace from the ranks' (arrays, config) of their shares of
    `sizes` samples (the module's docstring says how)."""
    arrays = [p[0] for p in parts]
    batch = sum(sizes)
    scales = [size / batch for size in sizes]
    for config, size in zip((p[1] for p in parts), sizes, strict=True):
        if config.batch != size:
            raise LstmvizError(f"{where}: the module's recurrent layers got a batch of "
                               f"{config.batch} from a share of {size} samples; under "
                               "torch.distributed the probe batch is split along axis 0 of x "
                               "and y, so the module must take its batch there "
                               "(batch-major, batch_first=True)")  # fmt: skip
    keys = list(arrays[0])
    for rank, a in enumerate(arrays[1:], 1):
        if set(a) != set(keys):
            odd = sorted(set(a) ^ set(keys))
            raise LstmvizError(f"{where}: the traces of rank 0 and rank {rank} hold different "
                               f"arrays ({', '.join(odd)}); the ranks must trace the same "
                               "module on shares of one probe batch")  # fmt: skip
    out: dict[str, np.ndarray] = {}
    for key in keys:
        values = [np.asarray(a[key]) for a in arrays]
        out[key] = _combined(key, values, scales, arrays)
    config = dataclasses.replace(parts[0][1], batch=batch)
    return GradientTrace("model", config, out)


def _family(key: str, arrays: dict) -> tuple[str | None, str | None]:
    """(the key's name within its direction, e.g. "grad_h_total", or None for a whole-model
    key; its rule's name among the direction's: a modern layer's other states read as "h",
    their totals as "grad_h_total", its parameters' gradients as "grad_kernel")."""
    if not (key.startswith("layer") and key[5:6].isdigit() and "_" in key):
        return None, None
    layer, name = key.split("_", 1)
    states = [str(s) for s in np.atleast_1d(arrays.get(f"{layer}_state_names", []))]
    if name in states:
        return name, "h"
    if name.startswith("grad_") and name.endswith("_total") and name[5:-6] in states:
        return name, "grad_h_total"
    if name.startswith("grad_weight_"):
        return name, "grad_kernel"
    return name, name


def _combined(key: str, values: list[np.ndarray], scales: list[float], arrays: list[dict]):
    """The whole batch's `key` from the shares' `values` (the module's docstring says how);
    `scales` [ranks] each share's s_r, `arrays` each share's trace."""
    first = values[0]
    name, rule = _family(key, arrays[0])
    if rule in _CONCAT_T_B or key in _ALONG_B:
        return np.concatenate(values, 1 if name else _ALONG_B[key])
    if key.startswith("x_"):  # one of several inputs: time-major [T, B, …] or [B, …]
        shares = [np.shape(a[f"saliency_{key[2:]}"])[0] for a in arrays]
        major = all(v.ndim >= 2 and v.shape[1] == b for v, b in zip(values, shares, strict=True))
        return np.concatenate(values, 1 if major else 0)
    if rule in _SCALED_T_B or key in _SCALED_ALONG_B or key.startswith(_SCALED_INPUTS):
        axis = 1 if name or key.startswith("grad_input_") else _SCALED_ALONG_B.get(key, 0)
        pairs = zip(values, scales, strict=True)
        return np.concatenate([v * np.asarray(s, v.dtype) for v, s in pairs], axis)
    if rule in _SUMMED or key == "loss":
        total = sum(v.astype(np.float64) * s for v, s in zip(values, scales, strict=True))
        return np.asarray(total, first.dtype)
    if key in _NORMS:
        pairs = zip(values, scales, strict=True)
        squares = sum(np.square(v.astype(np.float64) * s) for v, s in pairs)
        return np.sqrt(squares).astype(first.dtype)
    if rule in _STEP_MEANS or rule in _MEANS:
        layer = key[: -len(name) - 1]  # "layer{k}"
        weights = [_counts(a, layer, per_step=rule in _STEP_MEANS) for a in arrays]
        total = sum(weights)
        summed = sum(v.astype(np.float64) * w for v, w in zip(values, weights, strict=True))
        mean = np.divide(summed, total, out=np.zeros_like(summed), where=total > 0)
        return mean.astype(first.dtype)
    if rule == "timescale":
        return _timescale(values, scales)
    if key == "nonfinite_steps":
        return np.unique(np.concatenate(values)).astype(first.dtype)
    if key == "model_seconds":
        return np.max(values).astype(first.dtype)
    if rule in _SAME or key == "layer_names":  # of the module, not the share: the same
        if not all(np.array_equal(v, first) for v in values[1:]):
            raise LstmvizError(f"lstmviz.torch.distributed: the ranks' {key} differ "
                               f"({', '.join(str(v) for v in values)}); they must trace the "
                               "same module")  # fmt: skip
        return first
    if key in _FIRST:
        return first
    raise LstmvizError(f"lstmviz.torch.distributed: no rule to combine the ranks' {key}")


def _timescale(values: list[np.ndarray], scales: list[float]) -> np.ndarray:
    """τ [S] of the whole batch from the shares' τ_r [S] (steps per e-fold, −1/ln ā_r, ln ā_r ≤ 0
    the mean log decay over a share's (b, t); inf where ā_r = 1): −1 / Σ_r s_r ln ā_r."""
    with np.errstate(divide="ignore"):
        logs = np.stack([-1.0 / v.astype(np.float64) for v in values])  # ln ā_r (±0 at τ = ±inf)
        weights = np.reshape(scales, (-1,) + (1,) * values[0].ndim)
        mean = np.sum(logs * weights, axis=0)
        return (-1.0 / mean).astype(values[0].dtype)


def _counts(arrays: dict, layer: str, per_step: bool):
    """A share's weight in a gate summary of direction `layer` ("layer{k}"): its unmasked
    samples at each of the direction's steps [T_k] (per_step), else in all its (t, b); from the
    share's `mask` when that has the direction's steps, else every sample (a modern layer's,
    one with `state_names`, always: its summaries take every sample)."""
    steps, batch = np.shape(arrays[f"{layer}_h"])[:2]
    mask = arrays.get("mask")
    if mask is not None and len(mask) == steps and f"{layer}_state_names" not in arrays:
        counts = np.asarray(mask, np.float64).sum(1)
    else:
        counts = np.full(steps, batch, np.float64)
    if per_step:
        return counts[None, :]  # [1, T_k]: against a summary [G, T_k]
    return counts.sum()
