"""A Keras encoder-decoder (`seq2seq`: an LSTM encoder handing (h, c) to an LSTM decoder, with
attention or not; its sizes `B`, `TE`, `TD`, `V`, `E`, `H`) and its reference: the same model by
Keras's own cells stepped one by one (`unrolled`, `reference`: the total dL/dh_t and dL/dc_t
of each direction, and the direct partials), to `TOL`."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

L = keras.layers

B, TE, TD, V, E, H = 3, 5, 4, 12, 4, 3
TOL = {"rtol": 2e-4, "atol": 2e-6}


def seq2seq(attention: bool):
    """Embedding on each of two inputs; an LSTM encoder handing (h, c) to an LSTM decoder;
    with `attention` the decoder also attends over the encoder's outputs."""
    keras.utils.set_random_seed(1)
    enc_in = keras.Input((TE,), name="enc", dtype="int32")
    dec_in = keras.Input((TD,), name="dec", dtype="int32")
    e = L.Embedding(V, E, name="emb_e")(enc_in)
    d = L.Embedding(V, E, name="emb_d")(dec_in)
    seq, h, c = L.LSTM(H, return_sequences=attention, return_state=True, name="encoder")(e)
    dec = L.LSTM(H, return_sequences=True, name="decoder")(d, initial_state=[h, c])
    if attention:
        dec = L.Concatenate(name="cat")([dec, L.AdditiveAttention(name="att")([dec, seq])])
    out = L.Dense(V, activation="softmax", name="head")(dec)
    model = keras.Model([enc_in, dec_in], out)
    model.compile(loss="sparse_categorical_crossentropy")
    rng = np.random.default_rng(2)
    x = {"enc": rng.integers(1, V, (B, TE)), "dec": rng.integers(1, V, (B, TD))}
    y = rng.integers(0, V, (B, TD))
    return model, x, y


def unrolled(layer, inputs, state):
    """Keras's own cell of `layer` stepped over inputs [B, T, E] from `state`: (every state
    list, every output copy (the direct sources))."""
    states, outputs = [], []
    for t in range(inputs.shape[1]):
        _, state = layer.cell(inputs[:, t], state)
        states.append(state)
        outputs.append(tf.identity(state[0]))
    return states, outputs


def reference(model, x, y, attention: bool, step: int | None = None):
    """(loss, {direction: (totals h, totals c, direct)}) of the seq2seq by its unrolled cells;
    with `step`, of the loss of that decoder step alone (its share of the mean)."""
    get = model.get_layer
    with tf.GradientTape(persistent=True) as tape:
        e, d = get("emb_e")(x["enc"]), get("emb_d")(x["dec"])
        zeros = [tf.zeros([B, H]), tf.zeros([B, H])]
        enc_states, enc_out = unrolled(get("encoder"), e, zeros)
        handed = [enc_out[-1], enc_states[-1][1]]
        dec_states, dec_out = unrolled(get("decoder"), d, handed)
        seq = tf.stack(dec_out, 1)
        if attention:
            seq = get("cat")([seq, get("att")([seq, tf.stack(enc_out, 1)])])
        probs = get("head")(seq)
        losses = keras.losses.sparse_categorical_crossentropy(y, probs)  # [B, TD]
        if step is not None:
            losses = losses * tf.one_hot(step, TD)
        loss = tf.reduce_mean(losses)
    def grad(tensor):
        return tape.gradient(loss, tensor, unconnected_gradients="zero").numpy()

    found = {}
    for name, states, outs in (("encoder", enc_states, enc_out), ("decoder", dec_states, dec_out)):
        totals = tuple(np.stack([grad(s[i]) for s in states]) for i in (0, 1))
        found[name] = (*totals, np.stack([grad(o) for o in outs]))
    return float(loss), found
