"""What the window's worker (`gui/threads/worker.py`) and its computing process
(`engine/process/computing.py`) say to each other: small frozen dataclasses, pickled through the
connection between them. This module imports neither TensorFlow nor Qt (the window's process imports
it).

To the computing process: `Run`, `Verify`, `Save` (requests, answered in the order sent), and
`Cancel`, `Finish`, `Pause`, `Resume` (applied at once to the run they name), `Close`.

From it: `Notice` (a line for the status bar: a first run building the native kernels, before
`Ready`), `Ready` once TensorFlow is imported, or `Broken` when it cannot be; per run `Started`,
then `Progress` and `Paused` any number of times, and one of `Finished`, `Cancelled`,
`Failed`; `Verified` answers a `Verify`, `Saved` a `Save`.

A run's final arrays cross as `.npy` files in the run's folder (`computing.pack`): `Packed` maps
each key to its array (small ones) or to the path of its file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Packed = dict[str, "np.ndarray | str"]  # `computing.pack`: key → array, or the path of its .npy


@dataclass(frozen=True)
class PackedTrace:
    """A trace as it crosses: its mode, its RunConfig and its packed arrays."""

    mode: str
    config: Any
    arrays: Packed


# ---- to the computing process -----------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """Run `config` (a RunConfig) with `engine`: None (`runner.run`) or a picklable function
    with its signature; the final arrays go into `folder`."""

    run_id: int
    config: Any
    engine: Callable | None
    folder: str


@dataclass(frozen=True)
class Verify:
    """Check a trace's gradients by finite differences (`Verified` answers). `trace`: a
    PackedTrace (in the worker's own queue, the GradientTrace it packs before sending)."""

    request_id: int
    trace: PackedTrace


@dataclass(frozen=True)
class Save:
    """Write a training trace's final weights to `path` (`Saved` answers); `trace` as in
    `Verify`."""

    request_id: int
    trace: PackedTrace
    path: str


@dataclass(frozen=True)
class Cancel:
    """Stop run `run_id` at its next unit of work (or never start it)."""

    run_id: int


@dataclass(frozen=True)
class Finish:
    """Stop run `run_id`, keeping the units it has done as a complete trace."""

    run_id: int


@dataclass(frozen=True)
class Pause:
    """Hold run `run_id` at its next unit of work until `Resume`, `Cancel` or `Finish`."""

    run_id: int


@dataclass(frozen=True)
class Resume:
    run_id: int


@dataclass(frozen=True)
class Close:
    """End the computing process (what it computes is dropped)."""


Request = Run | Verify | Save  # the requests the process answers, one at a time
Control = Cancel | Finish | Pause | Resume  # applied at once by the process's reader thread


# ---- from the computing process ---------------------------------------------------------------


@dataclass(frozen=True)
class Notice:
    """A line for the window's status bar (`kernels.report_to`: building the native kernels on
    an installed copy's first run, and how long it took, or why they are not built)."""

    text: str


@dataclass(frozen=True)
class Ready:
    """TensorFlow is imported: `device` is `engine.device.device_description()`."""

    device: dict


@dataclass(frozen=True)
class Broken:
    """TensorFlow cannot be imported: why (the process ends)."""

    message: str


@dataclass(frozen=True)
class Started:
    run_id: int


@dataclass(frozen=True)
class Progress:
    """A run's partial result: `update` is a TraceUpdate."""

    run_id: int
    update: Any


@dataclass(frozen=True)
class Paused:
    """Run `run_id` is held after `done` units of work."""

    run_id: int
    done: int


@dataclass(frozen=True)
class Finished:
    """Run `run_id` ended with a trace (its arrays packed into the run's folder)."""

    run_id: int
    trace: PackedTrace


@dataclass(frozen=True)
class Cancelled:
    run_id: int


@dataclass(frozen=True)
class Failed:
    """Run `run_id` failed: one line for bad input, the traceback for a bug."""

    run_id: int
    message: str


@dataclass(frozen=True)
class Verified:
    """`result`: a `verify.Verification`, or the message (str) of why it could not be made."""

    request_id: int
    result: Any


@dataclass(frozen=True)
class Saved:
    """`path` written (or ""), `error` (or "")."""

    request_id: int
    path: str
    error: str


RunEnd = Finished | Cancelled | Failed
