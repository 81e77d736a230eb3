"""A taped run's progress line said "taped while-loop, T=…" while the native kernels ran: it
now names what computes the LSTM, as the trace's `lstm_kernel` records it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from lstmviz.core import modes
from lstmviz.core.config import RunConfig
from lstmviz.engine.modes.taped import run_taped
from lstmviz.io.trace import GradientTrace, TraceUpdate

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXPECTED = {"native": "taped, native kernels, T=6", "while_loop": "taped while-loop, T=6"}


def test_the_progress_line_names_the_implementation_the_trace_records():
    items = list(run_taped(RunConfig(mode="taped", steps=6, batch=2, input_dim=3, hidden=4)))
    first, trace = items[0], items[-1]
    assert isinstance(first, TraceUpdate) and isinstance(trace, GradientTrace)
    assert first.message == EXPECTED[str(trace["lstm_kernel"])]


@pytest.mark.slow
def test_the_command_line_says_while_loop_only_where_it_runs(tmp_path):
    """Both implementations, each in a process of its own (the choice is made once a process)."""
    argv = [sys.executable, "-m", "lstmviz", "run", "--mode", "taped", "--steps", "6", "--batch",
            "2", "--input-dim", "3", "--hidden", "4"]  # fmt: skip
    env = os.environ | {"PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}
    for native in ("1", "0"):
        out = tmp_path / f"t{native}.npz"
        done = subprocess.run([*argv, "--out", str(out)], capture_output=True, text=True,
                              env=env | {"LSTMVIZ_NATIVE": native}, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        kernel = str(np.asarray(GradientTrace.load(out)["lstm_kernel"]))
        if native == "0":
            assert kernel == "while_loop"
        assert f"[taped] 0/1 {EXPECTED[kernel]} ·" in done.stderr
        others = [text for name, text in EXPECTED.items() if name != kernel]
        assert not any(text in done.stderr for text in others)


def test_the_modes_name_is_the_engine_not_one_implementation():
    """The mode combo box, the window title and the figure title show the label."""
    assert modes.label("taped") == "taped"
    assert "while" not in modes.label("taped")
