"""Independent reference computations for the tests: a NumPy LSTM and its BPTT, in float64.

Nothing here uses lstmviz's TensorFlow code. Layout as Keras: kernel [I, 4H], recurrent [H, 4H],
bias [4H], gates i, f, c, o; x time-major [T, B, I].

A mask [T, B] of 0/1 (Keras's masking) makes a step where it is 0 keep the state it was given:
h_t = m·ĥ_t + (1-m)·h_{t-1}, c_t likewise, where ĥ_t, ĉ_t is what the cell computes.
"""

from __future__ import annotations

import numpy as np


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _ran(mask, steps, batch):
    """[T, B, 1] bool, to broadcast over units: where the cell's new state is kept (the mask
    is nonzero; everywhere when it is None)."""
    if mask is None:
        return np.ones((steps, batch, 1), bool)
    return np.asarray(mask).reshape(steps, batch, 1) != 0


def np_forward(x, kernel, recurrent, bias, h0, c0, mask=None):
    """Returns h, c [T, B, H] and, per step, the gate activations (i, f, g, o) and the cell's
    own new c (before the mask picks it or the carried state) that the backward pass needs."""
    x, kernel, recurrent, bias = (np.asarray(a, np.float64) for a in (x, kernel, recurrent, bias))
    h, c = np.asarray(h0, np.float64), np.asarray(c0, np.float64)
    ran = _ran(mask, x.shape[0], x.shape[1])
    hs, cs, gates = [], [], []
    for t in range(x.shape[0]):
        z = x[t] @ kernel + h @ recurrent + bias
        zi, zf, zg, zo = np.split(z, 4, axis=-1)
        i, f, g, o = sigmoid(zi), sigmoid(zf), np.tanh(zg), sigmoid(zo)
        c_cell = f * c + i * g
        h_cell = o * np.tanh(c_cell)
        # Keras's masked step: the previous state where the mask is 0.
        h = np.where(ran[t], h_cell, h)
        c = np.where(ran[t], c_cell, c)
        hs.append(h)
        cs.append(c)
        gates.append((i, f, g, o, c_cell))
    return np.stack(hs), np.stack(cs), gates


def np_loss(loss, h, target):
    """Loss value and its direct partial dL/dh [T, B, H], as lstmviz/engine/problem/losses.py
    defines."""
    direct = np.zeros_like(h)
    if loss == "mean_h":
        direct[:] = 1.0 / h.size
        return h.mean(), direct
    if loss == "last_mse":
        diff = h[-1] - target
        direct[-1] = 2.0 * diff / diff.size
        return np.mean(diff**2), direct
    if loss == "seq_mse":
        diff = h - target
        return np.mean(diff**2), 2.0 * diff / diff.size
    raise ValueError(loss)


def np_bptt(x, kernel, recurrent, bias, h0, c0, direct, cut_at=(), direct_c=None, mask=None):
    """Backpropagate the direct partials `direct` [T, B, H] (at h_t) and `direct_c` (at c_t,
    zeros when None) through time, over steps masked by `mask` [T, B] of 0/1 (None: none).

    Returns dict with dh (total dL/dh_t), dc (total dL/dc_t), dkernel, drecurrent, dbias, dh0,
    dc0, dx. At every t in `cut_at` the gradient is not passed on to the state before t
    (truncated BPTT at pass boundaries). dc_t counts the path through h_t where the cell ran
    (h_t = o·tanh(c_t)); at a masked step h_t and c_t are copies, and dc_t is the copy's own.
    """
    x = np.asarray(x, np.float64)
    h0, c0 = np.asarray(h0, np.float64), np.asarray(c0, np.float64)
    h, c, gates = np_forward(x, kernel, recurrent, bias, h0, c0, mask)
    ran = _ran(mask, x.shape[0], x.shape[1])
    recurrent = np.asarray(recurrent, np.float64)
    steps = x.shape[0]
    dh_all, dc_all = np.zeros_like(h), np.zeros_like(c)
    dk = np.zeros(np.shape(kernel))
    dr = np.zeros(np.shape(recurrent))
    db = np.zeros(np.shape(bias))
    dh_rec, dc_rec = np.zeros_like(h0), np.zeros_like(c0)
    dx = np.zeros_like(x)
    direct_c = np.zeros_like(c) if direct_c is None else direct_c
    for t in reversed(range(steps)):
        i, f, g, o, c_cell = gates[t]
        h_prev = h[t - 1] if t > 0 else h0
        c_prev = c[t - 1] if t > 0 else c0
        dh_state = direct[t] + dh_rec  # dL/dh_t
        dc_state = dc_rec + direct_c[t]  # dL/dc_t, not counting h_t's dependence on it
        tc = np.tanh(c_cell)
        # Rows that ran the cell send everything into it; the others copy the state they were
        # given, so their gradient goes to that state unchanged and the cell gets none.
        dh = np.where(ran[t], dh_state, 0.0)
        dc = np.where(ran[t], dh * o * (1 - tc**2) + dc_state, 0.0)
        dh_all[t] = dh_state
        dc_all[t] = np.where(ran[t], dc, dc_state)
        dz = np.concatenate(
            [
                dc * g * i * (1 - i),
                dc * c_prev * f * (1 - f),
                dc * i * (1 - g**2),
                dh * tc * o * (1 - o),
            ],
            axis=-1,
        )
        dk += x[t].T @ dz
        dx[t] = dz @ np.asarray(kernel, np.float64).T
        dr += h_prev.T @ dz
        db += dz.sum(axis=0)
        dh_rec = dz @ recurrent.T + np.where(ran[t], 0.0, dh_state)
        dc_rec = dc * f + np.where(ran[t], 0.0, dc_state)
        if t in cut_at:
            dh_rec, dc_rec = np.zeros_like(dh_rec), np.zeros_like(dc_rec)
    return {
        "h": h,
        "c": c,
        "dh": dh_all,
        "dc": dc_all,
        "dkernel": dk,
        "drecurrent": dr,
        "dbias": db,
        "dh0": dh_rec,
        "dc0": dc_rec,
        "dx": dx,
    }


def assert_close(actual, expected, rtol=1e-4, atol_scale=1e-5, what=""):
    """Relative check scaled by the largest magnitude of `expected` (float32 vs float64)."""
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    scale = max(np.max(np.abs(expected)), 1e-12)
    err = np.max(np.abs(actual - expected)) if actual.size else 0.0
    assert err <= rtol * scale + atol_scale * scale, f"{what}: max err {err:.3g}, scale {scale:.3g}"


def interrupted_outcome(run) -> str:
    """Call `run()` in a thread and `interrupt.interrupt()` every 5 ms until it returns:
    "finished", or the message of the CancelledError it raised."""
    import threading
    import time

    import tensorflow as tf

    from lstmviz.engine.native import interrupt

    outcome = {}

    def call():
        try:
            run()
            outcome["result"] = "finished"
        except tf.errors.CancelledError as error:
            outcome["result"] = str(error)

    thread = threading.Thread(target=call)
    thread.start()
    while thread.is_alive():  # the op may not have started at the first call: repeat
        interrupt.interrupt()
        time.sleep(0.005)
    thread.join()
    return outcome["result"]
