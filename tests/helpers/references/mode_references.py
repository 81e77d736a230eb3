"""The modes' NumPy references (float64, on tests/helpers/references/reference.py's LSTM and BPTT)
and the cases they are checked on: a taped run's and a multi-pass run's inputs (`taped_case`,
`multipass_case`), the multi-pass loss and its BPTT (`np_multipass`), one batch's BPTT and
every batch of a per-batch-weights trace checked against it (`batch_bptt`, `check_batches`),
the hypernetwork's chain rule (`numpy_hypernetwork`), training's read-out loss (`np_readout`)
and the connectivity map (`np_connectivity`)."""

from __future__ import annotations

import numpy as np
import pytest

from lstmviz.weights import LSTMWeights, random_weights
from tests.helpers.references.reference import assert_close, np_bptt, np_forward, np_loss

GRADS = {"dkernel": "grad_kernel", "drecurrent": "grad_recurrent_kernel", "dbias": "grad_bias"}
GRADS |= {"dh": "grad_h_total", "dc": "grad_c_total", "dh0": "grad_h0", "dc0": "grad_c0"}


def taped_case(rng, loss, steps=9, random_state=True):
    """(x [steps, 3, 4], weights, the loss's target, h0, c0) of a taped run: H = 5, the
    recurrent kernel scaled up so that gradients do not vanish."""
    B, I, H = 3, 4, 5
    w = random_weights(I, H, rng)
    w = LSTMWeights(w.kernel, 1.5 * w.recurrent_kernel, w.bias + 0.1 * rng.standard_normal(4 * H))
    x = rng.standard_normal((steps, B, I)).astype(np.float32)
    h0 = rng.uniform(-0.5, 0.5, (B, H)).astype(np.float32) if random_state else None
    c0 = rng.uniform(-0.5, 0.5, (B, H)).astype(np.float32) if random_state else None
    target = {
        "mean_h": None,
        "last_mse": rng.uniform(-0.5, 0.5, (B, H)),
        "seq_mse": rng.uniform(-0.5, 0.5, (steps, B, H)),
    }[loss]
    return x, w, target, h0, c0


def multipass_case(rng, loss, passes, pass_length=4):
    """(x [passes, pass_length, 2, 3], weights, the loss's target, h0, c0) of a multi-pass run:
    H = 5."""
    B, I, H = 2, 3, 5
    w = random_weights(I, H, rng)
    # A larger recurrent kernel keeps the gradient alive across passes of a few steps.
    w = LSTMWeights(w.kernel, 1.5 * w.recurrent_kernel, w.bias + 0.1 * rng.standard_normal(4 * H))
    x = rng.standard_normal((passes, pass_length, B, I)).astype(np.float32)
    h0, c0 = (rng.uniform(-0.5, 0.5, (B, H)).astype(np.float32) for _ in range(2))
    target = {
        "mean_h": None,
        "last_mse": rng.uniform(-0.5, 0.5, (passes, B, H)),
        "seq_mse": rng.uniform(-0.5, 0.5, (passes * pass_length, B, H)),
    }[loss]
    return x, w, target, h0, c0


def np_multipass(loss, x, w, target, h0, c0, cut=False):
    """Independent: the mean of the per-pass losses (each pass a separate np_loss), its direct
    partials, and BPTT over the joined sequence, uncut or cut at every pass start."""
    passes, pass_length = x.shape[:2]
    joined = x.reshape(passes * pass_length, *x.shape[2:])
    h, _, _ = np_forward(joined, w.kernel, w.recurrent_kernel, w.bias, h0, c0)
    direct = np.zeros_like(h)
    values = []
    for p in range(passes):
        seg = slice(p * pass_length, (p + 1) * pass_length)
        seg_target = {"mean_h": None, "last_mse": target, "seq_mse": target}[loss]
        if seg_target is not None:
            seg_target = seg_target[p] if loss == "last_mse" else seg_target[seg]
        value, seg_direct = np_loss(loss, h[seg], seg_target)
        values.append(value)
        direct[seg] = seg_direct / passes
    cut_at = range(0, passes * pass_length, pass_length) if cut else ()
    ref = np_bptt(joined, w.kernel, w.recurrent_kernel, w.bias, h0, c0, direct, cut_at=cut_at)
    return np.mean(values), np.array(values), direct, ref


def batch_bptt(loss, x, w, h0, c0, target):
    """Independent NumPy loss and BPTT for one batch."""
    h, _, _ = np_forward(x, *w, h0, c0)
    value, direct = np_loss(loss, h, target)
    return value, direct, np_bptt(x, *w, h0, c0, direct)


def check_batches(trace, loss):
    """Every batch's gradients equal NumPy BPTT with that batch's own weights (to 1e-4)."""
    target = trace.arrays.get("target")
    for n in range(trace.x.shape[0]):
        w = (trace.kernel[n], trace.recurrent_kernel[n], trace.bias[n])
        t = None if target is None else target[n]
        value, direct, ref = batch_bptt(loss, trace.x[n], w, trace.h0[n], trace.c0[n], t)
        assert float(trace.loss_by_batch[n]) == pytest.approx(value, rel=1e-4)  # float32
        assert_close(trace.grad_output[n], direct, what=f"batch {n} grad_output")
        for ref_key, key in GRADS.items():
            assert_close(trace[key][n], ref[ref_key], what=f"batch {n} {key}")
    assert_close(trace.norm_h_total_by_batch, np.sqrt((trace.grad_h_total**2).sum(axis=(2, 3))))
    assert not np.allclose(trace.kernel[0], trace.kernel[1]), "batches share their weights"


def numpy_hypernetwork(hyper, x, loss, target):
    """The hypernetwork, the LSTM and the chain rule back to the model's weights, in NumPy float64.

    Returns (loss(params), gradients) with params = [W1, b1, W2, b2] read from the Keras model.
    """
    params = [np.asarray(v, np.float64) for v in hyper.model.get_weights()]
    base = hyper.base.numpy().astype(np.float64)
    meta = np.concatenate([x.mean(axis=(0, 1)), x.std(axis=(0, 1))]).astype(np.float64)
    I, H = hyper.input_dim, hyper.hidden
    zeros = np.zeros((x.shape[1], H))

    def weights(p):
        a = np.tanh(meta @ p[0] + p[1])
        flat = base + a @ p[2] + p[3]
        k, r, b = np.split(flat, [I * 4 * H, (I + H) * 4 * H])
        return a, (k.reshape(I, 4 * H), r.reshape(H, 4 * H), b)

    def value(p):
        h, _, _ = np_forward(x, *weights(p)[1], zeros, zeros)
        return np_loss(loss, h, target)[0]

    a, w = weights(params)
    _, _, ref = batch_bptt(loss, x, w, zeros, zeros, target)
    dflat = np.concatenate([ref["dkernel"].ravel(), ref["drecurrent"].ravel(), ref["dbias"]])
    dz = (params[2] @ dflat) * (1 - a**2)
    return value, params, [np.outer(meta, dz), dz, np.outer(a, dflat), dflat]


def np_readout(task_loss, per_step, h, kernel, bias, y):
    """Loss of the dense read-out and its direct partial dL/dh [T, B, H], in float64."""
    kernel = np.asarray(kernel, np.float64)
    out = (h if per_step else h[-1]) @ kernel + bias
    if task_loss == "xent":
        p = np.exp(out - out.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        value = np.mean(-np.sum(y * np.log(p), axis=-1))
        dout = (p - y) / (out.size / out.shape[-1])
    else:
        value = np.mean((out - y) ** 2)
        dout = 2 * (out - y) / out.size
    direct = np.zeros_like(h)
    if per_step:
        direct[:] = dout @ kernel.T
    else:
        direct[-1] = dout @ kernel.T
    return value, direct, dout


def np_connectivity(x, kernel, recurrent, bias, h0, c0, direct):
    """T independent NumPy BPTT passes, each with the one-step loss L_t."""
    steps = x.shape[0]
    c = np.zeros((steps, steps))
    for t in range(steps):
        one = np.zeros_like(direct)
        one[t] = direct[t]
        dh = np_bptt(x, kernel, recurrent, bias, h0, c0, one)["dh"]
        c[t] = np.sqrt((dh**2).sum(axis=(1, 2)))
    return c
