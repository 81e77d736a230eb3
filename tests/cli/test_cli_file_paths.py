"""`lstmviz run` writes the files it read into the trace's config by their absolute paths, so
the trace opens (and runs again) from any working folder."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lstmviz.io.trace import GradientTrace
from lstmviz.weights import random_weights

ROOT = Path(__file__).resolve().parents[2]


def write_weights(path: Path, seed: int) -> None:
    w = random_weights(3, 4, np.random.default_rng(seed))
    np.savez(path, kernel=w.kernel, recurrent_kernel=w.recurrent_kernel, bias=w.bias)


@pytest.mark.parametrize("mode", ["taped", "batchwise"])
def test_a_trace_names_the_files_it_read_by_their_whole_paths(tmp_path, mode):
    folder = tmp_path / "work"
    folder.mkdir()
    for seed in (1, 2):
        write_weights(folder / f"w{seed}.npz", seed)
    np.save(folder / "x.npy", np.random.default_rng(0).standard_normal((2, 5, 3)))
    flags = {"taped": ["--weights", "w1.npz", "--inputs", "x.npy"],
             "batchwise": ["--weights", "w1.npz,w2.npz", "--generator", "files",
                           "--batches", "2", "--steps", "5"]}[mode]  # fmt: skip
    command = [sys.executable, "-m", "lstmviz", "run", "--mode", mode, *flags,
               "--quiet", "--out", "t.npz"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr
    config = GradientTrace.load(folder / "t.npz").config
    assert config.inputs == (str(folder / "x.npy") if mode == "taped" else None)
    named = [folder / "w1.npz"] + ([folder / "w2.npz"] if mode == "batchwise" else [])
    assert config.weights == ",".join(map(str, named))


def test_a_trace_saved_from_python_names_its_files_by_their_whole_paths(tmp_path, monkeypatch):
    """A notebook's `trace.save` too: the trace opens from another folder (the window's)."""
    import lstmviz
    from lstmviz.core.config import RunConfig
    from lstmviz.io.trace import GradientTrace

    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32))
    *_, trace = lstmviz.run(RunConfig(steps=5, batch=2, input_dim=3, hidden=4, inputs="x.npy"))
    assert trace.config.inputs == "x.npy"  # as given
    path = trace.save(tmp_path / "t.npz")
    assert GradientTrace.load(path).config.inputs == str(tmp_path / "x.npy")
