"""Import TensorFlow once, without its C++ start-up chatter, and describe the device.

TensorFlow's native libraries print CUDA-probing and oneDNN notices to file descriptor 2
before any Python-level logging setting applies; they are noise for our users, so the import
and the first device query run with fd 2 pointed at /dev/null. Python exceptions still rise.
"""

from __future__ import annotations

import contextlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@contextlib.contextmanager
def _quiet_fd2():
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (embedded interpreters)
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


with _quiet_fd2():
    import tensorflow as tf

    _GPUS = tf.config.list_physical_devices("GPU")


def device_description() -> dict[str, str]:
    """{'device': 'CPU' or the GPU's name, 'tensorflow': version, 'cudnn': 'yes'/'no'}."""
    if _GPUS:
        details = tf.config.experimental.get_device_details(_GPUS[0])
        name = details.get("device_name", _GPUS[0].name)
        cudnn = "yes" if tf.test.is_built_with_cuda() else "no"
    else:
        name, cudnn = "CPU", "no"
    return {"device": name, "tensorflow": tf.__version__, "cudnn": cudnn}


__all__ = ["tf", "device_description"]
