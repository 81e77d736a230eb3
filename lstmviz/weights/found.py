"""What a file reader returns: candidate LSTM weight sets in Keras's layout, not yet validated."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lstmviz.errors import WeightsError
from lstmviz.inputs import beyond_float32

# A guard against corrupt headers that claim huge arrays (2^30 float32 values = 4 GiB).
MAX_VALUES = 2**30


@dataclass
class FoundLayer:
    """One recurrent layer found in a file.

    `arrays` holds `kernel`, `recurrent_kernel` and optionally `bias` (Keras layout); `aliases`
    are other names `layer=` accepts (e.g. the path inside the file); `note` is shown with the
    name; `problem`, when set, says why the layer cannot be used.

    For reading several layers as a stack: `owner` names the model layer the weights belong to
    (a Bidirectional's name for both of its halves), `direction` is "forward" or "backward" for
    a half of a Bidirectional ("" otherwise) and `order` sorts the layers as the model runs them.
    """

    name: str
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    note: str = ""
    problem: str = ""
    owner: str = ""
    direction: str = ""
    order: tuple[int, ...] = ()


def numeric(name: str, value) -> np.ndarray:
    """`value` as a NumPy array of numbers, or a WeightsError naming the array: not numbers,
    or values that float32 (what the engines compute in) cannot hold."""
    size = int(np.prod(np.shape(value), dtype=np.int64))
    if size > MAX_VALUES:
        raise WeightsError(f"{name} claims {size} values, more than lstmviz reads")
    dtype = np.dtype(getattr(value, "dtype", None) or np.asarray(value).dtype)
    if dtype.kind not in "fiu":
        raise WeightsError(f"{name} has dtype {dtype}, not numbers")
    array = np.asarray(value)
    if (largest := beyond_float32(array)) is not None:
        raise WeightsError(f"{name} holds {largest:.3g}, beyond float32's range (±3.4e38)")
    return array
