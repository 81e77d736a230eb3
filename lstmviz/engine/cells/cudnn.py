"""cuDNN's LSTM through `tf.raw_ops.CudnnRNNV3`, with the weights entering as tensors (GPU only).

The op takes one flat `params` buffer. For one unidirectional layer with
`input_mode="linear_input"` it is cuDNN's canonical layout, which Keras's TensorFlow backend packs
the same way (`keras/src/backend/tensorflow/rnn.py`, `_cudnn_lstm`):

    W_i, W_f, W_c, W_o      input weights, each [H, I] row-major (Keras's kernel blocks, transposed)
    R_i, R_f, R_c, R_o      recurrent weights, each [H, H] row-major
    bW_i … bW_o, bR_i … bR_o   biases, each [H]

cuDNN adds an input and a recurrent bias; Keras has one, so the input biases are zero and the
recurrent ones are Keras's bias. cuDNN's gate order i, f, c (new memory), o is Keras's; ROCm's
MIOpen orders the blocks i, f, o, c. Total size 4H·I + 4H·H + 8H.
"""

from __future__ import annotations

from lstmviz.engine.quiet_tensorflow import tf

CUDNN_GATES = (0, 1, 2, 3)  # Keras block for each of cuDNN's i, f, c, o
MIOPEN_GATES = (0, 1, 3, 2)  # ... for MIOpen's i, f, o, c


def is_rocm_build() -> bool:
    return bool(tf.sysconfig.get_build_info().get("is_rocm_build", False))


def params_size(input_dim: int, hidden: int) -> int:
    """Length of the flat buffer for one layer: 4H·I + 4H·H + 8H."""
    return 4 * hidden * (input_dim + hidden) + 8 * hidden


def pack_cudnn_params(
    kernel: tf.Tensor, recurrent_kernel: tf.Tensor, bias: tf.Tensor, rocm: bool | None = None
) -> tf.Tensor:
    """Keras-layout kernel [I, 4H], recurrent_kernel [H, 4H], bias [4H] -> params [4H(I+H) + 8H].

    Differentiable: gradients on the buffer flow back to the three tensors. `rocm` picks
    MIOpen's gate order (default: whatever TensorFlow was built for).
    """
    gates = MIOPEN_GATES if (is_rocm_build() if rocm is None else rocm) else CUDNN_GATES
    kernels = tf.split(kernel, 4, axis=1)
    recurrents = tf.split(recurrent_kernel, 4, axis=1)
    biases = tf.split(bias, 4)
    matrices = [kernels[g] for g in gates] + [recurrents[g] for g in gates]
    flat = [tf.reshape(tf.transpose(m), [-1]) for m in matrices]
    zeros = [tf.zeros_like(biases[0])] * 4
    return tf.concat(flat + zeros + [biases[g] for g in gates], axis=0)


def cudnn_lstm(
    x: tf.Tensor,
    h0: tf.Tensor,
    c0: tf.Tensor,
    kernel: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    bias: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor]:
    """The LSTM over x [T, B, I] on cuDNN; returns every h_t [T, B, H] and the last c [B, H].

    cuDNN does not expose the intermediate c_t, nor a hook inside its loop (so no probes:
    per-state total gradients come from the while loop). Needs a GPU to execute.
    """
    steps, batch = tf.shape(x)[0], tf.shape(x)[1]
    h_all, _, c_last, _, _ = tf.raw_ops.CudnnRNNV3(
        input=x,
        input_h=h0[None],  # [layers·directions = 1, B, H]
        input_c=c0[None],
        params=pack_cudnn_params(kernel, recurrent_kernel, bias),
        sequence_lengths=tf.fill([batch], steps),
        rnn_mode="lstm",
        input_mode="linear_input",
        direction="unidirectional",
        is_training=True,  # keeps the reserve space the backward pass needs
        time_major=True,
    )
    return h_all, c_last[0]
