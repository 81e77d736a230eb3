"""Training mode and the connectivity map, against independent computations.

The training loss is the read-out's task loss, not a hidden-state loss, so "step 0 equals a plain
taped run" is checked the only meaningful way: the NumPy BPTT of
tests/helpers/references/reference.py, fed with the read-out's direct gradient ∂L/∂h_t computed here
in NumPy, must give the same total dL/dh_t, dL/dc_t and weight gradients as step 0 of training (and
as the final weights' taped arrays)."""

import numpy as np
import pytest

from lstmviz.cli import main
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import InputError
from lstmviz.engine.modes import train as train_module
from lstmviz.engine.modes.taped import connectivity_map, taped_gradients
from lstmviz.engine.modes.train import run_train, train
from lstmviz.engine.modes.trained_weights import keras_model, save_trained_weights
from lstmviz.engine.problem.tasks import make_task
from lstmviz.io.trace import GradientTrace, TraceUpdate
from tests.helpers.references.mode_references import np_connectivity, np_readout
from tests.helpers.references.mode_references import taped_case as make_case
from tests.helpers.references.reference import assert_close, np_bptt, np_forward, np_loss


def check_against_numpy(trace, prefix, task_loss):
    """The taped keys `prefix`* of a train trace against NumPy BPTT with the read-out loss."""
    a = {key[len(prefix) :]: value for key, value in trace.arrays.items() if key.startswith(prefix)}
    h, c, _ = np_forward(a["x"], a["kernel"], a["recurrent_kernel"], a["bias"], a["h0"], a["c0"])
    per_step = bool(trace.readout_per_step)
    value, direct, dout = np_readout(
        task_loss, per_step, h, a["readout_kernel"], a["readout_bias"], a["target"]
    )
    ref = np_bptt(a["x"], a["kernel"], a["recurrent_kernel"], a["bias"], a["h0"], a["c0"], direct)
    assert float(a["loss"]) == pytest.approx(value, rel=1e-5)
    assert_close(a["h"], h, what="h")
    assert_close(a["grad_h_direct"], direct, what="direct")
    assert_close(a["grad_h_total"], ref["dh"], what="dL/dh")
    assert_close(a["grad_c_total"], ref["dc"], what="dL/dc")
    assert_close(a["grad_kernel"], ref["dkernel"], what="dkernel")
    assert_close(a["grad_recurrent_kernel"], ref["drecurrent"], what="drecurrent")
    assert_close(a["grad_bias"], ref["dbias"], what="dbias")
    used = h.reshape(-1, h.shape[-1]) if per_step else h[-1]
    assert_close(a["grad_readout_kernel"], used.T @ dout.reshape(-1, dout.shape[-1]), what="dW")
    assert_close(a["norm_h_total"], np.sqrt((ref["dh"] ** 2).sum(axis=(1, 2))), what="norm")
    return a, direct


@pytest.mark.parametrize(
    ("task", "task_loss"), [("adding", "mse"), ("copy", "xent"), ("sine", "mse")]
)
def test_step0_and_final_gradients_match_numpy_bptt(task, task_loss):
    trace = train(task=task, train_steps=3, steps=7, batch=4, hidden=5, seed=3, connectivity=True)
    step0, _ = check_against_numpy(trace, "step0_", task_loss)
    np.testing.assert_allclose(trace.norm_h_total_by_step[0], step0["norm_h_total"], rtol=1e-6)
    final, direct = check_against_numpy(trace, "", task_loss)
    assert not np.allclose(final["kernel"], step0["kernel"])  # it trained
    args = [final[k] for k in ("x", "kernel", "recurrent_kernel", "bias", "h0", "c0")]
    assert_close(trace.connectivity, np_connectivity(*args, direct), what="connectivity")
    assert trace.loss_by_step.shape == (3,) and trace.norm_h_total_by_step.shape == (3, 7)


def test_cli_training_learns_and_saved_weights_load_into_keras(tmp_path):
    """The README's training command: the loss of the last ten steps < 0.7 × the first ten."""
    out = tmp_path / "t.npz"
    argv = ["run", "--mode", "train", "--task", "adding", "--train-steps", "150", "--steps",
            "30", "--batch", "32", "--hidden", "16", "--seed", "2", "--quiet",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    trace = GradientTrace.load(out)
    losses = trace.loss_by_step
    assert trace.mode == "train" and losses.shape == (150,)
    assert trace.norm_h_total_by_step.shape == (150, 30)
    assert losses[-10:].mean() < 0.7 * losses[:10].mean()
    assert trace.config.input_dim == 2 and trace.kernel.shape == (2, 64)

    h5, npz = save_trained_weights(trace, tmp_path / "w.weights.h5"), tmp_path / "w.npz"
    save_trained_weights(trace, npz)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.npz", "w.npz", "w.weights.h5"]
    model = keras_model(2, 16, 1, per_step=False)
    model.load_weights(h5)
    keys = ("kernel", "recurrent_kernel", "bias", "readout_kernel", "readout_bias")
    for key, value in zip(keys, model.get_weights(), strict=True):
        np.testing.assert_array_equal(value, trace[key])
    with np.load(npz) as saved:
        for key in keys:
            np.testing.assert_array_equal(saved[key], trace[key])
    # Keras's own LSTM on the final weights reproduces the final loss on the last batch.
    out_keras = model(trace.x.transpose(1, 0, 2)).numpy()
    assert np.mean((out_keras - trace.target) ** 2) == pytest.approx(float(trace.loss), rel=1e-4)


def test_live_updates_grow_and_match_the_trace(monkeypatch):
    monkeypatch.setattr(train_module, "UPDATES_PER_SECOND", 1e9)  # an update after every step
    config = RunConfig(mode="train", task="sine", train_steps=6, steps=5, batch=3, hidden=4)
    items = list(run_train(config))
    updates, trace = items[:-1], items[-1]
    assert isinstance(trace, GradientTrace) and all(isinstance(u, TraceUpdate) for u in updates)
    assert [u.done for u in updates] == list(range(7)) and updates[-1].total == 6
    for u in updates[1:]:
        assert u.arrays["loss_by_step"].shape == (u.done,)
        assert u.arrays["norm_h_total_by_step"].shape == (u.done, 5)
        np.testing.assert_array_equal(
            u.arrays["norm_h_total"], trace.norm_h_total_by_step[u.done - 1]
        )
    np.testing.assert_array_equal(updates[-1].arrays["loss_by_step"], trace.loss_by_step)


def test_cancel_stops_between_steps():
    polls = []

    def cancelled():
        polls.append(1)
        return len(polls) > 3

    config = RunConfig(mode="train", task="adding", train_steps=50, steps=4, batch=2, hidden=3)
    items = list(run_train(config, cancelled=cancelled))
    assert not any(isinstance(item, GradientTrace) for item in items)
    assert max(item.done for item in items) <= 3 and len(polls) == 4


def test_cancel_with_keep_gives_the_trace_of_the_steps_done(monkeypatch):
    """Paused after 3 of 20 steps, cancelled with keep: the next item is the trace a run of 3
    steps gives (same seed), connectivity map included; nothing to keep before a step."""
    monkeypatch.setattr(train_module, "UPDATES_PER_SECOND", 1e9)  # an update after every step
    config = RunConfig(mode="train", task="adding", train_steps=20, steps=6, batch=3, hidden=4,
                       connectivity=True)  # fmt: skip
    stop = []
    items = run_train(config, cancelled=lambda: bool(stop), keep=lambda: True)
    updates = [next(items) for _ in range(4)]  # the start, then steps 1..3: paused after 3
    stop.append(1)
    rest = list(items)
    assert updates[-1].done == 3 and len(rest) == 1 and isinstance(rest[0], GradientTrace)
    trace = rest[0].check()
    assert trace.loss_by_step.shape == (3,) and trace.norm_h_total_by_step.shape == (3, 6)
    assert trace.config.train_steps == 3 and int(trace.units_requested) == 20
    assert str(trace.stopped) == "cancelled" and int(trace.units_done) == 3
    full = train(task="adding", train_steps=3, steps=6, batch=3, hidden=4, connectivity=True)
    assert trace.keys() == full.keys() and trace.config == full.config
    for key in full.arrays:
        if key not in ("stopped", "units_requested"):
            np.testing.assert_array_equal(trace[key], full[key], err_msg=key)
    assert str(full.stopped) == "completed" and int(full.units_requested) == 3
    nothing = list(run_train(config, cancelled=lambda: True, keep=lambda: True))
    assert [type(item) for item in nothing] == [TraceUpdate]
    stop.clear()
    items = run_train(config, cancelled=lambda: bool(stop))
    [next(items) for _ in range(3)]
    stop.append(1)
    assert list(items) == []  # cancelled without keep: no trace


def test_same_seed_same_training():
    a, b = (train(task="copy", train_steps=2, steps=6, batch=2, hidden=3, seed=5) for _ in "ab")
    for key in a.arrays:
        np.testing.assert_array_equal(a[key], b[key])


def test_tasks_are_what_they_say():
    rng = np.random.default_rng(0)
    adding = make_task(RunConfig(task="adding", steps=10, batch=50))
    x, y = adding.sample(rng)
    assert x.shape == (10, 50, 2) and y.shape == (50, 1)
    assert np.all(x[:, :, 1].sum(axis=0) == 2)
    assert np.all(x[:5, :, 1].sum(axis=0) == 1)
    np.testing.assert_allclose(y[:, 0], (x[:, :, 0] * x[:, :, 1]).sum(axis=0), rtol=1e-6)
    copy = make_task(RunConfig(task="copy", steps=12, batch=4))
    x, y = copy.sample(rng)
    symbols, recall = x[:5].argmax(-1), y[-5:].argmax(-1)
    assert x.shape == (12, 4, 10) and y.shape == (12, 4, 9) and np.all(symbols < 8)
    np.testing.assert_array_equal(symbols, recall)
    assert np.all(x[6, :, 9] == 1) and np.all(y[:7].argmax(-1) == 8)
    sine = make_task(RunConfig(task="sine", steps=8, batch=3))
    x, y = sine.sample(rng)
    np.testing.assert_array_equal(x[1:], y[:-1])
    for name, task in (("adding", adding), ("copy", copy), ("sine", sine)):
        fixed = RunConfig(mode="train", task=name, input_dim=8).for_mode()
        assert task.input_dim == fixed.input_dim == task.sample(rng)[0].shape[-1]  # shown as I


def Z(*shape):  # noqa: N802 - reads like the arrays it builds
    return np.zeros(shape)


def _save(path, **arrays):
    np.savez(path, **arrays) if path.suffix == ".npz" else np.save(path, arrays["x"])
    return path


@pytest.mark.parametrize(
    ("name", "arrays", "needle"),
    [
        ("a.npz", {"x": Z(8, 5), "y": Z(8, 1)}, "x must be [N, T, I]"),
        ("a.npz", {"x": Z(8, 5, 2), "y": Z(8, 4, 1)}, "x has T=5 steps but y has T=4"),
        ("a.npz", {"x": Z(8, 5, 2), "y": Z(7, 1)}, "N=8 like x"),
        ("a.npz", {"x": Z(2, 5, 2), "y": Z(2, 1)}, "fewer than --batch 4"),
        ("a.npz", {"x": Z(8, 5, 2)}, "missing y"),
        ("a.npz", {"x": Z(8, 5, 2), "y": Z(8, 1) + np.nan}, "y holds NaN or Inf (first in"),
        ("a.npy", {"x": Z(8, 6)}, ".npy of series must be [N, T+1, I]"),
        ("a.txt", {}, "must be .npz"),
    ],
)  # fmt: skip
def test_bad_user_sequences_are_named(tmp_path, name, arrays, needle):
    path = tmp_path / name
    if arrays:
        _save(path, **arrays)
    else:
        path.write_text("1 2 3")
    with pytest.raises(InputError) as info:
        make_task(RunConfig(mode="train", inputs=str(path), steps=5, batch=4))
    assert needle in str(info.value) and str(path) in str(info.value)


def test_training_on_user_sequences_takes_their_length(tmp_path):
    """--steps is the built-in tasks' T; a file of sequences has its own (T=6 here)."""
    rng = np.random.default_rng(2)
    path = _save(tmp_path / "six.npz", x=rng.standard_normal((8, 6, 2)),
                 y=rng.standard_normal((8, 1)))  # fmt: skip
    trace = train(inputs=str(path), steps=5, batch=4, hidden=3, train_steps=2, seed=1)
    assert trace.config.steps == 6 and trace.norm_h_total_by_step.shape == (2, 6)


def test_nan_in_inputs_via_cli_exits_2(tmp_path, capsys):
    x = np.zeros((8, 5, 2))
    x[3, 2, 1] = np.nan
    path = _save(tmp_path / "seq.npz", x=x, y=np.zeros((8, 1)))
    code = main(["run", "--mode", "train", "--inputs", str(path), "--steps", "5", "--batch", "4",
                 "--out", str(tmp_path / "t.npz")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "x holds NaN or Inf (first in sequence 3)" in err and str(path) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seq.npz"]


@pytest.mark.parametrize(
    ("name", "x", "y", "per_step"),
    [("s.npz", (10, 6, 3), (10, 2), False), ("s.npz", (10, 6, 3), (10, 6, 2), True),
     ("s.npy", (10, 7, 3), None, True)],
)  # fmt: skip
def test_user_sequences_train(tmp_path, name, x, y, per_step):
    rng = np.random.default_rng(0)
    arrays = {"x": rng.standard_normal(x)} | ({"y": rng.standard_normal(y)} if y else {})
    path = _save(tmp_path / name, **arrays)
    trace = train(inputs=str(path), train_steps=2, steps=6, batch=4, hidden=3)
    assert trace.config.input_dim == 3 and bool(trace.readout_per_step) == per_step
    assert trace.x.shape == (6, 4, 3) and trace.norm_h_total_by_step.shape == (2, 6)


def test_saving_weights_needs_a_known_suffix(tmp_path):
    trace = train(task="adding", train_steps=1, steps=3, batch=2, hidden=2)
    with pytest.raises(InputError, match=".weights.h5 or .npz"):
        save_trained_weights(trace, tmp_path / "w.pt")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("loss", ["mean_h", "last_mse", "seq_mse"])
def test_connectivity_equals_one_step_numpy_bptt(rng, loss):
    x, w, target, h0, c0 = make_case(rng, loss, steps=8)
    c = connectivity_map(x, w, loss=loss, target=target, h0=h0, c0=c0)
    h, _, _ = np_forward(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0)
    _, direct = np_loss(loss, h, target)
    ref = np_connectivity(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0, direct)
    assert c.shape == (8, 8)
    assert_close(c, ref, what="connectivity")
    assert np.all(c[np.triu_indices(8, 1)] == 0)
    taped = taped_gradients(x, w, loss=loss, target=target, h0=h0, c0=c0)
    np.testing.assert_allclose(np.diag(c), taped.norm_h_direct, rtol=1e-5, atol=1e-12)
    if loss == "last_mse":
        assert np.all(c[:-1] == 0)


def test_cli_connectivity_on_a_taped_seq_mse_run(tmp_path):
    out = tmp_path / "t.npz"
    argv = ["run", "--mode", "taped", "--steps", "12", "--batch", "3", "--input-dim", "4",
            "--hidden", "5", "--loss", "seq_mse", "--seed", "4", "--random-state",
            "--connectivity", "--quiet", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    t = GradientTrace.load(out)
    h, _, _ = np_forward(t.x, t.kernel, t.recurrent_kernel, t.bias, t.h0, t.c0)
    _, direct = np_loss("seq_mse", h, t.target)
    ref = np_connectivity(t.x, t.kernel, t.recurrent_kernel, t.bias, t.h0, t.c0, direct)
    assert np.max(np.abs(t.connectivity - ref)) <= 1e-4 * np.max(ref)


def test_api_names_resolve():
    import lstmviz

    assert lstmviz.train is train and lstmviz.connectivity_map is connectivity_map
    assert lstmviz.run_train is run_train and lstmviz.save_trained_weights is save_trained_weights


@pytest.mark.parametrize(("task", "task_loss"), [("copy", "xent"), ("sine", "mse")])
def test_every_live_row_is_the_bptt_norm_at_the_weights_before_its_update(task, task_loss):
    """Row k of `norm_h_total_by_step` (what the app draws live) against NumPy BPTT at the
    weights after k updates (a k-step run's final weights, same seed) on batch k+1 (the last
    batch of a (k+1)-step run)."""
    sizes = dict(task=task, steps=6, batch=3, hidden=4, seed=8)
    runs = [train(train_steps=k, **sizes) for k in (1, 2, 3)]
    for k in (1, 2):
        before, after = runs[k - 1], runs[k]
        x, y = after["x"], after["target"]
        w = [before[key] for key in ("kernel", "recurrent_kernel", "bias")]
        h0 = np.zeros((3, 4))
        h, _, _ = np_forward(x, *w, h0, h0)
        _, direct, _ = np_readout(task_loss, bool(after.readout_per_step), h,
                                  before["readout_kernel"], before["readout_bias"], y)  # fmt: skip
        dh = np_bptt(x, *w, h0, h0, direct)["dh"]
        row = runs[2].norm_h_total_by_step[k]
        assert_close(row, np.sqrt((dh**2).sum(axis=(1, 2))), what=f"row {k}")
        longest = runs[2].norm_h_total_by_step
        np.testing.assert_array_equal(after.norm_h_total_by_step, longest[: k + 1])
