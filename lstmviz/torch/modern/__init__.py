"""Modern recurrent layers in PyTorch modules (the optional extra `lstmviz[modern]`): minGRU and
minLSTM (mingru-pytorch), Mamba's selective SSM (mambapy), the LRU (lru-pytorch) and xLSTM's
sLSTM and mLSTM (xlstm), found in a module by their class and traced through their state
(docs/modern-recurrence.md).

Holds: `layers` (which classes, which are not traced and why), `piece` (one call's record),
`mingru`, `ssm` and `xlstm` (their forwards, the state tapped), `scan` (the totals: a reverse linear
scan of the direct gradient with the per-step decay), `model` (model mode's arrays for them).
May import PyTorch, `lstmviz.core`, `lstmviz.io`; never `lstmviz.torch`'s other modules (they
call in here: `tracer.Tracer`). The layers' packages are imported only when a layer of
theirs runs traced: importing this package needs none of them.
"""

from __future__ import annotations

from torch import nn

from lstmviz.torch.modern.layers import found


def alone(module: nn.Module, classic: bool) -> bool:
    """Whether `module` is traced here: it holds modern layers (traced or not) and, `classic`
    False, no nn.LSTM/GRU/RNN or cell (those are traced by `lstmviz.torch.tracer`)."""
    traced, skipped = found(module)
    return not classic and bool(traced or skipped)


def notes(module: nn.Module, classic: bool) -> list[str]:
    """One line per modern layer not traced, naming it and why (for the model's summary)."""
    traced, skipped = found(module)
    lines = [f"not traced: {name} ({why})" for name, _, why in skipped]
    if classic:
        lines += [f"not traced: {name} ({type(sub).__name__}: in a module with nn.LSTM/GRU/RNN "
                  "layers only those are traced)" for name, sub, _ in traced]  # fmt: skip
    return lines


def trace(*args, **kwargs):
    """`model.trace` (imported when called)."""
    from lstmviz.torch.modern.model import trace as run

    return run(*args, **kwargs)
