"""Losses on hidden states h [T, B, H]:

- mean_h:   mean of all h[t, b, j]; no target.
- last_mse: mean over (b, j) of (h[T-1] - target)^2; target [B, H].
- seq_mse:  mean over (t, b, j) of (h - target)^2; target [T, B, H].

Multi-pass (P passes of Tp steps joined into T = P·Tp): the loss is the mean over passes of each
pass's loss. For mean_h and seq_mse that is the same loss on the joined sequence; for last_mse
the target is [P, B, H] and the loss averages the last step of every pass, so `hidden_loss` on
the joined h with a [P, B, H] target is the multi-pass loss.

Training's task losses are on a dense read-out of h instead (`readout_loss`).
"""

from __future__ import annotations

import numpy as np

from lstmviz.core.config import LOSSES
from lstmviz.core.errors import InputError
from lstmviz.core.numeric import float32_copy


def target_shape(
    loss: str, steps: int, batch: int, hidden: int, passes: int | None = None
) -> tuple[int, ...] | None:
    """The shape of the target `loss` needs, or None when it needs none.

    `passes` is P for a multi-pass run (steps is then the joined length P·Tp)."""
    return {
        "mean_h": None,
        "last_mse": (batch, hidden) if passes is None else (passes, batch, hidden),
        "seq_mse": (steps, batch, hidden),
    }[loss]


def check_loss(loss) -> None:
    """Raise InputError unless `loss` is one of LOSSES."""
    if not isinstance(loss, str | None):  # a target given in the loss's place, most likely
        shape = np.shape(loss) if isinstance(loss, np.ndarray | list | tuple) else ()
        raise InputError(f"loss must be one of {', '.join(LOSSES)}, not a {type(loss).__name__}"
                         f"{' ' + str(list(shape)) if shape else ''}; give a target as "
                         "target=")  # fmt: skip
    if loss not in LOSSES:
        raise InputError(f"unknown loss {loss!r} (choose from {', '.join(LOSSES)})")


def check_target(
    loss: str, target, steps: int, batch: int, hidden: int, passes: int | None = None
) -> np.ndarray | None:
    """Validate a target for `loss` and return it as float32 (None for mean_h)."""
    check_loss(loss)
    shape = target_shape(loss, steps, batch, hidden, passes)
    if shape is None:
        if target is not None:  # likely a forgotten loss=: say so rather than drop it
            raise InputError(f"loss {loss!r} takes no target (with a target: last_mse [B, H] "
                             "or seq_mse [T, B, H])")  # fmt: skip
        return None
    if target is None:
        raise InputError(f"loss {loss!r} needs a target of shape {list(shape)}")
    target = float32_copy(target, "target")
    if target.shape != shape:
        raise InputError(
            f"target for {loss!r} must have shape {list(shape)}, got {list(target.shape)}"
        )
    return target


def hidden_loss(loss: str, h, target):
    """The scalar loss (TensorFlow) of hidden states h [T, B, H].

    A last_mse target [P, B, H] scores the last step of each of P equal passes (T = P·Tp).
    Means are written as sum / size: the same value as reduce_mean, and a gradient that is one
    broadcast of the scalar 1/size rather than a tile and a division over all of h.
    """
    from lstmviz.engine.quiet_tensorflow import tf

    def mean(values):
        return tf.reduce_sum(values) / tf.cast(tf.size(values, out_type=tf.int64), values.dtype)

    if loss == "mean_h":
        return mean(h)
    if loss == "last_mse":
        shape = tf.shape(h)
        target = tf.reshape(target, [-1, shape[1], shape[2]])  # [P, B, H]; P = 1 for [B, H]
        pass_length = shape[0] // tf.shape(target)[0]
        return mean(tf.square(h[pass_length - 1 :: pass_length] - target))
    if loss == "seq_mse":
        return mean(tf.square(h - target))
    raise InputError(f"unknown loss {loss!r}")


def readout_loss(per_step: bool, loss: str, h, readout_kernel, readout_bias, y):
    """The task loss (TensorFlow) of a dense read-out [H, O] + [O] of h [T, B, H]: of every step
    (y [T, B, O]) or of h[T-1] only (y [B, O]); "xent" is softmax cross-entropy against one-hot
    y, anything else the mean squared error."""
    from lstmviz.engine.quiet_tensorflow import tf

    out = tf.tensordot(h if per_step else h[-1], readout_kernel, 1) + readout_bias
    if loss == "xent":
        return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=out))
    return tf.reduce_mean(tf.square(out - y))
