"""Runs: consecutive calls of one chain differentiated as one sequence.

A decoder stepping its `nn.LSTM` once per token makes T calls of one step each; their backward
recurrences, one after another, are one backward over T steps (`fused.backward_run`) when no
gradient PyTorch computes between them depends on it. `model_gradients` goes from the last
call to the first; a call's direct gradients must be complete when its backward runs. They are
when nothing that runs later in that order feeds them, that is when no call j after the run's
first, in the run or between its calls, takes an input or a given initial state computed in
PyTorch from the outputs of a run call before j (a decoder fed its own previous output: no
run; teacher forcing, or an input of `argmax`, which carries no gradient: a run), nor from the
input of a run call before j. And every final state of a run call but the last goes on into the
next call alone (PyTorch left it no gradient).

The walk over PyTorch's graph from a call's inputs stops at leaves (every call's outputs are
leaves); past `_BUDGET` nodes it gives up and the call joins no run.
"""

from __future__ import annotations

import torch

from lstmviz.torch import fused

_BUDGET = 4096


def runs(calls: list, grads: list, spans: list[tuple[int, int]]) -> dict[int, list[int]]:
    """The runs of two calls or more: the index of each run's last call -> its calls' indices
    in call order. `grads`: what PyTorch left at every call's outputs (None: nothing), the
    calls' `spans` in it."""
    reach = _Reach(calls)
    found: dict[int, list[int]] = {}
    open_runs: dict[int, list[int]] = {}  # a run's last call -> the run
    for n, call in enumerate(calls):
        before = call.chained_from
        run = open_runs.pop(before, None) if before is not None else None
        if run is not None and not (
            fused.joins(calls[before], call)
            and _handed_on(calls[before], grads[slice(*spans[before])])
            and not any(reach.depends(j, run) for j in range(run[-1] + 1, n + 1))
        ):
            if len(run) > 1:
                found[run[-1]] = run
            run = None
        open_runs[n] = [n] if run is None else [*run, n]
    found |= {run[-1]: run for run in open_runs.values() if len(run) > 1}
    return found


def _handed_on(call, grads: list) -> bool:
    """Whether PyTorch left no gradient at `call`'s final state: its h_n (, c_n), or a cell's
    c′ (a cell's h′ is its output, `grads[0]`, the direct gradient of its step)."""
    return all(g is None for g in grads[1:])


class _Reach:
    """What each call's inputs (its input, and its given initial state unless it continues a
    chain) depend on in PyTorch's graph, walked once per call when first asked."""

    def __init__(self, calls: list):
        self.calls = calls
        self.walked: dict[int, tuple[set[int], set[int]] | None] = {}

    def depends(self, j: int, run: list[int]) -> bool:
        """Whether call j's inputs depend on the outputs or the input of a call of `run`
        before it (unknown: yes)."""
        if j not in self.walked:
            self.walked[j] = self._walk(self.calls[j])
        walked = self.walked[j]
        if walked is None:
            return True
        leaves, nodes = walked
        for m in run:
            if m >= j:
                continue
            call = self.calls[m]
            if any(id(t) in leaves for t in call.outputs):
                return True
            source = call.source
            if source.requires_grad and (id(source) in leaves or (
                    source.grad_fn is not None and id(source.grad_fn) in nodes)):  # fmt: skip
                return True
        return False

    def _walk(self, call) -> tuple[set[int], set[int]] | None:
        """(ids of the leaves and of the graph's nodes strictly upstream of the call's inputs)
        or None past the budget."""
        return _upstream([call.source] + ([] if call.chained_from is not None else list(call.hx)))


def reads_earlier(calls: list, n: int) -> bool:
    """Whether call n's input is computed in PyTorch from the outputs of a call before it (its
    dL/d input then goes on into them; unknown: yes)."""
    walked = _upstream([calls[n].source])
    if walked is None:
        return True
    leaves = walked[0]
    return any(id(t) in leaves for call in calls[:n] for t in call.outputs)


def _upstream(tensors: list) -> tuple[set[int], set[int]] | None:
    """(ids of the leaves and of the graph's nodes strictly upstream of `tensors`) or None past
    the budget. The tensors' own nodes are not upstream: two inputs made by one node (a
    sequence's `unbind`) do not depend on each other."""
    leaves: set[int] = set()
    nodes: set[int] = set()
    stack = []
    for tensor in tensors:
        if not isinstance(tensor, torch.Tensor) or not tensor.requires_grad:
            continue
        if tensor.grad_fn is None:
            leaves.add(id(tensor))
        else:
            stack += [fn for fn, _ in tensor.grad_fn.next_functions if fn is not None]
    while stack:
        node = stack.pop()
        if id(node) in nodes:
            continue
        nodes.add(id(node))
        if len(nodes) > _BUDGET:
            return None
        variable = getattr(node, "variable", None)
        if variable is not None:
            leaves.add(id(variable))
            continue
        stack += [fn for fn, _ in node.next_functions if fn is not None]
    return leaves, nodes
