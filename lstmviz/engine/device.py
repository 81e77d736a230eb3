"""What computes here, in words: the device, TensorFlow's version, cuDNN, the LSTM kernels."""

from __future__ import annotations

from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import tf


def device_description() -> dict[str, str]:
    """{'device': 'CPU' or the GPU's name, 'tensorflow': version, 'cudnn': 'yes'/'no',
    'lstm': which LSTM implementation runs (`kernels.kernel_name()`: 'native' or 'while_loop'),
    'lstm_detail': the same in words, with the reason (`kernels.status()`)}."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        name = details.get("device_name", gpus[0].name)
        cudnn = "yes" if tf.test.is_built_with_cuda() else "no"
    else:
        name, cudnn = "CPU", "no"
    return {
        "device": name,
        "tensorflow": tf.__version__,
        "cudnn": cudnn,
        "lstm": kernels.kernel_name(),
        "lstm_detail": kernels.status(),
    }
