"""Independent references for recurrent cells of every kind (GRU, SimpleRNN, LSTM of any
activation) in model mode:

- `spec_of(model)`: a small Keras 3 model (Embedding, Masking, GRU / SimpleRNN / LSTM,
  Bidirectional of each, Dense) as a ModelSpec made by hand from `layer.get_weights()` and the
  layers' attributes, without lstmviz's file readers.
- `unrolled(model, x, y, loss)`: the model's forward as an eager step-by-step loop calling the
  Keras cells themselves (`cell.call(x_t, states)`), a zero perturbation added to every h_t of
  every direction, so `tape.gradient` gives the total dL/dh_t; plus Keras's weight gradients.
  Nothing of lstmviz runs there.
- `numpy_direction`: a float64 NumPy forward of one direction of each cell, for finite
  differences.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from lstmviz.weights.model_spec import LayerSpec, ModelSpec

KINDS = {"LSTM": "lstm", "GRU": "gru", "SimpleRNN": "simple_rnn"}


def _name(fn) -> str:
    return keras.activations.serialize(fn) if callable(fn) else str(fn)


def _rnn_args(layer) -> dict:
    args = {"units": layer.units, "return_sequences": layer.return_sequences,
            "go_backwards": layer.go_backwards, "use_bias": layer.cell.use_bias,
            "zero_output_for_mask": layer.zero_output_for_mask,
            "activation": _name(layer.cell.activation)}  # fmt: skip
    if hasattr(layer.cell, "recurrent_activation"):
        args["recurrent_activation"] = _name(layer.cell.recurrent_activation)
    if hasattr(layer.cell, "reset_after"):
        args["reset_after"] = layer.cell.reset_after
    return args


def _weights(layer, prefix: str = "") -> dict:
    names = ("kernel", "recurrent_kernel", "bias")
    return {prefix + k: w for k, w in zip(names, layer.get_weights(), strict=False)}


def spec_of(model, loss: str | None = None) -> ModelSpec:
    """The Keras model as a ModelSpec, made by hand (see the module docstring)."""
    shape = tuple(model.input_shape[1:])
    layers = [LayerSpec("input", "input", "InputLayer", output_shape=shape)]
    for layer in model.layers:
        cls = type(layer).__name__
        if cls == "InputLayer":
            continue
        out = tuple(layer.output.shape[1:])
        common = {"name": layer.name, "class_name": cls, "output_shape": out,
                  "params": layer.count_params()}  # fmt: skip
        if cls == "Embedding":
            args = {"input_dim": layer.input_dim, "output_dim": layer.output_dim,
                    "mask_zero": layer.mask_zero}  # fmt: skip
            layers.append(LayerSpec(kind="embedding", args=args,
                                    weights={"embeddings": layer.get_weights()[0]}, **common))
        elif cls == "Masking":
            layers.append(LayerSpec(kind="masking", args={"mask_value": layer.mask_value},
                                    **common))  # fmt: skip
        elif cls in KINDS:
            layers.append(LayerSpec(kind=KINDS[cls], args=_rnn_args(layer),
                                    weights=_weights(layer), **common))  # fmt: skip
        elif cls == "Bidirectional":
            fw, bw = layer.forward_layer, layer.backward_layer
            args = {"merge_mode": layer.merge_mode, "return_sequences": layer.return_sequences,
                    "cell": KINDS[type(fw).__name__], "forward": _rnn_args(fw),
                    "backward": _rnn_args(bw), "layer_class": type(fw).__name__}  # fmt: skip
            weights = _weights(fw, "forward/") | _weights(bw, "backward/")
            layers.append(LayerSpec(kind="bidirectional", args=args, weights=weights, **common))
        elif cls == "Dense":
            args = {"units": layer.units, "activation": _name(layer.activation)}
            weights = dict(zip(("kernel", "bias"), layer.get_weights(), strict=False))
            layers.append(LayerSpec(kind="dense", args=args, weights=weights, **common))
        else:
            raise AssertionError(f"spec_of does not know {cls}")
    return ModelSpec(model.name, "a Keras model made in the test", tuple(layers), loss=loss)


def _direction(layer, x, mask, tape, record):
    """Run one Keras recurrent layer (not a Bidirectional) step by step over x [B, T, I] with
    its cell; mask [B, T] bool or None. Returns the outputs [B, T, H] in processing order
    (zeros at masked steps when the layer zeroes them) and the last h; appends to `record`
    {t: eps} (the perturbations of h_t by input position, watched by `tape`)."""
    cell = layer.cell
    batch, steps = x.shape[0], x.shape[1]
    units = cell.units
    states = [tf.zeros([batch, units])] * (2 if isinstance(cell, keras.layers.LSTMCell) else 1)
    order = range(steps - 1, -1, -1) if layer.go_backwards else range(steps)
    outputs, eps = [], {}
    for t in order:
        new_h, new_states = cell.call(x[:, t], states, training=False)
        new_states = list(new_states) if isinstance(new_states, list | tuple) else [new_states]
        if mask is not None:
            m = mask[:, t : t + 1]
            new_states = [tf.where(m, n, s) for n, s in zip(new_states, states, strict=True)]
        e = tf.zeros([batch, units])
        tape.watch(e)
        eps[t] = e
        new_states[0] = new_states[0] + e
        states = new_states
        out = states[0]
        if mask is not None and layer.zero_output_for_mask:
            out = out * tf.cast(mask[:, t : t + 1], out.dtype)
        outputs.append(out)
    record.append(eps)
    return tf.stack(outputs, 1), states[0]


def unrolled(model, x: np.ndarray, y: np.ndarray, loss: str):
    """(loss, y_pred, [dL/dh [T, B, H] by input position per direction, in lstmviz's order],
    {variable path: Keras's gradient}) of `model` on x, y (batch-major)."""
    records: list = []
    with tf.GradientTape(persistent=True) as tape:
        value, mask = tf.constant(x), None
        for layer in model.layers:
            cls = type(layer).__name__
            if cls == "Embedding":
                mask = tf.not_equal(value, 0) if layer.mask_zero else None
                value = layer(value)
            elif cls == "Masking":
                mask = tf.reduce_any(tf.not_equal(value, layer.mask_value), -1)
                value = value * tf.cast(mask, value.dtype)[..., None]
            elif cls in KINDS:
                seq, last = _direction(layer, value, mask, tape, records)
                value = seq if layer.return_sequences else last
                mask = mask if layer.return_sequences else None
            elif cls == "Bidirectional":
                halves = []
                for sub in (layer.forward_layer, layer.backward_layer):
                    seq, last = _direction(sub, value, mask, tape, records)
                    if layer.return_sequences and sub.go_backwards:
                        seq = tf.reverse(seq, [1])
                    halves.append(seq if layer.return_sequences else last)
                value = _merge(layer.merge_mode, *halves)
                mask = mask if layer.return_sequences else None
            else:
                value = layer(value)
        value_loss = tf.reduce_mean(keras.losses.get(loss)(tf.constant(y), value))
    dh = []
    for eps in records:
        steps = sorted(eps)
        grads = tape.gradient(value_loss, [eps[t] for t in steps],
                              unconnected_gradients=tf.UnconnectedGradients.ZERO)
        dh.append(np.stack([g.numpy() for g in grads]))
    return float(value_loss), value.numpy(), dh, _by_path(model, tape.gradient(
        value_loss, model.trainable_weights))  # fmt: skip


def _merge(mode: str, a, b):
    if mode == "concat":
        return tf.concat([a, b], -1)
    return {"sum": a + b, "mul": a * b, "ave": (a + b) / 2}[mode]


def _by_path(model, grads) -> dict:
    """{variable path: gradient as NumPy} (an Embedding's IndexedSlices made dense)."""
    return {v.path: tf.convert_to_tensor(g).numpy()
            for v, g in zip(model.trainable_weights, grads, strict=True)}  # fmt: skip


def keras_gradients(model, x, y, loss: str):
    """(loss, y_pred, {variable path: gradient}): Keras's own forward and tape.gradient."""
    with tf.GradientTape() as tape:
        y_pred = model(x, training=False)
        value = tf.reduce_mean(keras.losses.get(loss)(tf.constant(y), y_pred))
    variables = model.trainable_weights
    grads = tape.gradient(value, variables)
    return float(value), y_pred.numpy(), {v.path: tf.convert_to_tensor(g).numpy() for v, g in zip(
        variables, grads, strict=True)}  # fmt: skip


# float64 NumPy forwards of one direction (time-major x [T, B, I]), for finite differences.
_ACTS = {
    "tanh": np.tanh,
    "sigmoid": lambda z: 1.0 / (1.0 + np.exp(-z)),
    "relu": lambda z: np.maximum(z, 0.0),
    "linear": lambda z: z,
    "hard_sigmoid": lambda z: np.clip(z + 3.0, 0.0, 6.0) / 6.0,
    "hard_sigmoid_keras2": lambda z: np.clip(0.2 * z + 0.5, 0.0, 1.0),
}


def numpy_direction(cell, args, x, weights, mask=None, nudge=None):
    """h [T, B, H] of one direction in float64 from zeros; `nudge` (t, b, j, eps) adds eps to
    h_t[b, j] as it leaves step t (into the recurrence); mask [T, B] bool or None."""
    kernel, recurrent, bias = (np.asarray(weights[k], np.float64)
                               for k in ("kernel", "recurrent_kernel", "bias"))  # fmt: skip
    act = _ACTS[args.get("activation", "tanh")]
    gate = _ACTS[args.get("recurrent_activation", "sigmoid")]
    steps, batch = x.shape[:2]
    units = recurrent.shape[0]
    h = np.zeros((batch, units))
    c = np.zeros((batch, units))
    out = []
    for t in range(steps):
        if cell == "simple_rnn":
            h_new, c_new = act(x[t] @ kernel + h @ recurrent + bias), c
        elif cell == "lstm":
            z = x[t] @ kernel + h @ recurrent + bias
            i, f, g, o = np.split(z, 4, axis=1)
            c_new = gate(f) * c + gate(i) * act(g)
            h_new = gate(o) * act(c_new)
        else:
            wz, wr, wh = np.split(kernel, 3, axis=1)
            uz, ur, uh = np.split(recurrent, 3, axis=1)
            if bias.ndim == 2:
                bz, br, bh = np.split(bias[0], 3)
                rz, rr, rh = np.split(bias[1], 3)
                z = gate(x[t] @ wz + bz + h @ uz + rz)
                r = gate(x[t] @ wr + br + h @ ur + rr)
                hh = act(x[t] @ wh + bh + r * (h @ uh + rh))
            else:
                bz, br, bh = np.split(bias, 3)
                z = gate(x[t] @ wz + bz + h @ uz)
                r = gate(x[t] @ wr + br + h @ ur)
                hh = act(x[t] @ wh + bh + (r * h) @ uh)
            h_new, c_new = z * h + (1 - z) * hh, c
        if mask is not None:
            m = mask[t][:, None]
            h_new, c_new = np.where(m, h_new, h), np.where(m, c_new, c)
        if nudge is not None and nudge[0] == t:
            h_new = h_new.copy()
            h_new[nudge[1], nudge[2]] += nudge[3]
        h, c = h_new, c_new
        out.append(h)
    return np.stack(out)


def finite_differences(cell, args, x, weights, mask, w_out, eps: float = 1e-6) -> np.ndarray:
    """d(Σ h ⊙ w_out)/dh_t [T, B, H] of `numpy_direction` by central differences (float64)."""
    expected = np.zeros(w_out.shape)
    for t, b, j in np.ndindex(*w_out.shape):
        up, down = (np.sum(numpy_direction(cell, args, x, weights, mask, (t, b, j, s)) * w_out)
                    for s in (eps, -eps))  # fmt: skip
        expected[t, b, j] = (up - down) / (2 * eps)
    return expected


def recurrent_layers(model) -> list:
    """The Keras recurrent layers of `model`, one per direction, in lstmviz's order."""
    found = []
    for layer in model.layers:
        if type(layer).__name__ == "Bidirectional":
            found += [layer.forward_layer, layer.backward_layer]
        elif type(layer).__name__ in KINDS:
            found.append(layer)
    return found


def check_trace(model, arrays: dict, x, y, loss: str, atol: float = 2e-5) -> None:
    """Assert that a model-mode trace of `model` on x, y matches Keras (y_pred, loss, every
    direction's weight gradients) and the unrolled reference (every total dL/dh_t), and holds
    each direction's cell keys."""
    value, y_pred, grads = keras_gradients(model, x, y, loss)
    np.testing.assert_allclose(arrays["y_pred"], y_pred, atol=atol)
    np.testing.assert_allclose(arrays["loss"], value, rtol=1e-5)
    _, _, dh, _ = unrolled(model, x, y, loss)
    layers = recurrent_layers(model)
    assert len(arrays["layer_names"]) == len(layers)
    for k, layer in enumerate(layers):
        cell = KINDS[type(layer).__name__]
        assert str(arrays[f"layer{k}_cell"]) == cell
        np.testing.assert_allclose(arrays[f"layer{k}_grad_h_total"], dh[k], atol=atol,
                                   err_msg=f"dL/dh_t of direction {k}")  # fmt: skip
        for key in ("kernel", "recurrent_kernel", "bias"):
            variable = getattr(layer.cell, key, None)
            if variable is not None:
                np.testing.assert_allclose(arrays[f"layer{k}_grad_{key}"], grads[variable.path],
                                           atol=atol, err_msg=f"{key} of direction {k}")
        gates = arrays[f"layer{k}_gates_mean"]
        names = [str(n) for n in arrays[f"layer{k}_gate_names"]]
        assert gates.shape == (len(names), x.shape[1])
        assert arrays[f"layer{k}_gates_saturated"].shape == gates.shape
        has_c = cell == "lstm"
        assert (f"layer{k}_c" in arrays) == has_c
        assert (f"layer{k}_grad_c_total" in arrays) == has_c
        assert np.isnan(arrays["norm_c_total_by_layer"][k]).all() != has_c
