"""Keras layers without weights to differentiate through beyond their own, for model mode's
forward (TensorFlow): BatchNormalization at inference and Flatten, as Keras computes them."""

from __future__ import annotations

from lstmviz.engine.quiet_tensorflow import tf


def batch_normalization(value: tf.Tensor, weights: dict[str, tf.Tensor], args: dict) -> tf.Tensor:
    """Inference BatchNormalization on the last axis of `value` ([T, B, W] or [B, W]):
    (x − moving_mean) / sqrt(moving_variance + epsilon) · gamma + beta, gamma and beta left
    out without `scale` / `center` (weights `gamma`, `beta`, `moving_mean`, `moving_variance`
    [W])."""
    inverse = tf.math.rsqrt(weights["moving_variance"] + float(args.get("epsilon", 1e-3)))
    if "gamma" in weights:
        inverse = inverse * weights["gamma"]
    out = (value - weights["moving_mean"]) * inverse
    return out + weights["beta"] if "beta" in weights else out


def flatten(value: tf.Tensor, sequence: bool, args: dict) -> tf.Tensor:
    """Flatten: a time-major sequence [T, B, W] (when `sequence`) to batch-major [B, T·W],
    row by row as Keras does (with `channels_first`, Keras first moves the time axis last:
    [B, W·T]); a [B, W] vector stays as it is."""
    if not sequence:
        return value
    order = [1, 2, 0] if args.get("channels_first") else [1, 0, 2]
    batch_major = tf.transpose(value, order)
    return tf.reshape(batch_major, [tf.shape(batch_major)[0], -1])
