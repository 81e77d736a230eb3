"""Trace files and the CLI: bit-exact round trip, atomic writes, exit codes, a fresh process."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lstmviz.cli import main
from lstmviz.core.config import RANGES, RunConfig
from lstmviz.core.errors import TraceError
from lstmviz.io.trace import GradientTrace
from tests.helpers.references.reference import np_bptt, np_loss

ENV = os.environ | {"TF_CPP_MIN_LOG_LEVEL": "2"}


def test_round_trip_is_bit_exact(tmp_path, rng):
    arrays = {
        "h": rng.standard_normal((5, 2, 3)).astype(np.float32),
        "loss": np.float32(0.25),
        "nonfinite_steps": np.array([1, 4], np.int64),
        "norm_h_total": np.array([np.nan, np.inf, -0.0, 1.0, 2.0], np.float32),
    }
    config = RunConfig(steps=5, batch=2, hidden=3, loss="seq_mse", seed=7)
    path = GradientTrace("taped", config, arrays).save(tmp_path / "a.npz")
    back = GradientTrace.load(path)
    assert back.mode == "taped" and back.config == config
    assert sorted(back.arrays) == sorted(arrays)
    for key, value in arrays.items():
        assert back[key].dtype == np.asarray(value).dtype
        assert np.asarray(value).tobytes() == back[key].tobytes(), key
    assert [p.name for p in tmp_path.iterdir()] == ["a.npz"]  # no temporary left


def test_failed_write_leaves_old_file_untouched(tmp_path):
    path = tmp_path / "t.npz"
    GradientTrace("taped", RunConfig(), {"bias": np.ones(4, np.float32)}).save(path)
    before = path.read_bytes()
    bad = GradientTrace("taped", RunConfig(), {"bias": np.array([object()], dtype=object)})
    with pytest.raises(TraceError, match="unsupported dtype"):
        bad.save(path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.npz"]


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"", "not a readable"), (b"PK\x03\x04garbage", "not a readable"), (None, "not an lstmviz")],
)
def test_corrupt_or_foreign_trace_is_refused(tmp_path, content, message):
    path = tmp_path / "bad.npz"
    if content is None:
        np.savez(path, something=np.ones(2))
    else:
        path.write_bytes(content)
    with pytest.raises(TraceError, match=message):
        GradientTrace.load(path)


def test_pickled_arrays_are_refused(tmp_path):
    path = tmp_path / "p.npz"
    np.savez(path, mode=np.array("taped"), config_json=np.array("{}"), evil=np.array([{}], object))
    with pytest.raises(TraceError, match="corrupt or foreign"):
        GradientTrace.load(path)


@pytest.mark.slow
def test_cli_trace_matches_independent_bptt_in_a_fresh_process(tmp_path):
    out = tmp_path / "t.npz"
    cmd = [sys.executable, "-m", "lstmviz", "run", "--mode", "taped", "--steps", "37", "--batch",
           "3", "--input-dim", "5", "--hidden", "7", "--loss", "last_mse", "--seed", "11",
           "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    check = textwrap.dedent(f"""
        import numpy as np
        from lstmviz.io.trace import GradientTrace
        t = GradientTrace.load({str(out)!r})
        print(t.mode, t.config.steps, t.grad_h_total.shape)
    """)
    fresh = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=ENV)
    assert fresh.stdout.split() == ["taped", "37", "(37,", "3,", "7)"], fresh.stderr
    trace = GradientTrace.load(out)
    h = trace.h.astype(np.float64)
    _, direct = np_loss("last_mse", h, trace.target)
    ref = np_bptt(trace.x, trace.kernel, trace.recurrent_kernel, trace.bias, trace.h0, trace.c0,
                  direct)  # fmt: skip
    for key, ref_key in [
        ("grad_h_total", "dh"),
        ("grad_c_total", "dc"),
        ("grad_kernel", "dkernel"),
    ]:
        rel = np.max(np.abs(trace[key] - ref[ref_key])) / np.max(np.abs(ref[ref_key]))
        assert rel < 1e-4, key
    for key in ["mode", "config_json"]:
        assert key not in trace.arrays
    with np.load(out) as raw:
        assert {"mode", "config_json", "x", "kernel", "recurrent_kernel", "bias", "h0", "c0",
                "target", "loss", "h", "c", "grad_h_total", "grad_c_total", "grad_h_direct",
                "grad_kernel", "grad_recurrent_kernel", "grad_bias", "norm_h_total",
                "norm_h_direct", "norm_c_total"} <= set(raw.files)  # fmt: skip


def test_same_seed_same_trace(tmp_path):
    paths = [tmp_path / "a.npz", tmp_path / "b.npz"]
    for path in paths:
        assert main(["run", "--steps", "6", "--batch", "2", "--input-dim", "3", "--hidden", "4",
                     "--loss", "seq_mse", "--seed", "3", "--random-state", "--quiet",
                     "--out", str(path)]) == 0  # fmt: skip
    a, b = (GradientTrace.load(p) for p in paths)
    for key in a.arrays:
        np.testing.assert_array_equal(a[key], b[key])
    assert np.any(a.h0 != 0)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--steps", "0"], "--steps"),
        (["--hidden", "-3"], "--hidden"),
        (["--batch", "many"], "--batch"),
        (["--mode", "bogus"], "--mode"),
        (["--loss", "l1"], "--loss"),
        (["--seed", "-1"], "--seed"),
        (["--out", "trace.txt"], "--out"),
        (["--out", "/no/such/dir/t.npz"], "--out"),
    ],
)
def test_bad_flags_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, argv, needle):
    base = ["run", "--steps", "4", "--out", str(tmp_path / "t.npz")]
    code = main(base + argv) if "--out" not in argv else main(base[:3] + argv)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_console_script_exits_2_on_a_usage_error(tmp_path):
    out = str(tmp_path / "t.npz")
    cmd = [sys.executable, "-m", "lstmviz", "run", "--hidden", "0", "--out", out]
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    assert done.returncode == 2
    assert done.stderr.strip() == "lstmviz: error: --hidden: 0 is out of range [1, 16384]"
    assert list(tmp_path.iterdir()) == []


def test_run_help_gives_every_range_and_default(capsys):
    """`lstmviz run --help` shows the range and the default of every flag that has them, as
    the checks use them (RANGES, RunConfig's defaults)."""
    assert main(["run", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.lower().split())
    defaults = RunConfig()
    for name, (lo, hi) in RANGES.items():
        assert f"[{lo}, {hi}], default {getattr(defaults, name)}" in text, name
    for name in ("mode", "loss", "generator", "task"):
        assert f"default {getattr(defaults, name)}." in text, name


def test_load_names_a_folder_as_a_folder_not_as_missing(tmp_path):
    (tmp_path / "runs.npz").mkdir()
    with pytest.raises(TraceError, match=r"runs\.npz: is a folder, not a trace file$"):
        GradientTrace.load(tmp_path / "runs.npz")
    with pytest.raises(TraceError, match=r"gone\.npz: no such trace file$"):
        GradientTrace.load(tmp_path / "gone.npz")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_stdout_that_takes_nothing_fails_no_export(tmp_path):
    """`lstmviz export … > /dev/full` (and `| head`, which closes the pipe) wrote the file
    and then ended in a traceback and exit 1 printing "wrote …"."""
    trace = tmp_path / "t.npz"
    GradientTrace("taped", RunConfig(steps=3, batch=1, hidden=2),
                  {"norm_h_total": np.ones(3, np.float32)}).save(trace)  # fmt: skip
    command = [sys.executable, "-m", "lstmviz", "export", str(trace), "--csv"]
    with open("/dev/full", "w") as full:
        done = subprocess.run([*command, str(tmp_path / "a.csv")], stdout=full,
                              stderr=subprocess.PIPE, text=True, env=ENV, timeout=120)  # fmt: skip
    assert done.returncode == 0 and (tmp_path / "a.csv").is_file()
    assert done.stderr.strip().splitlines() == [
        "lstmviz: could not print on stdout (No space left on device); the files are written"
    ]
    closed = subprocess.Popen([*command, str(tmp_path / "b.csv")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=ENV)  # fmt: skip
    closed.stdout.close()  # a reader that has gone, as `| head` does once it has its lines
    assert closed.wait(timeout=120) == 0 and (tmp_path / "b.csv").is_file()
    assert closed.stderr.read() == ""
