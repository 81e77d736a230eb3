"""A trace's or a recording's arrays grouped by shape and dtype, as their text and HTML reprs
list them (NumPy only)."""

from __future__ import annotations

import numpy as np

TEXT_VALUES = 16  # a 1-D text array up to this long is shown as its values (`layer_names`)


def array_groups(arrays) -> tuple[dict[str, list[str]], list[tuple[str, np.ndarray]]]:
    """A trace's arrays as its reprs list them: {"[T, B, H] float32": keys} in key order, and
    apart, (key, value) of those shown as values: scalars and 1-D text of at most TEXT_VALUES
    entries (`layer_names`)."""
    groups: dict[str, list[str]] = {}
    shown = []
    for key in sorted(arrays):
        value = np.asarray(arrays[key])
        if value.ndim == 0 or (value.ndim == 1 and value.dtype.kind == "U"
                               and value.size <= TEXT_VALUES):  # fmt: skip
            shown.append((key, value))
        else:
            groups.setdefault(f"[{', '.join(map(str, value.shape))}] {value.dtype}", []).append(key)
    return groups, shown
