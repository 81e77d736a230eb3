"""An independent reference for model mode: a Keras model's forward written again as an eager,
unrolled, step-by-step TensorFlow loop over the Keras layers themselves (their own weights, read
with `get_weights()`), with a zero perturbation added to every h_t and c_t of every LSTM
direction, so that `tape.gradient` with respect to the perturbations is the total dL/dh_t and
dL/dc_t. Nothing of lstmviz runs here: no while loop, no native kernel, no ModelSpec.

`check_against_keras` checks a model-mode trace against Keras and this reference (`close`:
arrays equal to a tolerance of their scale; `keras_directions`: a model's LSTM directions in
lstmviz's order).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf


def _lstm_direction(layer, x, mask, backwards, record, tape, gates, outs=None):
    """x [B, T, I] batch-major, mask [B, T] or None; returns h at every processed step (a list,
    processing order) and records the perturbations by input position. With `outs` (a list),
    h_t leaves the layer plus a zero perturbation of its own, recorded there as (t, eps_out,
    h_t, c_t): its gradient is the direct ∂L/∂h_t through the layer's output only (it does not
    enter the recurrence)."""
    kernel, recurrent, *bias = [tf.constant(w) for w in layer.get_weights()]
    units = recurrent.shape[0]
    bias = bias[0] if bias else tf.zeros(4 * units)
    batch, steps = x.shape[0], x.shape[1]
    h = c = tf.zeros([batch, units])
    order = range(steps - 1, -1, -1) if backwards else range(steps)
    outputs = []
    for t in order:
        # dL/dc_t is BPTT's delta at the cell state: through h_t = o_t·tanh(c_t) and later
        # steps, so the perturbation of c_t enters before h_t is computed.
        z = x[:, t] @ kernel + h @ recurrent + bias
        i, f, g, o = tf.split(z, 4, axis=1)
        m = 1.0 if mask is None else tf.cast(mask[:, t : t + 1], tf.float32)
        eps_h, eps_c = tf.zeros_like(h), tf.zeros_like(c)
        tape.watch([eps_h, eps_c])
        record.append((t, eps_h, eps_c))
        gates.append((t, [tf.sigmoid(i), tf.sigmoid(f), tf.tanh(g), tf.sigmoid(o)], m))
        c_new = m * (tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)) + (1 - m) * c + eps_c
        h = m * tf.sigmoid(o) * tf.tanh(c_new) + (1 - m) * h + eps_h
        c = c_new
        if outs is None:
            outputs.append((t, h))
        else:
            eps_out = tf.zeros_like(h)
            tape.watch(eps_out)
            outs.append((t, eps_out, h, c))
            outputs.append((t, h + eps_out))
    return outputs


def _sequence(outputs, steps, zero_masked, mask, reverse_back):
    """Outputs of a direction as [B, T, H] in processing order (Keras's order for a layer
    reading backwards), or flipped back to input order (a Bidirectional's backward half)."""
    hs = [h for _, h in outputs]
    if zero_masked and mask is not None:
        hs = [h * tf.cast(mask[:, t : t + 1], tf.float32) for (t, _), h in zip(outputs, hs,
                                                                                 strict=True)]
    if reverse_back:
        hs = hs[::-1]
    return tf.stack(hs, 1)


def leaves(model):
    """The model's layers in call order, nested models opened up."""
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            yield from leaves(layer)
        else:
            yield layer


def forward(model: keras.Model, x: np.ndarray, tape: tf.GradientTape, extras=None):
    """(y_pred, directions): directions a list of (name, {t: (eps_h, eps_c)}) in the order
    lstmviz names them (model order, forward before backward). Layers lstmviz does not model
    (Conv1D, attention, pooling) are called as the Keras layers they are. With `extras` (a
    dict) it also records there, watched by `tape`: "input", the tensor fed to the first LSTM
    (batch-major), and "outs", per direction name the output perturbations of
    `_lstm_direction`."""
    value = tf.constant(x)
    mask = None
    directions = []
    outs = None if extras is None else extras.setdefault("outs", {})
    for layer in leaves(model):
        name = type(layer).__name__
        if name == "InputLayer":
            continue
        if extras is not None and name in ("LSTM", "Bidirectional") and "input" not in extras:
            tape.watch(value)
            extras["input"] = value
        if name == "Embedding":
            value = tf.gather(tf.constant(layer.get_weights()[0]), value)
            mask = tf.not_equal(tf.constant(x), 0) if layer.mask_zero else None
        elif name == "Masking":
            mask = tf.reduce_any(tf.not_equal(value, layer.mask_value), -1)
            value = value * tf.cast(mask, value.dtype)[..., None]
        elif name in ("Dropout", "SpatialDropout1D", "GaussianNoise"):
            pass
        elif name == "LSTM":
            record, gates, out = [], [], None if outs is None else []
            outputs = _lstm_direction(layer, value, mask, layer.go_backwards, record, tape, gates,
                                      out)  # fmt: skip
            directions.append((layer.name, record, gates))
            if outs is not None:
                outs[layer.name] = out
            if layer.return_sequences:
                value = _sequence(outputs, x.shape[1], layer.zero_output_for_mask, mask, False)
            else:
                value, mask = outputs[-1][1], None
        elif name == "Bidirectional":
            merged = []
            for half, sub in (("forward", layer.forward_layer), ("backward", layer.backward_layer)):
                record, gates, out = [], [], None if outs is None else []
                outputs = _lstm_direction(sub, value, mask, sub.go_backwards, record, tape, gates,
                                          out)  # fmt: skip
                directions.append((f"{layer.name}/{half}", record, gates))
                if outs is not None:
                    outs[f"{layer.name}/{half}"] = out
                if layer.return_sequences:
                    merged.append(_sequence(outputs, x.shape[1], True, mask, half == "backward"))
                else:
                    merged.append(outputs[-1][1])
            a, b = merged
            merge = layer.merge_mode
            if merge == "concat":
                value = tf.concat([a, b], -1)
            else:
                value = {"sum": a + b, "mul": a * b, "ave": (a + b) / 2}[merge]
            if not layer.return_sequences:
                mask = None
        elif name in ("Dense", "TimeDistributed"):
            dense = layer.layer if name == "TimeDistributed" else layer
            kernel, *bias = [tf.constant(w) for w in dense.get_weights()]
            value = tf.tensordot(value, kernel, 1) + (bias[0] if bias else 0.0)
            value = keras.activations.get(dense.activation)(value)
        elif name == "Activation":
            value = keras.activations.get(layer.activation)(value)
        elif name == "MultiHeadAttention":
            value = layer(value, value)
        else:
            value = layer(value)
            if value.shape.rank < 3:
                mask = None
    return value, mask, directions


def gate_statistics(gates) -> tuple[np.ndarray, np.ndarray]:
    """Mean activation of i, f, g, o and the fraction saturated (sigmoid < 0.01 or > 0.99,
    |tanh| > 0.99) over the unmasked (b, j) of each step: [4, T] each, by input position."""
    gates = sorted(gates, key=lambda item: item[0])
    means, saturated = np.zeros((4, len(gates))), np.zeros((4, len(gates)))
    for t, acts, m in gates:
        weight = np.broadcast_to(np.asarray(m, np.float64), (acts[0].shape[0], 1))
        count = weight.sum() * acts[0].shape[1]
        for k, a in enumerate(acts):
            a = a.numpy().astype(np.float64)
            sat = np.abs(a) > 0.99 if k == 2 else (a < 0.01) | (a > 0.99)
            means[k, t] = (a * weight).sum() / count if count else 0.0
            saturated[k, t] = (sat * weight).sum() / count if count else 0.0
    return means, saturated


def reference(model: keras.Model, x: np.ndarray, y: np.ndarray, loss: str):
    """(loss, y_pred, {direction name: (dL/dh [T, B, H], dL/dc [T, B, H], gate means [4, T],
    gates saturated [4, T])}) by input position;
    the loss is Keras's mean (over the unmasked steps of a sequence output)."""
    with tf.GradientTape(persistent=True) as tape:
        y_pred, mask, directions = forward(model, x, tape)
        compiled = getattr(model, "loss", None)
        if hasattr(compiled, "fn") and hasattr(compiled, "_fn_kwargs"):  # a wrapper and its args
            values = compiled.fn(y, y_pred, **compiled._fn_kwargs)
        else:
            values = keras.losses.get(loss)(y, y_pred)
        if values.shape.rank == 2 and mask is not None:
            weight = tf.cast(mask, values.dtype)
            value = tf.reduce_sum(values * weight) / tf.reduce_sum(weight)
        else:
            value = tf.reduce_mean(values)
    totals = {}
    for name, record, gates in directions:
        record = sorted(record, key=lambda item: item[0])  # by input position
        grads = tape.gradient(value, [[eh for _, eh, _ in record], [ec for _, _, ec in record]],
                              unconnected_gradients=tf.UnconnectedGradients.ZERO)
        totals[name] = tuple(np.stack([g.numpy() for g in part]) for part in grads)
        totals[name] += gate_statistics(gates)
    return float(value), y_pred.numpy(), totals


def _keras_loss(loss, y, y_pred, mask, model):
    """(per-sample losses [B], the loss): `loss` a Keras loss name (the model's compiled one
    first, as `reference` takes it) or a callable (y, y_pred) -> per-sample values [B, ...];
    Keras's mean, over the unmasked steps of a sequence output."""
    compiled = getattr(model, "loss", None)
    if callable(loss):
        values = loss(y, y_pred)
    elif hasattr(compiled, "fn") and hasattr(compiled, "_fn_kwargs"):
        values = compiled.fn(y, y_pred, **compiled._fn_kwargs)
    else:
        values = keras.losses.get(loss)(y, y_pred)
    if values.shape.rank == 2 and mask is not None:
        weight = tf.cast(mask, values.dtype)
        counts = tf.reduce_sum(weight, 1)
        per_sample = tf.reduce_sum(values * weight, 1) / tf.maximum(counts, 1.0)
        return per_sample, tf.reduce_sum(values * weight) / tf.reduce_sum(weight)
    per_sample = tf.reshape(values, [values.shape[0], -1])
    return tf.reduce_mean(per_sample, 1), tf.reduce_mean(values)


def reference_all(model: keras.Model, x: np.ndarray, y, loss) -> dict:
    """Everything model mode shows, by this module's unrolled forward: "loss", "y_pred",
    "loss_by_sample" [B], "grad_input" [T, B, E] (dL/d input of the first LSTM, time-major)
    and "directions": {name: {"h", "c", "dh", "dc", "direct" [T, B, H], "gates_mean",
    "gates_saturated" [4, T]}} by input position, in lstmviz's order of directions.
    `loss`: as `_keras_loss` takes it (a callable for the hidden-state losses of a stack)."""
    extras: dict = {}
    with tf.GradientTape(persistent=True) as tape:
        y_pred, mask, directions = forward(model, x, tape, extras)
        per_sample, value = _keras_loss(loss, y, y_pred, mask, model)
    zero = tf.UnconnectedGradients.ZERO
    found = {}
    for name, record, gates in directions:
        record = sorted(record, key=lambda item: item[0])
        outs = sorted(extras["outs"][name], key=lambda item: item[0])
        sources = [[e for _, e, _ in record], [e for _, _, e in record], [e for _, e, _, _ in outs]]
        dh, dc, direct = (np.stack([g.numpy() for g in part])
                          for part in tape.gradient(value, sources, unconnected_gradients=zero))
        means, saturated = gate_statistics(gates)
        found[name] = {
            "h": np.stack([h.numpy() for _, _, h, _ in outs]),
            "c": np.stack([c.numpy() for _, _, _, c in outs]),
            "dh": dh, "dc": dc, "direct": direct,
            "gates_mean": means, "gates_saturated": saturated,
        }  # fmt: skip
    grad_input = tape.gradient(value, extras["input"], unconnected_gradients=zero)
    return {
        "loss": float(value),
        "y_pred": y_pred.numpy(),
        "loss_by_sample": per_sample.numpy(),
        "grad_input": np.swapaxes(grad_input.numpy(), 0, 1),
        "directions": found,
    }


def keras_directions(model):
    """The LSTM layers of each direction, in lstmviz's order."""
    found = []
    for layer in leaves(model):
        if isinstance(layer, keras.layers.Bidirectional):
            found += [layer.forward_layer, layer.backward_layer]
        elif isinstance(layer, keras.layers.LSTM):
            found.append(layer)
    return found


def close(a, b, rtol, what):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = max(np.abs(b).max(), 1e-6)
    assert np.abs(a - b).max() <= rtol * scale, f"{what}: max |Δ| {np.abs(a - b).max():.3g}"


def check_against_keras(model, loss, x, y, trace, masked=None):
    """y_pred, the loss, every direction's weight gradients against Keras; dL/dh_t, dL/dc_t
    against the unrolled reference (at the steps `masked` does not hide)."""
    trace.check()
    with tf.GradientTape() as tape:
        y_pred = model(x, training=False)
        value = model.compute_loss(x=x, y=y, y_pred=y_pred, training=False)
    grads = dict(zip((id(w) for w in model.trainable_weights),
                     tape.gradient(value, model.trainable_weights), strict=True))  # fmt: skip
    close(trace.y_pred, y_pred, 1e-5, "y_pred")
    assert float(trace.loss) == pytest.approx(float(value), rel=1e-5)
    assert trace.loss_by_sample.shape == (len(x),)
    ref_loss, _, totals = reference(model, x, y, loss)
    assert ref_loss == pytest.approx(float(value), rel=1e-5)  # the reference is Keras's model
    directions = keras_directions(model)
    assert len(trace.layer_names) == len(directions) == len(totals)
    keep = 1.0 if masked is None else masked.T[..., None]  # [T, B, 1]
    for k, (layer, name_k) in enumerate(zip(directions, totals, strict=True)):
        cell = layer.cell
        weights = (("kernel", cell.kernel), ("recurrent_kernel", cell.recurrent_kernel))
        weights += (("bias", cell.bias),) if cell.use_bias else ()
        for key, weight in weights:
            close(trace[f"layer{k}_grad_{key}"], grads[id(weight)], 1e-4, f"{name_k} {key}")
        dh, dc, gate_means, gate_saturated = totals[name_k]
        close(trace[f"layer{k}_grad_h_total"] * keep, dh * keep, 1e-4, f"{name_k} dL/dh")
        close(trace[f"layer{k}_grad_c_total"] * keep, dc * keep, 1e-4, f"{name_k} dL/dc")
        close(trace[f"layer{k}_gates_mean"], gate_means, 1e-5, f"{name_k} gates")
        np.testing.assert_allclose(trace[f"layer{k}_gates_saturated"], gate_saturated,
                                   atol=1.5 / (len(x) * dh.shape[2]))  # one (b, j) at an edge
    assert trace.norm_h_total_by_layer.shape == (len(directions), x.shape[1])
    return trace
