"""Traces the tests share: one per one-LSTM mode, computed once per test module (`traces`, a
fixture; `CONFIGS` and their sizes `T`, `P`, `N`, `S`), small ones made without running
anything (`small_trace`: taped, 10 × 2 × 3; `long_trace`: a training trace of many
timesteps; `decaying_trace`: gradients falling by 0.7 a step; `scaled_copy`: a trace's gradients
times k), and an exported CSV read back (`read_csv`)."""

from __future__ import annotations

import copy
import csv

import numpy as np
import pytest

from lstmviz.core.config import RunConfig
from lstmviz.io.trace import GradientTrace, step_norm

T, P, N, S = 12, 3, 3, 3
CONFIGS = {
    "taped": RunConfig(mode="taped", steps=T, batch=3, input_dim=2, hidden=4, loss="last_mse"),
    "multipass": RunConfig(mode="multipass", steps=T, passes=P, batch=3, input_dim=2, hidden=4),
    "batchwise": RunConfig(mode="batchwise", steps=T, batches=N, batch=2, input_dim=2, hidden=4),
    "train": RunConfig(mode="train", task="sine", train_steps=S, steps=T, batch=4, hidden=4),
}


def run_to_trace(config: RunConfig) -> GradientTrace:
    """The trace the runner ends with for `config`."""
    from lstmviz.engine.runner import run

    return next(item for item in run(config) if isinstance(item, GradientTrace))


@pytest.fixture(scope="module")
def traces():
    """A trace of each one-LSTM mode (`CONFIGS`), computed once per test module."""
    return {mode: run_to_trace(config) for mode, config in CONFIGS.items()}


def read_csv(path):
    """A CSV file's header and rows, as text."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    return rows[0], rows[1:]


def long_trace(steps: int = 300, rows: int = 4) -> GradientTrace:
    """A training trace of `rows` steps × `steps` timesteps of random norms."""
    rng = np.random.default_rng(3)
    norm = rng.random(steps).astype(np.float32) + 0.1
    arrays = {"norm_h_total": norm, "norm_h_direct": norm / 2, "norm_c_total": norm * 2,
              "norm_h_total_by_step": rng.random((rows, steps)).astype(np.float32) + 0.1,
              "loss_by_step": rng.random(rows).astype(np.float32)}  # fmt: skip
    config = RunConfig(mode="train", task="sine", steps=steps, train_steps=rows, hidden=4)
    return GradientTrace("train", config, arrays)


def small_trace(seed: int = 0) -> GradientTrace:
    g = np.random.default_rng(seed).standard_normal((10, 2, 3)).astype(np.float32)
    arrays = {"grad_h_total": g, "norm_h_total": step_norm(g), "loss": np.float32(1)}
    return GradientTrace("taped", RunConfig(steps=10, batch=2, hidden=3), arrays)


def decaying_trace(steps: int = 12, seed: int = 0) -> GradientTrace:
    """A taped-mode trace (B = 2, H = 3) whose gradients fall by exactly 0.7 per step back from
    the last."""
    B, H = 2, 3
    rng = np.random.default_rng(seed)
    scale = 0.7 ** np.arange(steps)[::-1]
    signs = rng.choice([-1.0, 1.0], (2, steps, B, H))  # norms exactly √(BH) · 0.7^n
    g_h, g_c = (signs * scale[:, None, None]).astype(np.float32)
    direct = np.zeros_like(g_h)
    direct[-1] = g_h[-1]
    arrays = {"grad_h_total": g_h, "grad_c_total": g_c, "grad_h_direct": direct,
              "norm_h_total": step_norm(g_h),
              "norm_c_total": step_norm(g_c),
              "norm_h_direct": step_norm(direct)}  # fmt: skip
    config = RunConfig(mode="taped", steps=steps, batch=B, hidden=H, loss="last_mse")
    return GradientTrace("taped", config, arrays)


def scaled_copy(trace: GradientTrace, k: float) -> GradientTrace:
    """A copy of `trace` with every gradient and norm times `k`."""
    out = copy.deepcopy(trace)
    for key in list(out.arrays):
        if key.startswith(("grad_", "norm_")):
            out.arrays[key] = (out.arrays[key] * k).astype(np.float32)
    return out
