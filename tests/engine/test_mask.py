"""Masked sequences (Keras's masking: a step whose mask is 0 carries the state over) in both
implementations of `lstm.lstm_sequence`: against NumPy BPTT (tests/helpers/references/reference.py),
finite differences in float64, and Keras's own LSTM layer with a mask."""

import keras
import numpy as np
import pytest

from lstmviz.engine.cells import lstm
from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import tf
from tests.helpers.kernel_choice import BACKENDS
from tests.helpers.references.reference import assert_close, np_bptt

STEPS, BATCH, INPUTS, HIDDEN = 9, 5, 3, 4


def _padding(lengths, steps, pre):
    """[T, B] of 0/1: row b has lengths[b] ones, after the zeros (pre) or before them (post)."""
    t = np.arange(steps)[:, None]
    lengths = np.asarray(lengths)[None, :]
    return (t >= steps - lengths) if pre else (t < lengths)


def _mask(kind, rng, steps=STEPS, batch=BATCH):
    """A [T, B] float32 mask of one kind; every batch has a row of each edge case it names."""
    if kind == "random":
        mask = rng.random((steps, batch)) < 0.6
    elif kind == "rows_all_zero_or_one":
        mask = rng.random((steps, batch)) < 0.5
        mask[:, 0], mask[:, -1] = False, True
    elif kind == "pre_padding":  # lengths include the whole sequence and nothing at all
        mask = _padding([steps, 0, 3, 1, steps - 1][:batch], steps, pre=True)
    elif kind == "post_padding":
        mask = _padding([steps, 0, 3, 1, steps - 1][:batch], steps, pre=False)
    elif kind == "all_zero":
        mask = np.zeros((steps, batch), bool)
    elif kind == "ones":
        mask = np.ones((steps, batch), bool)
    else:
        raise ValueError(kind)
    return mask.astype(np.float32)


MASKS = ("random", "rows_all_zero_or_one", "pre_padding", "post_padding", "all_zero", "ones")


def _problem(rng, steps=STEPS, batch=BATCH, inputs=INPUTS, hidden=HIDDEN, dtype=np.float32):
    """x, h0, c0, kernel, recurrent, bias as arrays; the state is not zero, so carrying the
    initial state over is visible."""
    x = rng.normal(size=(steps, batch, inputs))
    h0, c0 = rng.normal(size=(2, batch, hidden)) * 0.5
    kernel = rng.normal(size=(inputs, 4 * hidden)) * 0.5
    recurrent = rng.normal(size=(hidden, 4 * hidden)) * 0.5
    bias = rng.normal(size=4 * hidden)
    return [a.astype(dtype) for a in (x, h0, c0, kernel, recurrent, bias)]


def _previous(states, initial):
    """[T, B, H] -> the state before each step: initial, states[0], ..., states[T-2]."""
    return np.concatenate([np.asarray(initial)[None], np.asarray(states)[:-1]])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", MASKS)
def test_masked_states_and_every_gradient_match_numpy_bptt(rng, backend, kind):
    arrays = _problem(rng)
    mask = _mask(kind, rng)
    weight_h, weight_c = rng.normal(size=(2, STEPS, BATCH, HIDDEN)).astype(np.float32)
    sources = [tf.constant(a) for a in arrays]
    probes = [tf.zeros((STEPS, BATCH, HIDDEN)) for _ in range(2)]
    with tf.GradientTape() as tape:
        tape.watch(sources + probes)
        h, c = BACKENDS[backend](*sources, *probes, tf.constant(mask))
        loss = tf.reduce_sum(h * weight_h) + tf.reduce_sum(c * weight_c)
    grads = tape.gradient(loss, sources + probes)
    x, h0, c0, kernel, recurrent, bias = arrays
    ref = np_bptt(x, kernel, recurrent, bias, h0, c0, weight_h, direct_c=weight_c, mask=mask)
    assert_close(h, ref["h"], what="h")
    assert_close(c, ref["c"], what="c")
    names = ("dx", "dh0", "dc0", "dkernel", "drecurrent", "dbias", "dh", "dc")
    for name, grad in zip(names, grads, strict=True):
        assert_close(grad, ref[name], what=name)
    # A masked step copies the state it was given, bit for bit.
    carried = mask == 0
    np.testing.assert_array_equal(np.asarray(h)[carried], _previous(h, h0)[carried])
    np.testing.assert_array_equal(np.asarray(c)[carried], _previous(c, c0)[carried])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_mask_of_ones_changes_nothing(rng, backend):
    arrays = [tf.constant(a) for a in _problem(rng)]
    probes = [tf.zeros((STEPS, BATCH, HIDDEN)) for _ in range(2)]
    weight = rng.normal(size=(STEPS, BATCH, HIDDEN)).astype(np.float32)
    results = []
    for mask in ([], [tf.ones((STEPS, BATCH))]):
        with tf.GradientTape() as tape:
            tape.watch(arrays + probes)
            h, c = BACKENDS[backend](*arrays, *probes, *mask)
            loss = tf.reduce_sum(h * weight) + tf.reduce_sum(c)
        results.append([h, c, *tape.gradient(loss, arrays + probes)])
    for plain, masked in zip(*results, strict=True):
        np.testing.assert_allclose(masked, plain, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])  # float64 runs the while-loops
def test_lstm_sequence_takes_bool_or_number_masks_and_gives_the_mask_no_gradient(rng, dtype):
    """A mask of numbers counts any nonzero as 1, as casting it to bool does."""
    arrays = [tf.constant(a) for a in _problem(rng, dtype=dtype)]
    mask = _mask("random", rng)
    as_float = tf.constant(mask, dtype)
    scaled = mask * rng.choice([0.5, 1.0, 3.0, -2.0], size=mask.shape)
    outputs = []
    for given in (tf.constant(mask > 0), tf.constant(scaled, dtype), as_float):
        with tf.GradientTape() as tape:
            tape.watch(arrays + [as_float])
            h, _ = lstm.lstm_sequence(*arrays, mask=given)
            loss = tf.reduce_sum(h)
        grads = tape.gradient(loss, arrays + [as_float])
        assert grads[-1] is None  # the mask is not differentiated
        outputs.append([h, *grads[:-1]])
    for from_bool, *from_numbers in zip(*outputs, strict=True):
        for other in from_numbers:
            np.testing.assert_array_equal(other, from_bool)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_mask_of_the_wrong_shape_is_refused(rng, dtype):
    arrays = _problem(rng, dtype=dtype)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"mask must be \[T, B\]"):
        lstm.lstm_sequence(*arrays, mask=np.ones((BATCH, STEPS), dtype))


def test_the_native_ops_check_their_mask():
    lib = kernels.library()
    if lib is None:
        pytest.skip(kernels.status())
    x, zeros, probes = tf.zeros((3, 2, 4)), tf.zeros((2, 5)), tf.zeros((3, 2, 5))
    weights = (tf.zeros((4, 20)), tf.zeros((5, 20)), tf.zeros(20))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"mask must be \[T, B\] = \[3, 2\]"):
        lib.lstmviz_sequence_forward(x, *weights, zeros, zeros, probes, probes, [tf.ones((2, 3))])
    with pytest.raises(tf.errors.InvalidArgumentError, match="at most one mask, got 2"):
        lib.lstmviz_sequence_forward(
            x, *weights, zeros, zeros, probes, probes, [tf.ones((3, 2))] * 2
        )
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"mask must be \[T, B\] = \[3, 2\]"):
        lib.lstmviz_sequence_backward(
            x, weights[1], zeros, zeros, probes, probes, tf.zeros((3, 2, 20)), [probes], [],
            [tf.ones((3, 1))], weights[0],
        )  # fmt: skip


def test_masked_gradients_match_finite_differences_in_float64(rng):
    """The while-loops' hand-written backward against central differences of their forward,
    at a few coordinates of every input (probe_h: the total dL/dh_t, masked steps included)."""
    steps, batch, hidden = 6, 3, 3
    arrays = _problem(rng, steps=steps, batch=batch, hidden=hidden, dtype=np.float64)
    arrays.append(np.zeros((steps, batch, hidden)))  # probe_h
    mask = tf.constant(_mask("random", rng, steps, batch), tf.float64)
    mask_rows = _padding([steps, 2, 4], steps, pre=True) * _padding([5, 6, 1], steps, pre=False)
    mask = tf.constant(np.asarray(mask) * mask_rows)  # random holes, pre- and post-padding
    weight_h, weight_c = rng.normal(size=(2, steps, batch, hidden))

    def loss(x, h0, c0, kernel, recurrent, bias, probe_h):
        h, c = lstm._lstm_sequence(
            x, h0, c0, kernel, recurrent, bias, probe_h, tf.zeros_like(probe_h), mask
        )
        return tf.reduce_sum(h * weight_h) + tf.reduce_sum(c * weight_c)

    sources = [tf.constant(a) for a in arrays]
    with tf.GradientTape() as tape:
        tape.watch(sources)
        value = loss(*sources)
    grads = tape.gradient(value, sources)
    eps = 1e-6
    for k, (array, grad) in enumerate(zip(arrays, grads, strict=True)):
        for index in rng.choice(array.size, size=min(array.size, 8), replace=False):
            bumped = [np.array(a) for a in arrays]
            bumped[k].flat[index] += eps
            up = float(loss(*bumped))
            bumped[k].flat[index] -= 2 * eps
            down = float(loss(*bumped))
            numeric = (up - down) / (2 * eps)
            assert abs(np.asarray(grad).flat[index] - numeric) <= 1e-6 * (1 + abs(numeric)), (
                f"input {k}, element {index}: {np.asarray(grad).flat[index]} vs {numeric}"
            )


# ---- against Keras's LSTM layer ---------------------------------------------------------------


def _keras_lstm(weights, **options):
    """A built keras.layers.LSTM holding (kernel, recurrent, bias)."""
    kernel, recurrent, bias = weights
    layer = keras.layers.LSTM(recurrent.shape[0], **options)
    layer.build((None, None, kernel.shape[0]))
    layer.set_weights([kernel, recurrent, bias])
    return layer


def _ours(backend, x, weights, mask, weight_last):
    """Our h [T, B, H] over x [T, B, I] from a zero state, and the gradients of the loss
    sum(h_{T-1}·weight_last) with respect to (kernel, recurrent, bias)."""
    batch, hidden = x.shape[1], weights[1].shape[0]
    zeros, probes = tf.zeros((batch, hidden)), tf.zeros((x.shape[0], batch, hidden))
    weights = [tf.constant(w) for w in weights]
    with tf.GradientTape() as tape:
        tape.watch(weights)
        h, _ = BACKENDS[backend](tf.constant(x), zeros, zeros, *weights, probes, probes, mask)
        loss = tf.reduce_sum(h[-1] * weight_last)
    return np.asarray(h), tape.gradient(loss, weights)


def _keras_gradients(layer, inputs, weight_last, model=None):
    """Keras's output of `model` (or `layer`) on `inputs` and tape.gradient of
    sum(output·weight_last) with respect to the layer's (kernel, recurrent, bias)."""
    with tf.GradientTape() as tape:
        out = (model or layer)(inputs[0], **inputs[1])
        loss = tf.reduce_sum(out * weight_last)
    return np.asarray(out), tape.gradient(loss, layer.trainable_weights)


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_states_and_weight_gradients_match_keras(rng, backend):
    """Keras's LSTM called with mask=: at unmasked steps its return_sequences output is our h;
    its last output (return_sequences=False) is our last h, and so are the weight gradients of
    a loss on it."""
    x, _, _, *weights = _problem(rng)
    mask = _mask("random", rng)
    mask[:2, 1] = 0  # pre-padding in one row, post-padding in another, a row all masked
    mask[-3:, 2] = 0
    mask[:, 3] = 0
    weight_last = rng.normal(size=(BATCH, HIDDEN)).astype(np.float32)
    h, grads = _ours(backend, x, weights, tf.constant(mask), weight_last)

    batch_major = (tf.constant(x.transpose(1, 0, 2)), {"mask": tf.constant(mask.T > 0)})
    sequences = _keras_lstm(weights, return_sequences=True)(batch_major[0], **batch_major[1])
    unmasked = mask > 0
    assert_close(h[unmasked], np.asarray(sequences).transpose(1, 0, 2)[unmasked], what="h")
    last = _keras_lstm(weights)
    out, keras_grads = _keras_gradients(last, batch_major, weight_last)
    assert_close(h[-1], out, what="last h")
    for name, ours, theirs in zip(("kernel", "recurrent", "bias"), grads, keras_grads, strict=True):
        assert_close(ours, theirs, what=f"d{name}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_masking_layer_and_go_backwards_match_keras(rng, backend):
    """keras.layers.Masking (steps whose features are all 0) before LSTM(go_backwards=True):
    the caller reverses x and the mask in time, and our last h and weight gradients are
    Keras's."""
    x, _, _, *weights = _problem(rng)
    mask = _padding([STEPS, 4, 0, 7, 1], STEPS, pre=False)  # post-padding, a row all padding
    mask[2, 0] = False  # and a hole
    x[~mask] = 0.0
    weight_last = rng.normal(size=(BATCH, HIDDEN)).astype(np.float32)
    h, grads = _ours(backend, x[::-1], weights, tf.constant(mask[::-1], tf.float32), weight_last)

    layer = _keras_lstm(weights, go_backwards=True)
    model = keras.Sequential([keras.Input((STEPS, INPUTS)), keras.layers.Masking(), layer])
    out, keras_grads = _keras_gradients(layer, (x.transpose(1, 0, 2), {}), weight_last, model)
    assert_close(h[-1], out, what="last h")
    for name, ours, theirs in zip(("kernel", "recurrent", "bias"), grads, keras_grads, strict=True):
        assert_close(ours, theirs, what=f"d{name}")
