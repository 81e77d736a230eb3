"""The builder's parts (engine/autodiff/gradients.py) as code with its own tape uses them: two
stacked LSTMs on one tape, names prefixed per layer, against NumPy BPTT through both layers."""

import numpy as np

from lstmviz.engine.autodiff.gradients import (
    gradient_sources,
    graph_norms,
    named_gradients,
    watch_probes,
)
from lstmviz.engine.cells.lstm import lstm_sequence
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.io.trace import step_norm
from lstmviz.weights import random_weights
from tests.helpers.references.reference import assert_close, np_bptt, np_forward

T, B, I, H0, H1 = 7, 3, 4, 5, 6


def test_prefixed_names_for_two_layers_on_one_tape_match_numpy_bptt(rng):
    """Layer 0 [I -> H0] feeds layer 1 [H0 -> H1]; loss = mean of layer 1's h. Every
    per-layer gradient the helpers name equals NumPy BPTT run layer by layer (layer 0's
    direct gradient is dL/dx of layer 1)."""
    layers = [random_weights(I, H0, rng), random_weights(H0, H1, rng)]
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    states = [np.zeros((B, w.hidden), np.float32) for w in layers]
    sources, inputs = {}, tf.constant(x)
    with tf.GradientTape() as tape:
        for k, w in enumerate(layers):
            names = ("kernel", "recurrent_kernel", "bias")
            weights = {name: tf.constant(getattr(w, name)) for name in names}
            tape.watch(list(weights.values()))
            probes = watch_probes(tape, inputs, states[k])
            h, _ = lstm_sequence(inputs, states[k], states[k], *weights.values(), *probes)
            sources |= gradient_sources(probes, weights, h, prefix=f"layer{k}_")
            inputs = h
        value = tf.reduce_mean(inputs)
    named = named_gradients(tape, value, sources)
    named |= graph_norms(named, prefix="layer0_") | graph_norms(named, prefix="layer1_")

    h0, _, _ = np_forward(x, layers[0].kernel, layers[0].recurrent_kernel, layers[0].bias,
                          states[0], states[0])  # fmt: skip
    top = np_bptt(h0, layers[1].kernel, layers[1].recurrent_kernel, layers[1].bias, states[1],
                  states[1], np.full((T, B, H1), 1.0 / (T * B * H1)))  # fmt: skip
    bottom = np_bptt(x, layers[0].kernel, layers[0].recurrent_kernel, layers[0].bias, states[0],
                     states[0], top["dx"])  # fmt: skip
    for k, ref in enumerate((bottom, top)):
        p = f"layer{k}_"
        assert_close(named[p + "grad_h_total"], ref["dh"], what=p + "h_total")
        assert_close(named[p + "grad_c_total"], ref["dc"], what=p + "c_total")
        assert_close(named[p + "grad_kernel"], ref["dkernel"], what=p + "kernel")
        assert_close(named[p + "grad_recurrent_kernel"], ref["drecurrent"], what=p + "recurrent")
        assert_close(named[p + "grad_bias"], ref["dbias"], what=p + "bias")
        np.testing.assert_allclose(
            named[p + "norm_h_total"], step_norm(named[p + "grad_h_total"]), rtol=1e-5
        )
    assert_close(named["layer0_grad_h_direct"], top["dx"], what="layer 0 direct")
    assert_close(named["layer1_grad_h_direct"], np.full((T, B, H1), 1.0 / (T * B * H1)))


def test_list_sources_get_lists_and_unreached_sources_zeros():
    a, b, c = tf.constant(2.0), tf.constant(3.0), tf.constant(5.0)
    with tf.GradientTape() as tape:
        tape.watch([a, b, c])
        value = a * a + 4.0 * b
    named = named_gradients(tape, value, {"grad_ab": [a, b], "grad_c": c})
    assert [float(g) for g in named["grad_ab"]] == [4.0, 4.0] and float(named["grad_c"]) == 0.0
