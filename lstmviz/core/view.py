"""How a trace or a recording is drawn: one value the window, the exports, `lstmviz.plot` and
the figures share instead of long argument lists."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class ViewOptions:
    """`log`: log10 axes for the norms (View → Log scale). `normalise`: each pass's curve divided
    by its largest value (View → Normalise per pass). `layer`: the direction a model trace's gates
    and per-unit panels show (an index into `layer_names`). `record`: a recording's record (from
    0, negative from the end; None: the last). `t_range`: the timesteps [start, stop) a
    recording's heatmap shows (None: every t). `anchored`: a model trace's curves of the error of
    one step (`anchor_norm_h_by_layer` [L, A, T]) beside the full gradient (View → Error of one
    step t*). `anchor`: which of the trace's A anchors they show (an index a from 0; None: for
    each direction the one its diagnosis follows, the median of its anchors' decays)."""

    log: bool = True
    normalise: bool = False
    layer: int = 0
    record: int | None = None
    t_range: tuple[int, int] | None = None
    anchored: bool = False
    anchor: int | None = None

    def but(self, **changes) -> ViewOptions:
        """A copy with `changes` (field=value) applied."""
        return replace(self, **changes)

    @classmethod
    def given(cls, view: ViewOptions | None = None, **keywords) -> ViewOptions:
        """`view` (default: ViewOptions()) with the `keywords` (log=…, layer=…) that differ
        from the defaults applied: what a function taking both `view=` and the separate
        keywords draws. Anything but a ViewOptions as `view` is a TypeError."""
        if view is not None and not isinstance(view, ViewOptions):
            raise TypeError(f"view takes a lstmviz.ViewOptions, not a {type(view).__name__}")
        default = cls()
        changed = {name: value for name, value in keywords.items()
                   if not _same(value, getattr(default, name))}  # fmt: skip
        return replace(view or default, **changed)


def _same(value, default) -> bool:
    """Whether `value` is the default itself (not merely equal to it: an array compares
    element by element)."""
    return value is default or (type(value) is type(default) and value == default)


DEFAULT_VIEW = ViewOptions()  # how a trace is drawn when nothing else is asked
