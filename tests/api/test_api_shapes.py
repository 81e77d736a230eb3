"""The Python API's messages for arrays in another library's layout: a batch-major x [B, T, I]
where the API takes time-major [T, B, I], and PyTorch's nn.LSTM weights where LSTMWeights takes
Keras's. Each message names the argument at fault, and following it gives the right numbers."""

import re

import numpy as np
import pytest

import lstmviz
from lstmviz.core.errors import InputError, WeightsError
from tests.helpers.references.reference import np_forward, sigmoid

T, B, I, H = 7, 3, 4, 5
BATCH_MAJOR = r"x looks batch-major \[B, T, I\] = \[3, 7, 4\]"


@pytest.fixture
def weights(rng):
    return lstmviz.random_weights(I, H, rng)


@pytest.mark.parametrize(
    ("loss", "arguments", "evidence"),
    [
        ("last_mse", {"target": np.zeros((B, H))}, r"target \[3, 5\] has B=3"),
        ("mean_h", {"h0": np.zeros((B, H))}, r"h0 \[3, 5\] has B=3"),
        ("mean_h", {"c0": np.zeros((B, H)).tolist()}, r"c0 \[3, 5\] has B=3"),
    ],
)
def test_batch_major_x_is_named_not_the_argument_that_shows_it(rng, weights, loss, arguments,
                                                               evidence):  # fmt: skip
    """x [B, T, I] with a target, h0 or c0 of the batch size B its first axis holds: the
    message blamed the target or h0 ("target for 'last_mse' must have shape [7, 5]")."""
    x = rng.standard_normal((B, T, I))
    for function in (lstmviz.taped_gradients, lstmviz.connectivity_map):
        with pytest.raises(InputError, match=BATCH_MAJOR) as caught:
            function(x, weights, loss=loss, **arguments)
        message = str(caught.value)
        assert "x.transpose(1, 0, 2)" in message
        assert "time-major [T, B, I]" in message
        assert re.search(evidence, message), message


@pytest.mark.parametrize(
    ("x_shape", "target_shape"), [((B, T, I), (T, B, H)), ((T, B, I), (B, T, H))]
)
def test_x_and_a_sequence_target_that_disagree_name_both_readings(rng, weights, x_shape,
                                                                   target_shape):  # fmt: skip
    """A seq_mse target has a time axis too: when its T and B are x's the other way round,
    either one may be the batch-major one, so the message says what to do in each case (the
    target alone was blamed, "must have shape [3, 7, 5]", when x was the batch-major one)."""
    x = rng.standard_normal(x_shape)
    with pytest.raises(InputError) as caught:
        lstmviz.taped_gradients(x, weights, loss="seq_mse", target=np.zeros(target_shape))
    assert str(caught.value) == (
        f"x {list(x_shape)} and target {list(target_shape)} disagree on which axis is T and "
        f"which is B: if x is batch-major [B, T, I], give x.transpose(1, 0, 2); if x is "
        f"time-major [T, B, I], target must be {[*x_shape[:2], H]}"
    )


def test_following_the_batch_major_advice_gives_the_numpy_lstm(rng, weights):
    x = rng.standard_normal((B, T, I))
    h0 = rng.uniform(-0.5, 0.5, (B, H))
    with pytest.raises(InputError, match=BATCH_MAJOR):
        lstmviz.taped_gradients(x, weights, h0=h0)
    trace = lstmviz.taped_gradients(x.transpose(1, 0, 2), weights, h0=h0)
    h, _, _ = np_forward(x.transpose(1, 0, 2), weights.kernel, weights.recurrent_kernel,
                         weights.bias, h0, np.zeros((B, H)))  # fmt: skip
    np.testing.assert_allclose(trace.h, h, rtol=1e-4, atol=1e-5)


def test_a_state_of_the_wrong_batch_is_still_blamed_on_the_state(rng, weights):
    """An h0 whose B matches neither of x's first two axes says nothing about x's layout."""
    x = rng.standard_normal((T, B, I))
    with pytest.raises(InputError, match=r"^h0 must have shape \[B, H\] = \[3, 5\], got \[4, 5\]$"):
        lstmviz.taped_gradients(x, weights, h0=np.zeros((4, H)))
    with pytest.raises(InputError, match=r"^target for 'last_mse' must have shape \[3, 5\]"):
        lstmviz.taped_gradients(x, weights, loss="last_mse", target=np.zeros((T, B, H)))


def test_a_square_x_cannot_be_told_apart_and_blames_the_argument(rng, weights):
    """T = B: both readings of x fit the same states, so the message stays the argument's."""
    x = rng.standard_normal((B, B, I))
    with pytest.raises(InputError, match=r"^h0 must have shape"):
        lstmviz.taped_gradients(x, weights, h0=np.zeros((4, H)))


def test_multipass_batch_major_passes_are_named(rng, weights):
    """x_passes [P, B, Tp, I] where [P, Tp, B, I] is wanted."""
    x_passes = rng.standard_normal((2, B, T, I))
    for arguments in (
        {"loss": "last_mse", "target": np.zeros((2, B, H))},
        {"h0": np.zeros((B, H))},
    ):
        with pytest.raises(InputError, match=r"x_passes looks batch-major \[P, B, Tp, I\] = "
                                             r"\[2, 3, 7, 4\]") as caught:  # fmt: skip
            lstmviz.multipass_gradients(x_passes, weights, **arguments)
        assert "x_passes.transpose(0, 2, 1, 3)" in str(caught.value)


def test_batchwise_batch_major_batches_are_named(rng, weights):
    """x [N, B, T, I] where [N, T, B, I] is wanted."""
    x = rng.standard_normal((2, B, T, I))
    for arguments in ({"loss": "last_mse", "target": np.zeros((2, B, H))},
                      {"h0": np.zeros((2, B, H))}):  # fmt: skip
        with pytest.raises(InputError, match=r"x looks batch-major \[N, B, T, I\] = "
                                             r"\[2, 3, 7, 4\]") as caught:  # fmt: skip
            lstmviz.batchwise_gradients(x, [weights, weights], **arguments)
        assert "x.transpose(0, 2, 1, 3)" in str(caught.value)


def test_lstm_forward_names_a_batch_major_x(rng, weights):
    """The functional LSTM raised TensorFlow's InvalidArgumentError from inside the kernel."""
    w = weights
    zeros = np.zeros((B, H))
    with pytest.raises(InputError, match=BATCH_MAJOR):
        lstmviz.lstm_forward(rng.standard_normal((B, T, I)), zeros, zeros, w.kernel,
                             w.recurrent_kernel, w.bias)  # fmt: skip


def torch_lstm(x, weight_ih, weight_hh, bias_ih, bias_hh):
    """PyTorch's nn.LSTM formula over x [T, B, I] from zero states, its own layout: weight_ih
    [4H, I], weight_hh [4H, H], gates i, f, g, o. Returns h [T, B, H]."""
    hidden = weight_hh.shape[1]
    h = c = np.zeros((x.shape[1], hidden))
    out = []
    for x_t in x:
        z = x_t @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh
        i, f, g, o = np.split(z, 4, axis=-1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        out.append(h)
    return np.stack(out)


@pytest.fixture
def torch_weights(rng):
    scale = 1 / np.sqrt(H)  # nn.LSTM's initialisation: U(-1/sqrt(H), 1/sqrt(H))
    return {
        "weight_ih": rng.uniform(-scale, scale, (4 * H, I)),
        "weight_hh": rng.uniform(-scale, scale, (4 * H, H)),
        "bias_ih": rng.uniform(-scale, scale, 4 * H),
        "bias_hh": rng.uniform(-scale, scale, 4 * H),
    }


def test_pytorch_weights_are_named_and_the_advice_gives_pytorchs_lstm(rng, torch_weights):
    """The message was "recurrent_kernel [20, 5] implies H=20, so kernel must be [I, 80]"."""
    t = torch_weights
    with pytest.raises(WeightsError) as caught:
        lstmviz.LSTMWeights(t["weight_ih"], t["weight_hh"], t["bias_ih"] + t["bias_hh"])
    message = str(caught.value)
    assert message.startswith("kernel [20, 4] and recurrent_kernel [20, 5] have PyTorch's layout")
    assert "[4H, I]" in message and "[4H, H]" in message
    assert "LSTMWeights(weight_ih.T, weight_hh.T, bias_ih + bias_hh)" in message
    assert ".safetensors" in message and "implies H=20" not in message
    w = lstmviz.LSTMWeights(t["weight_ih"].T, t["weight_hh"].T, t["bias_ih"] + t["bias_hh"])
    x = rng.standard_normal((T, B, I))
    trace = lstmviz.taped_gradients(x, w)
    np.testing.assert_allclose(trace.h, torch_lstm(x, **t), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("transposed", "message"),
    [
        ("kernel", r"^kernel \[20, 4\] has PyTorch's layout \[4H, I\]; transpose it: kernel.T "),
        (
            "recurrent_kernel",
            r"^recurrent_kernel \[20, 5\] has PyTorch's layout \[4H, H\]; transpose it: "
            r"recurrent_kernel.T ",
        ),  # fmt: skip
    ],
)
def test_one_array_in_pytorchs_layout_is_named(rng, transposed, message):
    w = lstmviz.random_weights(I, H, rng)
    arrays = {"kernel": w.kernel, "recurrent_kernel": w.recurrent_kernel, "bias": w.bias}
    arrays[transposed] = arrays[transposed].T
    with pytest.raises(WeightsError, match=message):
        lstmviz.LSTMWeights(**arrays)


def test_weights_of_no_layout_keep_the_generic_message(rng):
    """A bias of the wrong length is no layout: the message lists the shapes as before."""
    w = lstmviz.random_weights(I, H, rng)
    with pytest.raises(WeightsError, match=r"^inconsistent shapes: recurrent_kernel \[5, 20\]"):
        lstmviz.LSTMWeights(w.kernel.T, w.recurrent_kernel, np.zeros(7))


def test_square_kernel_is_keras_layout(rng):
    """I = 4H: kernel [4H, 4H] fits both layouts and is taken as Keras's, as documented."""
    w = lstmviz.LSTMWeights(np.eye(4 * H), np.zeros((H, 4 * H)), np.zeros(4 * H))
    assert (w.input_dim, w.hidden) == (4 * H, H)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda w: lstmviz.multipass_gradients([[["a"]]], w), r"^x_passes has dtype <U1"),
        (
            lambda w: lstmviz.multipass_gradients(np.ones((2, T, B, I)) * 1j, w),
            r"^x_passes has dtype complex128",
        ),  # fmt: skip
        (
            lambda w: lstmviz.batchwise_gradients(
                np.zeros((2, T, B, I)), [w, w], loss="last_mse", target=[["a"] * H] * 2
            ),  # fmt: skip
            r"^target has dtype <U1",
        ),  # fmt: skip
        (
            lambda w: lstmviz.batchwise_gradients(
                np.zeros((2, T, B, I)), [w, w], h0=np.ones((2, B, H)) * 1j
            ),  # fmt: skip
            r"^h0 has dtype complex128",
        ),  # fmt: skip
    ],
)
def test_arrays_that_are_not_real_numbers_are_named(weights, call, message):
    """multipass_gradients and batchwise_gradients' per-batch arrays raised NumPy's own
    "could not convert string to float" and dropped complex numbers' imaginary parts."""
    with pytest.raises(InputError, match=message):
        call(weights)


def test_lstm_forward_names_pytorch_weights(weights):
    w = weights
    zeros = np.zeros((B, H))
    with pytest.raises(WeightsError, match=r"^kernel \[20, 4\] and recurrent_kernel \[20, 5\]"):
        lstmviz.lstm_forward(np.zeros((T, B, I)), zeros, zeros, w.kernel.T, w.recurrent_kernel.T,
                             w.bias)  # fmt: skip


def test_model_gradients_names_a_time_major_x(rng):
    """model_gradients takes x batch-major, as Keras does; x [T, B, I] with y of B samples for a
    model of free length was blamed on y ("y has 6 samples but x has 10")."""
    import keras

    model = keras.Sequential([keras.Input((None, 3)), keras.layers.LSTM(4), keras.layers.Dense(1)])
    model.compile(loss="mse")
    x, y = rng.standard_normal((10, 6, 3)), np.zeros((6, 1))
    with pytest.raises(InputError) as caught:
        lstmviz.model_gradients(model, x, y)
    message = str(caught.value)
    assert "x looks time-major [T, B, …] = [10, 6, 3], as y has 6 samples" in message
    assert "batch-major [B, T, …]" in message and "np.swapaxes(x, 0, 1)" in message
    trace = lstmviz.model_gradients(model, np.swapaxes(x, 0, 1), y)
    np.testing.assert_allclose(trace.y_pred, model.predict(np.swapaxes(x, 0, 1), verbose=0),
                               rtol=1e-4, atol=1e-5)  # fmt: skip
