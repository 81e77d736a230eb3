"""Directions of a PyTorch forward: the recorded calls grouped into chains.

A *direction* is one chain of calls of one recurrent layer (and direction) whose state passes
from call to call (`capture.Call.chained_from`): an `nn.LSTM` called once, a decoder stepping
`nn.LSTM` once per token with (h, c) handed on, an `nn.LSTMCell` in a loop. Its time axis is its
steps in call order. Calls of one layer that do not chain (an encoder run on two inputs) are
separate directions, `{name}#{n}` from 0 (no suffix when the layer makes one chain). A state
handed from one layer to another (an encoder's (h_n, c_n) as its decoder's initial state) links
two directions (`Chain.initial_from`), never merges them.

`join` puts a chain's per-call arrays together ([T_k, B, ·] per direction, T_k the sum of its
calls' steps): per-step arrays concatenated in call order, weight gradients summed (each call's
part of dL/dW), the gate summaries over (t, b) weighted by each call's unmasked samples.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

# [T, …] per step, in input order within a call: joined along time
_STEPS = ("h", "c", "grad_h_total", "grad_c_total", "grad_h_direct", "norm_h_total",
          "norm_h_direct", "norm_c_total")  # fmt: skip
_GATE_STEPS = ("gates_mean", "gates_saturated")  # [G, T]
# summed over the calls; a run of calls with one backward (fused.backward_run) has them in its
# last call only
SUMS = ("grad_kernel", "grad_recurrent_kernel", "grad_bias")
_MEANS = ("gates_unit_mean", "gates_saturated_diagnosis")  # over the unmasked (t, b)


@dataclass
class Chain:
    """One direction: its name, cell kind and its pieces, (call index, row of the call's
    layers·directions) in call order; `initial_from` the index of the direction whose final
    state is its initial state (−1: none)."""

    name: str
    kind: str
    pieces: list[tuple[int, int]] = field(default_factory=list)
    initial_from: int = -1

    @property
    def calls(self) -> list[int]:
        """The indices of the calls that made it, in call order."""
        return [n for n, _ in self.pieces]


def chains(calls: list) -> list[Chain]:
    """The directions of `calls` (capture.Call, in the order they ran), ordered by their first
    call, layer-major and forward first within it."""
    found: list[Chain] = []
    where: dict[tuple[int, int], int] = {}  # (call, row) -> its direction
    for n, call in enumerate(calls):
        for row, name in enumerate(call.direction_names()):
            if call.chained_from is not None:
                k = where[(call.chained_from, row)]
                found[k].pieces.append((n, row))
            else:
                source = call.initial[row] if call.initial else None
                k = len(found)
                found.append(Chain(name, call.kind, [(n, row)], where.get(source, -1)))
            where[(n, row)] = k
    counts, seen = Counter(c.name for c in found), Counter()
    for chain in found:
        if counts[chain.name] > 1:
            base = chain.name
            chain.name, seen[base] = f"{base}#{seen[base]}", seen[base] + 1
    return found


def samples(call) -> int:
    """The unmasked (t, b) of a call: every sequence's length summed."""
    lengths = call.layout.lengths()
    return call.layout.steps * call.layout.batch if lengths is None else int(lengths.sum())


def join(chain: Chain, calls: list, results: list) -> dict[str, np.ndarray]:
    """The arrays of `chain` from `results` (per call, one dict per row, as
    `probed.call_gradients` gives them)."""
    parts = [results[n][row] for n, row in chain.pieces]
    if len(parts) == 1:
        return dict(parts[0])
    one: dict[str, np.ndarray] = {}
    first = parts[0]
    for key in _STEPS:
        if key in first:
            one[key] = np.concatenate([p[key] for p in parts], 0)
    for key in _GATE_STEPS:
        if key in first:
            one[key] = np.concatenate([p[key] for p in parts], 1)
    for key in SUMS:
        found = [p[key] for p in parts if key in p]
        if found:
            one[key] = np.sum(found, 0, dtype=found[0].dtype)
    weights = np.array([samples(calls[n]) for n in chain.calls], np.float64)
    for key in _MEANS:
        if key in first:
            stacked = np.stack([p[key] for p in parts]).astype(np.float64)
            total = weights.sum()
            mean = np.tensordot(weights, stacked, 1) / total if total else stacked[0] * 0
            one[key] = mean.astype(first[key].dtype)
    return one
