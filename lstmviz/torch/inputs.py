"""Which of a module's inputs each recurrent call reads, for a module of several inputs.

A seq2seq's `forward(source, target)` feeds `source` to its encoder and `target` to its
decoder; the trace keeps, per input that reaches a recurrent layer, `x_{name}`,
`grad_input_{name}` (dL/d the input of the first direction it feeds, [T_k, B, I]) and
`saliency_{name}` (its norm over I, [B, T_k]), as a Keras graph's trace does
(docs/model-mode.md, "Graphs"). Token ids carry no gradient, so the link is followed through
the forward itself: `Provenance`, a TorchFunctionMode, marks every tensor an op makes with
the inputs any of the op's tensors came from (an Embedding's lookup, slicing, arithmetic, …),
and a recurrent call's input reads its mark (`inputs_of`).
"""

from __future__ import annotations

import contextlib
import inspect

import numpy as np
import torch
from torch import nn
from torch.overrides import TorchFunctionMode

_MARK = "_lstmviz_inputs"  # the attribute a marked tensor carries: a frozenset of indices


class Provenance(TorchFunctionMode):
    """While active, each op's tensor outputs carry the union of its tensor arguments' marks;
    the module's arguments (tensors) are marked with their own index. lstmviz's own recording
    of a recurrent call runs `outside` it (its outputs marked by `carry`): a decoder step's
    hundred-odd ops of conversion would otherwise each pass through here."""

    active = 0  # Provenance modes entered and not exited

    def __init__(self, args: tuple):
        super().__init__()
        for i, arg in enumerate(args):
            if torch.is_tensor(arg):
                _mark(arg, frozenset({i}))

    def __enter__(self):
        Provenance.active += 1
        return super().__enter__()

    def __exit__(self, *exc):
        Provenance.active -= 1
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        found = _marks(args) | _marks(kwargs) if kwargs else _marks(args)
        if found:
            carry_marks(out, found)
        return out


def outside():
    """A context in which no Provenance sees the ops (a no-op when none is active)."""
    return torch._C.DisableTorchFunction() if Provenance.active else contextlib.nullcontext()


def carry(outputs, given) -> None:
    """Mark the tensors in `outputs` with the marks of those in `given` (nests of tuples,
    lists and dicts), as an op run under Provenance would have marked them."""
    if Provenance.active:
        found = _marks(given)
        if found:
            carry_marks(outputs, found)


def carry_marks(outputs, found: frozenset) -> None:
    for tensor in _tensors(outputs):
        _mark(tensor, found | getattr(tensor, _MARK, frozenset()))


def inputs_of(tensor) -> frozenset[int]:
    """The indices of the module's arguments `tensor` was computed from (while `Provenance`
    was active)."""
    return getattr(tensor, _MARK, frozenset())


def unmark(args: tuple) -> None:
    """Take the marks off the module's own arguments (the user's tensors)."""
    for arg in args:
        if torch.is_tensor(arg) and hasattr(arg, _MARK):
            delattr(arg, _MARK)


def input_names(module: nn.Module, count: int) -> list[str]:
    """The names of the first `count` parameters of `module.forward` (x0, x1, … where the
    signature does not say them)."""
    try:
        params = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]  # fmt: skip
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params[:count]]
    return names if len(names) == count else [f"x{n}" for n in range(count)]


def first_feeds(calls: list, found: list, count: int) -> dict[int, int]:
    """Input index -> the index of the first direction (in `found`, layer-major) whose first
    call's input that argument reaches, for the inputs that reach one; where several reach
    the same direction first (a sequence and its lengths, packed together) the first of them
    stands for it."""
    first_of: dict[int, int] = {}
    for k, chain in enumerate(found):
        for i in sorted(inputs_of(calls[chain.calls[0]].source)):
            if i < count:
                first_of.setdefault(i, k)
    taken: dict[int, int] = {}
    for i, k in sorted(first_of.items()):
        taken.setdefault(k, i)
    return {i: k for k, i in taken.items()}


def time_major(x, call, steps: int) -> np.ndarray:
    """An argument as the trace keeps it: time-major [T, B(, I)] when it is a sequence of the
    call's batch and `steps` (batch-major when the call's module is batch_first), else as
    given (NumPy)."""
    value = x.detach().cpu().numpy()
    batch = call.layout.batch
    if value.ndim >= 2 and value.shape[:2] == (batch, steps) and (
            call.layout.batch_first or value.shape[:2] != (steps, batch)):  # fmt: skip
        return np.ascontiguousarray(np.swapaxes(value, 0, 1))
    return value


def _mark(tensor: torch.Tensor, marks: frozenset) -> None:
    with contextlib.suppress(AttributeError, RuntimeError):  # a subclass without a __dict__
        setattr(tensor, _MARK, marks)


def _marks(value) -> frozenset:
    """The union of the marks of the tensors in a nest (of the arguments of one op: most
    often flat, checked without a generator)."""
    if isinstance(value, torch.Tensor):
        return getattr(value, _MARK, frozenset())
    found = frozenset()
    items = value.values() if isinstance(value, dict) else value
    if not isinstance(items, tuple | list) and not isinstance(value, dict):
        return found
    for item in items:
        if isinstance(item, torch.Tensor):
            mark = getattr(item, _MARK, None)
            if mark:
                found = found | mark
        elif isinstance(item, tuple | list | dict):
            found = found | _marks(item)
    return found


def _tensors(value):
    """Every tensor in a nest of tuples, lists and dicts."""
    if torch.is_tensor(value):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
