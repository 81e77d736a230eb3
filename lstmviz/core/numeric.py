"""Arrays handed in by callers (the Python API, files), as the engines keep them."""

from __future__ import annotations

import numpy as np

from lstmviz.core.errors import InputError, LstmvizError


def float32_copy(value, what: str, error: type[LstmvizError] = InputError) -> np.ndarray:
    """`value` as a new float32 array, never a view of the caller's (a trace must not change
    when its caller reuses the buffer), or `error` naming `what` when it is not real numbers
    (complex values would lose their imaginary part, text and ragged lists cannot convert)."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise error(f"{what} is not an array of numbers ({exc})") from None
    if array.dtype.kind not in "biuf":
        raise error(f"{what} has dtype {array.dtype}, not real numbers")
    return np.array(array, dtype=np.float32, copy=True)
