"""Bad sizes, memory guard, non-finite values."""

import subprocess
import sys
import time

import numpy as np

from lstmviz.config import RunConfig
from lstmviz.engine.taped import taped_gradients
from lstmviz.errors import ConfigError
from lstmviz.weights import LSTMWeights, random_weights


def test_oversized_run_is_refused_quickly_naming_memory(tmp_path):
    out = tmp_path / "t.npz"
    cmd = [sys.executable, "-m", "lstmviz", "run", "--steps", "200000", "--batch", "512",
           "--hidden", "2048", "--out", str(out)]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - start
    assert done.returncode == 2
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "GiB" in line and "memory" in line, line
    assert not out.exists()
    assert elapsed < 30  # generous: a cold interpreter on a loaded machine; typically < 1 s


def test_memory_estimate_scales_and_compares():
    small = RunConfig(steps=100, batch=4, hidden=8)
    assert small.check_memory(available=2**30) is small
    big = RunConfig(steps=200_000, batch=512, hidden=2048)
    assert big.estimated_bytes() > 1000 * 2**30
    try:
        big.check_memory(available=24 * 2**30)
    except ConfigError as exc:
        assert exc.flag == "memory" and "GiB" in str(exc)
    else:
        raise AssertionError("expected ConfigError")
    multi = RunConfig(mode="multipass", steps=100, passes=4, batch=4, hidden=8)
    assert multi.estimated_bytes() > 4 * small.estimated_bytes()


def test_nan_in_kernel_is_reported_not_crashed_on(rng):
    w = random_weights(3, 4, rng)
    kernel = w.kernel.copy()
    kernel[0, 0] = np.nan
    bad = LSTMWeights(kernel, w.recurrent_kernel, w.bias)
    assert bad.nonfinite() == ["kernel"]
    x = rng.standard_normal((6, 2, 3))
    x[:2] = 0.0  # x[t, :, 0] == 0 for t < 2, but NaN * 0 is still NaN: every step is hit
    trace = taped_gradients(x, bad)
    assert list(trace.nonfinite_steps) == list(range(6))


def test_exploding_steps_are_located(rng):
    w = random_weights(3, 4, rng)
    x = rng.standard_normal((8, 2, 3)).astype(np.float32)
    x[5, 0, 0] = np.nan  # one input goes non-finite at t = 5 (Inf would only saturate gates)
    trace = taped_gradients(x, w, loss="seq_mse", target=np.zeros((8, 2, 4)))
    assert trace.nonfinite_steps.dtype.kind == "i"
    # States go non-finite from t = 5 on; the gradients of every earlier step depend on them.
    assert not np.isfinite(trace.h[5:]).all(axis=(1, 2)).any()
    assert np.isfinite(trace.h[:5]).all()
    assert list(trace.nonfinite_steps) == list(range(8))
    clean = taped_gradients(np.nan_to_num(x), w)
    assert clean.nonfinite_steps.size == 0


def test_cli_warns_on_non_finite(tmp_path, monkeypatch, capsys):
    from lstmviz import cli
    from lstmviz.engine import problem as problem_module

    original = problem_module.seeded_problem

    def with_nan(config, steps=None):
        p = original(config, steps)
        p.x[3] = np.nan
        return p

    monkeypatch.setattr("lstmviz.engine.taped.seeded_problem", with_nan)
    out = tmp_path / "t.npz"
    argv = ["run", "--steps", "6", "--batch", "2", "--hidden", "3", "--quiet", "--out", str(out)]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "NaN or Inf at 6 timestep(s)" in err and "first non-finite state at t=3" in err
    assert out.exists()
