"""The command line as a demanding user meets it: files of the wrong kind under the right
name, folders given as files, damaged archive members, values float32 cannot hold, empty
names, no display, sizes the files replace, layer listings in model order, help texts.

Every bad input must give one line "lstmviz: error: …" naming the problem, exit 2, no
traceback and no file written."""

import os
import subprocess
import sys
import zipfile

import h5py
import numpy as np
import pytest

from lstmviz.cli import build_parser, main
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import WeightsError
from lstmviz.io import files
from lstmviz.io.trace import GradientTrace
from lstmviz.weights.loaders import list_lstm_layers, load_weights, read_weights
from tests.helpers.models.model_fixtures import keras3_models, npz_stack
from tests.helpers.processes.cli_process import ROOT, SMALL, files_in


def refused(argv: list[str], capsys, folder) -> str:
    """Run the CLI on `argv`: it must exit 2 with one error line and leave `folder` as it
    was. Returns the line without its "lstmviz: error: " prefix."""
    before = files_in(folder)
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("lstmviz: error: "), err
    assert "Traceback" not in err and "Warning" not in err, err
    assert files_in(folder) == before, argv
    return lines[0].removeprefix("lstmviz: error: ")


def weights_npz(path, rng, input_dim=3, hidden=4, dtype=np.float32):
    arrays = {"kernel": rng.standard_normal((input_dim, 4 * hidden)),
              "recurrent_kernel": rng.standard_normal((hidden, 4 * hidden)),
              "bias": rng.standard_normal(4 * hidden)}  # fmt: skip
    np.savez(path, **{k: v.astype(dtype) for k, v in arrays.items()})
    return arrays


def hdf5_file(path):
    with h5py.File(path, "w") as f:
        f["a"] = np.ones(3)
    return path


def broken_member(path, array: np.ndarray) -> None:
    """Damage the bytes of the first array stored in the .npz `path` (a CRC mismatch when
    the member is read; the zip directory is intact)."""
    raw = bytearray(path.read_bytes())
    at = raw.find(array.tobytes()[:32])
    assert at > 0
    raw[at + 8] ^= 0xFF
    path.write_bytes(bytes(raw))
    with zipfile.ZipFile(path) as archive:  # the directory still reads
        assert archive.namelist()


# --- files of another kind under the right name --------------------------------------------


@pytest.mark.parametrize(
    ("name", "make", "says"),
    [
        ("zip.h5", "zip", "it is a zip archive"),
        ("zip.weights.h5", "zip", "it is a zip archive"),
        ("hdf5.npz", "hdf5", "it is an HDF5 file"),
        ("hdf5.keras", "hdf5", "it is an HDF5 file"),
        ("hdf5.safetensors", "hdf5", "it is an HDF5 file"),
        ("text.npz", "text", "it is a text file"),
        ("empty.keras", "empty", "it is empty (0 bytes)"),
        ("empty.safetensors", "empty", "it is empty (0 bytes)"),
        ("npy.h5", "npy", "it is a single NumPy array"),
    ],
)
def test_weights_of_another_kind_say_what_the_file_is(tmp_path, capsys, rng, name, make, says):
    path = tmp_path / name
    if make == "zip":
        weights_npz(tmp_path / "w.npz", rng)
        (tmp_path / "w.npz").rename(path)
    elif make == "hdf5":
        hdf5_file(path)
    elif make == "text":
        path.write_text("kernel,recurrent_kernel,bias\n1,2,3\n")
    elif make == "npy":
        with open(path, "wb") as handle:
            np.save(handle, np.ones(3))
    else:
        path.write_bytes(b"")
    line = refused(["run", *SMALL, "--weights", str(path), "--out", str(tmp_path / "t.npz")],
                   capsys, tmp_path)  # fmt: skip
    assert line.startswith(f"{path}: not a readable ") and f"file: {says}" in line, line
    model = refused(["run", "--mode", "model", "--model", str(path), "--quiet", "--out",
                     str(tmp_path / "t.npz")], capsys, tmp_path)  # fmt: skip
    assert model.startswith(f"{path}: not a readable ") and f"file: {says}" in model, model


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("text.npy", b"1 2 3\n4 5 6\n", "it is a text file"),
        ("hdf5.npz", None, "it is an HDF5 file"),
        ("empty.npy", b"", "it is empty (0 bytes)"),
    ],
)
def test_inputs_of_another_kind_say_what_the_file_is(tmp_path, capsys, name, content, says):
    path = tmp_path / name
    hdf5_file(path) if content is None else path.write_bytes(content)
    out = str(tmp_path / "t.npz")
    for mode in ("taped", "train"):
        argv = ["run", "--mode", mode, *SMALL, "--inputs", str(path), "--out", out]
        line = refused(argv, capsys, tmp_path)
        assert line.startswith(f"{path}: not a readable ") and f"file: {says}" in line, line


def test_what_a_file_holds_is_read_from_its_first_bytes(tmp_path, rng):
    weights_npz(tmp_path / "w.npz", rng)
    np.save(tmp_path / "x.npy", np.ones(2))
    (tmp_path / "t.txt").write_text("é" * 300)  # a character cut at byte 512 is still text
    (tmp_path / "b.bin").write_bytes(bytes(range(256)))
    (tmp_path / "e").write_bytes(b"")
    found = {name: files.content(tmp_path / name)
             for name in ("w.npz", "x.npy", "t.txt", "b.bin", "e", "missing")}  # fmt: skip
    assert found == {"w.npz": "zip", "x.npy": "npy", "t.txt": "text", "b.bin": "",
                     "e": "empty", "missing": ""}  # fmt: skip
    assert files.content(hdf5_file(tmp_path / "a.h5")) == "hdf5"
    assert files.wrong_content(tmp_path / "w.npz") is None  # what its name says
    assert files.wrong_content(tmp_path / "b.bin") is None  # an unknown suffix says nothing


# --- folders given as files -----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["run", *SMALL, "--weights", "{d}"],
        ["run", *SMALL, "--inputs", "{d}"],
        ["run", "--mode", "train", *SMALL, "--inputs", "{d}"],
        ["run", "--mode", "model", "--quiet", "--model", "{d}"],
    ],
)
def test_a_folder_given_as_a_file_is_named_as_a_folder(tmp_path, capsys, argv):
    weights = "--weights" in argv or "--model" in argv
    folder = tmp_path / ("w.keras" if weights else "x.npz")
    folder.mkdir()
    argv = [a.format(d=folder) for a in argv] + ["--out", str(tmp_path / "t.npz")]
    assert refused(argv, capsys, tmp_path) == f"{folder}: is a folder, not a file"


def test_a_folder_given_to_gui_or_export_is_named_as_a_folder(tmp_path, capsys):
    folder = tmp_path / "t.npz"
    folder.mkdir()
    line = refused(["gui", str(folder)], capsys, tmp_path)
    assert line == f"FILE: {folder}: is a folder, not a file"
    line = refused(["export", str(folder), "--csv", str(tmp_path / "a.csv")], capsys, tmp_path)
    assert line == f"{folder}: is a folder, not a file"


# --- damaged members, NaN, values beyond float32 ----------------------------------------------


def test_a_damaged_array_inside_an_npz_is_one_line_in_every_mode(tmp_path, capsys, rng):
    """The zip directory reads; the member's bytes do not match its CRC. Model mode and
    training read the arrays after opening the archive: they raised BadZipFile."""
    x = rng.standard_normal((4, 5, 3))
    data = tmp_path / "data.npz"
    np.savez(data, x=x, y=rng.standard_normal((4, 5, 3)))
    broken_member(data, x)
    npz_stack(tmp_path / "stack.npz", rng, {"a": (3, 4)})
    out = str(tmp_path / "t.npz")
    for argv in (
        ["run", *SMALL, "--inputs", str(data), "--out", out],
        ["run", "--mode", "train", *SMALL, "--inputs", str(data), "--out", out],
        ["run", "--mode", "model", "--quiet", "--model", str(tmp_path / "stack.npz"),
         "--inputs", str(data), "--out", out],
    ):  # fmt: skip
        line = refused(argv, capsys, tmp_path)
        assert line.startswith(f"{data}: not a readable .npz file (BadZipFile: Bad CRC"), line


def test_training_data_saved_as_npz_under_an_npy_name(tmp_path, capsys, rng):
    """np.load reads an .npz whatever its name: training took it for one array (an
    AttributeError traceback). Now its arrays are used, or the missing one is named."""
    path = tmp_path / "series.npy"
    with open(path, "wb") as handle:
        np.savez(handle, kernel=np.ones((3, 8)))
    line = refused(["run", "--mode", "train", *SMALL, "--inputs", str(path), "--out",
                    str(tmp_path / "t.npz")], capsys, tmp_path)  # fmt: skip
    assert line == (f"{path}: needs arrays 'x' [N, T, I] and 'y' [N, O] or [N, T, O]; missing "
                    "x, y (found kernel)")  # fmt: skip
    x, y = rng.standard_normal((4, 6, 2)), rng.standard_normal((4, 1))
    with open(path, "wb") as handle:
        np.savez(handle, x=x, y=y)
    out = tmp_path / "t.npz"
    argv = ["run", "--mode", "train", "--train-steps", "2", "--batch", "2", "--hidden", "3"]
    assert main([*argv, "--quiet", "--inputs", str(path), "--out", str(out)]) == 0
    trace = GradientTrace.load(out)
    assert (trace.config.steps, trace.config.input_dim) == (6, 2)


def test_values_float32_cannot_hold_are_refused_not_turned_into_inf(tmp_path, capsys, rng):
    """1e39 is finite in float64 and Inf in float32 (with a RuntimeWarning on stderr): the
    run went on with Inf (model mode: exit 0, loss -inf)."""
    w = tmp_path / "w.npz"
    arrays = weights_npz(w, rng, dtype=np.float64)
    arrays["kernel"][1, 2] = -1e39
    np.savez(w, **arrays)
    out = str(tmp_path / "t.npz")
    line = refused(["run", *SMALL, "--weights", str(w), "--out", out], capsys, tmp_path)
    assert line == f"{w}: kernel holds 1e+39, beyond float32's range (±3.4e38)"

    x = tmp_path / "x.npy"
    big = rng.standard_normal((2, 4, 3))
    big[1, 1, 1] = 1e300
    np.save(x, big)
    line = refused(["run", *SMALL, "--inputs", str(x), "--out", out], capsys, tmp_path)
    assert line == f"{x}: x holds 1e+300, beyond float32's range (±3.4e38)"

    npz_stack(tmp_path / "stack.npz", rng, {"a": (3, 4)})
    data = tmp_path / "data.npz"
    np.savez(data, x=rng.standard_normal((2, 4, 3)), y=np.full((2, 4, 4), 5e38))
    argv = ["run", "--mode", "model", "--quiet", "--model", str(tmp_path / "stack.npz"),
            "--inputs", str(data), "--out", out]  # fmt: skip
    assert refused(argv, capsys, tmp_path) == (
        f"{data}: y holds 5e+38, beyond float32's range (±3.4e38)"
    )
    np.savez(data, x=rng.standard_normal((2, 4, 3)), y=np.float32(1.0))
    assert refused(argv, capsys, tmp_path) == (
        f"{data}: y is a single number, not one target per sample"
    )


def test_token_ids_for_a_weights_only_file_say_why_the_shapes_differ(tmp_path, capsys, rng):
    npz_stack(tmp_path / "stack.npz", rng, {"a": (3, 4)})
    data = tmp_path / "ids.npz"
    np.savez(data, x=rng.integers(1, 50, (4, 6)))
    argv = ["run", "--mode", "model", "--quiet", "--model", str(tmp_path / "stack.npz"),
            "--inputs", str(data), "--out", str(tmp_path / "t.npz")]  # fmt: skip
    line = refused(argv, capsys, tmp_path)
    assert line.startswith(f"{data}: x has shape [4, 6], the model takes (None, None, 3); ")
    assert "weights-only file runs its LSTMs alone" in line


# --- empty names, no display, what export reads -------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["run", *SMALL, "--out", ""], "--out: empty file name"),
        (["export", "{t}", "--png", ""], "--png: empty file name"),
        (["export", "{t}", "--csv", "{d}/a.csv", "--svg", ""], "--svg: empty file name"),
        (["export", "", "--csv", "{d}/a.csv"], "TRACE: empty file name"),
        (["gui", "--screenshot", ""], "--screenshot: empty file name"),
        (["gui", ""], "FILE: empty file name"),
    ],
)
def test_empty_output_and_file_names_are_refused(tmp_path, capsys, argv, expected):
    """`--out ""` said ".: is a folder", `--png ""` "nothing to export" and `--screenshot ""`
    opened the window without saving."""
    trace = tmp_path / "t.npz"
    GradientTrace("taped", RunConfig(), {"bias": np.ones(4, np.float32)}).save(trace)
    argv = [a.format(t=trace, d=tmp_path) for a in argv]
    assert refused(argv, capsys, tmp_path) == expected


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/Wayland only")
def test_gui_without_a_display_exits_2_before_qt_aborts(tmp_path):
    """Qt aborted the process (exit 134, a core dump) after five lines of plugin errors.
    A process of its own: were the check gone, Qt would abort this one."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}  # fmt: skip
    env |= {"XDG_CONFIG_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "lstmviz", "gui"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("lstmviz: error: gui: no display to open a window on")
    assert len(done.stderr.splitlines()) == 1 and "xvfb-run -a" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("m.keras", "lstmviz export reads a trace (.npz) or a recording (.lvz)"),
        ("empty.lvz", "not a readable .lvz file: it is empty (0 bytes)"),
        ("text.npz", "not a readable .npz file: it is a text file"),
    ],
)
def test_export_names_what_it_reads(tmp_path, capsys, rng, name, expected):
    path = tmp_path / name
    if name == "m.keras":
        weights_npz(tmp_path / "w.npz", rng)
        (tmp_path / "w.npz").rename(path)
    else:
        path.write_text("" if name == "empty.lvz" else "not a trace")
    line = refused(["export", str(path), "--csv", str(tmp_path / "a.csv")], capsys, tmp_path)
    assert line.startswith(f"{path}: {expected}"), line


# --- sizes the files replace ----------------------------------------------------------------


def test_sizes_the_files_fix_are_named_when_the_command_line_asked_otherwise(
    tmp_path, capsys, rng
):
    """--steps 9 with inputs of 5 steps ran 5 steps without a word."""
    x = tmp_path / "x.npy"
    np.save(x, rng.standard_normal((2, 5, 3)))  # B=2, T=5, I=3
    w = tmp_path / "w.npz"
    weights_npz(w, rng, input_dim=3, hidden=4)
    out = tmp_path / "t.npz"
    argv = ["run", "--quiet", "--inputs", str(x), "--weights", str(w), "--out", str(out)]
    assert main([*argv, "--steps", "9", "--batch", "7", "--hidden", "4"]) == 0
    note = "lstmviz: note: the files fix the sizes: ran "
    assert capsys.readouterr().err == note + "--steps 5 (not 9), --batch 2 (not 7)\n"
    config = GradientTrace.load(out).config
    assert (config.steps, config.batch, config.input_dim, config.hidden) == (5, 2, 3, 4)
    assert main([*argv, "--hidden", "6"]) == 0
    assert capsys.readouterr().err == note + "--hidden 4 (not 6)\n"
    assert main(argv) == 0  # nothing asked: nothing to say
    assert capsys.readouterr().err == ""


# --- layer listings in model order ----------------------------------------------------------


@pytest.fixture(scope="module")
def tokens_model():
    return keras3_models()["tokens"]


@pytest.fixture(scope="module")
def tokens_files(tmp_path_factory, tokens_model):
    """The Embedding → Bidirectional(LSTM) → LSTM → Dense model of
    tests/helpers/models/model_fixtures.py in the three Keras formats."""
    model = tokens_model
    folder = tmp_path_factory.mktemp("tokens")
    model.save(folder / "m.keras")
    model.save(folder / "m.h5")
    model.save_weights(folder / "m.weights.h5")
    return folder


@pytest.mark.parametrize("name", ["m.keras", "m.h5", "m.weights.h5"])
def test_layers_are_listed_in_model_order_forward_half_first(tokens_files, capsys, name):
    """A .keras archive listed the top LSTM before the Bidirectional, and its backward half
    before the forward one."""
    path = tokens_files / name
    layers = list_lstm_layers(path)
    assert [layer.name for layer in layers][2] == "top"
    assert layers[0].note.startswith("forward") and layers[1].note.startswith("backward")
    line = refused(["run", "--weights", str(path), "--out", str(tokens_files / "t.npz")],
                   capsys, tokens_files)  # fmt: skip
    names = ", ".join(repr(layer.name) for layer in layers)
    assert line == (f"{path}: 3 LSTM layers ({names}; Bidirectional 'bi' = its forward half, "
                    "'bi/backward' = its backward half); pick one with --layer NAME (layer= in "
                    "Python)")  # fmt: skip


def assert_weights_of(weights, keras_layer):
    """`weights` hold exactly the arrays Keras's `keras_layer.get_weights()` returns."""
    got = (weights.kernel, weights.recurrent_kernel, weights.bias)
    for have, want in zip(got, keras_layer.get_weights(), strict=True):
        np.testing.assert_array_equal(have, want)


@pytest.mark.parametrize("name", ["m.keras", "m.h5", "m.weights.h5"])
def test_a_bidirectionals_own_name_picks_its_forward_half(tokens_model, tokens_files, name):
    """`layer="bi"` (the Bidirectional's name, the one a user sees in model.summary()) was
    "no layer named 'bi'": only the inner forward_lstm_N / backward_lstm_N names worked."""
    path, bi = tokens_files / name, tokens_model.get_layer("bi")
    weights, source = read_weights(path, "bi")
    assert_weights_of(weights, bi.forward_layer)
    picked = f"layer 'bi': a Bidirectional, using its forward half {bi.forward_layer.name!r}"
    assert picked in source
    assert_weights_of(load_weights(path, "bi/forward"), bi.forward_layer)
    assert_weights_of(load_weights(path, "bi/backward"), bi.backward_layer)
    assert_weights_of(load_weights(path, bi.backward_layer.name), bi.backward_layer)
    with pytest.raises(WeightsError, match="no layer named 'bi/sideways'"):
        load_weights(path, "bi/sideways")


def test_layer_naming_a_bidirectional_on_the_command_line(tokens_model, tokens_files, tmp_path,
                                                          capsys):  # fmt: skip
    path, bi = tokens_files / "m.keras", tokens_model.get_layer("bi")
    out = tmp_path / "t.npz"
    argv = ["run", "--quiet", "--weights", str(path), "--steps", "4", "--batch", "2"]
    assert main([*argv, "--layer", "bi", "--out", str(out)]) == 0
    assert capsys.readouterr().err == (
        f"lstmviz: note: --layer 'bi': a Bidirectional, using its forward half "
        f"{bi.forward_layer.name!r} (its backward half: 'bi/backward')\n"
    )
    trace = GradientTrace.load(out)
    assert_weights_of(trace, bi.forward_layer)
    assert trace.config.layer == "bi"
    line = refused([*argv, "--layer", "lstm", "--out", str(tmp_path / "u.npz")], capsys, tmp_path)
    names = ", ".join(repr(layer.name) for layer in list_lstm_layers(path))
    assert line == (f"{path}: no layer named 'lstm' (layers: {names}; Bidirectional 'bi' = its "
                    "forward half, 'bi/backward' = its backward half)")  # fmt: skip
    line = refused(["run", "--mode", "model", "--model", str(path), "--layer", "bi", "--out",
                    str(tmp_path / "m.npz")], capsys, tmp_path)  # fmt: skip
    assert line.startswith("--layer: model mode runs every LSTM direction of the model (both "
                           "halves of a Bidirectional")  # fmt: skip


# --- help texts -----------------------------------------------------------------------------


def _subparsers():
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return parser, action.choices


def test_every_flag_of_every_command_has_a_help_text(capsys):
    """`lstmviz export --help` listed --width and --height with no text, range or default."""
    _, commands = _subparsers()
    for name, sub in commands.items():
        for action in sub._actions:
            if action.option_strings and action.dest != "help":
                assert action.help, f"lstmviz {name} {action.option_strings[0]} has no help"
    for flag, default in (("--width", "1600"), ("--height", "1000"), ("--dpi", "144")):
        action = next(a for a in commands["export"]._actions if flag in a.option_strings)
        text = action.help % {"default": action.default}
        assert "range [" in text and f"default {default}" in text, (flag, text)


def test_help_texts_match_what_the_cli_does(capsys):
    parser, commands = _subparsers()
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    assert "Exit codes: 0 success, 2 bad input" in top and "130 interrupted" in top
    run = {a.dest: a.help for a in commands["run"]._actions}
    for suffix in files.WEIGHTS:  # every suffix the loaders read
        assert suffix in run["weights"], suffix
    assert "'wrote …'" in run["quiet"]  # --quiet also drops the closing line


def test_a_native_crash_says_where_each_thread_was():
    """A segfault in Qt, TensorFlow or the kernels (exit -11 and nothing else) prints the
    Python stack of every thread: what a bug report needs."""
    code = ("import ctypes, sys\n"
            "from lstmviz.cli import main\n"
            "main(['run', '--help'])\n"
            "ctypes.string_at(0)\n")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)  # fmt: skip
    assert done.returncode == -11
    assert "Fatal Python error: Segmentation fault" in done.stderr, done.stderr[-500:]


def test_a_launcher_without_stdout_or_stderr_still_gets_exit_codes(tmp_path):
    """Started with no standard streams (sys.stderr None, as pythonw or a desktop entry does),
    a bad input still exits 2 and a run still writes its trace: writing the message failed
    with an AttributeError (exit 1)."""
    out = tmp_path / "t.npz"
    code = (
        "import sys; sys.stdout = None; sys.stderr = None\n"
        "from lstmviz.cli import main\n"
        f"bad = main(['run', '--steps', '0', '--out', {str(out)!r}])\n"
        "good = main(['run', '--steps', '3', '--batch', '2', '--hidden', '4',\n"
        f"             '--out', {str(out)!r}])\n"
        "sys.__stdout__.write(f'{bad} {good}')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "2 0" and out.exists()
