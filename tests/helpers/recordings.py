"""Recordings the tests write without TensorFlow: a model-mode trace of random arrays
(`model_trace`, its sizes `T`, `B`, `L`, `H`, its directions `NAMES`: module globals a writer
process may enlarge before calling it), a recording of such records (`write`), two traces
compared key by key (`same_trace`), and a disk that fills up under a RecordingWriter
(`fill_the_disk`, `full_disk`)."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np

from lstmviz.core.config import RunConfig
from lstmviz.io import recording
from lstmviz.io.recording import RecordingWriter, record_rows
from lstmviz.io.trace import GradientTrace

T, B, L, H = 6, 3, 2, 4
NAMES = ["bi/forward", "bi/backward"]


def model_trace(seed: int, nonfinite: int = 0) -> GradientTrace:
    """A model-mode trace of two directions with random arrays, every value from `seed`."""
    rng = np.random.default_rng(seed)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    arrays = {
        "x": rng.integers(1, 9, (T, B)).astype(np.int32),
        "y": rng.integers(0, 2, (B, 1)).astype(np.float32),
        "y_pred": r(B, 1),
        "loss": np.float32(rng.random()),
        "loss_by_sample": r(B),
        "layer_names": np.array(NAMES),
        "model_summary": np.array("Model 'toy'\n  emb  Embedding"),
        "lstm_kernel": np.array("native"),
        "grad_input": r(T, B, 5),
        "saliency": np.abs(r(B, T)),
        "mask": rng.random((T, B)) > 0.2,
        "nonfinite_steps": np.arange(nonfinite),
    }
    for k in range(L):
        for key in ("h", "c", "grad_h_total", "grad_c_total", "grad_h_direct"):
            arrays[f"layer{k}_{key}"] = r(T, B, H)
        arrays[f"layer{k}_grad_kernel"] = r(5, 4 * H)
        arrays[f"layer{k}_grad_recurrent_kernel"] = r(H, 4 * H)
        arrays[f"layer{k}_grad_bias"] = r(4 * H)
        arrays[f"layer{k}_gates_mean"] = r(4, T)
        arrays[f"layer{k}_gates_saturated"] = r(4, T)
    for key in ("norm_h_total", "norm_h_direct", "norm_c_total"):
        arrays[f"{key}_by_layer"] = np.abs(r(L, T))
    config = RunConfig(mode="model", steps=T, batch=B, input_dim=1, hidden=H,
                       loss="binary_crossentropy", model=None)  # fmt: skip
    return GradientTrace("model", config, arrays).check()


def write(path: Path, seeds, every: int = 5, close: bool = True) -> RecordingWriter:
    writer = RecordingWriter(path, every)
    for n, seed in enumerate(seeds, 1):
        trace = model_trace(seed, nonfinite=n % 3)
        writer.append(record_rows(trace, n * every, n // 2, train_loss=0.5 / n, seconds=0.1),
                      trace)  # fmt: skip
    if close:
        writer.close()
    return writer


def same_trace(a: GradientTrace, b: GradientTrace) -> None:
    assert a.mode == b.mode and a.config == b.config
    assert sorted(a.arrays) == sorted(b.arrays)
    for key in a.arrays:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        assert np.asarray(a[key]).dtype.kind == np.asarray(b[key]).dtype.kind, key


def full_disk(f: h5py.File) -> None:
    """From now on each write HDF5 makes to `f` fails as on a full disk (ENOSPC), the file on
    disk left as it is: the descriptor HDF5 writes through is pointed at /dev/full."""
    full = os.open("/dev/full", os.O_RDWR)
    os.dup2(full, f.id.get_vfd_handle())
    os.close(full)


def fill_the_disk(counter: str = "writing", value: int = 1) -> None:
    """Fill the disk of every RecordingWriter as it sets `counter` to `value`: "writing" to n,
    in the middle of record n (its rows written, its trace not), "finished" to 1 as `close`
    ends the file. HDF5 meets the failure where, and as, it would on a full disk."""
    set_counter = recording.writer._set

    def full_then_set(dataset: h5py.Dataset, to: int) -> None:
        if dataset.name == f"/{counter}" and to == value:
            full_disk(dataset.file)
        set_counter(dataset, to)

    recording.writer._set = full_then_set
