"""The package top level: cheap to import, lazy names resolve; what a notebook user meets."""

import copy
import pickle
import subprocess
import sys

import numpy as np
import pytest


def python_c(code: str) -> subprocess.CompletedProcess:
    """`code` run by a fresh interpreter (`python -c`), which must exit 0."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done


def test_import_is_cheap_and_names_resolve():
    code = (
        "import sys, lstmviz\n"
        "assert 'tensorflow' not in sys.modules and 'PySide6' not in sys.modules\n"
        "lstmviz.LSTMWeights, lstmviz.GradientTrace, lstmviz.RunConfig\n"
        "assert 'tensorflow' not in sys.modules\n"
        "assert callable(lstmviz.taped_gradients)\n"
        "assert 'tensorflow' in sys.modules and 'PySide6' not in sys.modules\n"
    )
    python_c(code)


def test_unknown_name_is_an_attribute_error():
    import lstmviz

    try:
        lstmviz.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_tensorflow_import_is_quiet_but_loses_nothing_other_threads_write():
    code = (
        "import os, sys, threading, time\n"
        "def other():\n"
        "    time.sleep(0.2)\n"
        "    os.write(2, b'written meanwhile\\n')\n"
        "threading.Thread(target=other).start()\n"
        "from lstmviz.engine.quiet_tensorflow import tf\n"
        "tf.constant(1.0) + 1.0\n"
        "print('after', file=sys.stderr)\n"
    )
    done = python_c(code)
    lines = done.stderr.splitlines()
    assert lines == ["written meanwhile", "after"], lines


def test_a_run_prints_no_native_notice_and_importing_leaves_tensorflow_configurable():
    """A masked model's fit or gradient printed "E0000 … oneDNN supports DT_BOOL only on
    platforms with AVX-512 …" (once per process, at the first graph with a boolean op): a run
    spends it where it is filtered. Importing lstmviz.keras still runs no op, so a notebook can
    configure TensorFlow's threads and devices after it."""
    code = (
        "import sys\n"
        "import lstmviz.keras\n"
        "import tensorflow as tf\n"
        "tf.config.threading.set_intra_op_parallelism_threads(2)\n"  # raises once set up
        "from lstmviz import RunConfig, run\n"
        "list(run(RunConfig(mode='taped', steps=3, batch=2, input_dim=2, hidden=3)))\n"
        "f = tf.function(lambda m: tf.transpose(tf.logical_not(m), [1, 0, 2]))\n"
        "f(tf.ones((2, 3, 4), tf.bool))\n"
        "print('after', file=sys.stderr)\n"
    )
    done = python_c(code)
    lines = [line for line in done.stderr.splitlines() if "Warning" not in line]
    assert lines[-1:] == ["after"] and not any("DT_BOOL" in line for line in lines), lines


# ---- what a notebook user meets: repr, keys, errors by name ------------------------------------


def _taped(rng, steps=9, loss="last_mse"):
    import lstmviz

    w = lstmviz.random_weights(4, 5, rng)
    x = rng.standard_normal((steps, 3, 4))
    target = {"last_mse": np.zeros((3, 5)), "seq_mse": np.zeros((steps, 3, 5))}.get(loss)
    return lstmviz.taped_gradients(x, w, loss=loss, target=target)


def test_trace_repr_lists_keys_by_shape_not_values(rng):
    trace = _taped(rng, steps=300)
    text = repr(trace)
    assert len(text) < 1500, len(text)  # not every array's values
    assert text.splitlines()[0] == "GradientTrace(mode='taped', loss='last_mse', 23 arrays)"
    assert "[300, 3, 5] float32: c, grad_c_total, grad_h_direct, grad_h_total, h" in text
    assert f"loss={float(trace.loss):.4g}" in text
    assert str(trace) == text


def test_model_trace_repr_shows_its_layer_names():
    import keras

    import lstmviz

    layers = keras.layers
    model = keras.Sequential([keras.Input((6, 2)), layers.Bidirectional(layers.LSTM(3), name="bi"),
                              layers.Dense(1)])  # fmt: skip (named: Keras counts default names)
    model.compile(loss="mse")
    trace = lstmviz.model_gradients(model, np.ones((2, 6, 2)), np.zeros((2, 1)))
    text = repr(trace)
    assert "layer_names=['bi/forward', 'bi/backward']" in text
    assert "model_summary=" in text and len(max(text.splitlines(), key=len)) <= 100


def test_trace_names_close_keys_iterates_and_completes(rng):
    trace = _taped(rng)
    with pytest.raises(AttributeError, match=r"did you mean .*'grad_h_total'"):
        trace.grad_h_totl  # noqa: B018
    with pytest.raises(KeyError, match=r"did you mean .*'norm_h_total'"):
        trace["norm_h_totl"]
    with pytest.raises(AttributeError, match=r"trace\.keys\(\) lists them"):
        trace.nothing_like_it  # noqa: B018
    for name in ("plot", "show"):  # what a notebook user tries first: the function that draws
        with pytest.raises(AttributeError, match=r"^GradientTrace has no method "
                           rf"'{name}': lstmviz\.plot\(trace\) draws the panels$"):  # fmt: skip
            getattr(trace, name)()
    assert list(trace) == trace.keys()
    assert {"grad_h_total", "norm_h_total", "save", "keys"} <= set(dir(trace))
    copied = copy.deepcopy(trace)  # __getattr__ must not break copying or pickling
    assert np.array_equal(pickle.loads(pickle.dumps(copied)).grad_h_total, trace.grad_h_total)


def test_save_into_a_missing_folder_names_the_file_asked_for(rng, tmp_path):
    trace = _taped(rng)
    target = tmp_path / "nowhere" / "t.npz"
    with pytest.raises(FileNotFoundError) as caught:
        trace.save(target)
    assert caught.value.filename == str(target)
    assert ".tmp" not in str(caught.value)


def test_loading_a_recording_as_a_trace_points_to_load_recording(tmp_path):
    import lstmviz

    path = tmp_path / "run.lvz"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(64))
    with pytest.raises(lstmviz.TraceError, match="lstmviz.load_recording"):
        lstmviz.GradientTrace.load(path)


def test_error_classes_and_verify_resolve_from_the_top_level():
    import lstmviz
    from lstmviz.analysis.verify import verify_trace
    from lstmviz.io.recording import RecordingError
    from lstmviz.plots.export.writer import ExportError

    assert lstmviz.RecordingError is RecordingError
    assert lstmviz.ExportError is ExportError
    assert lstmviz.verify_trace is verify_trace
    assert issubclass(lstmviz.RecordingError, lstmviz.LstmvizError)
    assert issubclass(lstmviz.ExportError, lstmviz.LstmvizError)


def test_verify_takes_a_path_and_checks_arguments(rng, tmp_path):
    import lstmviz

    trace = _taped(rng, loss="seq_mse")
    direct = lstmviz.verify_trace(trace)
    from_file = lstmviz.verify_trace(trace.save(tmp_path / "t.npz"))
    assert direct.ok and from_file == direct
    with pytest.raises(lstmviz.InputError, match="samples"):
        lstmviz.verify_trace(trace, samples=-1)
    with pytest.raises(lstmviz.InputError, match="not a dict"):
        lstmviz.verify_trace(dict(trace.arrays))


@pytest.mark.parametrize("task", ["adding", "sine", "copy"])
def test_verify_checks_a_training_trace_against_its_task_loss(task):
    """A training run's gradients are of its task's loss on a dense read-out (MSE of the last
    step or of every step, cross-entropy for copy): rebuilding config.loss (mean_h) on h had
    reported correct gradients as wrong (worst_rel ~1), the GUI's Verify a red ✗. A gradient
    off by 10% is caught."""
    import lstmviz

    trace = lstmviz.train(task=task, train_steps=2, steps=6, batch=2, hidden=3, seed=1)
    result = lstmviz.verify_trace(trace)
    assert result.ok, result
    trace.arrays["grad_h_total"] = trace.arrays["grad_h_total"] * 1.1
    assert not lstmviz.verify_trace(trace).ok


def test_verify_refuses_what_it_cannot_rebuild(rng):
    import lstmviz

    weights = lstmviz.random_weights(3, 4, rng)
    trace = lstmviz.taped_gradients(rng.standard_normal((5, 2, 3)), weights)
    trace.mode = "batchwise"
    with pytest.raises(lstmviz.InputError, match="batchwise trace cannot be verified"):
        lstmviz.verify_trace(trace)


def test_load_inputs_says_how_to_read_time_major_in_python(tmp_path):
    import lstmviz

    np.save(tmp_path / "ids.npy", np.ones((4, 7), np.int32))
    with pytest.raises(lstmviz.InputError, match=r"time_major=True"):
        lstmviz.load_inputs(tmp_path / "ids.npy")


def test_what_a_notebook_passes_is_checked_and_copied(rng, tmp_path):
    """Arrays are copied (reusing the caller's buffer does not change the trace); wrong types
    and kinds of input raise lstmviz errors naming the argument, not NumPy or TensorFlow
    errors from deep inside; a target given to mean_h is refused, not dropped."""
    import lstmviz

    w = lstmviz.random_weights(3, 4, 0)  # a seed is enough
    assert repr(w) == "LSTMWeights(I=3, H=4)"
    np.testing.assert_array_equal(w.kernel, lstmviz.random_weights(3, 4, 0).kernel)
    x = rng.standard_normal((5, 2, 3)).astype(np.float32)
    trace = lstmviz.taped_gradients(x, w)
    x[:] = 0.0
    assert np.abs(trace.x).max() > 0  # the trace kept what it computed with
    kernel = w.kernel.copy()
    raw = [kernel, w.recurrent_kernel, w.bias]
    own = lstmviz.LSTMWeights(*raw)
    raw[0][:] = 0.0
    assert np.abs(own.kernel).max() > 0
    with pytest.raises(lstmviz.WeightsError, match="not a tuple"):
        lstmviz.taped_gradients(x, (w.kernel, w.recurrent_kernel, w.bias))
    with pytest.raises(lstmviz.InputError, match="x has dtype complex"):
        lstmviz.taped_gradients(x.astype(np.complex64), w)
    with pytest.raises(lstmviz.InputError, match="x is not an array of numbers"):
        lstmviz.taped_gradients([[[1.0, 2.0, 3.0]], [[1.0]]], w)
    with pytest.raises(lstmviz.InputError, match="'mean_h' takes no target"):
        lstmviz.taped_gradients(x, w, target=np.zeros((2, 4)))
    with pytest.raises(lstmviz.InputError, match="one LSTMWeights per batch"):
        lstmviz.batchwise_gradients(x[None], w)
    from lstmviz.plots.export.writer import export

    with pytest.raises(lstmviz.ExportError, match="not a dict"):
        export(dict(trace.arrays), csv=tmp_path / "t.csv")
    assert not (tmp_path / "t.csv").exists()
    with pytest.raises(lstmviz.ConfigError, match="no parameter 'tasks'"):
        lstmviz.train(tasks="adding")


@pytest.mark.parametrize("sequences", [True, False])
def test_float64_targets_of_a_model_run_as_float32(sequences):
    """np.zeros makes float64: a stack's last_mse took it into a float32 graph and failed in
    TensorFlow; it gives the float32 target's gradients. The top LSTM may return its last
    step only (last_mse took step -1 of that output's units)."""
    import keras
    import tensorflow as tf

    import lstmviz

    model = keras.Sequential([keras.Input((6, 3)),
                              keras.layers.LSTM(2, return_sequences=sequences)])  # fmt: skip
    x = np.random.default_rng(2).standard_normal((5, 6, 3)).astype(np.float32)
    y = np.full((5, 2), 0.25)
    wide = lstmviz.model_gradients(model, x, y, loss="last_mse")
    narrow = lstmviz.model_gradients(model, x, y.astype(np.float32), loss="last_mse")
    np.testing.assert_array_equal(wide.layer0_grad_h_total, narrow.layer0_grad_h_total)
    assert float(wide.loss) == float(narrow.loss)
    with tf.GradientTape() as tape:  # Keras's own model, its output's last step
        out = model(x)
        value = tf.reduce_mean(tf.square((out[:, -1] if sequences else out) - y.astype("f")))
    grads = tape.gradient(value, model.trainable_weights)
    np.testing.assert_allclose(float(wide.loss), float(value), rtol=1e-6)
    np.testing.assert_allclose(wide.layer0_grad_kernel, grads[0], rtol=1e-4, atol=1e-7)


def test_model_gradients_speaks_of_its_own_arguments():
    """Messages `prepare` shares with the command line name model_gradients's arguments
    (loss=, y=), not --loss or --targets; a hidden-state loss for a model with a head says
    why it does not apply."""
    import keras

    import lstmviz

    model = keras.Sequential([keras.Input((6, 3)), keras.layers.LSTM(4), keras.layers.Dense(1)])
    x = np.zeros((2, 6, 3), np.float32)
    with pytest.raises(lstmviz.ConfigError) as caught:
        lstmviz.model_gradients(model, x)
    assert "give loss= with a Keras loss name" in str(caught.value)
    assert "--" not in str(caught.value)
    with pytest.raises(lstmviz.ConfigError, match="last_mse is a loss on the output of a model "
                       "ending in an LSTM, this one ends in Dense"):  # fmt: skip
        lstmviz.model_gradients(model, x, loss="last_mse")
    model.compile(loss="mse")
    with pytest.raises(lstmviz.InputError) as caught:
        lstmviz.model_gradients(model, x)
    assert str(caught.value).endswith("needs targets y (y=)")


def _image(png: bytes):
    from PySide6.QtGui import QImage

    image = QImage.fromData(png, "PNG")
    assert not image.isNull()
    return image


def _colours(image, step: int = 7) -> int:
    return len({image.pixel(x, y) for x in range(0, image.width(), step)
                for y in range(0, image.height(), step)})  # fmt: skip


def test_plot_shows_the_panels_inline_as_the_png_export_draws_them(rng, tmp_path):
    import lstmviz
    from lstmviz.plots.export.writer import export_png

    w = lstmviz.random_weights(5, 7, rng)
    trace = lstmviz.taped_gradients(rng.standard_normal((37, 3, 5)), w, loss="mean_h")
    figure = lstmviz.plot(trace)
    png = figure._repr_png_()  # what Jupyter displays
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png is figure.png
    image = _image(png)
    assert (image.width(), image.height()) == (figure.width, figure.height) == (1200, 750)
    assert _colours(image) > 50  # curves and heatmaps drawn, not an empty canvas
    assert repr(figure) == "<lstmviz Figure 1200×750 px PNG>"
    export_png(trace, tmp_path / "same.png", width=1200, height=750, dpi=96)
    assert _image((tmp_path / "same.png").read_bytes()) == image
    one = lstmviz.plot(trace, panels=["norm"], width=800, height=400)
    assert (one.width, one.height) == (800, 400) and _image(one.png) != image.scaled(800, 400)
    assert one.save(tmp_path / "one.png").read_bytes() == one.png


def test_plot_takes_a_recording_and_names_its_own_arguments_in_errors(tmp_path):
    import lstmviz
    from tests.helpers.recordings import write

    write(tmp_path / "run.lvz", [1, 2, 3])
    rec = lstmviz.load_recording(tmp_path / "run.lvz")
    figure = lstmviz.plot(rec, record=1, width=900, height=600)
    assert (_image(figure.png).width(), figure.height) == (900, 600)
    assert _colours(_image(figure.png)) > 20
    with pytest.raises(lstmviz.LstmvizError, match=r"^panels: unknown panel 'nope' \(choose"):
        lstmviz.plot(rec, panels=["nope"])
    with pytest.raises(lstmviz.LstmvizError, match=r"^width: 10 is out of range"):
        lstmviz.plot(tmp_path / "run.lvz", width=10)
    with pytest.raises(lstmviz.LstmvizError, match=r"\.jpg: PNG files end in \.png"):
        figure.save(tmp_path / "x.jpg")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.lvz"]


def test_train_names_its_keywords_not_the_command_lines_flags():
    """train()'s parameter errors name the keyword (`train_steps`), not `--train-steps`; an
    array where a file name goes says so in a line, not with the array's values."""
    import lstmviz

    with pytest.raises(lstmviz.ConfigError, match=r"^train_steps: 0 is out of range") as caught:
        lstmviz.train(train_steps=0)
    assert caught.value.flag == "train_steps"
    with pytest.raises(lstmviz.ConfigError) as caught:
        lstmviz.train(targets="y.npy")
    assert "--" not in str(caught.value) and str(caught.value).startswith("targets: ")
    with pytest.raises(lstmviz.ConfigError, match=r"^inputs: train\(\) takes a file name") as c:
        lstmviz.train(inputs=np.zeros((300, 20, 3)))
    assert len(str(c.value)) < 120


def test_train_with_a_model_fits_it_as_the_command_line_does(tmp_path):
    """train(model=...) fits the user's model and records it (it had trained the built-in
    task, ignoring model, inputs and record); run_train refuses what is not a RunConfig."""
    import keras

    import lstmviz

    model = keras.Sequential([keras.Input((6, 2)), keras.layers.LSTM(3), keras.layers.Dense(1)])
    model.compile(loss="mse", optimizer="adam")
    model.save(tmp_path / "m.keras")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", x=rng.random((8, 6, 2), "f"), y=rng.random((8, 1), "f"))
    trace = lstmviz.train(model=str(tmp_path / "m.keras"), inputs=tmp_path / "d.npz",
                          record=str(tmp_path / "r.lvz"), every=1)  # fmt: skip
    assert trace.mode == "model" and trace.x.shape == (6, 8, 2)
    assert len(lstmviz.load_recording(tmp_path / "r.lvz").step) >= 1
    with pytest.raises(lstmviz.ConfigError, match="run_train takes a lstmviz.RunConfig"):
        lstmviz.run_train({"mode": "train"})


def test_batchwise_weights_of_different_sizes_name_the_batch(rng):
    import lstmviz

    weights = [lstmviz.random_weights(2, 3, 0), lstmviz.random_weights(2, 4, 0)]
    with pytest.raises(lstmviz.InputError, match=r"weights\[1\] has I=2, H=4 but weights\[0\]"):
        lstmviz.batchwise_gradients(rng.standard_normal((2, 3, 2, 2)), weights)


def test_plot_takes_one_panel_name_and_refuses_views_the_trace_has_not(rng):
    """panels="norm" is that panel (it had been read letter by letter: "unknown panel 'n'");
    a layer, record or t_range the trace does not have is an error, not silently ignored."""
    import lstmviz

    trace = lstmviz.taped_gradients(rng.standard_normal((4, 2, 2)), lstmviz.random_weights(2, 3))
    one = lstmviz.plot(trace, panels="norm", width=400, height=300)
    assert one.png == lstmviz.plot(trace, panels=["norm"], width=400, height=300).png
    with pytest.raises(lstmviz.LstmvizError, match=r"^layer: 1 is not an LSTM direction"):
        lstmviz.plot(trace, layer=1)
    with pytest.raises(lstmviz.LstmvizError, match=r"^record: only for a recording"):
        lstmviz.plot(trace, record=2)
    with pytest.raises(lstmviz.LstmvizError, match=r"^t_range: only for a recording"):
        lstmviz.plot(trace, t_range=(0, 2))


def test_run_refuses_what_is_not_a_run_config():
    import lstmviz

    with pytest.raises(lstmviz.ConfigError, match=r"^config: run takes a lstmviz.RunConfig"):
        lstmviz.run({"mode": "taped", "steps": 5})


def test_loaders_given_an_object_instead_of_a_path_say_what_they_take(rng):
    import lstmviz

    x = rng.standard_normal((4, 3, 2))
    with pytest.raises(lstmviz.WeightsError, match=r"path, not a ndarray: .*LSTMWeights"):
        lstmviz.load_weights(x)
    with pytest.raises(lstmviz.WeightsError, match=r"path, not a dict"):
        lstmviz.list_lstm_layers({"kernel": x})
    with pytest.raises(lstmviz.InputError, match=r"path, not a ndarray: .*time-major"):
        lstmviz.load_inputs(x)


def test_batchwise_without_a_target_names_the_shape_of_all_batches(rng):
    import lstmviz

    weights = [lstmviz.random_weights(2, 3, rng) for _ in range(4)]
    x = rng.standard_normal((4, 5, 2, 2))  # N=4 batches of T=5, B=2, I=2
    with pytest.raises(lstmviz.InputError, match=r"needs a target of shape \[4, 2, 3\], one row"):
        lstmviz.batchwise_gradients(x, weights, loss="last_mse")


def test_random_weights_check_their_sizes_and_a_model_spec_reads_as_its_summary(tmp_path):
    import lstmviz
    from tests.helpers.models.model_fixtures import keras3_models

    for bad in (5.0, -1, 0, True):
        with pytest.raises(lstmviz.WeightsError, match=r"positive integer, got"):
            lstmviz.random_weights(bad, 7)
    for bad in ("x", -3, 1.5):  # NumPy's own TypeError/ValueError about a SeedSequence
        with pytest.raises(lstmviz.WeightsError, match=r"rng must be a numpy Generator"):
            lstmviz.random_weights(5, 7, bad)
    model = next(iter(keras3_models().values()))
    model.save(tmp_path / "m.keras")
    spec = lstmviz.load_model(tmp_path / "m.keras")
    assert repr(spec) == spec.summary() and len(repr(spec)) < 2000
    assert repr(spec.layers[-1]).startswith("LayerSpec(") and "params)" in repr(spec.layers[-1])


def test_save_refuses_a_name_the_tools_would_not_open_as_a_trace(rng, tmp_path):
    """lstmviz (the app, `export`, `plot`, the CLI's `--out`) knows a trace by its `.npz`:
    save("x") had written a file named x that none of them opens; it is refused, as
    `Figure.save` refuses a name without `.png`, and nothing is written."""
    import lstmviz

    trace = _taped(rng)
    with pytest.raises(lstmviz.LstmvizError, match=r"^GradientTrace.save: .*x: trace files "
                       r"end in \.npz$"):  # fmt: skip
        trace.save(tmp_path / "x")
    assert list(tmp_path.iterdir()) == []
    saved = trace.save(tmp_path / "x.NPZ")
    assert lstmviz.plot(saved, panels="norm", width=400, height=300).width == 400


def test_indexing_a_trace_by_position_says_it_takes_key_names(rng):
    """trace[0] (a notebook reflex) had raised "TypeError: 'int' object is not iterable" from
    deep inside the key suggestions; it is a KeyError that says where the names are."""
    trace = _taped(rng)
    with pytest.raises(KeyError, match=r"no array 0 \(trace\.keys\(\) lists them\)"):
        trace[0]


def test_a_trace_of_sizes_past_the_run_limits_opens_again(tmp_path):
    """RunConfig's ranges bound the runs the CLI and the app start; the API computes any size
    that fits in memory. Such a trace saved, then failed to load ("config_json: --batch: 65537
    is out of range"); it opens, and a run is still refused."""
    import lstmviz

    weights = lstmviz.random_weights(1, 1, 0)
    trace = lstmviz.taped_gradients(np.ones((2, 65_537, 1)), weights)
    back = lstmviz.GradientTrace.load(trace.save(tmp_path / "wide.npz"))
    assert back.config.batch == 65_537 and back.h.shape == (2, 65_537, 1)
    np.testing.assert_array_equal(back.grad_h_total, trace.grad_h_total)
    with pytest.raises(lstmviz.ConfigError, match=r"^batch: 65537 is out of range"):
        lstmviz.run(back.config)
