"""`lstmviz.model_gradients` reuses its compiled computation: a second call on a model of the
same structure traces nothing; new weights give the new gradients (checked against Keras's own
tape.gradient of the updated model), the weights of a layer Keras runs (a Conv1D) too; another
input shape traces again; another loss or structure builds anew. A live model's spec, read from
its variables in memory (views of their values, not copies), equals the one read from the
file `save_weights` writes."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.models.model_fixtures import randomize

keras = pytest.importorskip("keras")
tf = pytest.importorskip("tensorflow")

import lstmviz  # noqa: E402
from lstmviz.engine.modes import model as engine  # noqa: E402

L = keras.layers


@pytest.fixture(scope="module")
def conv_model():
    """Conv1D (run by Keras) → LSTM (sequences) → LSTM → Dense, mse; x [4, 6, 3], y [4, 1]."""
    keras.utils.set_random_seed(5)
    inputs = keras.Input((None, 3))
    x = L.Conv1D(4, 3, padding="same", name="conv")(inputs)
    x = L.LSTM(5, return_sequences=True, name="low")(x)
    x = L.LSTM(3, name="top")(x)
    model = keras.Model(inputs, L.Dense(1, name="head")(x), name="conv_model")
    model.compile(loss="mse")
    randomize(model, 6)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 6, 3)).astype(np.float32)
    y = rng.standard_normal((4, 1)).astype(np.float32)
    return model, x, y


@pytest.fixture
def fresh():
    """No compiled model kept from other tests."""
    engine._COMPILED.clear()
    yield
    engine._COMPILED.clear()


def traces() -> int:
    return sum(f.experimental_get_tracing_count() for g in engine._COMPILED.values()
               for f in g._steps.values())


def keras_gradients(model, x, y) -> tuple[float, dict]:
    """The loss and the LSTM layers' weight gradients by Keras itself."""
    lstms = [model.get_layer(name) for name in ("low", "top")]
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.mean_squared_error(y, model(x, training=False)))
    weights = [getattr(layer.cell, key) for layer in lstms
               for key in ("kernel", "recurrent_kernel", "bias")]  # fmt: skip
    grads = tape.gradient(loss, weights)
    names = [f"layer{k}_grad_{key}" for k in range(2)
             for key in ("kernel", "recurrent_kernel", "bias")]  # fmt: skip
    return float(loss), {name: g.numpy() for name, g in zip(names, grads, strict=True)}


def check_against_keras(trace, model, x, y) -> None:
    loss, grads = keras_gradients(model, x, y)
    assert float(trace["loss"]) == pytest.approx(loss, rel=1e-5)
    for name, expected in grads.items():
        np.testing.assert_allclose(trace[name], expected, rtol=1e-4, atol=1e-6, err_msg=name)


def test_new_weights_reuse_the_compiled_function_and_give_their_gradients(conv_model, fresh):
    model, x, y = conv_model
    original = model.get_weights()
    try:
        check_against_keras(lstmviz.model_gradients(model, x, y), model, x, y)
        assert len(engine._COMPILED) == 1 and traces() == 1
        gradients = next(iter(engine._COMPILED.values()))
        for seed in (8, 9):  # every weight new, the Conv1D's that Keras runs among them
            randomize(model, seed)
            check_against_keras(lstmviz.model_gradients(model, x, y), model, x, y)
        assert list(engine._COMPILED.values()) == [gradients] and traces() == 1
    finally:
        model.set_weights(original)


def test_another_input_shape_traces_again(conv_model, fresh):
    model, x, y = conv_model
    lstmviz.model_gradients(model, x, y)
    lstmviz.model_gradients(model, x[:, :5], y)  # another length
    assert len(engine._COMPILED) == 1 and traces() == 2
    check_against_keras(lstmviz.model_gradients(model, x[:3, :4], y[:3]), model, x[:3, :4], y[:3])


def test_another_loss_or_structure_builds_anew(conv_model, fresh):
    model, x, y = conv_model
    lstmviz.model_gradients(model, x, y)
    same = keras.models.clone_model(model)  # same structure, its own weights
    same.compile(loss="mse")
    lstmviz.model_gradients(same, x, y)
    assert len(engine._COMPILED) == 1
    other_loss = keras.models.clone_model(model)
    other_loss.compile(loss="mae")
    lstmviz.model_gradients(other_loss, x, y)
    assert len(engine._COMPILED) == 2
    inputs = keras.Input((None, 3))
    wider = L.LSTM(4)(L.Conv1D(4, 3, padding="same", name="conv")(inputs))
    wider_model = keras.Model(inputs, L.Dense(1)(wider))
    wider_model.compile(loss="mse")
    lstmviz.model_gradients(wider_model, x, y)
    assert len(engine._COMPILED) == 3 and traces() == 3


def test_a_live_spec_equals_the_one_from_its_weights_file(conv_model, tmp_path):
    from lstmviz.weights.model_files import spec_from_keras

    model = conv_model[0]
    model.save(tmp_path / "m.keras")
    live, saved = spec_from_keras(model), lstmviz.weights.model_files.load_model(
        tmp_path / "m.keras")  # fmt: skip
    assert engine.structure_key(live, engine.ModelLoss("mse")) == engine.structure_key(
        saved, engine.ModelLoss("mse"))  # fmt: skip
    for a, b in zip(live.layers, saved.layers, strict=True):
        assert list(a.weights) == list(b.weights)
        for key in a.weights:
            np.testing.assert_array_equal(a.weights[key], b.weights[key])


def test_a_live_model_changed_in_place_is_read_anew():
    from lstmviz.weights.model_files import spec_from_keras

    model = keras.Sequential([keras.Input((5, 3)), L.LSTM(4, name="low")])
    before = spec_from_keras(model)
    model.add(L.Dense(2, name="head"))
    after = spec_from_keras(model)
    assert [layer.name for layer in before.layers] == ["input", "low"]
    assert [layer.name for layer in after.layers] == ["input", "low", "head"]
    np.testing.assert_array_equal(after.layers[2].weights["kernel"],
                                  model.get_layer("head").kernel.numpy())  # fmt: skip


def test_a_live_spec_views_its_variables_and_keeps_the_values_read():
    """A live spec's arrays are read-only views of the variables' values, which a run takes
    without a copy; an update in place (as an optimizer's assign_add) after the read leaves
    them as they were, and the next read sees it."""
    from lstmviz.weights.live.keras_live import tensor_of
    from lstmviz.weights.model_files import spec_from_keras

    model = keras.Sequential([keras.Input((5, 3)), L.LSTM(4, name="low")])
    kernel = spec_from_keras(model).layers[1].weights["kernel"]
    before = kernel.copy()
    assert not kernel.flags.writeable
    assert engine._tensor(kernel) is tensor_of(kernel) is not None
    model.get_layer("low").cell.kernel.assign_add(np.ones_like(before))
    np.testing.assert_array_equal(kernel, before)
    np.testing.assert_array_equal(spec_from_keras(model).layers[1].weights["kernel"], before + 1)
    assert tensor_of(before) is None  # an array of its own: copied into the run


def test_the_recording_callback_shares_the_compiled_function(conv_model, fresh, tmp_path):
    """The callback records with model_gradients's compiled computation (no trace of its own);
    the Conv1D weights it gives that computation during training do not stay: the model's
    weights set back to those of an earlier call give that call's gradients again."""
    from lstmviz.keras import GradientFlowCallback

    model, x, y = conv_model
    original = model.get_weights()
    try:
        lstmviz.model_gradients(model, x, y)
        model.compile(loss="mse", optimizer=keras.optimizers.SGD(0.5))
        callback = GradientFlowCallback((x, y), tmp_path / "run.lvz", every=1)
        model.fit(x, y, batch_size=4, epochs=1, callbacks=[callback], verbose=0)
        assert callback.records == 1
        assert len(engine._COMPILED) == 1 and traces() == 1
        model.set_weights(original)
        check_against_keras(lstmviz.model_gradients(model, x, y), model, x, y)
    finally:
        model.set_weights(original)
        model.compile(loss="mse")
