"""Every activation a recurrent cell (or a Dense) may name, by Keras name, in TensorFlow.

`activation(name)` -> `Activation`: `fn(x)` computes it as Keras 3 does (Keras's own function),
except "hard_sigmoid_keras2", Keras 2's clip(0.2·x + 0.5, 0, 1) (Keras 3's "hard_sigmoid" is
relu6(x + 3) / 6); the file readers write that name for a hard_sigmoid Keras 2 saved.

`slope(x, y)`: the derivative at pre-activation x with y = fn(x), in closed form, for the
activations the cells' hand-written BPTT loops (any_cell.py) take; None for the others, which run
in a loop TensorFlow differentiates (`generic_sequence`).

Saturation (the gates panel's "saturated" fraction): tanh and sigmoid as the LSTM's gates,
within `margin` of their bounds (0.01, `SATURATION`: |y| > 0.99; y < 0.01 or y > 0.99; the
diagnosis's fraction takes 0.05, `schema.GATE_SATURATION_DIAGNOSIS`); every other activation
where the size of its slope is below 1% of its steepest slope (`peak`), whatever the margin:
exactly the clipped tails of hard_sigmoid, relu and relu6, never for linear. Activations that
mix units (softmax, log_softmax, sparsemax) have no per-unit slope: never saturated.
`saturated(x, y, margin)` -> bool; x may be None for tanh, sigmoid, relu and the hard
sigmoids (told by y alone: a hard sigmoid is flat exactly where y is 0 or 1, relu where 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lstmviz.core.errors import ModelError
from lstmviz.core.schema import GATE_SATURATION_DIAGNOSIS
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.weights.model_spec import ACROSS_UNITS, ACTIVATIONS, KERAS2_HARD_SIGMOID

SATURATION = 0.01  # the gates panel's margin (module docstring)
# The bounded activations, name -> (centre, half-width): saturated where |y − centre| >
# half-width − margin (tanh |y| > 1 − margin, sigmoid |y − 0.5| > 0.5 − margin).
BOUNDED = {"tanh": (0.0, 1.0), "sigmoid": (0.5, 0.5)}


def gate_stat_bounds(names) -> dict[str, list[float]] | None:
    """The native gate statistics' attributes (gate_sums.h) for gates of the activations
    `names`: each one's centre, and its bound by the gates panel's margin and by the
    diagnosis's; None when one is not in BOUNDED."""
    if not names or any(name not in BOUNDED for name in names):
        return None
    return {"centres": [BOUNDED[name][0] for name in names],
            "bounds": [BOUNDED[name][1] - SATURATION for name in names],
            "diagnosis_bounds": [BOUNDED[name][1] - GATE_SATURATION_DIAGNOSIS for name in names]}
_UNIT_CLIPPED = ("hard_sigmoid", KERAS2_HARD_SIGMOID)  # flat exactly where y is 0 or 1
_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805


@dataclass(frozen=True)
class Activation:
    name: str
    fn: Callable
    slope: Callable | None  # (x, y) -> dy/dx, elementwise
    peak: float  # the largest slope (saturation: below 1% of it)

    def saturated(self, x: tf.Tensor | None, y: tf.Tensor, margin: float = SATURATION) -> tf.Tensor:
        """bool, elementwise: whether (x, y = fn(x)) lies in a flat tail: tanh and sigmoid
        within `margin` of a bound (module docstring)."""
        if self.name in BOUNDED:
            centre, half_width = BOUNDED[self.name]
            return tf.abs(y - centre) > half_width - margin
        if self.name in ACROSS_UNITS:
            return tf.zeros_like(y, tf.bool)
        if x is None and self.name in _UNIT_CLIPPED:  # told by the values, as tanh's
            return (y <= 0.0) | (y >= 1.0)
        if x is None and self.name == "relu":
            return y <= 0.0
        return tf.abs(self.slope_of(x, y)) < 0.01 * self.peak

    def slope_of(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        """dy/dx elementwise: the closed form, or TensorFlow's derivative of fn (not
        differentiated further)."""
        if self.slope is not None:
            return self.slope(x, y)
        with tf.GradientTape() as tape:
            tape.watch(x)
            out = self.fn(x)
        return tf.stop_gradient(tape.gradient(out, x))


def _between(x, low, high, inside):
    return tf.where((x > low) & (x < high), tf.cast(inside, x.dtype), tf.zeros_like(x))


def _sigmoid_slope(x, y):
    return y * (1.0 - y)


def _swish_slope(x, y):
    s = tf.sigmoid(x)
    return s + y * (1.0 - s)


# name -> (closed-form slope or None, peak slope)
_SLOPES: dict[str, tuple[Callable | None, float]] = {
    "tanh": (lambda x, y: 1.0 - y * y, 1.0),
    "sigmoid": (_sigmoid_slope, 0.25),
    "hard_sigmoid": (lambda x, y: _between(x, -3.0, 3.0, 1.0 / 6.0), 1.0 / 6.0),
    KERAS2_HARD_SIGMOID: (lambda x, y: _between(x, -2.5, 2.5, 0.2), 0.2),
    "relu": (lambda x, y: tf.cast(x > 0, x.dtype), 1.0),
    "relu6": (lambda x, y: _between(x, 0.0, 6.0, 1.0), 1.0),
    "linear": (lambda x, y: tf.ones_like(x), 1.0),
    "softsign": (lambda x, y: tf.square(1.0 - tf.abs(y)), 1.0),
    "elu": (lambda x, y: tf.where(x > 0, tf.ones_like(x), y + 1.0), 1.0),
    "selu": (
        lambda x, y: tf.where(x > 0, _SELU_SCALE * tf.ones_like(x), y + _SELU_SCALE * _SELU_ALPHA),
        _SELU_SCALE * _SELU_ALPHA,
    ),
    "softplus": (lambda x, y: tf.sigmoid(x), 1.0),
    "exponential": (lambda x, y: y, 1.0),  # the slope at 0: the left tail is flat
    "swish": (_swish_slope, 1.0998),
    "silu": (_swish_slope, 1.0998),
    "leaky_relu": (lambda x, y: tf.where(x > 0, tf.ones_like(x), 0.2 * tf.ones_like(x)), 1.0),
    "hard_tanh": (lambda x, y: _between(x, -1.0, 1.0, 1.0), 1.0),
    "log_sigmoid": (lambda x, y: 1.0 - tf.exp(y), 1.0),
}
# the steepest slopes of the activations without a closed form here (saturation only)
_PEAKS = {"gelu": 1.129, "mish": 1.089, "celu": 1.0, "hard_silu": 1.5, "hard_swish": 1.5,
          "squareplus": 1.0, "sparse_plus": 1.0, "soft_shrink": 1.0, "hard_shrink": 1.0,
          "tanh_shrink": 1.0, "sparse_sigmoid": 0.5}  # fmt: skip


def _keras2_hard_sigmoid(x):
    return tf.clip_by_value(0.2 * x + 0.5, 0.0, 1.0)


def activation(name: str | None) -> Activation:
    """The activation Keras calls `name` (None: linear); ModelError for a name Keras has not."""
    name = name or "linear"
    if name not in ACTIVATIONS:
        raise ModelError(f"unknown activation {name!r} (Keras's are {', '.join(ACTIVATIONS)})")
    if name == KERAS2_HARD_SIGMOID:
        fn = _keras2_hard_sigmoid
    else:
        import keras

        fn = keras.activations.get(name)
    slope, peak = _SLOPES.get(name, (None, _PEAKS.get(name, 1.0)))
    return Activation(name, fn, slope, peak)


def hand_differentiable(*names: str | None) -> bool:
    """Whether every named activation has a closed-form slope (the hand-written BPTT loops)."""
    return all(activation(name).slope is not None for name in names)

