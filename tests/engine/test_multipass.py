"""Multi-pass backpropagation against a float64 NumPy BPTT (uncut, and cut at every pass start)."""

import numpy as np
import pytest

from lstmviz.cli import main
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import InputError
from lstmviz.engine.modes.multipass import multipass_gradients, pass_states, run_multipass
from lstmviz.io.trace import GradientTrace
from lstmviz.weights import LSTMWeights, random_weights
from tests.helpers.references.mode_references import multipass_case as make_case
from tests.helpers.references.mode_references import np_multipass
from tests.helpers.references.reference import assert_close

LOSSES = ["mean_h", "last_mse", "seq_mse"]
TP, B, I, H = 4, 2, 3, 5
WEIGHT_GRADS = [("grad_kernel", "dkernel"), ("grad_recurrent_kernel", "drecurrent"),
                ("grad_bias", "dbias")]  # fmt: skip


@pytest.mark.parametrize("passes", [1, 2, 5])
@pytest.mark.parametrize("loss", LOSSES)
def test_full_equals_reference_and_numpy_bptt(rng, loss, passes):
    x, w, target, h0, c0 = make_case(rng, loss, passes)
    trace = multipass_gradients(x, w, loss=loss, target=target, h0=h0, c0=c0)
    value, values, direct, ref = np_multipass(loss, x, w, target, h0, c0)
    assert float(trace.loss) == pytest.approx(value, rel=1e-5)
    np.testing.assert_allclose(trace.loss_by_pass, values, rtol=1e-5)
    assert_close(trace.h, ref["h"], what="h")
    assert_close(trace.grad_h_direct, direct, what="direct")
    for key, ref_key in [("grad_h", "dh"), ("grad_c", "dc")]:
        assert_close(trace[f"{key}_total"], ref[ref_key], what=f"{key} full")
        assert_close(trace[f"{key}_reference"], ref[ref_key], what=f"{key} reference")
        # full and reference: the same numbers up to float32 rounding, not just close to NumPy
        np.testing.assert_allclose(
            trace[f"{key}_total"], trace[f"{key}_reference"], rtol=1e-5, atol=1e-8
        )
    for key, ref_key in [*WEIGHT_GRADS, ("grad_h0", "dh0"), ("grad_c0", "dc0")]:
        assert_close(trace[key], ref[ref_key], what=key)
    scale = max(np.abs(ref[k]).max() for k in ("dh", "dc", "dkernel", "drecurrent", "dbias"))
    assert trace.max_abs_diff_full_vs_reference < 1e-5 * scale
    assert int(trace.passes) == passes and int(trace.pass_length) == TP
    assert trace.x.shape == (passes * TP, B, I)
    expected = np.sqrt((ref["dh"] ** 2).sum(axis=(1, 2))).reshape(passes, TP)
    assert_close(trace.norm_h_total_by_pass, expected, what="norm by pass")


@pytest.mark.parametrize("passes", [2, 5])
@pytest.mark.parametrize("loss", LOSSES)
def test_truncated_equals_numpy_bptt_cut_at_every_pass(rng, loss, passes):
    x, w, target, h0, c0 = make_case(rng, loss, passes)
    trace = multipass_gradients(x, w, loss=loss, target=target, h0=h0, c0=c0)
    _, _, _, cut = np_multipass(loss, x, w, target, h0, c0, cut=True)
    _, _, _, full = np_multipass(loss, x, w, target, h0, c0)
    assert_close(trace.grad_h_truncated, cut["dh"], what="dh truncated")
    assert_close(trace.grad_c_truncated, cut["dc"], what="dc truncated")
    for key, ref_key in WEIGHT_GRADS:
        assert_close(trace[f"{key}_truncated"], cut[ref_key], what=f"{key} truncated")
    expected = np.sqrt((cut["dh"] ** 2).sum(axis=(1, 2))).reshape(passes, TP)
    assert_close(trace.norm_h_truncated_by_pass, expected, what="norm by pass")
    # The cut matters: earlier passes differ from the full gradient, the last pass does not.
    last = slice((passes - 1) * TP, None)
    np.testing.assert_allclose(trace.grad_h_truncated[last], trace.grad_h_total[last], rtol=1e-5,
                               atol=1e-8)  # fmt: skip
    earlier = slice(0, (passes - 1) * TP)
    gap = np.abs(trace.grad_h_truncated[earlier] - trace.grad_h_total[earlier]).max()
    assert gap > 1e-3 * np.abs(full["dh"][earlier]).max()
    assert gap == pytest.approx(np.abs(cut["dh"][earlier] - full["dh"][earlier]).max(), rel=1e-2)


@pytest.mark.parametrize("loss", LOSSES)
def test_one_pass_truncated_equals_full(rng, loss):
    x, w, target, h0, c0 = make_case(rng, loss, 1, pass_length=6)
    trace = multipass_gradients(x, w, loss=loss, target=target, h0=h0, c0=c0)
    for kind in ("h", "c"):
        np.testing.assert_allclose(
            trace[f"grad_{kind}_truncated"], trace[f"grad_{kind}_total"], rtol=1e-5, atol=1e-8
        )
    np.testing.assert_allclose(trace.grad_kernel_truncated, trace.grad_kernel, rtol=1e-5, atol=1e-8)


def test_seed_demonstration_variable_assign_cuts_the_gradient():
    """Seed 004: a tf.Variable updated with `assign` inside the tape gives None upstream."""
    import tensorflow as tf

    x = tf.Variable([2.0])
    w = tf.Variable([4.0])
    with tf.GradientTape() as tape:
        w.assign(w * x)
        y = w * w
    assert tape.gradient(y, x) is None
    with tf.GradientTape() as tape:  # the same computation, carried as a tensor
        carried = w * x
        y = carried * carried
    assert tape.gradient(y, x) is not None


@pytest.mark.parametrize("carry", ["variable", "tensor"])
def test_one_tape_over_passes_with_each_carry(rng, carry):
    """Two passes of the engine's own pass function on one tape: with the state in tf.Variables
    the second pass's loss never reaches the first pass (None), and the gradient equals the
    engine's truncated one; carried as a tensor it equals the full one."""
    import tensorflow as tf

    x, w, _, h0, c0 = make_case(rng, "mean_h", 2)
    weights = [tf.constant(a) for a in (w.kernel, w.recurrent_kernel, w.bias)]
    probes = [[tf.zeros((TP, B, H)) for _ in range(2)] for _ in range(2)]
    state = [tf.Variable(h0), tf.Variable(c0)] if carry == "variable" else [h0, c0]
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([p for pair in probes for p in pair])
        losses = []
        for p in range(2):
            h, c = pass_states(x[p], *state, *weights, *probes[p])
            losses.append(tf.reduce_mean(h))
            if carry == "variable":
                state[0].assign(h[-1])
                state[1].assign(c[-1])
            else:
                state = [h[-1], c[-1]]
        value = (losses[0] + losses[1]) / 2
    upstream = tape.gradient(losses[1], probes[0][0])
    assert (upstream is None) == (carry == "variable")
    grad = np.concatenate([tape.gradient(value, probes[p][0]).numpy() for p in range(2)])
    trace = multipass_gradients(x, w, h0=h0, c0=c0)
    expected = trace.grad_h_truncated if carry == "variable" else trace.grad_h_total
    np.testing.assert_allclose(grad, expected, rtol=1e-5, atol=1e-8)


def test_generator_yields_once_per_pass_then_the_trace():
    config = RunConfig(mode="multipass", steps=3, batch=2, input_dim=3, hidden=4, passes=4,
                       loss="last_mse")  # fmt: skip
    items = list(run_multipass(config))
    updates, trace = items[:-1], items[-1]
    assert isinstance(trace, GradientTrace) and trace.mode == "multipass"
    assert [u.done for u in updates] == [1, 2, 3, 4, 5] and {u.total for u in updates} == {5}
    for p, update in enumerate(updates[:4], start=1):
        assert update.arrays["norm_h_truncated_by_pass"].shape == (p, 3)
        np.testing.assert_array_equal(
            update.arrays["norm_h_truncated_by_pass"], trace.norm_h_truncated_by_pass[:p]
        )
        np.testing.assert_array_equal(update.arrays["loss_by_pass"], trace.loss_by_pass[:p])
    np.testing.assert_array_equal(
        updates[-1].arrays["norm_h_total_by_pass"], trace.norm_h_total_by_pass
    )
    assert trace.target.shape == (4, 2, 4)


def test_generator_stops_when_cancelled_between_passes():
    config = RunConfig(mode="multipass", steps=3, batch=2, input_dim=3, hidden=4, passes=5)
    updates = []
    items = run_multipass(config, cancelled=lambda: len(updates) >= 2)
    for item in items:
        assert not isinstance(item, GradientTrace)
        updates.append(item)
    assert [u.done for u in updates] == [1, 2]


@pytest.mark.parametrize(
    ("x_shape", "loss", "target_shape", "message"),
    [
        ((0, TP, B, I), "mean_h", None, "P >= 1"),
        ((2, 0, B, I), "mean_h", None, "Tp >= 1"),
        ((2 * TP, B, I), "mean_h", None, r"\[P, Tp, B, I\]"),
        ((2, TP, B, I), "last_mse", (B, H), r"target for 'last_mse' must have shape \[2, 2, 5\]"),
        ((2, TP, B, I), "seq_mse", (TP, B, H), r"must have shape \[8, 2, 5\]"),
        ((2, TP, B, I), "last_mse", None, "needs a target"),
    ],
)
def test_bad_inputs_name_the_problem(rng, x_shape, loss, target_shape, message):
    w = random_weights(I, H, rng)
    target = None if target_shape is None else np.zeros(target_shape)
    with pytest.raises(InputError, match=message):
        multipass_gradients(np.zeros(x_shape), w, loss=loss, target=target)


def _cli(tmp_path, *flags):
    out = tmp_path / "t.npz"
    args = ["run", "--mode", "multipass", "--batch", "2", "--input-dim", "4", "--hidden", "6",
            "--quiet", "--out", str(out), *flags]  # fmt: skip
    return main(args), out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--passes", "0"], "--passes"),
        (["--steps", "0"], "--steps"),
        (["--passes", "1000", "--steps", "1000", "--hidden", "512"], "memory: this run needs"),
    ],
)
def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, flags, message):
    code, out = _cli(tmp_path, *flags)
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert "Traceback" not in err and not out.exists()


def test_cli_trace_matches_independent_bptt(tmp_path):
    """The README's multi-pass command: full and reference uncut, truncated cut at passes, to
    1e-4."""
    code, out = _cli(tmp_path, "--passes", "3", "--steps", "12", "--loss", "last_mse",
                     "--seed", "5")  # fmt: skip
    assert code == 0
    trace = GradientTrace.load(out)
    assert trace.mode == "multipass" and trace.config.passes == 3 and trace.config.steps == 12
    keys = ["x", "passes", "pass_length", "grad_h_total", "grad_h_truncated", "grad_h_reference",
            "grad_c_total", "grad_c_truncated", "grad_c_reference", "norm_h_total_by_pass",
            "norm_h_truncated_by_pass", "max_abs_diff_full_vs_reference", "h", "c",
            "grad_h_direct", "grad_kernel", "norm_h_total", "target"]  # fmt: skip
    assert set(keys) <= set(trace.keys())
    assert trace.x.shape == (36, 2, 4) and trace.norm_h_truncated_by_pass.shape == (3, 12)
    w = LSTMWeights(trace.kernel, trace.recurrent_kernel, trace.bias)
    x = trace.x.reshape(3, 12, 2, 4)
    _, _, _, full = np_multipass("last_mse", x, w, trace.target, trace.h0, trace.c0)
    _, _, _, cut = np_multipass("last_mse", x, w, trace.target, trace.h0, trace.c0, cut=True)
    # Full and truncated differ here by at most 2e-4 (an absolute 1e-4 barely tells them
    # apart): the tolerance, relative to each array's largest entry, must resolve the cut.
    for kind in ("dh", "dc"):
        scale = np.abs(full[kind]).max()
        assert np.abs(cut[kind] - full[kind]).max() > 1e-3 * scale
    for kind, ref in [("total", full), ("reference", full), ("truncated", cut)]:
        assert_close(trace[f"grad_h_{kind}"], ref["dh"], what=f"grad_h_{kind}")
        assert_close(trace[f"grad_c_{kind}"], ref["dc"], what=f"grad_c_{kind}")


def test_api_name_resolves_lazily():
    import lstmviz

    assert lstmviz.multipass_gradients is multipass_gradients
