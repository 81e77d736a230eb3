"""Per-batch weights against independent computations: NumPy BPTT, a NumPy hypernetwork with its
own chain rule, finite differences, Keras's LSTM; the cuDNN buffer against its documented layout."""

import numpy as np
import pytest

from lstmviz.cli import main
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import InputError
from lstmviz.engine.cells.cudnn import cudnn_lstm, pack_cudnn_params, params_size
from lstmviz.engine.cells.lstm_backends import choose_backend, gpu_visible, lstm_forward
from lstmviz.engine.modes.batchwise import batch_step, batchwise_gradients
from lstmviz.engine.modes.taped import taped_gradients
from lstmviz.engine.problem.seeded import check_problem
from lstmviz.engine.problem.weight_sources import Hypernetwork
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.engine.runner import run
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.weights import LSTMWeights, random_weights
from tests.helpers.references.mode_references import check_batches, numpy_hypernetwork
from tests.helpers.references.reference import assert_close, np_forward, sigmoid

N, T, B, I, H = 3, 6, 2, 3, 4
CLI_SHAPE = ["--steps", "15", "--batch", "2", "--input-dim", "3", "--hidden", "5"]


# --- cuDNN parameter buffer -------------------------------------------------------------------


def unpack_documented(flat, input_dim, hidden, gates="ifco"):
    """NumPy reading of the buffer by cuDNN's documented layout: 4 input matrices [H, I], 4
    recurrent [H, H], then 8 biases [H], gates in `gates` order. Returns dicts keyed by gate."""
    sizes = [hidden * input_dim] * 4 + [hidden * hidden] * 4 + [hidden] * 8
    assert flat.shape == (sum(sizes),)
    parts = np.split(flat, np.cumsum(sizes)[:-1])
    w = {g: parts[k].reshape(hidden, input_dim) for k, g in enumerate(gates)}
    r = {g: parts[4 + k].reshape(hidden, hidden) for k, g in enumerate(gates)}
    bw = {g: parts[8 + k] for k, g in enumerate(gates)}
    br = {g: parts[12 + k] for k, g in enumerate(gates)}
    return w, r, bw, br


def cudnn_reference_lstm(x, h0, c0, w, r, bw, br):
    """cuDNN's LSTM equations in NumPy (x [B, T, I], W·x with W [H, I], two biases)."""
    h, c, out = h0, c0, []
    for t in range(x.shape[1]):
        z = {g: x[:, t] @ w[g].T + h @ r[g].T + bw[g] + br[g] for g in "ifco"}
        c = sigmoid(z["f"]) * c + sigmoid(z["i"]) * np.tanh(z["c"])
        h = sigmoid(z["o"]) * np.tanh(c)
        out.append(h)
    return np.stack(out, axis=1)


def test_packed_buffer_read_by_cudnn_layout_gives_keras_lstm(rng):
    import keras

    w = random_weights(I, H, rng)
    w = LSTMWeights(w.kernel, w.recurrent_kernel, w.bias + rng.standard_normal(4 * H))
    x = rng.standard_normal((B, T, I)).astype(np.float32)
    h0, c0 = (rng.uniform(-0.5, 0.5, (B, H)).astype(np.float32) for _ in range(2))
    layer = keras.layers.LSTM(H, return_sequences=True)
    layer.build((B, T, I))
    layer.set_weights([w.kernel, w.recurrent_kernel, w.bias])
    expected = layer(x, initial_state=[h0, c0]).numpy()

    flat = pack_cudnn_params(w.kernel, w.recurrent_kernel, w.bias, rocm=False).numpy()
    assert flat.shape == (params_size(I, H),)
    wi, ri, bw, br = unpack_documented(flat.astype(np.float64), I, H)
    assert all(np.all(b == 0) for b in bw.values()), "cuDNN's input biases must be zero"
    actual = cudnn_reference_lstm(x, h0, c0, wi, ri, bw, br)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-6)


def test_rocm_buffer_orders_gates_i_f_o_c(rng):
    w = random_weights(I, H, rng)
    cudnn = unpack_documented(pack_cudnn_params(*_tensors(w), rocm=False).numpy(), I, H)
    miopen = unpack_documented(pack_cudnn_params(*_tensors(w), rocm=True).numpy(), I, H, "ifoc")
    for a, b in zip(cudnn, miopen, strict=True):
        for g in "ifco":
            np.testing.assert_array_equal(a[g], b[g])


def test_packing_passes_gradients_back_to_the_weights(rng):
    w = _tensors(random_weights(I, H, rng))
    probe = tf.constant(rng.standard_normal(params_size(I, H)).astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch(w)
        value = tf.reduce_sum(probe * pack_cudnn_params(*w, rocm=False))
    grads = tape.gradient(value, w)
    # The buffer is a permutation of the weights (plus zeros): the gradient is the probe unpacked.
    wi, ri, _, br = unpack_documented(probe.numpy(), I, H)
    np.testing.assert_array_equal(grads[0].numpy(), np.concatenate([wi[g].T for g in "ifco"], 1))
    np.testing.assert_array_equal(grads[1].numpy(), np.concatenate([ri[g].T for g in "ifco"], 1))
    np.testing.assert_array_equal(grads[2].numpy(), np.concatenate([br[g] for g in "ifco"]))


def test_cudnn_call_and_its_gradient_build_on_cpu():
    """Executing needs a GPU, but building the graph checks the op's arguments and attributes
    and that TensorFlow has a gradient for it."""
    spec = tf.TensorSpec

    def forward_backward(x, h0, c0, kernel, recurrent, bias):
        with tf.GradientTape() as tape:
            tape.watch([kernel, recurrent, bias])
            h, c = cudnn_lstm(x, h0, c0, kernel, recurrent, bias)
            value = tf.reduce_sum(h) + tf.reduce_sum(c)
        return h, c, tape.gradient(value, [kernel, recurrent, bias])

    f = tf.function(forward_backward).get_concrete_function(
        spec([T, B, I]),
        spec([B, H]),
        spec([B, H]),
        spec([I, 4 * H]),
        spec([H, 4 * H]),
        spec([4 * H]),
    )
    ops = {op.type for op in f.graph.get_operations()}
    assert {"CudnnRNNV3", "CudnnRNNBackpropV3"} <= ops
    h, c, grads = f.structured_outputs
    assert h.shape == (T, B, H) and c.shape == (B, H)
    assert [g.shape for g in grads] == [(I, 4 * H), (H, 4 * H), (4 * H,)]


def _tensors(w):
    return [tf.constant(a) for a in (w.kernel, w.recurrent_kernel, w.bias)]


# --- backends ---------------------------------------------------------------------------------


@pytest.mark.skipif(gpu_visible(), reason="checks the CPU fallback")
def test_without_gpu_the_while_loop_runs_and_cudnn_is_refused():
    assert choose_backend("auto") == "while_loop"
    with pytest.raises(InputError, match="needs a GPU"):
        choose_backend("cudnn")
    with pytest.raises(InputError, match="unknown RNN backend"):
        choose_backend("cuda")


def test_lstm_forward_takes_float64_arrays_as_a_notebook_has_them(rng):
    """NumPy's default dtype: TensorFlow refused float64 next to the float32 cell's products."""
    w = random_weights(I, H, rng)
    x, (h0, c0) = rng.standard_normal((T, B, I)), rng.uniform(-0.5, 0.5, (2, B, H))
    weights = (np.asarray(a, np.float64) for a in (w.kernel, w.recurrent_kernel, w.bias))
    h, c_last = lstm_forward(x, h0, c0, *weights, "while_loop")
    expected_h, expected_c, _ = np_forward(x, w.kernel, w.recurrent_kernel, w.bias, h0, c0)
    assert h.dtype == tf.float32
    assert_close(h.numpy(), expected_h, what="h")
    assert_close(c_last.numpy(), expected_c[-1], what="c")


@pytest.mark.gpu
@pytest.mark.parametrize("loss", ["mean_h", "last_mse"])
def test_cudnn_equals_while_loop_and_numpy(rng, loss):
    w = [random_weights(I, H, rng) for _ in range(N)]
    x = rng.standard_normal((N, T, B, I))
    h0 = rng.uniform(-0.5, 0.5, (N, B, H))
    target = None if loss == "mean_h" else rng.uniform(-0.5, 0.5, (N, B, H))
    cudnn = batchwise_gradients(x, w, loss, target, h0=h0, backend="cudnn")
    loop = batchwise_gradients(x, w, loss, target, h0=h0, backend="while_loop")
    assert str(cudnn.rnn_backend) == "cudnn" and str(loop.rnn_backend) == "while_loop"
    check_batches(cudnn, loss)
    for key in ("grad_output", "grad_kernel", "grad_recurrent_kernel", "grad_bias", "grad_h0"):
        assert_close(cudnn[key], loop[key], what=key)
    xt, h0t = tf.constant(x[0], tf.float32), tf.constant(h0[0], tf.float32)
    outs = [
        lstm_forward(xt, h0t, tf.zeros_like(h0t), *_tensors(w[0]), b)
        for b in ("cudnn", "while_loop")
    ]
    for a, b in zip(*outs, strict=True):
        assert_close(a.numpy(), b.numpy(), what="forward")


@pytest.mark.gpu
def test_hypernetwork_gradients_agree_across_backends(rng):
    hyper = Hypernetwork(I, H, seed=2, width=4)
    problem = check_problem(rng.standard_normal((T, B, I)), _zero(), "mean_h")
    _, on_gpu = batch_step(hyper, 0, problem, "mean_h", "cudnn")
    _, on_loop = batch_step(hyper, 0, problem, "mean_h", "while_loop")
    for a, b in zip(on_gpu, on_loop, strict=True):
        assert_close(a.numpy(), b.numpy(), what="generator gradient")


def _zero():
    return LSTMWeights(np.zeros((I, 4 * H)), np.zeros((H, 4 * H)), np.zeros(4 * H))


# --- each batch its own weights ---------------------------------------------------------------


@pytest.mark.parametrize("loss", ["mean_h", "last_mse", "seq_mse"])
def test_seeded_batches_match_numpy_bptt_and_the_taped_engine(loss):
    config = RunConfig(mode="batchwise", steps=T, batch=B, input_dim=I, hidden=H, batches=N)
    config.loss, config.random_state = loss, True
    trace = list(run(config))[-1]
    assert isinstance(trace, GradientTrace) and str(trace.generator) == "random"
    assert trace.x.shape == (N, T, B, I) and trace.kernel.shape == (N, I, 4 * H)
    assert trace.norm_h_total_by_batch.shape == (N, T) and trace.batch_seconds.shape == (N,)
    assert "norm_h_total" not in trace  # the same keys live and final
    check_batches(trace, loss)
    target = trace.arrays.get("target")
    for n in range(N):
        w = LSTMWeights(trace.kernel[n], trace.recurrent_kernel[n], trace.bias[n])
        t = None if target is None else target[n]
        taped = taped_gradients(trace.x[n], w, loss, t, trace.h0[n], trace.c0[n])
        np.testing.assert_allclose(trace.grad_h_total[n], taped.grad_h_total, rtol=1e-6)


def test_api_takes_one_weight_set_per_batch(rng):
    w = [random_weights(I, H, rng) for _ in range(N)]
    x = rng.standard_normal((N, T, B, I))
    target = rng.uniform(-0.5, 0.5, (N, T, B, H))
    trace = batchwise_gradients(x, w, "seq_mse", target, c0=rng.uniform(-1, 1, (N, B, H)))
    check_batches(trace, "seq_mse")
    assert str(trace.rnn_backend) in ("while_loop", "cudnn")
    with pytest.raises(InputError, match="N >= 1"):
        batchwise_gradients(x[:0], w, "mean_h")
    with pytest.raises(InputError, match="2 weight sets for N=3"):
        batchwise_gradients(x, w[:2], "mean_h")
    with pytest.raises(InputError, match="target must have one row per batch"):
        batchwise_gradients(x, w, "seq_mse", target[:1])


def test_run_yields_after_every_batch_and_stops_on_cancel():
    config = RunConfig(mode="batchwise", steps=T, batch=B, input_dim=I, hidden=H, batches=N)
    items = list(run(config))
    updates = [u for u in items if isinstance(u, TraceUpdate)]
    assert [u.done for u in updates] == list(range(N + 1))
    for u in updates[1:]:
        assert u.arrays["norm_h_total_by_batch"].shape == (u.done, T)
    np.testing.assert_array_equal(
        updates[-1].arrays["norm_h_total_by_batch"], items[-1].norm_h_total_by_batch
    )
    seen, stopped = [], []
    for item in run(config, cancelled=lambda: len(seen) >= 1):  # cancel once a batch is done
        stopped.append(item)
        if isinstance(item, TraceUpdate) and item.done:
            seen.append(item.done)
    assert seen == [1] and not any(isinstance(i, GradientTrace) for i in stopped)


# --- the hypernetwork -------------------------------------------------------------------------


def test_hypernetwork_gradients_match_numpy_chain_rule_and_finite_differences(rng):
    hyper = Hypernetwork(I, H, seed=5, width=4)
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    target = rng.uniform(-0.5, 0.5, (B, H))
    problem = check_problem(x, _zero(), "last_mse", target)
    arrays, grads = batch_step(hyper, 0, problem, "last_mse", "while_loop")
    value, params, expected = numpy_hypernetwork(hyper, x, "last_mse", target)
    assert len(grads) == 4
    for g, e, name in zip(grads, expected, ("W1", "b1", "W2", "b2"), strict=True):
        g = g.numpy()
        assert np.all(np.isfinite(g)) and np.any(g != 0), name
        assert_close(g, e, rtol=1e-4, atol_scale=1e-4, what=name)
    norm = np.sqrt(sum((e**2).sum() for e in expected))
    assert float(arrays["grad_generator_norm"]) == pytest.approx(norm, rel=1e-4)
    # Finite differences (float64, central) on a few entries of each parameter.
    eps = 1e-6
    for p, e in zip(range(4), expected, strict=True):
        for index in list(np.ndindex(params[p].shape))[:: max(1, params[p].size // 3)]:
            up = [q.copy() for q in params]
            down = [q.copy() for q in params]
            up[p][index] += eps
            down[p][index] -= eps
            fd = (value(up) - value(down)) / (2 * eps)
            assert fd == pytest.approx(e[index], rel=1e-5, abs=1e-9), (p, index)


def test_assigning_weights_to_a_layer_cuts_the_gradient_but_tensors_do_not(rng):
    """Seed 002's approach 1 gives None for every hypernetwork variable; lstm_forward does not."""
    import keras

    hyper = Hypernetwork(I, H, seed=1, width=4)
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    layer = keras.layers.LSTM(H, return_sequences=True)
    layer.build((B, T, I))
    with tf.GradientTape() as tape:
        kernel, recurrent, bias = hyper(0, x)
        layer.cell.kernel.assign(kernel)
        layer.cell.recurrent_kernel.assign(recurrent)
        layer.cell.bias.assign(bias)
        value = tf.reduce_mean(layer(np.transpose(x, (1, 0, 2))))
    assert tape.gradient(value, hyper.variables) == [None] * 4

    zeros = tf.zeros([B, H])
    with tf.GradientTape() as tape:
        h, _ = lstm_forward(tf.constant(x), zeros, zeros, *hyper(0, x))
        ours = tf.reduce_mean(h)
    grads = tape.gradient(ours, hyper.variables)
    assert float(ours) == pytest.approx(float(value), rel=1e-5)  # the same LSTM, the same weights
    _, expected = batch_step(hyper, 0, check_problem(x, _zero(), "mean_h"), "mean_h", "auto")
    for g, e in zip(grads, expected, strict=True):
        assert g is not None and np.any(g.numpy() != 0)
        assert_close(g.numpy(), e.numpy(), what="generator gradient")


def test_a_few_optimizer_steps_on_the_hypernetwork_lower_the_loss(rng):
    import keras

    hyper = Hypernetwork(I, H, seed=0, width=8)
    target = rng.uniform(-0.5, 0.5, (B, H))
    problem = check_problem(rng.standard_normal((T, B, I)), _zero(), "last_mse", target)
    optimizer = keras.optimizers.Adam(0.01)
    losses = []
    for _ in range(6):
        arrays, grads = batch_step(hyper, 0, problem, "last_mse", "auto")
        losses.append(float(arrays["loss"]))
        optimizer.apply_gradients(zip(grads, hyper.variables, strict=True))
    assert losses[-1] < 0.7 * losses[0], losses


# --- command line -----------------------------------------------------------------------------


@pytest.mark.parametrize("generator", ["random", "hypernetwork"])
def test_cli_writes_traces_that_match_numpy_bptt(tmp_path, generator):
    out = tmp_path / "t.npz"
    argv = ["run", "--mode", "batchwise", "--batches", "3", "--generator", generator]
    argv += [*CLI_SHAPE, "--loss", "last_mse", "--seed", "3", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    trace = GradientTrace.load(out)
    assert trace.mode == "batchwise" and str(trace.generator) == generator
    assert str(trace.rnn_backend) == ("cudnn" if gpu_visible() else "while_loop")
    assert trace.target.shape == (3, 2, 5) and trace.grad_h_total.shape == (3, 15, 2, 5)
    check_batches(trace, "last_mse")
    assert ("grad_generator_norm" in trace) == (generator == "hypernetwork")


def test_cli_files_generator_reads_one_file_per_batch(tmp_path, rng):
    paths = []
    for n in range(2):
        w = random_weights(3, 5, rng)
        paths.append(tmp_path / f"w{n}.npz")
        np.savez(paths[-1], kernel=w.kernel, recurrent_kernel=w.recurrent_kernel, bias=w.bias)
    argv = ["run", "--mode", "batchwise", "--generator", "files", *CLI_SHAPE, "--quiet"]
    for spec in (",".join(map(str, paths)), str(tmp_path)):
        out = tmp_path / "out" / "t.npz"
        out.parent.mkdir(exist_ok=True)
        assert main([*argv, "--batches", "2", "--weights", spec, "--out", str(out)]) == 0
        trace = GradientTrace.load(out)
        assert str(trace.generator) == "files"
        for n, path in enumerate(paths):
            np.testing.assert_array_equal(trace.kernel[n], np.load(path)["kernel"])
        check_batches(trace, "mean_h")


def test_files_generator_reads_any_weights_format(tmp_path, rng):
    """A folder mixing a real Keras `.weights.h5` and a PyTorch-layout `.safetensors` file."""
    import keras
    from safetensors.numpy import save_file

    model = keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(5, name="lstm")])
    model.save_weights(tmp_path / "a.weights.h5")
    torch_w = random_weights(3, 5, rng)
    half = torch_w.bias / 2  # PyTorch keeps two biases that add up
    save_file(
        {
            "weight_ih_l0": np.ascontiguousarray(torch_w.kernel.T),
            "weight_hh_l0": np.ascontiguousarray(torch_w.recurrent_kernel.T),
            "bias_ih_l0": half,
            "bias_hh_l0": half,
        },
        str(tmp_path / "b.safetensors"),
    )
    out = tmp_path / "t.npz"
    argv = ["run", "--mode", "batchwise", "--generator", "files", *CLI_SHAPE, "--batches", "2"]
    assert main([*argv, "--weights", str(tmp_path), "--quiet", "--out", str(out)]) == 0
    trace = GradientTrace.load(out)
    np.testing.assert_array_equal(trace.kernel[0], model.get_layer("lstm").get_weights()[0])
    np.testing.assert_allclose(trace.bias[1], torch_w.bias, rtol=1e-6)
    np.testing.assert_array_equal(trace.recurrent_kernel[1], torch_w.recurrent_kernel)
    check_batches(trace, "mean_h")


def test_cli_weight_files_fix_the_sizes_as_a_weights_file_does(tmp_path, capsys):
    rng = np.random.default_rng(3)
    names = []
    for k in range(2):
        w = random_weights(2, 3, rng)
        np.savez(tmp_path / f"w{k}.npz", kernel=w.kernel, recurrent_kernel=w.recurrent_kernel,
                 bias=w.bias)  # fmt: skip
        names.append(str(tmp_path / f"w{k}.npz"))
    out = tmp_path / "t.npz"
    argv = ["run", "--mode", "batchwise", "--generator", "files", *CLI_SHAPE, "--batches", "2",
            "--weights", ",".join(names), "--quiet", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0  # CLI_SHAPE asks for I=3, H=5: the files have I=2, H=3
    assert "ran --input-dim 2 (not 3), --hidden 3 (not 5)" in capsys.readouterr().err
    trace = GradientTrace.load(out)
    assert trace.kernel.shape == (2, 2, 12) and trace.config.hidden == 3
    listed = "2 files, batch 1, 2, … in this order: w0.npz, w1.npz"
    assert str(trace.weights_source) == f"{names[0]}: {listed}"
    np.testing.assert_array_equal(trace.kernel[1], np.load(names[1])["kernel"])
    check_batches(trace, "mean_h")


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (None, ["--batches", "0"], "--batches: 0 is out of range"),
        (None, ["--generator", "files"], "--weights: --generator files needs"),
        ("two_sizes", ["--generator", "files", "--batches", "2"],
         "v.npz: weights are for I=3, H=5, but the run has I=3, H=4"),
        ("missing", ["--generator", "files", "--batches", "1"], "w.npz: missing recurrent_kernel"),
        ("wrong_h", ["--generator", "files", "--batches", "2"], "1 weight file(s), but --batch"),
        (
            "wrong_h",
            ["--generator", "random"],
            "--weights: in batchwise mode weights files need --generator files",
        ),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, setup, args, message):
    path = tmp_path / "w.npz"
    w = random_weights(3, 4, np.random.default_rng(0))
    if setup == "wrong_h":
        np.savez(path, kernel=w.kernel, recurrent_kernel=w.recurrent_kernel, bias=w.bias)
    elif setup == "missing":
        np.savez(path, kernel=w.kernel, bias=w.bias)
    elif setup == "two_sizes":  # the first file fixes I and H; the second must have them
        np.savez(path, kernel=w.kernel, recurrent_kernel=w.recurrent_kernel, bias=w.bias)
        v = random_weights(3, 5, np.random.default_rng(1))
        np.savez(tmp_path / "v.npz", kernel=v.kernel, recurrent_kernel=v.recurrent_kernel,
                 bias=v.bias)  # fmt: skip
        path = f"{path},{tmp_path / 'v.npz'}"
    weights = ["--weights", str(path)] if setup else []
    out = tmp_path / "t.npz"
    argv = ["run", "--mode", "batchwise", *CLI_SHAPE, *args, *weights, "--out", str(out)]
    assert main([*argv, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_top_level_names_resolve():
    import lstmviz

    assert lstmviz.batchwise_gradients is batchwise_gradients
    assert lstmviz.lstm_forward is lstm_forward and lstmviz.Hypernetwork is Hypernetwork
