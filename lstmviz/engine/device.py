"""What computes here, in words: the device, TensorFlow's version, cuDNN, the LSTM kernels."""

from __future__ import annotations

from lstmviz.engine import native
from lstmviz.engine.tfload import tf


def device_description() -> dict[str, str]:
    """{'device': 'CPU' or the GPU's name, 'tensorflow': version, 'cudnn': 'yes'/'no',
    'lstm': which LSTM implementation runs (`native.kernel_name()`: 'native' or 'while_loop'),
    'lstm_detail': the same in words, with the reason (`native.status()`)}."""
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
        "lstm": native.kernel_name(),
        "lstm_detail": native.status(),
    }
