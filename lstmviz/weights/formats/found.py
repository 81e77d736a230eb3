"""What a file reader returns: candidate LSTM weight sets in Keras's layout, not yet validated."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from lstmviz.core.errors import WeightsError
from lstmviz.io.inputs import beyond_float32

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

    `kind`: "lstm", "gru" or "simple_rnn" when the file says it (a PyTorch layout: by its
    shapes), "" when only the Keras-layout arrays' shapes tell (see `found_kind`); `args`: the
    cell's arguments the file gives beyond Keras's defaults (e.g. {"activation": "relu"});
    `pytorch`: the arrays were converted from PyTorch's layout.
    """

    name: str
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    note: str = ""
    problem: str = ""
    owner: str = ""
    direction: str = ""
    order: tuple[int, ...] = ()
    kind: str = ""
    args: dict = field(default_factory=dict)
    pytorch: bool = False


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


def found_kind(layer: FoundLayer) -> str:
    """The kind of cell a found layer holds: its `kind`, else the one whose gate count its
    Keras-layout recurrent_kernel [H, GH] has (4 LSTM, 3 GRU, 1 SimpleRNN; "lstm" when the
    shapes say none, and the LSTM check names what is wrong)."""
    if layer.kind:
        return layer.kind
    shape = np.shape(layer.arrays.get("recurrent_kernel"))
    if len(shape) == 2 and shape[0] > 0 and shape[1] in (3 * shape[0], shape[0]):
        return "gru" if shape[1] == 3 * shape[0] else "simple_rnn"
    return "lstm"


# The class names of the kinds of cell, in Keras and PyTorch.
KERAS_CLASSES = {"lstm": "LSTM", "gru": "GRU", "simple_rnn": "SimpleRNN"}
TORCH_CLASSES = {"lstm": "nn.LSTM", "gru": "nn.GRU", "simple_rnn": "nn.RNN"}


def class_of(layer: FoundLayer) -> str:
    """The layer's class as its framework names it ("GRU", "nn.RNN", …)."""
    return (TORCH_CLASSES if layer.pytorch else KERAS_CLASSES)[found_kind(layer)]
