"""The loss of a model run, as Keras computes it: `ModelLoss` (a Keras loss by name, its
arguments, the compile's reduction and loss weight; or a loss on a stack's top output h), and
`CallableLoss` (any callable (y_true, y_pred) -> scalar). Each returns (per-sample losses [B],
the loss)."""

from __future__ import annotations

from dataclasses import dataclass

from lstmviz.core.errors import ConfigError
from lstmviz.engine.quiet_tensorflow import tf


@dataclass(frozen=True)
class ModelLoss:
    """The loss of a model run: a Keras loss `name` with its keyword `args` (as pairs), or,
    for a stack without a head, a loss on its top output by `LOSSES` name (`hidden`).

    Two of `args` are the compile's, not the loss function's: `reduction` ("sum", else Keras's
    mean) and `loss_weight` (the compile's `loss_weights` of the one output)."""

    name: str
    args: tuple = ()
    hidden: bool = False

    def __call__(self, y, y_pred, mask) -> tuple[tf.Tensor, tf.Tensor]:
        """(per-sample losses [B], the loss) as Keras reduces them: the mean (or sum) over the
        entries that count — the unmasked steps where the output is a sequence with a mask,
        the targets not ignored (`ignore_class`) — times the loss weight."""
        if self.hidden:
            return self._hidden(y, y_pred)
        import keras

        args = dict(self.args)
        summed = args.pop("reduction", None) == "sum"  # else Keras's mean
        weight = float(args.pop("loss_weight", 1.0))
        values = keras.losses.get(self.name)(y, y_pred, **args)  # [B] or [B, T]
        ignored = getattr(values, "_keras_mask", None)  # False where ignore_class
        values = tf.cast(values, tf.float32)
        counts = tf.ones_like(values) if ignored is None else tf.cast(ignored, tf.float32)
        if values.shape.rank == 2 and mask is not None:
            counts *= tf.cast(tf.transpose(mask), tf.float32)  # [B, T]
        values *= counts
        axes = list(range(1, values.shape.rank))
        per_sample = tf.reduce_sum(values, axes) if axes else values
        loss = tf.reduce_sum(values)
        if not summed:
            per_sample = tf.math.divide_no_nan(
                per_sample, tf.reduce_sum(counts, axes) if axes else counts
            )
            loss = tf.math.divide_no_nan(loss, tf.reduce_sum(counts))
        return per_sample * weight, loss * weight

    def _hidden(self, y, y_pred):
        if self.name == "mean_h":
            values = y_pred
        elif self.name == "last_mse":  # the last step's output: a top LSTM's sequences' last
            last = y_pred[:, -1] if y_pred.shape.rank == 3 else y_pred
            values = tf.square(last - y)
        else:  # seq_mse
            values = tf.square(y_pred - y)
        axes = list(range(1, values.shape.rank))
        return tf.reduce_mean(values, axes), tf.reduce_mean(values)


def keras_loss(name: str) -> ModelLoss:
    """The Keras loss `name` as a ModelLoss, or ConfigError for a name Keras lacks."""
    import keras

    try:
        keras.losses.get(name)
    except (ValueError, TypeError):
        raise ConfigError("loss", f"unknown loss {name!r} (a Keras loss name)") from None
    return ModelLoss(name)



@dataclass(frozen=True)
class CallableLoss:
    """A loss given as a callable (y_true, y_pred) -> scalar (a Keras loss object too): its
    per-sample values are its value on each sample alone."""

    fn: object
    name: str = "custom"
    hidden: bool = False
    callable: bool = True  # needs no targets of its own

    def __call__(self, y, y_pred, mask):
        value = tf.cast(self.fn(y, y_pred), tf.float32)
        per_sample = tf.stack([tf.cast(self.fn(y[b:b + 1], y_pred[b:b + 1]), tf.float32)
                               for b in range(int(y_pred.shape[0]))])  # fmt: skip
        return per_sample, value
