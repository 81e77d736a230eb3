"""Which modules are modern recurrent layers, by their class (the packages are never imported
here: a class is known by its module and name), and which of them lstmviz cannot trace, why.

Known: mingru-pytorch's `minGRU` and `minLSTM`, mambapy's `MambaBlock`, lru-pytorch's `LRU`,
xlstm's sLSTM cell on its "vanilla" backend and its mLSTM cell. Recognised but not traced (one
line each, the rest of the model traced): a MambaBlock set to use the CUDA kernels
(`config.use_cuda`), mambapy's `Mamba2Block` (mamba_ssm's Triton kernels only), xlstm's sLSTM
cell on its CUDA backend, a subclass of a known class that has a forward of its own (an unknown
variant).
"""

from __future__ import annotations

from torch import nn

# (module, class) -> cell kind
KNOWN = {
    ("minGRU_pytorch.minGRU", "minGRU"): "mingru",
    ("minGRU_pytorch.minLSTM", "minLSTM"): "minlstm",
    ("mambapy.mamba", "MambaBlock"): "mamba",
    ("LRU_pytorch.LRU", "LRU"): "lru",
    ("xlstm.blocks.slstm.cell", "sLSTMCell_vanilla"): "slstm",  # inside an sLSTMLayer
    ("xlstm.blocks.mlstm.cell", "mLSTMCell"): "mlstm",  # inside an mLSTMLayer
}
# (module prefix, class) -> why it is not traced
UNTRACED = {
    ("mambapy.mamba2", "Mamba2Block"): "Mamba-2 runs only on mamba_ssm's CUDA/Triton kernels",
    ("xlstm", "sLSTMCell_cuda"): "xLSTM's sLSTM CUDA kernel (backend=\"cuda\"); the "
    "\"vanilla\" backend is traced",
}


def _key(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__


def kind_of(sub: nn.Module) -> str | None:
    """The cell kind of a module lstmviz traces as a modern layer, else None."""
    return KNOWN.get(_key(type(sub)))


def untraced(sub: nn.Module) -> str | None:
    """Why a modern layer (or one derived from one) is not traced; None when it is, or when it
    is no modern layer."""
    module, name = _key(type(sub))
    for (prefix, cls), why in UNTRACED.items():
        if name == cls and module.startswith(prefix):
            return why
    for base in type(sub).__mro__[1:]:
        if _key(base) in KNOWN and "forward" in vars(type(sub)):
            return (f"a subclass of {base.__qualname__} with a forward of its own (an unknown "
                    "variant)")  # fmt: skip
    if base_kind(sub) == "slstm" and getattr(sub.config, "function", "slstm") != "slstm":
        return f"an sLSTM cell computing {sub.config.function!r} (only \"slstm\" is traced)"
    if base_kind(sub) == "mamba" and getattr(sub.config, "use_cuda", False):
        return "set to run mamba_ssm's CUDA selective scan (config.use_cuda), which has no CPU path"
    return None


def base_kind(sub: nn.Module) -> str | None:
    """The kind of a known class or of a subclass that keeps its forward."""
    kind = kind_of(sub)
    if kind is not None:
        return kind
    for base in type(sub).__mro__[1:]:
        if _key(base) in KNOWN and "forward" not in vars(type(sub)):
            return KNOWN[_key(base)]
    return None


def found(module: nn.Module) -> tuple[list[tuple[str, nn.Module, str]], list[tuple]]:
    """([(name, module, kind)] of the modern layers traced, [(name, module, why)] of those that
    are not), in module order; names are attribute paths with "/" (the class in lower case for the
    module itself)."""
    traced, skipped = [], []
    for path, sub in module.named_modules():
        name = path.replace(".", "/") or type(sub).__name__.lower()
        why = untraced(sub)
        if why is not None:
            skipped.append((name, sub, f"{type(sub).__name__}: {why}"))
            continue
        kind = base_kind(sub)
        if kind is not None:
            traced.append((name, sub, kind))
    return traced, skipped
