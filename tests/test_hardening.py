"""Hardening: bad CLI input, memory guard, non-finite values, Ctrl-C, partial training traces."""

import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lstmviz.core.config import RunConfig
from lstmviz.core.errors import ConfigError
from lstmviz.engine.modes.taped import taped_gradients
from lstmviz.engine.modes.trace_arrays import add_norms
from lstmviz.io.trace import GradientTrace
from lstmviz.weights import LSTMWeights, random_weights
from tests.helpers.processes.cli_process import ROOT, SMALL, CliRun, cli_env, console, files_in


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
    assert elapsed < 30  # generous: a cold interpreter on a loaded machine


def test_the_memory_refusal_says_how_much_a_run_may_use():
    """Refused above 80% of the memory available: the message gives that limit, not only the
    memory available (9 GiB needed "but 10 GiB is available" read as if it fitted)."""
    from lstmviz.core.config import check_fits
    from lstmviz.core.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        check_fits(9 * 2**30, "T=1 B=1", "--steps", available=10 * 2**30)
    assert "needs about 9.0 GiB (T=1 B=1), more than the 8.0 GiB it may use (80% of the " \
           "10.0 GiB available); reduce --steps" in str(caught.value)
    check_fits(7 * 2**30, "T=1 B=1", "--steps", available=10 * 2**30)  # fits


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


def test_a_model_runs_memory_comes_from_its_layers_and_data(tmp_path, monkeypatch, capsys):
    """Model mode estimates from the model's LSTM directions and the data it runs on: the
    default --input-dim/--hidden and an unused --steps mean nothing there (random data of a
    1024-feature model is refused before it is drawn; a big --steps beside a small data file
    is not)."""
    import keras

    from lstmviz.cli import main
    from lstmviz.core import config

    wide = keras.Sequential([keras.Input((None, 1024)), keras.layers.LSTM(8),
                             keras.layers.Dense(1)])  # fmt: skip
    wide.compile(loss="mse")
    wide.save(tmp_path / "wide.keras")
    monkeypatch.setattr(config, "available_memory", lambda: 2**30)
    out = tmp_path / "w.npz"
    run = ["run", "--mode", "model", "--model", str(tmp_path / "wide.keras"), "--out", str(out)]
    assert main([*run, "--steps", "200", "--batch", "1000"]) == 2  # ~3.5 GiB
    error = capsys.readouterr().err
    assert "memory:" in error and "T=200 B=1000" in error and not out.exists()
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", x=rng.standard_normal((4, 6, 1024)).astype(np.float32),
             y=np.zeros((4, 1), np.float32))  # fmt: skip
    assert main([*run, "--inputs", str(tmp_path / "d.npz"), "--steps", "2000000"]) == 0
    assert out.exists()


def test_flags_the_mode_does_not_read_are_named_and_ignored(tmp_path, capsys):
    from lstmviz.cli import main

    out = tmp_path / "t.npz"
    args = ["run", "--mode", "taped", "--steps", "5", "--batch", "2", "--hidden", "3",
            "--passes", "7", "--task", "copy", "--out", str(out)]  # fmt: skip
    assert main(args) == 0 and out.exists()
    note = [line for line in capsys.readouterr().err.splitlines() if "note:" in line]
    assert note == ["lstmviz: note: --mode taped does not read --passes, --task; ignored"]


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


def test_a_non_finite_state_persists_so_the_last_state_decides(rng):
    """add_norms scans the states only when the last h or c is non-finite: a NaN or Inf in any
    state must therefore reach every later one. Inf in c0 (h0 finite) must show at every step."""
    w = random_weights(3, 4, rng)
    x = rng.standard_normal((7, 2, 3)).astype(np.float32)
    c0 = np.zeros((2, 4), np.float32)
    c0[1, 2] = np.inf
    trace = taped_gradients(x, w, c0=c0)
    states = np.stack([trace.h, trace.c])
    assert not np.isfinite(states).all(axis=(0, 2, 3)).any()
    assert list(trace.nonfinite_steps) == list(range(7))


def test_norms_whose_float32_squares_overflow_are_recomputed_exactly(rng):
    """The engine's graph gives float32 norms; |g| > 1e19 overflows their squares to Inf, and
    add_norms must then give the true norm (float64) and not call the step non-finite."""
    g = rng.standard_normal((4, 3, 5)).astype(np.float32)
    g[2] *= np.float32(1e25)  # finite, but squares overflow float32
    g[3, 1, 1] = np.nan
    with np.errstate(over="ignore", invalid="ignore"):
        graph_norms = np.sqrt(np.square(g).sum(axis=(1, 2)))  # float32 throughout, as TF does
    assert np.isinf(graph_norms[2]) and np.isnan(graph_norms[3])
    arrays = {"grad_h_total": g, "norm_h_total": graph_norms.astype(np.float32)}
    add_norms(arrays, {"grad_h_total": "norm_h_total"})
    exact = np.sqrt((g.astype(np.float64) ** 2).sum(axis=(1, 2)))
    np.testing.assert_allclose(arrays["norm_h_total"][:3], exact[:3], rtol=1e-6)
    assert np.isnan(arrays["norm_h_total"][3])
    assert list(arrays["nonfinite_steps"]) == [3]


def test_cli_warns_on_non_finite(tmp_path, monkeypatch, capsys):
    from lstmviz import cli
    from lstmviz.engine.problem import seeded as problem_module

    original = problem_module.seeded_problem

    def with_nan(config, steps=None):
        p = original(config, steps)
        p.x[3] = np.nan
        return p

    monkeypatch.setattr("lstmviz.engine.modes.taped.seeded_problem", with_nan)
    out = tmp_path / "t.npz"
    argv = ["run", "--steps", "6", "--batch", "2", "--hidden", "3", "--quiet", "--out", str(out)]
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert "NaN or Inf at 6 timestep(s)" in err and "first non-finite state at t=3" in err
    assert out.exists()


# --- CLI validation audit: bad input exits 2 with one line naming the flag or file ---------

def _bad_cases(tmp: Path) -> list[tuple[list[str], str]]:
    """(arguments after `run`, text the one error line must contain)."""
    garbage = tmp / "garbage.npz"
    garbage.write_bytes(b"PK\x03\x04garbage")
    out = str(tmp / "t.npz")
    (tmp / "folder.npz").mkdir()
    return [
        (["--steps", "0", "--out", out], "--steps: 0 is out of range [1, 10000000]"),
        (["--hidden", "-5", "--out", out], "--hidden: -5 is out of range [1, 16384]"),
        (["--batch", "two", "--out", out], "argument --batch: invalid int value"),
        (["--mode", "lstm", "--out", out], "argument --mode: invalid choice"),
        (["--loss", "mse", "--out", out], "--loss: unknown value 'mse'"),
        (["--weights", str(tmp / "missing.npz"), "--out", out], "missing.npz: no such file"),
        (["--inputs", str(garbage), "--out", out], "garbage.npz"),
        (["--out", str(tmp / "nowhere" / "t.npz")], "nowhere: no such folder"),
        (["--out", str(tmp / "t.csv")], "--out: " + str(tmp / "t.csv") + ": trace files end"),
        (["--out", str(tmp / "folder.npz")], "is a folder"),
        (["--layer", "lstm", "--out", out], "--layer: only applies together with --weights"),
        (["--time-major", "--out", out], "--time-major: only applies together with --inputs"),
        (["--mode", "multipass", "--connectivity", "--out", out], "--connectivity: only"),
        (["--mode", "train", "--train-steps", "0", "--out", out], "--train-steps: 0 is out of"),
        (["--inputs", str(garbage), "--out", str(garbage)], "would overwrite the --inputs"),
    ]


def test_bad_cli_input_in_process_exits_2_with_one_line(tmp_path, capsys):
    from lstmviz.cli import main

    cases = _bad_cases(tmp_path)
    before = files_in(tmp_path)
    for args, expected in cases:
        assert main(["run", *SMALL, *args]) == 2, args
        err = capsys.readouterr().err
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("lstmviz: error: "), (args, err)
        assert expected in lines[0], (args, err)
        assert "Traceback" not in err
        assert files_in(tmp_path) == before, args  # nothing written, no temporary left


def test_bad_cli_input_through_the_console_script(tmp_path):
    cases = _bad_cases(tmp_path)
    before = files_in(tmp_path)
    for index in (0, 3, 5, 10):  # a range, a choice, a missing file, a flag without its partner
        args, expected = cases[index]
        done = subprocess.run(
            [*console(), "run", *SMALL, *args],
            capture_output=True,
            text=True,
            env=cli_env(),
            cwd=tmp_path,
            timeout=120,
        )
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, done.stderr)
        assert done.stdout == ""
        assert files_in(tmp_path) == before


def _weights_files(folder: Path, names: tuple[str, ...]) -> list[Path]:
    """Weights files (.npz, I=3, H=4) called `names` in `folder`."""
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    paths = []
    for name in names:
        w = random_weights(3, 4, rng)
        np.savez(folder / name, kernel=w.kernel, recurrent_kernel=w.recurrent_kernel, bias=w.bias)
        paths.append(folder / name)
    return paths


BATCHWISE_FILES = ["--mode", "batchwise", "--generator", "files", "--batches", "2",
                   "--input-dim", "3", "--hidden", "4", "--steps", "5", "--batch", "2", "--quiet"]


@pytest.mark.parametrize("given", ["folder", "list"])
def test_out_that_is_one_of_the_weights_files_is_refused(tmp_path, capsys, given):
    """--out must not be any file the run reads: also a file inside the folder given as
    --weights (the files generator reads every weights file in it)."""
    from lstmviz.cli import main

    first, second = _weights_files(tmp_path / "wdir", ("a.npz", "b.npz"))
    weights = str(first.parent) if given == "folder" else f"{first},{second}"
    before = first.read_bytes()
    assert main(["run", *BATCHWISE_FILES, "--weights", weights, "--out", str(first)]) == 2
    err = capsys.readouterr().err
    assert err == f"lstmviz: error: --out: {first}: would overwrite the --weights file {first}\n"
    assert first.read_bytes() == before
    assert files_in(tmp_path) == {"wdir", "a.npz", "b.npz"}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--weights", ""], "--weights: empty file name"),
        (["--inputs", ""], "--inputs: empty file name"),
        (["--weights", "{w},", *BATCHWISE_FILES], "--weights: empty file name in the list '{w},'"),
        (["--weights", ",{w}", *BATCHWISE_FILES], "--weights: empty file name in the list ',{w}'"),
        (["--weights", "{w}", "--layer", ""], "--layer: empty layer name"),
        (["--mode", "model", "--model", ""], "--model: empty file name"),
    ],
)
def test_empty_file_names_are_refused(tmp_path, capsys, args, expected):
    """An empty name (an unset shell variable, a trailing comma) is an error, not "no file":
    the run would otherwise use seeded random weights or inputs and exit 0."""
    from lstmviz.cli import main

    (w,) = _weights_files(tmp_path / "w", ("a.npz",))
    args = [a.format(w=w) for a in args]
    before = files_in(tmp_path)
    assert main(["run", *SMALL, *args, "--out", str(tmp_path / "t.npz")]) == 2
    err = capsys.readouterr().err
    assert err == f"lstmviz: error: {expected.format(w=w)}\n"
    assert files_in(tmp_path) == before


def test_screenshot_that_is_a_folder_exits_2_before_the_window_opens(tmp_path):
    shot = tmp_path / "shot.png"
    shot.mkdir()
    done = subprocess.run([*console(), "gui", "--screenshot", str(shot)], capture_output=True,
                          text=True, env=cli_env(), cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"lstmviz: error: --screenshot: {shot}: is a folder, not a file name\n"
    assert files_in(tmp_path) == {"shot.png"}


# --- Interruption: Ctrl-C exits 130 promptly and leaves nothing broken ---------------------


TRAIN = ["--mode", "train", "--task", "sine", "--steps", "20", "--batch", "4", "--hidden", "8",
         "--train-steps", "100000"]  # fmt: skip


@pytest.mark.serial  # times the exit after Ctrl-C: alone under xdist
def test_ctrl_c_stops_training_and_writes_nothing(tmp_path):
    run = CliRun([*TRAIN, "--out", "t.npz"], tmp_path)
    run.wait_for("[train] 1")  # the first step has run: TensorFlow is busy training
    code, elapsed = run.interrupt()
    assert code == 130, run.text()
    assert elapsed < 10, elapsed  # generous for a loaded machine
    assert "nothing written" in run.text() and "Traceback" not in run.text()
    assert files_in(tmp_path) == set()


@pytest.mark.slow
@pytest.mark.serial  # times the exit after Ctrl-C: alone under xdist
def test_ctrl_c_with_keep_partial_keeps_a_complete_trace(tmp_path):
    run = CliRun([*TRAIN, "--keep-partial", "--out", "t.npz"], tmp_path)
    run.wait_for("[train] 1")
    code, elapsed = run.interrupt()
    assert code == 130, run.text()
    assert elapsed < 10, elapsed
    assert "kept them as a complete trace" in run.text(), run.text()
    assert files_in(tmp_path) == {"t.npz"}  # no temporary file beside it
    trace = GradientTrace.load(tmp_path / "t.npz")  # runs GradientTrace.check too
    done = int(trace["units_done"])
    assert 1 <= done < 100000 and str(trace["stopped"]) == "cancelled"
    assert trace.loss_by_step.shape == (done,) and trace.norm_h_total_by_step.shape == (done, 20)
    assert trace.config.train_steps == done and int(trace["units_requested"]) == 100000
    assert np.isfinite(trace.loss_by_step).all() and "grad_h_total" in trace


@pytest.mark.slow
@pytest.mark.serial  # times the exit after Ctrl-C: alone under xdist
def test_ctrl_c_with_keep_partial_keeps_the_passes_done(tmp_path):
    """Multi-pass, interrupted after some of 1000 passes: the kept trace is the multi-pass
    trace of the passes done, as the API gives for those passes of the same arrays."""
    from lstmviz.engine.modes.multipass import multipass_gradients

    args = ["--mode", "multipass", "--passes", "1000", "--steps", "300", "--batch", "4",
            "--input-dim", "3", "--hidden", "16", "--loss", "last_mse", "--random-state",
            "--keep-partial", "--out", "t.npz"]  # fmt: skip
    run = CliRun(args, tmp_path)
    run.wait_for("[multipass] 2/1001")
    code, elapsed = run.interrupt()
    assert code == 130, run.text()
    assert elapsed < 30, elapsed
    assert "passes; kept them as a complete trace in t.npz" in run.text(), run.text()
    assert "Traceback" not in run.text() and files_in(tmp_path) == {"t.npz"}
    trace = GradientTrace.load(tmp_path / "t.npz")  # runs GradientTrace.check too
    done = int(trace["units_done"])
    assert 2 <= done < 1000 and int(trace["units_requested"]) == 1000
    assert str(trace["stopped"]) == "cancelled" and trace.config.passes == done
    assert trace.x.shape == (done * 300, 4, 3) and trace.norm_h_total_by_pass.shape == (done, 300)
    weights = LSTMWeights(trace.kernel, trace.recurrent_kernel, trace.bias)
    again = multipass_gradients(
        trace.x.reshape(done, 300, 4, 3), weights, "last_mse", trace.target, trace.h0, trace.c0
    )
    for key in ("loss", "grad_h_total", "grad_h_truncated", "grad_h_reference", "grad_kernel"):
        np.testing.assert_allclose(trace[key], again[key], rtol=1e-5, atol=1e-8, err_msg=key)


@pytest.mark.serial  # times the exit after Ctrl-C: alone under xdist
def test_ctrl_c_during_one_long_tensorflow_call_exits_promptly(tmp_path):
    # A single taped call of several seconds: TensorFlow cannot be interrupted inside it, so
    # the CLI runs it in a worker thread and leaves without it, well before the call ends.
    run = CliRun(["--steps", "3000", "--batch", "16", "--hidden", "128", "--out", "t.npz"],
                 tmp_path)  # fmt: skip
    run.wait_for("[taped] 0/1")
    time.sleep(0.5)  # inside the compiled call by now
    code, elapsed = run.interrupt()
    assert code == 130, run.text()
    assert elapsed < 10, elapsed
    assert "nothing written" in run.text() and "Traceback" not in run.text()
    assert files_in(tmp_path) == set()


def test_partial_training_trace_equals_a_shorter_run():
    from lstmviz.engine.modes.train import run_train

    config = RunConfig(mode="train", task="adding", train_steps=50, steps=6, batch=3, hidden=4)
    polls = []
    training = run_train(config, cancelled=lambda: polls.append(1) or len(polls) > 4)
    items = list(training)  # cancelled without keep: no trace
    assert not any(isinstance(item, GradientTrace) for item in items)
    polls.clear()
    kept = run_train(config, lambda: polls.append(1) or len(polls) > 4, keep=lambda: True)
    *_, partial = kept
    assert int(partial["units_done"]) == 4 and str(partial["stopped"]) == "cancelled"
    *_, short = run_train(RunConfig(**{**config.__dict__, "train_steps": 4}))
    for key in ("loss_by_step", "norm_h_total_by_step", "kernel", "grad_h_total", "step0_h"):
        np.testing.assert_array_equal(partial[key], short[key], err_msg=key)
    assert partial.config == short.config
    partial.check()


# --- Non-finite values in every mode -------------------------------------------------------


def test_nan_in_multipass_is_recorded(tmp_path, rng):
    from lstmviz.engine.modes.multipass import multipass_gradients

    w = random_weights(3, 4, rng)
    x = rng.standard_normal((3, 4, 2, 3)).astype(np.float32)  # P=3 passes of Tp=4
    x[1, 2, 0, 0] = np.nan  # joined step 6
    trace = multipass_gradients(x, w, loss="seq_mse", target=np.zeros((12, 2, 4)))
    assert list(trace.nonfinite_steps) == list(range(12))  # total gradients reach back
    assert np.isfinite(trace.h[:6]).all() and not np.isfinite(trace.h[6:]).all(axis=(1, 2)).any()
    assert np.isfinite(trace.norm_h_truncated[:4]).all()  # truncation keeps pass 0 clean
    GradientTrace.load(trace.save(tmp_path / "m.npz"))


def test_nan_weights_in_one_batch_are_recorded_per_batch(tmp_path, rng):
    from lstmviz.engine.modes.batchwise import batchwise_gradients

    good = random_weights(3, 4, rng)
    kernel = good.kernel.copy()
    kernel[1, 2] = np.nan
    bad = LSTMWeights(kernel, good.recurrent_kernel, good.bias)
    x = rng.standard_normal((3, 5, 2, 3)).astype(np.float32)
    trace = batchwise_gradients(x, [good, bad, good], backend="while_loop")
    assert trace.nonfinite_by_batch.shape == (3, 5)
    assert not trace.nonfinite_by_batch[[0, 2]].any() and trace.nonfinite_by_batch[1].all()
    assert list(trace.nonfinite_steps) == list(range(5))
    GradientTrace.load(trace.save(tmp_path / "b.npz"))


def _nan_at_step(monkeypatch, bad_step: int) -> None:
    from lstmviz.engine.modes import train as train_module

    make_task = train_module.make_task

    def with_nan(config):
        task = make_task(config)
        calls = []

        def sample(rng):
            x, y = task.sample(rng)
            calls.append(1)
            if len(calls) == bad_step + 1:
                x = x.copy()
                x[1] = np.nan
            return x, y

        return replace(task, sample=sample)

    monkeypatch.setattr(train_module, "make_task", with_nan)


def test_nan_loss_stops_training_cleanly_and_keeps_the_steps(monkeypatch, tmp_path, capsys):
    from lstmviz.cli import main

    _nan_at_step(monkeypatch, 3)
    out = tmp_path / "t.npz"
    args = ["run", "--mode", "train", "--task", "sine", "--steps", "6", "--batch", "2",
            "--hidden", "3", "--train-steps", "40", "--quiet", "--out", str(out)]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "became NaN or Inf at step 4; training stopped after 4 of 40 steps" in err, err
    trace = GradientTrace.load(out)
    assert str(trace["stopped"]) == "non-finite" and int(trace["units_done"]) == 4
    assert list(trace.nonfinite_loss_steps) == [3]
    assert np.isfinite(trace.loss_by_step[:3]).all() and np.isnan(trace.loss_by_step[3])
    assert trace.nonfinite_steps.size > 0  # the final batch is the one that went bad
    assert np.isfinite(trace.kernel).all()  # the bad step's update was not applied
    assert trace.config.train_steps == 4


def test_loading_never_runs_code_from_a_file():
    """Every np.load refuses pickles, torch.load takes weights only, and nothing deserialises
    a Keras model (which can run Lambda-layer code)."""
    import re

    for path in (ROOT / "lstmviz").rglob("*.py"):
        source = path.read_text()
        for call in re.findall(r"np\.load\([^)]*\)", source):
            assert "allow_pickle=False" in call, (path, call)
        for call in re.findall(r"torch\.load\([^)]*\)", source):
            assert "weights_only=True" in call, (path, call)
        for unsafe in ("safe_mode=False", "pickle.load", "enable_unsafe"):
            assert unsafe not in source, (path, unsafe)
        # Keras's model loader; lstmviz's own load_model reads the files with json and h5py.
        # Training a model (engine/modes/fit.py) hands Keras a file, in safe mode, once lstmviz's
        # own loader has read it (no Lambda or custom layers); so does a graph Keras runs
        # (engine/modes/graph_model.py), in safe mode, once lstmviz's reader found it a graph.
        keras_calls = re.findall(r"(?:models|saving)\.load_model\([^)]*\)", source)
        imported = re.search(r"from (tf_)?keras[\w.]* import .*load_model", source)
        assert not imported, (path, "keras load_model")
        if path == ROOT / "lstmviz" / "engine" / "modes" / "fit.py":
            assert keras_calls and all("safe_mode=True" in call for call in keras_calls), path
            assert "spec = load_model(path)" in source, path
        elif path == ROOT / "lstmviz" / "engine" / "modes" / "graph_model.py":
            assert keras_calls and all("safe_mode=True" in call for call in keras_calls), path
        else:
            assert not keras_calls, (path, "keras load_model")
