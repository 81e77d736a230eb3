"""LSTMWeights: kernel [I, 4H], recurrent_kernel [H, 4H], bias [4H], gates ordered i, f, c, o."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lstmviz.core.errors import WeightsError
from lstmviz.core.numeric import float32_copy


@dataclass(frozen=True)
class LSTMWeights:
    """One LSTM layer's weights in Keras's layout (float32 NumPy arrays)."""

    kernel: np.ndarray
    recurrent_kernel: np.ndarray
    bias: np.ndarray

    def __post_init__(self) -> None:
        for name in ("kernel", "recurrent_kernel", "bias"):
            object.__setattr__(self, name, float32_copy(getattr(self, name), name, WeightsError))
        k, r, b = self.kernel, self.recurrent_kernel, self.bias
        if k.ndim != 2 or r.ndim != 2 or b.ndim != 1:
            raise WeightsError(
                "expected kernel [I, 4H], recurrent_kernel [H, 4H], bias [4H]; got "
                f"kernel {list(k.shape)}, recurrent_kernel {list(r.shape)}, bias {list(b.shape)}"
            )
        h = r.shape[0]
        if h == 0 or r.shape[1] != 4 * h or k.shape[1] != 4 * h or b.shape[0] != 4 * h:
            raise WeightsError(
                pytorch_layout(k.shape, r.shape, b.shape)
                or f"inconsistent shapes: recurrent_kernel {list(r.shape)} implies H={h}, so "
                f"kernel must be [I, {4 * h}] and bias [{4 * h}]; got kernel {list(k.shape)}, "
                f"bias {list(b.shape)}"
            )
        if k.shape[0] == 0:
            raise WeightsError("kernel has no input rows (I = 0)")

    def __repr__(self) -> str:
        return f"LSTMWeights(I={self.input_dim}, H={self.hidden})"

    @property
    def input_dim(self) -> int:
        return int(self.kernel.shape[0])

    @property
    def hidden(self) -> int:
        return int(self.recurrent_kernel.shape[0])

    def nonfinite(self) -> list[str]:
        """Names of the arrays holding NaN or Inf."""
        return [
            name
            for name in ("kernel", "recurrent_kernel", "bias")
            if not np.all(np.isfinite(getattr(self, name)))
        ]


def pytorch_layout(kernel_shape, recurrent_shape, bias_shape) -> str | None:
    """What to do when kernel or recurrent_kernel is in PyTorch's nn.LSTM layout (weight_ih
    [4H, I], weight_hh [4H, H]: Keras's [I, 4H], [H, 4H] transposed) and the rest fits it; None
    when neither array is, or the shapes fit no layout. A kernel [4H, 4H] (I = 4H) fits both
    and counts as Keras's. Shapes are sequences of ints."""
    k, r, b = (tuple(int(n) for n in shape) for shape in (kernel_shape, recurrent_shape,
                                                          bias_shape))  # fmt: skip
    if len(k) != 2 or len(r) != 2 or len(b) != 1:
        return None
    if 4 * r[0] == r[1]:
        hidden, torch_recurrent = r[0], False
    elif 4 * r[1] == r[0]:
        hidden, torch_recurrent = r[1], True
    else:
        return None
    if hidden == 0 or b != (4 * hidden,) or 4 * hidden not in k:
        return None
    torch_kernel = k[1] != 4 * hidden
    named = [(name, list(shape), layout) for name, shape, layout, torch in (
        ("kernel", k, "[4H, I]", torch_kernel),
        ("recurrent_kernel", r, "[4H, H]", torch_recurrent),
    ) if torch]  # fmt: skip
    after = ("(PyTorch's gate order i, f, g, o is Keras's i, f, c, o; lstmviz.load_weights "
             "reads nn.LSTM state dicts from .safetensors and .pt files itself: see the README "
             "on loading weights)")  # fmt: skip
    if len(named) == 2:
        return (f"kernel {list(k)} and recurrent_kernel {list(r)} have PyTorch's layout "
                "(weight_ih [4H, I], weight_hh [4H, H]); Keras's is their transpose: "
                f"LSTMWeights(weight_ih.T, weight_hh.T, bias_ih + bias_hh) {after}")  # fmt: skip
    if named:
        name, shape, layout = named[0]
        return f"{name} {shape} has PyTorch's layout {layout}; transpose it: {name}.T {after}"
    return None


def random_weights(input_dim: int, hidden: int, rng=None) -> LSTMWeights:
    """Keras's defaults: Glorot-uniform kernel, orthogonal recurrent kernel, unit forget bias.
    `rng`: a numpy Generator, a seed, or None (fresh entropy)."""
    for name, value in (("input_dim", input_dim), ("hidden", hidden)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise WeightsError(f"random_weights: {name} must be a positive integer, got {value!r}")
    try:
        rng = np.random.default_rng(rng)
    except (TypeError, ValueError):
        raise WeightsError(f"random_weights: rng must be a numpy Generator, a non-negative "
                           f"integer seed or None, got {rng!r}") from None  # fmt: skip
    limit = np.sqrt(6.0 / (input_dim + 4 * hidden))
    kernel = rng.uniform(-limit, limit, size=(input_dim, 4 * hidden))
    # Orthogonal [H, 4H]: QR of a [4H, H] normal matrix gives orthonormal columns; transpose.
    q, r = np.linalg.qr(rng.standard_normal((4 * hidden, hidden)))
    q = q * np.sign(np.diag(r))
    recurrent = q.T
    bias = np.zeros(4 * hidden)
    bias[hidden : 2 * hidden] = 1.0
    return LSTMWeights(kernel, recurrent, bias)
