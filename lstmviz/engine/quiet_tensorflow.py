"""Import TensorFlow once, without its C++ start-up chatter.

TensorFlow's native libraries print CUDA-probing and oneDNN notices to file descriptor 2
before any Python-level logging setting applies; they are noise for our users. The import and
the first device query run with fd 2 sent to a temporary file; afterwards every line that is not
such a native log line is written back to the real stderr, so what other threads (the GUI, the
CLI) wrote meanwhile is delayed, never lost. Python exceptions still rise.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# absl/glog lines: "I0000 00:00:1796235048.006864    2207 port.cc:153] ...", and its preamble.
_NATIVE_LOG = re.compile(
    rb"^([IWEF]\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\]]+\] |WARNING: All log messages before absl)"
)


@contextlib.contextmanager
def _quiet_fd2():
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (embedded interpreters)
        yield
        return
    with tempfile.TemporaryFile() as capture:
        try:
            os.dup2(capture.fileno(), 2)
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture if not _NATIVE_LOG.match(line)]
            if kept:
                os.write(2, b"".join(kept))


with _quiet_fd2():
    import tensorflow as tf

    tf.config.list_physical_devices("GPU")  # the first device query prints CUDA notices


@functools.cache  # once per process, as TensorFlow logs it
def spend_native_notices() -> None:
    """oneDNN's graph rewrite logs an error-level line, once per process, the first time a
    graph holds a boolean op it could take ("oneDNN supports DT_BOOL only on platforms with
    AVX-512 …"; TensorFlow's own kernel then runs): a masked model's fit and gradient do. One
    such graph here (a small one), filtered, spends it. Runs ops, so TensorFlow's runtime is set up
    after it (threads, devices): called by `runner.run`, never at import (a notebook may still
    configure TensorFlow after importing lstmviz.keras)."""
    with _quiet_fd2():
        tf.function(tf.transpose)(tf.constant([[True, False], [False, True]]))


def gpu_visible() -> bool:
    """Whether TensorFlow has a GPU to run on (cuDNN is then used, the native kernels not)."""
    return bool(tf.config.list_logical_devices("GPU"))


__all__ = ["tf", "gpu_visible", "spend_native_notices"]
