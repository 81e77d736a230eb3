"""Stand-ins for `runner.run` that the window's computing process runs (`Worker.engine`): module
level, so they cross to that process by name (with functools.partial for their arguments)."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import numpy as np

from lstmviz.io.trace import GradientTrace, TraceUpdate, step_norm

PASSES, TP = 4, 10


def multipass(config, cancelled=bool, keep=bool, delay: float = 0.0):
    """The multi-pass engine's shape of output: live rows per pass, then a final trace; when
    cancelled with `keep()` after some passes, the trace of those (as `runner.run` says)."""
    rng = np.random.default_rng(0)
    full = rng.uniform(0.1, 1.0, (PASSES, TP)).astype(np.float32)
    g = rng.standard_normal((PASSES * TP, 3, 5)).astype(np.float32)
    for p in range(PASSES):
        if cancelled():
            if keep() and p:
                kept = dataclasses.replace(config, passes=p)
                yield _multipass_trace(kept, full[:p], g[: p * TP], stopped=(p, PASSES))
            return
        time.sleep(delay)
        done = full[: p + 1]
        rows = {"norm_h_total_by_pass": done, "norm_h_truncated_by_pass": done / 2}
        yield TraceUpdate(p + 1, PASSES, f"pass {p + 1}/{PASSES}", rows)
    yield _multipass_trace(config, full, g)


def _multipass_trace(config, full, g, stopped: tuple[int, int] | None = None) -> GradientTrace:
    arrays = dict(
        grad_h_total=g,
        norm_h_total=step_norm(g),
        norm_h_total_by_pass=full,
        norm_h_truncated_by_pass=full / 2,
        pass_length=np.int32(TP),
        max_abs_diff_full_vs_reference=np.float32(3e-8),
        loss=np.float32(0.25),
    )
    if stopped is not None:
        arrays.update(stopped=np.array("cancelled"), units_done=np.int64(stopped[0]),
                      units_requested=np.int64(stopped[1]))  # fmt: skip
    return GradientTrace("multipass", config, arrays)


def broken(config, cancelled=bool, keep=bool):
    raise RuntimeError("engine exploded")


def crash(config, cancelled=bool, keep=bool):
    """One update, then the process dies as a crash in native code would."""
    import signal

    yield TraceUpdate(0, 1, "computing")
    os.kill(os.getpid(), signal.SIGSEGV)


def stuck(config, cancelled=bool, keep=bool, heartbeat: str = "", polls: bool = False):
    """One update, then work that never looks at `cancelled()` (like TensorFlow tracing a
    function), appending a line to `heartbeat` every 5 ms while it computes. With `polls` it
    looks between beats and ends when cancelled."""
    yield TraceUpdate(0, 1, "computing")
    with open(heartbeat, "a") as beats:
        while not (polls and cancelled()):
            beats.write(f"{os.getpid()} {time.monotonic()}\n")
            beats.flush()
            end = time.perf_counter() + 0.005
            while time.perf_counter() < end:  # busy, holding the CPU
                pass


def beats(heartbeat: str) -> int:
    """How many beats `stuck` has written."""
    path = Path(heartbeat)
    return len(path.read_text().splitlines()) if path.exists() else 0


_SPECS: dict = {}


def same_model(config, cancelled=bool, keep=bool):
    """`runner.run` with each model file read once in the process: a second run of the same
    model reuses the function compiled for it, so it computes at once instead of tracing."""
    from lstmviz.engine import runner
    from lstmviz.weights import model_files

    if model_files.load_model is not _read_once:
        _SPECS["read"] = model_files.load_model
        model_files.load_model = _read_once
    return runner.run(config, cancelled, keep)


def _read_once(path):
    if str(path) not in _SPECS:
        _SPECS[str(path)] = _SPECS["read"](path)
    return _SPECS[str(path)]
