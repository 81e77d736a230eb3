"""One record's rows of a recording (`.lvz`, `lstmviz.io.recording`), taken from a model-mode
trace. NumPy only.

The rows every record has (`SERIES`, and `LOSS_NAMES`): `step`, `epoch` (int64), `loss`,
`train_loss`, `record_seconds` (float32 scalars), the per-direction norms `NORM_KEYS` [L, T],
`saliency` [T] (the mean over the samples), and the loss's name (bytes).

The rows of the error of one step (`ANCHOR_KEYS`, docs/diagnosis.md), where the trace has
them: `anchors_by_layer` [L, A] (int64 input positions t*) and `anchor_norm_h_by_layer`,
`anchor_norm_c_by_layer` [L, A, T] (float32). A file holds them when its first record did
(HDF5 in SWMR mode cannot add a dataset later); a later record without them, or of another
A, gets the fill rows (`anchor_fill`): no anchor (-1), NaN norms, which the diagnosis reads as
"no error of one step in this record".
"""

from __future__ import annotations

import numpy as np

# The rows of a record drawn from the model trace: the per-direction norms over t.
NORM_KEYS = ("norm_h_total_by_layer", "norm_h_direct_by_layer", "norm_c_total_by_layer")
SERIES = ("step", "epoch", "loss", "train_loss", "record_seconds", *NORM_KEYS, "saliency")
# The error of one step followed back: anchors [L, A], their norms [L, A, T]
ANCHOR_KEYS = ("anchors_by_layer", "anchor_norm_h_by_layer", "anchor_norm_c_by_layer")
LOSS_NAMES = "loss_name"  # the rows of the loss's name, kept out of the checked arrays
LOSS_BYTES = 256  # the longest loss name a row holds (longer: cut, ending in "…")
NO_ANCHOR = -1  # a record's anchor row where it has no error of one step


def record_rows(
    trace,
    step: int,
    epoch: int,
    train_loss: float = np.nan,
    seconds: float = np.nan,
    loss_name: str | None = None,
) -> dict[str, np.ndarray]:
    """One record's rows (the `SERIES` keys, `LOSS_NAMES`, and the `ANCHOR_KEYS` the trace
    has) from a model-mode GradientTrace. `loss_name`: the loss it was computed with as the
    user knows it (its arguments too), else the trace config's."""
    arrays = trace.arrays
    rows = {
        "step": np.int64(step),
        "epoch": np.int64(epoch),
        "loss": np.float32(arrays["loss"]),
        "train_loss": np.float32(train_loss),
        "record_seconds": np.float32(seconds),
    }
    rows |= {key: np.asarray(arrays[key], np.float32) for key in NORM_KEYS}
    # a model of several inputs: the saliency of the first that reaches a recurrent layer
    key = "saliency" if "saliency" in arrays else next(
        (k for k in arrays if k.startswith("saliency_")), None)  # fmt: skip
    steps = np.shape(arrays["norm_h_total_by_layer"])[1]  # its longest direction's
    rows["saliency"] = np.full(steps, np.nan, np.float32)
    if key:
        mean = np.asarray(arrays[key], np.float32).mean(axis=0)[:steps]
        rows["saliency"][: len(mean)] = mean
    if all(key in arrays for key in ANCHOR_KEYS):
        rows["anchors_by_layer"] = np.asarray(arrays["anchors_by_layer"], np.int64)
        rows |= {key: np.asarray(arrays[key], np.float32) for key in ANCHOR_KEYS[1:]}
    rows[LOSS_NAMES] = np.bytes_(_cut(loss_name or trace.config.loss or "?"))
    return rows


def anchor_fill(key: str, shape: tuple[int, ...]) -> np.ndarray:
    """The row of anchor key `key` of `shape` for a record without an error of one step
    (or with another number of anchors than the file holds): NO_ANCHOR anchors, NaN norms."""
    if key == "anchors_by_layer":
        return np.full(shape, NO_ANCHOR, np.int64)
    return np.full(shape, np.nan, np.float32)


def _cut(name: str) -> bytes:
    """`name` in UTF-8 within LOSS_BYTES, cut at a character and ending in "…" when longer."""
    data = name.encode()
    if len(data) <= LOSS_BYTES:
        return data
    ellipsis = "…".encode()
    return data[: LOSS_BYTES - len(ellipsis)].decode(errors="ignore").encode() + ellipsis
