"""One functional LSTM with two kernels behind it: cuDNN on a GPU, the while loop everywhere else.

    h, c_last = lstm_forward(x, h0, c0, kernel, recurrent_kernel, bias, backend="auto")

x [T, B, I], h0 and c0 [B, H], weights in Keras's layout, all tensors: gradients reach whatever
produced the weights (a hypernetwork, say). `backend="auto"` picks cuDNN when TensorFlow sees a
GPU; our cell (tanh, sigmoid, bias, no mask, not unrolled) is always one cuDNN can run, except
per-sample weights, which cuDNN cannot take. Returns every h_t [T, B, H] and the last c [B, H]
(cuDNN gives no intermediate c_t; the while loop's `lstm.lstm_sequence` does).
"""

from __future__ import annotations

from lstmviz.core.errors import InputError, WeightsError
from lstmviz.engine.cells.cudnn import cudnn_lstm
from lstmviz.engine.cells.lstm import lstm_sequence
from lstmviz.engine.problem.seeded import batch_major_error
from lstmviz.engine.quiet_tensorflow import gpu_visible, tf
from lstmviz.weights.lstm_weights import pytorch_layout

BACKENDS = ("cudnn", "while_loop")


def choose_backend(requested: str = "auto") -> str:
    """ "auto" -> "cudnn" with a GPU, else "while_loop"; an explicit choice is checked."""
    if requested == "auto":
        return "cudnn" if gpu_visible() else "while_loop"
    if requested not in BACKENDS:
        raise InputError(
            f"unknown RNN backend {requested!r} (choose from auto, {', '.join(BACKENDS)})"
        )
    if requested == "cudnn" and not gpu_visible():
        raise InputError("the cudnn backend needs a GPU visible to TensorFlow; none is")
    return requested


def lstm_forward(
    x: tf.Tensor,
    h0: tf.Tensor,
    c0: tf.Tensor,
    kernel: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    bias: tf.Tensor,
    backend: str = "auto",
) -> tuple[tf.Tensor, tf.Tensor]:
    """Every h_t [T, B, H] and the last c [B, H], on cuDNN or the while loop (see the module).
    x [T, B, I], h0, c0 [B, H], kernel [I, 4H], recurrent_kernel [H, 4H], bias [4H]: tensors or
    arrays, any float dtype, computed in float32."""
    x, h0, c0, kernel, recurrent_kernel, bias = (
        tf.cast(value, tf.float32) for value in (x, h0, c0, kernel, recurrent_kernel, bias)
    )
    _check_layouts(x, h0, kernel, recurrent_kernel, bias)
    if choose_backend(backend) == "cudnn":
        return cudnn_lstm(x, h0, c0, kernel, recurrent_kernel, bias)
    h, c = lstm_sequence(x, h0, c0, kernel, recurrent_kernel, bias)
    return h, c[-1]


def _check_layouts(x, h0, kernel, recurrent_kernel, bias) -> None:
    """Raise naming x when it is batch-major [B, T, I] (its first axis is h0's B [B, H], its
    second is not), or the kernels when they are in PyTorch's layout; checked when TensorFlow
    knows every shape (inside a tf.function it may not: the kernels check them as they run)."""
    if not all(t.shape.is_fully_defined() for t in (x, h0, kernel, recurrent_kernel, bias)):
        return
    layout = pytorch_layout(kernel.shape, recurrent_kernel.shape, bias.shape)
    if layout:
        raise WeightsError(layout)
    x_shape, state = x.shape.as_list(), h0.shape.as_list()
    if len(x_shape) == 3 and len(state) == 2 and x_shape[0] == state[0] != x_shape[1]:
        raise batch_major_error("x", ("[B, T, I]", "[T, B, I]"), x_shape,
                                "tf.transpose(x, [1, 0, 2])",
                                ("h0", state, [x_shape[1], state[1]], False))  # fmt: skip
