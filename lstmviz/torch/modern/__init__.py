"""Modern recurrent layers in PyTorch modules (the optional extra `lstmviz[modern]`): minGRU and
minLSTM (mingru-pytorch), Mamba's selective SSM (mambapy), the LRU (lru-pytorch) and xLSTM's
sLSTM and mLSTM (xlstm), found in a module by their class and traced through their state
(docs/modern-recurrence.md).

Holds: `layers` (which classes, which are not traced and why), `piece` (one call's record),
`mingru`, `ssm` and `xlstm` (their forwards, the state tapped), `scan` (the totals: a reverse linear
scan of the direct gradient with the per-step decay), `model` (model mode's arrays for them),
`mixed` (a module that holds classic nn.LSTM/GRU/RNN layers too: the two sides' directions in
call order in one trace), `outcome` (what every PyTorch trace holds beside its directions, the
classic tracer's too).
May import PyTorch, `lstmviz.core`, `lstmviz.io`; never `lstmviz.torch`'s other modules (they
call in here: `tracer.Tracer`). The layers' packages are imported only when a layer of
theirs runs traced: importing this package needs none of them.
"""

from __future__ import annotations

from torch import nn

from lstmviz.torch.modern.layers import found


def alone(module: nn.Module, classic: bool) -> bool:
    """Whether `module` is traced here alone: it holds modern layers (traced or not) and,
    `classic` False, no nn.LSTM/GRU/RNN or cell (a module with those too is traced by
    `lstmviz.torch.tracer`, which joins `model.run`'s directions to them: `mixed`)."""
    traced, skipped = found(module)
    return not classic and bool(traced or skipped)


def notes(module: nn.Module) -> list[str]:
    """One line per modern layer not traced, naming it and why (for the model's summary)."""
    return [f"not traced: {name} ({why})" for name, _, why in found(module)[1]]


def trace(*args, **kwargs):
    """`model.trace` (imported when called)."""
    from lstmviz.torch.modern.model import trace as run

    return run(*args, **kwargs)
