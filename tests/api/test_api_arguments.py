"""The Python API's messages for arguments in the wrong place: weights given first, a target
given where the loss goes, a bad array of one batch among N. Each names what the caller did."""

import numpy as np
import pytest

import lstmviz
from lstmviz.core.errors import InputError, WeightsError

T, B, I, H = 6, 3, 4, 5


@pytest.fixture
def weights(rng):
    return lstmviz.random_weights(I, H, rng)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda w, x: lstmviz.taped_gradients(w, x),
         r"^x is an LSTMWeights: give x first, then the weights: taped_gradients\(x, weights"),
        (lambda w, x: lstmviz.connectivity_map(w, x),
         r"^x is an LSTMWeights: give x first, then the weights: connectivity_map\(x, weights"),
        (lambda w, x: lstmviz.multipass_gradients(w, x[None]),
         r"^x_passes is an LSTMWeights: give x_passes first, then the weights: "
         r"multipass_gradients\(x_passes, weights"),
        (lambda w, x: lstmviz.batchwise_gradients([w], x[None]),
         r"^x is a list of LSTMWeights: give x first, then the weights: "
         r"batchwise_gradients\(x, weights"),
    ],
)  # fmt: skip
def test_weights_given_before_x_are_named(rng, weights, call, message):
    """The message blamed the array ("weights must be lstmviz.LSTMWeights(…), not a ndarray")
    or called the weights an array of dtype object."""
    with pytest.raises(InputError, match=message):
        call(weights, rng.standard_normal((T, B, I)))


def test_a_target_given_as_the_loss_is_named(rng, weights):
    """taped_gradients(x, w, target): NumPy's "The truth value of an array … is ambiguous"."""
    x = rng.standard_normal((T, B, I))
    for function in (lstmviz.taped_gradients, lstmviz.connectivity_map):
        with pytest.raises(InputError, match=r"^loss must be one of mean_h, last_mse, seq_mse, "
                                             r"not a ndarray \[3, 5\]; give a target as "
                                             r"target="):  # fmt: skip
            function(x, weights, np.zeros((B, H)))
    with pytest.raises(InputError, match=r"^unknown loss 'mse' \(choose from mean_h"):
        lstmviz.taped_gradients(x, weights, "mse")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"loss": "last_mse", "target": np.zeros((2, 4, H))},
         r"^batch 0: target for 'last_mse' must have shape \[3, 5\], got \[4, 5\]"),
        ({"h0": np.zeros((2, 4, H))}, r"^batch 0: h0 must have shape \[B, H\] = \[3, 5\]"),
    ],
)  # fmt: skip
def test_batchwise_names_the_batch_of_a_bad_array(rng, weights, arguments, message):
    """A per-batch check's message named shapes of one batch without saying so."""
    x = rng.standard_normal((2, T, B, I))
    with pytest.raises(InputError, match=message):
        lstmviz.batchwise_gradients(x, [weights, weights], **arguments)


def test_batchwise_names_the_weights_that_are_not_lstm_weights(rng, weights):
    """One entry of the list is an array: "weights must be …, not a ndarray" about a list."""
    x = rng.standard_normal((2, T, B, I))
    with pytest.raises(WeightsError, match=r"^weights\[1\] must be lstmviz.LSTMWeights"):
        lstmviz.batchwise_gradients(x, [weights, np.zeros(3)])
