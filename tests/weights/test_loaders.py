"""Loading weights and inputs from real files made by Keras, safetensors and NumPy."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lstmviz
from lstmviz.cli import main
from lstmviz.core.errors import InputError, LstmvizError, WeightsError
from lstmviz.io.inputs import load_inputs
from lstmviz.io.trace import GradientTrace
from lstmviz.weights.loaders import list_lstm_layers, load_weights, read_weights

ENV = os.environ | {"TF_CPP_MIN_LOG_LEVEL": "2"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def torch_lstm_forward(x, w_ih, w_hh, b_ih, b_hh):
    """PyTorch's nn.LSTM equations, written independently: x [T, B, I] -> h [T, B, H]."""
    hidden = w_hh.shape[1]
    h = np.zeros((x.shape[1], hidden))
    c = np.zeros_like(h)
    out = []
    for x_t in x:
        gates = x_t @ w_ih.T + b_ih + h @ w_hh.T + b_hh
        i, f, g, o = (gates[:, k * hidden : (k + 1) * hidden] for k in range(4))
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        out.append(h)
    return np.stack(out)


@pytest.fixture(scope="module")
def keras_files(tmp_path_factory):
    """Tiny models saved by Keras in every format, with the layers they hold."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    from keras import layers

    keras.utils.set_random_seed(3)
    folder = tmp_path_factory.mktemp("keras")
    seq = keras.Sequential(
        [
            keras.Input((5, 3)),
            layers.Dense(4),
            layers.LSTM(6, return_sequences=True, name="enc"),
            layers.LSTM(2, name="dec"),
            layers.Dense(1),
        ]
    )
    inp = keras.Input((5, 3))
    mid = layers.Dense(4, name="pre")(inp)
    out = layers.LSTM(6, return_sequences=True, name="core")(mid)
    fun = keras.Model(inp, layers.Dense(1)(out))
    inner = keras.Sequential([keras.Input((5, 3)), layers.LSTM(3, name="inner_lstm")], name="sub")
    nested = keras.Sequential([keras.Input((5, 3)), inner, layers.Dense(2)])
    nobias = keras.Sequential([keras.Input((5, 3)), layers.LSTM(3, use_bias=False, name="nb")])
    bi = keras.Sequential([keras.Input((5, 3)), layers.Bidirectional(layers.LSTM(3), name="bi")])
    gru = keras.Sequential([keras.Input((5, 3)), layers.GRU(4, name="g")])
    dense = keras.Sequential([keras.Input((3,)), layers.Dense(2)])
    relu = keras.Sequential([keras.Input((5, 3)), layers.LSTM(3, activation="relu", name="r")])
    models = dict(seq=seq, fun=fun, nested=nested, nobias=nobias, bi=bi, gru=gru, dense=dense)
    models["relu"] = relu
    for name, model in models.items():
        model.save(folder / f"{name}.keras")
        model.save_weights(folder / f"{name}.weights.h5")
        model.save(folder / f"{name}.h5")  # legacy HDF5: Keras 3.15 still writes it
    expected = {
        "enc": seq.get_layer("enc").get_weights(),
        "dec": seq.get_layer("dec").get_weights(),
        "core": fun.get_layer("core").get_weights(),
        "inner_lstm": inner.get_layer("inner_lstm").get_weights(),
        "nb": nobias.get_layer("nb").get_weights(),
        "forward_lstm": bi.get_layer("bi").forward_layer.get_weights(),
    }
    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    lstm_in = keras.Model(inp, mid).predict(x, verbose=0)
    keras_h = keras.Model(inp, out).predict(x, verbose=0)
    return {"folder": folder, "expected": expected, "lstm_in": lstm_in, "keras_h": keras_h}


def assert_same(weights, expected):
    kernel, recurrent, *bias = expected
    bias = bias[0] if bias else np.zeros(recurrent.shape[1], np.float32)
    for got, want in zip(
        (weights.kernel, weights.recurrent_kernel, weights.bias),
        (kernel, recurrent, bias),
        strict=True,
    ):
        np.testing.assert_array_equal(got, want)


KINDS = ("keras", "weights.h5", "h5")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("model", "layer"),
    [("seq", "enc"), ("seq", "dec"), ("fun", None), ("nested", None), ("nobias", None)],
)
def test_keras_files_load_exact_weights(keras_files, kind, model, layer):
    path = keras_files["folder"] / f"{model}.{kind}"
    weights, source = read_weights(path, layer)
    name = layer or {"fun": "core", "nested": "inner_lstm", "nobias": "nb"}[model]
    assert_same(weights, keras_files["expected"][name])
    assert str(path) in source and repr(name) in source and f"H={weights.hidden}" in source


@pytest.mark.parametrize("kind", KINDS)
def test_several_lstms_are_listed_and_picked(keras_files, kind):
    path = keras_files["folder"] / f"seq.{kind}"
    assert sorted(info.name for info in list_lstm_layers(path)) == ["dec", "enc"]
    with pytest.raises(WeightsError, match=r"2 LSTM layers.*'enc'.*--layer") as err:
        load_weights(path)
    assert str(path) in str(err.value)
    with pytest.raises(WeightsError, match=r"no layer named 'nope'.*'enc'"):
        load_weights(path, "nope")


@pytest.mark.parametrize("kind", ("keras", "weights.h5"))
def test_bidirectional_halves_are_separate_layers(keras_files, kind):
    path = keras_files["folder"] / f"bi.{kind}"
    infos = {info.name: info for info in list_lstm_layers(path)}
    forward = next(name for name in infos if name.startswith("forward"))
    assert any(name.startswith("backward") for name in infos)
    assert "Bidirectional" in infos[forward].label
    assert_same(load_weights(path, forward), keras_files["expected"]["forward_lstm"])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("model", "message"), [("gru", "not an LSTM.*GRU"), ("dense", "")])
def test_files_without_an_lstm_are_refused(keras_files, kind, model, message):
    path = keras_files["folder"] / f"{model}.{kind}"
    with pytest.raises(WeightsError, match=f"no LSTM layer inside.*{message}") as err:
        load_weights(path)
    assert str(err.value).startswith(str(path))
    assert list_lstm_layers(path) == []


@pytest.mark.parametrize("kind", ("keras", "h5"))
def test_other_activations_are_refused_when_the_config_says_so(keras_files, kind):
    with pytest.raises(WeightsError, match="activation='relu'"):
        load_weights(keras_files["folder"] / f"relu.{kind}", "r")


def test_loaded_keras_weights_reproduce_keras_forward(keras_files):
    weights = load_weights(keras_files["folder"] / "fun.keras")
    x = keras_files["lstm_in"].transpose(1, 0, 2)
    trace = lstmviz.taped_gradients(x, weights)
    np.testing.assert_allclose(trace.h, keras_files["keras_h"].transpose(1, 0, 2), atol=1e-5)


def write_torch(path, rng, sizes, prefix="", extra=None):
    """A PyTorch nn.LSTM state dict (layers of (I, H)) written with safetensors."""
    from safetensors.numpy import save_file

    tensors = {}
    for k, (i, h) in enumerate(sizes):
        shapes = {"weight_ih": (4 * h, i), "weight_hh": (4 * h, h), "bias_ih": (4 * h,)}
        shapes["bias_hh"] = (4 * h,)
        for kind, shape in shapes.items():
            tensors[f"{prefix}{kind}_l{k}"] = rng.standard_normal(shape).astype(np.float32)
    tensors.update(extra or {})
    save_file(tensors, str(path))
    return tensors


def test_safetensors_state_dict_matches_pytorch_equations(tmp_path, rng):
    path = tmp_path / "m.safetensors"
    t = write_torch(path, rng, [(3, 5)])
    weights, source = read_weights(path)
    assert "'l0'" in source and "safetensors" in source
    np.testing.assert_array_equal(weights.kernel, t["weight_ih_l0"].T)
    np.testing.assert_array_equal(weights.bias, t["bias_ih_l0"] + t["bias_hh_l0"])
    x = rng.standard_normal((7, 2, 3))
    expected = torch_lstm_forward(
        x, *(t[f"{k}_l0"] for k in ("weight_ih", "weight_hh")), t["bias_ih_l0"], t["bias_hh_l0"]
    )
    np.testing.assert_allclose(lstmviz.taped_gradients(x, weights).h, expected, atol=1e-5)


def test_safetensors_with_prefix_and_two_layers(tmp_path, rng):
    path = tmp_path / "stack.safetensors"
    t = write_torch(path, rng, [(3, 4), (4, 2)], prefix="model.lstm.")
    assert [i.name for i in list_lstm_layers(path)] == ["model.lstm.l0", "model.lstm.l1"]
    with pytest.raises(WeightsError, match=r"'model.lstm.l0', 'model.lstm.l1'.*--layer"):
        load_weights(path)
    weights = load_weights(path, "model.lstm.l1")
    np.testing.assert_array_equal(weights.recurrent_kernel, t["model.lstm.weight_hh_l1"].T)
    assert (weights.input_dim, weights.hidden) == (4, 2)


def test_safetensors_gru_and_projection_are_refused(tmp_path, rng):
    from safetensors.numpy import save_file

    gru = tmp_path / "gru.safetensors"
    save_file(
        {"weight_ih_l0": np.ones((9, 2), np.float32), "weight_hh_l0": np.ones((9, 3), np.float32)},
        str(gru),
    )
    with pytest.raises(WeightsError, match="GRU"):
        load_weights(gru)
    proj = tmp_path / "proj.safetensors"
    write_torch(proj, rng, [(3, 4)], extra={"weight_hr_l0": np.ones((2, 4), np.float32)})
    with pytest.raises(WeightsError, match="proj_size"):
        load_weights(proj)


def test_pt_needs_torch(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    # as on a machine without PyTorch (the test extra installs it)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))  # fmt: skip
    path = tmp_path / "m.pt"
    path.write_bytes(b"\x80\x02}q\x00.")
    with pytest.raises(WeightsError, match="needs PyTorch.*safetensors") as err:
        load_weights(path)
    assert str(err.value).startswith(str(path))


def test_npz_weights(tmp_path, rng):
    w = lstmviz.random_weights(3, 4, rng)
    path = tmp_path / "w.npz"
    np.savez(path, kernel=w.kernel, recurrent_kernel=w.recurrent_kernel, bias=w.bias)
    assert_same(load_weights(path), (w.kernel, w.recurrent_kernel, w.bias))
    assert [i.name for i in list_lstm_layers(path)] == [""]
    with pytest.raises(WeightsError, match="have no names"):
        load_weights(path, "x")


def bad_weight_files(tmp_path, rng):
    """(path, message) for every kind of bad weights file."""
    w = lstmviz.random_weights(3, 4, rng)
    cases = [(tmp_path / "missing.keras", "no such file")]
    unknown = tmp_path / "w.bin"
    unknown.write_bytes(b"1234")
    cases.append((unknown, "unknown weights format"))
    for suffix in (".keras", ".weights.h5", ".h5", ".npz", ".safetensors"):
        empty = tmp_path / f"empty{suffix}"
        empty.write_bytes(b"")
        garbage = tmp_path / f"garbage{suffix}"
        garbage.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
        cases += [(empty, "not a readable"), (garbage, "not a readable")]
    arrays = {
        "missing_key": dict(kernel=w.kernel, bias=w.bias),
        "inconsistent": dict(kernel=w.kernel, recurrent_kernel=w.recurrent_kernel, bias=w.bias[:8]),
        "wrong_rank": dict(kernel=w.kernel[0], recurrent_kernel=w.recurrent_kernel, bias=w.bias),
        "nan": dict(kernel=w.kernel * np.nan, recurrent_kernel=w.recurrent_kernel, bias=w.bias),
        "text": dict(kernel=np.array(["a"]), recurrent_kernel=w.recurrent_kernel, bias=w.bias),
    }
    messages = {
        "missing_key": "missing recurrent_kernel",
        "inconsistent": "inconsistent",
        "wrong_rank": "expected kernel",
        "nan": "kernel contains NaN",
        "text": "not numbers",
    }
    for name, content in arrays.items():
        np.savez(tmp_path / f"{name}.npz", **content)
        cases.append((tmp_path / f"{name}.npz", messages[name]))
    pickled = tmp_path / "pickled.npz"
    np.savez(
        pickled, kernel=np.array([{"x": 1}], dtype=object), recurrent_kernel=w.kernel, bias=w.bias
    )
    cases.append((pickled, "not a readable"))
    return cases


def test_bad_weight_files_are_refused_naming_the_file(tmp_path, rng):
    for path, message in bad_weight_files(tmp_path, rng):
        with pytest.raises(WeightsError, match=message) as err:
            load_weights(path)
        text = str(err.value)
        assert text.startswith(str(path)) and "\n" not in text, text


def test_truncated_keras_files_are_refused(keras_files, tmp_path):
    for kind in KINDS:
        data = (keras_files["folder"] / f"fun.{kind}").read_bytes()
        path = tmp_path / f"cut.{kind}"
        path.write_bytes(data[: len(data) // 2])
        with pytest.raises(WeightsError, match=f"{path}: not a readable"):
            load_weights(path)


def mutated(data: bytes, cut: int, flips: list[int]) -> bytes:
    out = bytearray(data[: max(1, len(data) - cut)])
    for position in flips:
        out[position % len(out)] ^= 1 << (position % 8)
    return bytes(out)


FUZZ = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
MUTATIONS = dict(
    cut=st.integers(0, 64) | st.integers(0, 30000),
    flips=st.lists(st.integers(0, 10**6), max_size=3),
)


@pytest.fixture(scope="module")
def fuzz_sources(keras_files, tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    rng = np.random.default_rng(5)
    write_torch(folder / "m.safetensors", rng, [(3, 4)], prefix="lstm.")
    w = lstmviz.random_weights(3, 4, rng)
    np.savez(folder / "m.npz", kernel=w.kernel, recurrent_kernel=w.recurrent_kernel, bias=w.bias)
    sources = {f"m.{kind}": (keras_files["folder"] / f"fun.{kind}").read_bytes() for kind in KINDS}
    for name in ("m.safetensors", "m.npz"):
        sources[name] = (folder / name).read_bytes()
    return sources


@pytest.mark.parametrize("name", ["m.keras", "m.weights.h5", "m.h5", "m.safetensors", "m.npz"])
def test_fuzzed_weight_files_load_or_raise_lstmviz_errors(fuzz_sources, tmp_path_factory, name):
    folder = tmp_path_factory.mktemp("mutants")
    original = fuzz_sources[name]

    @FUZZ
    @given(**MUTATIONS)
    def check(cut, flips):
        path = folder / name
        path.write_bytes(mutated(original, cut, flips))
        try:
            weights = load_weights(path)
        except LstmvizError as exc:
            assert str(exc).startswith(str(path)) and "\n" not in str(exc)
        else:
            assert not weights.nonfinite()

    check()


def test_inputs_batch_major_and_time_major(tmp_path, rng):
    x = rng.standard_normal((2, 5, 3))
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "x.npz", x=x, other=np.ones(2))
    for name in ("x.npy", "x.npz"):
        loaded = load_inputs(tmp_path / name)
        assert loaded.dtype == np.float32 and loaded.shape == (5, 2, 3)
        np.testing.assert_array_equal(loaded, x.transpose(1, 0, 2).astype(np.float32))
        np.testing.assert_array_equal(
            load_inputs(tmp_path / name, time_major=True), x.astype(np.float32)
        )


def test_bad_inputs_are_refused_naming_the_file(tmp_path):
    cases = {
        "missing.npy": "no such file",
        "x.txt": "unknown input format",
        "two_d.npy": "3-D array",
        "nan.npy": "NaN or Inf",
        "nokey.npz": "no array 'x'",
        "pickled.npy": "not a readable",
        "empty.npy": "not a readable",
        "text.npy": "not numbers",
        "zero.npy": "non-empty",
    }
    (tmp_path / "x.txt").write_text("1 2 3")
    np.save(tmp_path / "two_d.npy", np.ones((2, 3)))
    np.save(tmp_path / "nan.npy", np.full((1, 2, 3), np.nan))
    np.savez(tmp_path / "nokey.npz", y=np.ones((1, 2, 3)))
    np.save(tmp_path / "pickled.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp_path / "empty.npy").write_bytes(b"")
    np.save(tmp_path / "text.npy", np.array([[["a"]]]))
    np.save(tmp_path / "zero.npy", np.ones((0, 2, 3)))
    for name, message in cases.items():
        with pytest.raises(InputError, match=message) as err:
            load_inputs(tmp_path / name)
        assert str(err.value).startswith(str(tmp_path / name)) and "\n" not in str(err.value)


@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_fuzzed_input_files_load_or_raise_lstmviz_errors(tmp_path_factory, suffix):
    folder = tmp_path_factory.mktemp("inputs")
    x = np.random.default_rng(1).standard_normal((2, 4, 3))
    path = folder / f"x{suffix}"
    np.save(path, x) if suffix == ".npy" else np.savez(path, x=x)
    original = path.read_bytes()

    @FUZZ
    @given(**MUTATIONS)
    def check(cut, flips):
        path.write_bytes(mutated(original, cut, flips))
        try:
            loaded = load_inputs(path)
        except LstmvizError as exc:
            assert str(exc).startswith(str(path))
        else:
            assert loaded.ndim == 3 and np.all(np.isfinite(loaded))

    check()


def test_cli_run_with_keras_weights_and_inputs(keras_files, tmp_path, capsys):
    x = np.random.default_rng(2).standard_normal((2, 7, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "t.npz"
    path = keras_files["folder"] / "seq.keras"
    argv = ["run", "--weights", str(path), "--layer", "enc", "--inputs", str(tmp_path / "x.npy")]
    assert main([*argv, "--out", str(out), "--quiet"]) == 2  # enc expects I=4, x has I=6
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "I=6" in err and "I=4" in err and not out.exists()
    argv[4] = "dec"
    assert main([*argv, "--loss", "last_mse", "--out", str(out), "--quiet"]) == 0
    trace = GradientTrace.load(out)
    assert_same(trace, keras_files["expected"]["dec"])
    np.testing.assert_array_equal(trace.x, x.transpose(1, 0, 2))
    c = trace.config
    assert (c.steps, c.batch, c.input_dim, c.hidden, c.layer) == (7, 2, 6, 2, "dec")
    assert "'dec'" in str(trace.weights_source) and "batch-major" in str(trace.inputs_source)
    assert trace.target.shape == (2, 2)


def test_batchwise_files_say_which_half_of_a_bidirectional_ran(keras_files, tmp_path, capsys):
    """`--mode batchwise --generator files --layer bi` ran the forward halves and said
    nothing (the other modes print which half ran)."""
    folder = keras_files["folder"]
    files = f"{folder / 'bi.keras'},{folder / 'bi.weights.h5'}"
    out = tmp_path / "t.npz"
    argv = ["run", "--mode", "batchwise", "--generator", "files", "--weights", files,
            "--batches", "2", "--steps", "4", "--batch", "2", "--quiet", "--out", str(out)]
    assert main([*argv, "--layer", "bi"]) == 0
    forward = read_weights(folder / "bi.keras", "bi")[1].partition(", layer ")[2]
    picked = forward.partition("; kernel")[0]
    assert picked.startswith("'bi': a Bidirectional, using its forward half 'forward_")
    assert capsys.readouterr().err == f"lstmviz: note: --layer {picked}\n"
    trace = GradientTrace.load(out)
    assert str(trace.weights_source).endswith(f", layer {picked}")
    for n in range(2):  # each batch ran the forward half's weights
        kernel, recurrent, bias = keras_files["expected"]["forward_lstm"]
        np.testing.assert_array_equal(trace.kernel[n], kernel)
        np.testing.assert_array_equal(trace.recurrent_kernel[n], recurrent)
        np.testing.assert_array_equal(trace.bias[n], bias)
    assert main([*argv, "--layer", "bi/backward"]) == 0
    assert capsys.readouterr().err == ""  # a half named: nothing to say


def test_loaded_weights_keep_the_seeded_parts(tmp_path, rng):
    w = lstmviz.random_weights(3, 4, rng)
    np.savez(tmp_path / "w.npz", kernel=w.kernel, recurrent_kernel=w.recurrent_kernel, bias=w.bias)
    common = ["run", "--steps", "6", "--batch", "2", "--seed", "9", "--random-state", "--quiet"]
    seeded, loaded = tmp_path / "s.npz", tmp_path / "l.npz"
    assert main([*common, "--input-dim", "3", "--hidden", "4", "--out", str(seeded)]) == 0
    assert main([*common, "--weights", str(tmp_path / "w.npz"), "--out", str(loaded)]) == 0
    a, b = GradientTrace.load(seeded), GradientTrace.load(loaded)
    for key in ("x", "h0", "c0"):
        np.testing.assert_array_equal(a[key], b[key])
    np.testing.assert_array_equal(b.kernel, w.kernel)
    assert b.config.input_dim == 3 and b.config.hidden == 4


def test_cli_refuses_a_corrupt_file_in_one_line(tmp_path):
    bad = tmp_path / "broken.keras"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    out = tmp_path / "t.npz"
    proc = subprocess.run(
        [sys.executable, "-m", "lstmviz", "run", "--weights", str(bad), "--out", str(out)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and str(bad) in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == [bad]


def test_layer_without_weights_is_a_config_error(tmp_path, capsys):
    assert main(["run", "--layer", "enc", "--out", str(tmp_path / "t.npz")]) == 2
    assert "--layer" in capsys.readouterr().err


def test_api_names_are_lazy():
    assert lstmviz.load_weights is load_weights
    assert lstmviz.load_inputs is load_inputs


def test_shipped_demo_files_load():
    weights, source = read_weights(os.path.join(ROOT, "resources", "demo_lstm.keras"))
    assert (weights.input_dim, weights.hidden) == (2, 16) and "'lstm'" in source
    assert load_inputs(os.path.join(ROOT, "resources", "demo_inputs.npy")).shape == (20, 8, 2)


def test_hdf5_links_are_not_followed(tmp_path, rng):
    import h5py

    w = lstmviz.random_weights(3, 4, rng)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["kernel"] = w.kernel
    path = tmp_path / "linked.h5"
    with h5py.File(path, "w") as f:
        cell = f.create_group("model_weights/lstm/lstm/lstm_cell")
        cell["kernel"] = h5py.ExternalLink(str(other), "kernel")
        cell["recurrent_kernel"] = w.recurrent_kernel
        cell["bias"] = w.bias
        f["model_weights/loop/self"] = f["model_weights"]  # a cycle of hard links
    with pytest.raises(WeightsError, match="kernel or recurrent_kernel is missing") as err:
        load_weights(path)
    assert str(err.value).startswith(str(path))


def test_a_refused_layer_without_a_name_is_not_listed_as_an_empty_name():
    """ "no LSTM layer inside (: not an LSTM …)": an unnamed layer's reason stands alone."""
    from lstmviz.weights.formats.found import FoundLayer
    from lstmviz.weights.loaders import _usable

    named = FoundLayer("gru", {"kernel": np.zeros((2, 9))}, problem="a GRU, not an LSTM")
    unnamed = FoundLayer("", {"kernel": np.zeros((2, 9))}, problem="a GRU, not an LSTM")
    usable, refused = _usable([named, unnamed])
    assert not usable and refused[0].startswith("gru: ") and not refused[1].startswith(":")
