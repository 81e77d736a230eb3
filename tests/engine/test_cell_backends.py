"""Both implementations of `lstm.lstm_sequence` — the native CPU kernels and the TensorFlow
while-loops — against NumPy BPTT (tests/helpers/references/reference.py): states, the total
gradients at every h_t and c_t, and the gradients of x, the weights and the initial state; eagerly
and compiled (where the native backward writes dz over the gates' buffer), with losses that reach h,
c or both. Shapes include whole vectors and a remainder of units, several row tiles per thread and
several panels of gate columns, whatever the vector width of the build."""

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lstmviz.engine.autodiff.gradients import graph_step_norm
from lstmviz.engine.cells import lstm
from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import gpu_visible, tf
from lstmviz.io.trace import step_norm
from tests.helpers.kernel_choice import BACKENDS
from tests.helpers.references.reference import (
    assert_close,
    interrupted_outcome,
    np_bptt,
    np_forward,
)


def test_native_kernels_build_and_load():
    """Wherever a C++ compiler is found, the kernels must build and load (this is what `make
    install` runs); CI therefore always exercises them."""
    if shutil.which("g++") is None and not os.environ.get("CXX"):
        pytest.skip("no C++ compiler")
    if gpu_visible() or os.environ.get("LSTMVIZ_NATIVE") == "0":
        pytest.skip("the while-loops run here by design")
    assert kernels.build().exists()
    kernels._load.cache_clear()
    assert kernels.library() is not None, kernels.status()
    assert kernels.status() == "native CPU kernels"


# (7, 4, 3, 5) and (12, 9, 6, 16): odd B, uneven row blocks; (6, 19, 7, 21): 21 units are whole
# vectors and a remainder with AVX2 (8 floats) and AVX-512 (16), 9 or 10 rows a thread make
# two row tiles, 84 gate columns several panels with the last one padded.
SHAPES = [(7, 4, 3, 5), (1, 1, 1, 1), (5, 3, 2, 4), (12, 9, 6, 16), (6, 19, 7, 21)]
LOSSES = {  # which states the loss reaches: the native backward gets no zeros for the other
    "h_and_c": (True, True),
    "h_only": (True, False),
    "c_only": (False, True),
}


def _problem(rng, steps, batch, inputs, hidden):
    """x, h0, c0, kernel, recurrent, bias (float32), the initial state not zero."""
    x = rng.normal(size=(steps, batch, inputs))
    h0, c0 = rng.normal(size=(2, batch, hidden)) * 0.5
    kernel = rng.normal(size=(inputs, 4 * hidden)) * 0.5
    recurrent = rng.normal(size=(hidden, 4 * hidden)) * 0.5
    bias = rng.normal(size=4 * hidden)
    return [a.astype(np.float32) for a in (x, h0, c0, kernel, recurrent, bias)]


def _check_against_numpy(rng, backend, arrays, loss="h_and_c", mask=None, compiled=False,
                         dx=True):  # fmt: skip
    """Run `backend` on arrays (x, h0, c0, kernel, recurrent, bias) under a random weighting of
    the states `loss` names; compare states, every gradient and the per-step norms of dL/dh_t,
    dL/dc_t and ∂L/∂h_t with NumPy BPTT. Compiled with the native kernels, the norms are the
    backward op's own (`native.kernels.backward_norms`). Without `dx` nothing asks for dL/dx, so a
    compiled native backward keeps dz in scratch rows instead of writing it out."""
    steps, batch, _ = arrays[0].shape
    hidden = arrays[1].shape[1]
    on_h, on_c = LOSSES[loss]
    weight_h, weight_c = rng.normal(size=(2, steps, batch, hidden)).astype(np.float32)
    masks = [] if mask is None else [tf.constant(mask)]
    fused = []

    def run(*sources):
        probes = [tf.zeros((steps, batch, hidden)) for _ in range(2)]
        with tf.GradientTape() as tape:
            tape.watch([*sources, *probes])
            h, c = BACKENDS[backend](*sources, *probes, *masks)
            value = 0.0
            if on_h:
                value += tf.reduce_sum(h * weight_h)
            if on_c:
                value += tf.reduce_sum(c * weight_c)
        wanted = [*sources, *probes, h] if dx else [*sources[1:], *probes, h]
        zero = tf.UnconnectedGradients.ZERO
        *grads, direct = tape.gradient(value, wanted, unconnected_gradients=zero)
        checked = grads[-2:] + ([direct] if on_h else [])
        fused.append([kernels.backward_norms(g) is not None for g in checked])
        return h, c, grads, [graph_step_norm(g) for g in checked]

    run = tf.function(run) if compiled else run
    h, c, grads, norms = run(*[tf.constant(a) for a in arrays])
    if compiled and backend == "native":
        assert all(fused[-1]), fused
    x, h0, c0, kernel, recurrent, bias = arrays
    direct_h = weight_h if on_h else np.zeros_like(weight_h)
    ref = np_bptt(x, kernel, recurrent, bias, h0, c0, direct_h, direct_c=weight_c if on_c else None,
                  mask=mask)  # fmt: skip
    assert_close(h, ref["h"], what="h")
    assert_close(c, ref["c"], what="c")
    names = ("dx", "dh0", "dc0", "dkernel", "drecurrent", "dbias", "dh", "dc")[0 if dx else 1 :]
    for name, grad in zip(names, grads, strict=True):
        assert_close(grad, ref[name], what=name)
    expected = {"dh": ref["dh"], "dc": ref["dc"], "direct": direct_h}
    for name, norm in zip(expected, norms, strict=False):  # "direct" when the loss reaches h
        grad = expected[name]
        np.testing.assert_allclose(norm, step_norm(grad), rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("steps,batch,inputs,hidden", SHAPES)
def test_states_and_every_gradient_match_numpy_bptt(rng, backend, steps, batch, inputs, hidden):
    _check_against_numpy(rng, backend, _problem(rng, steps, batch, inputs, hidden))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_losses_on_either_state_compiled_or_not_match_numpy_bptt(rng, backend, loss, compiled):
    _check_against_numpy(rng, backend, _problem(rng, 6, 19, 7, 21), loss, compiled=compiled)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_masked_runs_of_several_tiles_match_numpy_bptt(rng, backend, compiled):
    """Random holes and post-padding (rows 0 and 1 run no step; row 2 every step) at a shape
    where every part of the kernels' products and gate passes is used."""
    steps, batch = 6, 19
    mask = (rng.random((steps, batch)) < 0.7).astype(np.float32)
    mask *= np.arange(steps)[:, None] < rng.integers(0, steps + 1, size=batch)
    mask[:, :2], mask[:, 2] = 0.0, 1.0
    arrays = _problem(rng, steps, batch, 7, 21)
    _check_against_numpy(rng, backend, arrays, mask=mask, compiled=compiled)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "masked"])
def test_compiled_runs_without_dx_match_numpy_bptt(rng, backend, masked):
    steps, batch = 6, 19
    mask = (rng.random((steps, batch)) < 0.7).astype(np.float32) if masked else None
    arrays = _problem(rng, steps, batch, 7, 21)
    _check_against_numpy(rng, backend, arrays, mask=mask, compiled=True, dx=False)


def _use_backend(backend: str, monkeypatch) -> None:
    """`lstm.lstm_sequence` on `backend`: the native kernels (skipped where they are not
    built) or, with the library hidden, the while-loops."""
    if backend == "native" and kernels.library() is None:
        pytest.skip(kernels.status())
    if backend == "loops":
        monkeypatch.setattr(kernels, "library", lambda: None)


def _joined(ref_gates) -> np.ndarray:
    """np_forward's gates (per step i, f, g, o, …) as the cell's [T, B, 4H]."""
    return np.stack([np.concatenate(step[:4], axis=-1) for step in ref_gates])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("masked", [False, True], ids=["unmasked", "masked"])
def test_gate_activations_match_numpy_and_are_not_differentiated(rng, backend, masked,
                                                                  monkeypatch):  # fmt: skip
    _use_backend(backend, monkeypatch)
    steps, batch, hidden = 6, 19, 21
    arrays = _problem(rng, steps, batch, 7, hidden)
    mask = (rng.random((steps, batch)) < 0.6).astype(np.float32) if masked else None
    sources = [tf.constant(a) for a in arrays]
    with tf.GradientTape() as tape:
        tape.watch(sources)
        h, _, gates = lstm.lstm_sequence(*sources, mask=mask, with_gates=True)
        total = tf.reduce_sum(gates)
    assert all(g is None for g in tape.gradient(total, sources))
    x, h0, c0, kernel, recurrent, bias = arrays
    ref_h, _, ref_gates = np_forward(x, kernel, recurrent, bias, h0, c0, mask)
    assert_close(h, ref_h, what="h")
    assert_close(gates, _joined(ref_gates), what="gates")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_reading_from_the_end_keeps_input_positions(rng, backend, compiled, monkeypatch):
    """`reverse` (go_backwards): the cell reads x from its last step, every array indexed by
    input position: states, gates, every gradient and the per-step norms equal NumPy BPTT of
    the reversed sequence flipped back. Masked, the probes read (not `unread_probes`)."""
    _use_backend(backend, monkeypatch)
    steps, batch, hidden = 6, 19, 21
    arrays = _problem(rng, steps, batch, 7, hidden)
    mask = (rng.random((steps, batch)) < 0.7).astype(np.float32)
    weight_h, weight_c = rng.normal(size=(2, steps, batch, hidden)).astype(np.float32)

    def run(*sources):
        probes = [tf.zeros((steps, batch, hidden)) for _ in range(2)]
        with tf.GradientTape() as tape:
            tape.watch([*sources, *probes])
            h, c, gates = lstm.lstm_sequence(*sources, *probes, mask=tf.constant(mask),
                                             with_gates=True, reverse=True)  # fmt: skip
            value = tf.reduce_sum(h * weight_h) + tf.reduce_sum(c * weight_c)
        grads = tape.gradient(value, [*sources, *probes])
        return h, c, gates, grads, [graph_step_norm(g) for g in grads[-2:]]

    run = tf.function(run) if compiled else run
    h, c, gates, grads, norms = run(*[tf.constant(a) for a in arrays])
    x, h0, c0, kernel, recurrent, bias = arrays
    flip = functools.partial(np.flip, axis=0)
    ref = np_bptt(flip(x), kernel, recurrent, bias, h0, c0, flip(weight_h),
                  direct_c=flip(weight_c), mask=flip(mask))  # fmt: skip
    _, _, ref_gates = np_forward(flip(x), kernel, recurrent, bias, h0, c0, flip(mask))
    assert_close(h, flip(ref["h"]), what="h")
    assert_close(c, flip(ref["c"]), what="c")
    assert_close(gates, flip(_joined(ref_gates)), what="gates")
    names = ("dx", "dh0", "dc0", "dkernel", "drecurrent", "dbias", "dh", "dc")
    for name, grad in zip(names, grads, strict=True):
        assert_close(grad, flip(ref[name]) if name in ("dx", "dh", "dc") else ref[name],
                     what=name)  # fmt: skip
    for name, norm in zip(("dh", "dc"), norms, strict=True):
        np.testing.assert_allclose(norm, step_norm(flip(ref[name])), rtol=1e-4, atol=1e-6,
                                   err_msg=name)  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_probes_add_to_the_states(rng, backend):
    """A probe's value is added to h_t (c_t) and carried on, as the gradient assumes."""
    x = rng.normal(size=(4, 2, 3)).astype(np.float32)
    weights = [rng.normal(size=s).astype(np.float32) for s in ((3, 8), (2, 8), (8,))]
    zeros = tf.zeros((2, 2))
    bump = np.zeros((4, 2, 2), np.float32)
    bump[1] = 0.25
    plain = BACKENDS[backend](x, zeros, zeros, *weights, tf.zeros((4, 2, 2)), tf.zeros((4, 2, 2)))
    h, c = BACKENDS[backend](x, zeros, zeros, *weights, bump, tf.zeros((4, 2, 2)))
    np.testing.assert_allclose(h[1] - plain[0][1], 0.25, rtol=1e-6)
    assert not np.allclose(h[2], plain[0][2])  # carried into the next step
    np.testing.assert_array_equal(c[:2], plain[1][:2])


def test_native_kernels_name_inconsistent_shapes():
    lib = kernels.library()
    if lib is None:
        pytest.skip(kernels.status())
    x, zeros = tf.zeros((3, 2, 4)), tf.zeros((2, 5))
    with pytest.raises(tf.errors.InvalidArgumentError, match="LSTM shapes disagree"):
        lib.lstmviz_sequence_forward(
            x, tf.zeros((4, 16)), tf.zeros((5, 20)), tf.zeros(20), zeros, zeros,
            tf.zeros((3, 2, 5)), tf.zeros((3, 2, 5)), [],  # no mask
        )  # fmt: skip


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_norms_match_float64(rng, backend, monkeypatch):
    """`graph_step_norm` (the native op, or TensorFlow's reduction): per-step norms over
    whole and partial vectors of values as NumPy's in float64, and NaN stays NaN. Where the
    squares leave float32's range the native op sums them in double (exact); TensorFlow's
    reduction makes Inf and 0 there, which `trace_arrays.exact_norm` redoes."""
    _use_backend(backend, monkeypatch)
    for shape in ((6, 64, 37), (3, 1, 5), (0, 4, 8)):
        g = rng.standard_normal(shape).astype(np.float32) * 1e3
        np.testing.assert_allclose(graph_step_norm(tf.constant(g)), step_norm(g), rtol=1e-6)
    g = np.ones((5, 3, 40), np.float32)
    g[1, 2, 39], g[2, 0, 0], g[4] = np.nan, 1e20, 3e-25
    norms = np.asarray(graph_step_norm(tf.constant(g)))
    assert np.isnan(norms[1])
    np.testing.assert_allclose(norms[[0, 3]], np.sqrt(120), rtol=1e-6)
    assert kernels.exact_norms() == (backend == "native")
    if backend == "native":
        np.testing.assert_allclose(norms[[2, 4]], step_norm(g[[2, 4]]), rtol=1e-6)
    else:
        assert np.isinf(norms[2]) and norms[4] == 0


def test_a_compiled_step_neither_writes_nor_reads_zeros(monkeypatch):
    """In the compiled taped step the probes are `native.kernels.unread_probes` (the forward takes
    them as zeros without reading them) and the zeros a tape makes for dL/dc, which mean_h
    does not reach, are not passed to the backward; the while-loops refuse such probes."""
    from lstmviz.engine.autodiff.gradients import HiddenLoss, compiled_step

    if kernels.library() is None:
        pytest.skip(kernels.status())
    graph = compiled_step(HiddenLoss("mean_h"), 3, 2, 5).get_concrete_function().graph
    ops = {op.type: op for op in graph.get_operations()}
    forward, backward = ops["LstmvizSequenceForward"], ops["LstmvizSequenceBackward"]
    assert not forward.get_attr("read_probes")
    assert [t.op.type for t in forward.inputs[6:8]] == ["Empty", "Empty"]
    assert backward.get_attr("dh_given") == 1 and backward.get_attr("dc_given") == 0

    @tf.function
    def loops():
        x, h0 = tf.zeros((4, 3, 2)), tf.zeros((3, 5))
        weights = tf.zeros((2, 20)), tf.zeros((5, 20)), tf.zeros(20)
        return lstm.lstm_sequence(x, h0, h0, *weights, *kernels.unread_probes(x, h0))

    monkeypatch.setattr(kernels, "library", lambda: None)
    with pytest.raises(ValueError, match="unread_probes"):
        loops.get_concrete_function()


def test_a_model_graph_passes_no_zeros_to_the_backward():
    """Model mode's graph (static shapes): the tape's zeros for dL/dc_t, which the loss does
    not reach, are a Fill rather than a ZerosLike; the backward takes no dc_direct either."""
    import keras

    from lstmviz.engine.modes import model as engine
    from lstmviz.weights.model_files import spec_from_keras

    if kernels.library() is None:
        pytest.skip(kernels.status())
    model = keras.Sequential([keras.Input((4, 2)), keras.layers.LSTM(3), keras.layers.Dense(1)])
    model.compile(loss="mse")
    spec = spec_from_keras(model)
    x, y = np.zeros((2, 4, 2), np.float32), np.zeros((2, 1), np.float32)
    loss, x, y, _ = engine.prepare(spec, engine.RunConfig(mode="model"), x, y)
    gradients = engine.ModelGradients(spec, loss)
    arguments = [tf.constant(np.swapaxes(x, 0, 1)), tf.constant(y), engine.flat_weights(spec)]
    graph = gradients.function().get_concrete_function(*arguments).graph
    (backward,) = [op for op in graph.get_operations() if op.type == "LstmvizSequenceBackward"]
    assert backward.get_attr("dh_given") == 1 and backward.get_attr("dc_given") == 0


def test_native_can_be_switched_off(monkeypatch):
    monkeypatch.setenv("LSTMVIZ_NATIVE", "0")
    kernels._load.cache_clear()
    try:
        assert kernels._load() == (None, "TensorFlow while-loops (LSTMVIZ_NATIVE=0)")
    finally:
        monkeypatch.delenv("LSTMVIZ_NATIVE")
        kernels._load.cache_clear()


def test_traces_record_which_kernel_ran_and_the_summary_says_so(rng, tmp_path):
    from lstmviz.analysis.report.summary import summary_text
    from lstmviz.engine.modes.batchwise import batchwise_gradients
    from lstmviz.engine.modes.taped import taped_gradients
    from lstmviz.io.trace import GradientTrace
    from lstmviz.weights import random_weights

    x = rng.normal(size=(5, 2, 3)).astype(np.float32)
    weights = random_weights(3, 4, rng)
    taped = taped_gradients(x, weights)
    assert str(taped.lstm_kernel) == kernels.kernel_name()
    loaded = GradientTrace.load(taped.save(tmp_path / "t.npz"))
    assert str(loaded.lstm_kernel) == kernels.kernel_name()
    shown = {"native": "native kernels", "while_loop": "tf.while_loop"}[kernels.kernel_name()]
    assert shown in summary_text("taped", loaded.arrays, loaded.config, 0.1)
    per_batch = batchwise_gradients(np.stack([x, x]), [weights, weights])
    assert np.shape(per_batch.lstm_kernel) == ()  # one text, not one per batch
    summary = summary_text("batchwise", per_batch.arrays, per_batch.config, 0.1)
    cudnn = str(per_batch.rnn_backend) == "cudnn"
    assert ("LSTM on <b>cuDNN</b>" if cudnn else shown) in summary and "rnn_backend" not in summary
    older = {k: v for k, v in taped.arrays.items() if k != "lstm_kernel"}
    assert "tf.while_loop" in summary_text("taped", older, taped.config, 0.1)


def test_interrupt_stops_a_running_native_op_and_later_runs_are_unaffected():
    """`interrupt.interrupt()` (ctypes, any thread) makes a running kernel fail with
    CancelledError at its next step; the next call runs to the end."""
    if kernels.library() is None:
        pytest.skip(kernels.status())
    steps, hidden = 1_000_000, 4  # long enough to outlast one 5 ms interrupt interval
    x = tf.ones((steps, 1, 1))
    weights = (tf.fill((1, 4 * hidden), 0.1), tf.fill((hidden, 4 * hidden), 0.1), tf.zeros(16))
    zeros, probes = tf.zeros((1, hidden)), tf.zeros((steps, 1, hidden))
    outcome = interrupted_outcome(
        lambda: kernels.sequence(x, zeros, zeros, *weights, probes, probes))  # fmt: skip
    assert "LSTM run interrupted" in outcome
    h, _ = kernels.sequence(x[:10], zeros, zeros, *weights, probes[:10], probes[:10])
    assert np.isfinite(h).all()


def test_a_cancelled_run_whose_kernel_was_interrupted_ends_quietly(monkeypatch):
    """The runner turns the kernel's CancelledError into a cancelled run (no trace, no
    error) when the run was cancelled, and lets it through otherwise."""
    from lstmviz.core.config import RunConfig
    from lstmviz.engine import runner
    from lstmviz.engine.modes import taped

    def interrupted(*args, **kwargs):
        raise tf.errors.CancelledError(None, None, "LSTM run interrupted")

    monkeypatch.setattr(taped, "compute_taped", interrupted)
    config = RunConfig(mode="taped", steps=5, batch=2, hidden=3)
    polls = []  # not cancelled when the engine checks before computing, cancelled after

    def cancelled() -> bool:
        polls.append(1)
        return len(polls) > 1

    items = list(runner.run(config, cancelled))
    assert len(items) == 1 and items[0].done == 0  # the start update, then nothing
    with pytest.raises(tf.errors.CancelledError):
        list(runner.run(config))


def test_a_failing_compiler_is_named_and_leaves_nothing_behind(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", "/bin/false")
    monkeypatch.setattr(kernels, "library_path", lambda: tmp_path / "lstm_kernels-x.so")
    with pytest.raises(RuntimeError, match="/bin/false failed: exit code 1"):
        kernels.build()
    assert list(tmp_path.iterdir()) == []


def test_the_native_arch_names_the_build_and_its_flags(monkeypatch):
    monkeypatch.delenv(kernels.ARCH_VARIABLE, raising=False)
    default = kernels.library_path()
    assert kernels.arch() == "native" and "-march=native" in kernels._flags()
    assert default.name.startswith("lstm_kernels-native-")
    monkeypatch.setenv(kernels.ARCH_VARIABLE, "haswell")
    assert "-march=haswell" in kernels._flags() and "-march=native" not in kernels._flags()
    assert kernels.library_path().name.startswith("lstm_kernels-haswell-")
    assert kernels.library_path().parent == default.parent


def test_a_malformed_native_arch_is_named_and_the_loops_run(monkeypatch):
    if gpu_visible() or os.environ.get("LSTMVIZ_NATIVE") == "0":
        pytest.skip("the while-loops run here by design")
    monkeypatch.setenv(kernels.ARCH_VARIABLE, "x -O0")
    kernels._load.cache_clear()
    try:
        library, status = kernels._load()
        assert library is None
        expected = "LSTMVIZ_NATIVE_ARCH='x -O0' is not a g++ -march name"
        assert status == f"TensorFlow while-loops ({expected})"
    finally:
        monkeypatch.delenv(kernels.ARCH_VARIABLE)
        kernels._load.cache_clear()


def test_the_build_description_names_the_vector_instructions():
    if kernels.library() is None:
        assert kernels.build_description() == ""
        pytest.skip(kernels.status())
    described = kernels.build_description()
    assert described.startswith(f"-march={kernels.arch()}: ")
    assert any(isa in described for isa in ("AVX-512,", "AVX2+FMA,", "AVX,", "NEON,", "SSE2,"))
    assert "floats a vector" in described and "register tiles" in described


def _cpu_flags() -> set[str]:
    try:
        return set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return set()


@pytest.mark.slow
def test_the_avx2_build_matches_numpy_bptt():
    """LSTMVIZ_NATIVE_ARCH=haswell builds the AVX2 code path, which AVX-512 CPUs run too: its
    kernels pass this file's and tests/engine/test_mask.py's native tests, in a process of their own
    (one process loads one build of the ops)."""
    if shutil.which("g++") is None and not os.environ.get("CXX"):
        pytest.skip("no C++ compiler")
    if not {"avx2", "fma"} <= _cpu_flags():
        pytest.skip("no AVX2 and FMA on this CPU")
    if gpu_visible() or os.environ.get("LSTMVIZ_NATIVE") == "0":
        pytest.skip("the while-loops run here by design")
    root = Path(__file__).resolve().parents[2]
    env = os.environ | {kernels.ARCH_VARIABLE: "haswell"}
    subprocess.run([sys.executable, "-m", "lstmviz.engine.native"], env=env, cwd=root,
                   check=True, capture_output=True, timeout=600)  # fmt: skip
    selected = "native and not avx2_build and not malformed"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", selected,
         "tests/engine/test_cell_backends.py", "tests/engine/test_mask.py"],
        env=env, cwd=root, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-3000:]
