"""The native whole-sequence LSTM kernels (`lstm_kernels.cc`): build, load, differentiate.

On the CPU the taped engine's cost is TensorFlow dispatching some 40 small ops per step of its
while-loops; the two kernels run the forward recurrence and its BPTT as one op each (README,
"Performance"). They are compiled once per machine, TensorFlow version and source by
`python -m lstmviz.engine.native` (`make install` runs it) with the g++ found on PATH, into
`lstmviz/engine/_native/` or, when the package is not writable, `~/.cache/lstmviz`. Nothing is
compiled at run time: when the library is missing, fails to load, a GPU is visible, or
LSTMVIZ_NATIVE=0, `library()` is None and `cell.lstm_sequence` uses its while-loops, which
compute the same (tests/test_cell_backends.py checks both against NumPy BPTT).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lstmviz.engine import interrupt
from lstmviz.engine.tfload import gpu_visible, tf

SOURCE = Path(__file__).with_name("lstm_kernels.cc")
_FLAGS = ["-O3", "-march=native", "-shared", "-fPIC", "-Wno-deprecated-declarations"]
# Eigen's AVX512-FP16 code, which -march=native turns on where the CPU has it (Sapphire
# Rapids and later), does not compile with g++ 12 ("expected initializer before '<'").
_FP16_OFF = ["-mno-avx512fp16"]


def _cpu_model() -> str:
    """The CPU's model and instruction-set flags: -march=native code must not meet another
    CPU (a checkout moved to a machine without, say, AVX-512 would crash, not fall back)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            lines = [line for line in info if line.startswith(("model name", "flags"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor()


def _flags() -> list[str]:
    """The compiler flags for this CPU."""
    return _FLAGS + (_FP16_OFF if "avx512_fp16" in _cpu_model() else [])


def library_path() -> Path:
    """Where the library for this source, TensorFlow, compiler flags and CPU lives (built or
    not)."""
    key = hashlib.sha256()
    for part in (SOURCE.read_bytes(), tf.__version__.encode(), " ".join(_flags()).encode(),
                 platform.machine().encode(), _cpu_model().encode()):  # fmt: skip
        key.update(part)
    name = f"lstm_kernels-{key.hexdigest()[:16]}.so"
    local = SOURCE.parent / "_native"
    if os.access(SOURCE.parent, os.W_OK):
        return local / name
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lstmviz"
    return cache / name


def build(verbose: bool = False) -> Path:
    """Compile the kernels unless already built; return the library's path. Raises
    RuntimeError naming the problem (no compiler, compiler errors)."""
    target = library_path()
    if target.exists():
        return target
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise RuntimeError("no C++ compiler (g++) on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    # Written under a temporary name, then renamed: a concurrent build or an interrupted one
    # never leaves a half-written library where a loader would find it.
    fd, partial = tempfile.mkstemp(suffix=".so.part", dir=target.parent)
    os.close(fd)
    command = [
        compiler, str(SOURCE), "-o", partial, *_flags(),
        *tf.sysconfig.get_compile_flags(), *tf.sysconfig.get_link_flags(),
    ]  # fmt: skip
    if verbose:
        print(" ".join(command), file=sys.stderr)
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            lines = done.stderr.strip().splitlines() or [f"exit code {done.returncode}"]
            errors = [line for line in lines if "error" in line.lower()]
            raise RuntimeError(f"{compiler} failed: {(errors or lines[-1:])[0]}")
        os.replace(partial, target)
        for old in target.parent.glob("lstm_kernels-*.so"):  # other sources or TF versions
            if old != target:
                old.unlink(missing_ok=True)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def library():
    """The loaded kernel module, or None when the while-loops should run (see the module
    docstring; `status()` says why)."""
    return _load()[0]


def kernel_name() -> str:
    """What runs `cell.lstm_sequence` here, as traces record it (`lstm_kernel`): "native" or
    "while_loop"."""
    return "native" if library() is not None else "while_loop"


def status() -> str:
    """Which LSTM implementation runs and why, in words (the status bar's tooltip, the
    benchmark's header)."""
    return _load()[1]


@functools.cache
def _load():
    if os.environ.get("LSTMVIZ_NATIVE", "1") == "0":
        return None, "TensorFlow while-loops (LSTMVIZ_NATIVE=0)"
    if gpu_visible():
        return None, "TensorFlow while-loops (GPU)"
    path = library_path()
    if not path.exists():
        return None, "TensorFlow while-loops (native kernels not built: make install)"
    try:
        module = tf.load_op_library(str(path))
        interrupt.register(str(path))
    except (tf.errors.NotFoundError, OSError, AttributeError) as error:
        return None, f"TensorFlow while-loops (native kernels failed to load: {error})"
    return module, "native CPU kernels"


@tf.RegisterGradient("LstmvizSequenceForward")
def _sequence_gradient(op, dh_direct, dc_direct, _dfactors):
    """BPTT for the forward op: gradients for (x, kernel, recurrent, bias, h0, c0, probe_h,
    probe_c, and the mask when there is one: None); those for the probes are the total dL/dh_t
    and dL/dc_t. The weight gradients sum over all steps, one large matmul each (dz_t is zero
    at masked steps, so they need no mask)."""
    x, kernel, recurrent, _, h0, _, _, _, *mask = op.inputs
    h, _, factors = op.outputs
    dh_direct = tf.zeros_like(h) if dh_direct is None else dh_direct
    dc_direct = tf.zeros_like(h) if dc_direct is None else dc_direct
    dz, dh, dc, dh0, dc0 = library().lstmviz_sequence_backward(
        recurrent, factors, dh_direct, dc_direct, mask
    )
    gates, hidden, inputs = tf.shape(dz)[2], tf.shape(h)[2], tf.shape(x)[2]
    dz_rows = tf.reshape(dz, [-1, gates])  # [T·B, 4H]
    # Σ_t h_{t-1}ᵀ·dz_t, with h_{-1} = h0: two matmuls rather than a copy of h with h0 in front.
    d_recurrent = tf.matmul(h0, dz[0], transpose_a=True) + tf.matmul(
        tf.reshape(h[:-1], [-1, hidden]), tf.reshape(dz[1:], [-1, gates]), transpose_a=True
    )
    d_kernel = tf.matmul(tf.reshape(x, [-1, inputs]), dz_rows, transpose_a=True)
    d_bias = tf.reduce_sum(dz_rows, axis=0)
    dx = tf.einsum("tbg,ig->tbi", dz, kernel)  # pruned from compiled graphs unless asked for
    return dx, d_kernel, d_recurrent, d_bias, dh0, dc0, dh, dc, *[None] * len(mask)


def sequence(x, h0, c0, kernel, recurrent_kernel, bias, probe_h, probe_c, mask=None):
    """Every h_t and c_t [T, B, H] from the forward kernel (arguments as cell.lstm_sequence,
    the mask None or float32 [T, B] of 0/1); differentiable through `_sequence_gradient`
    (not with respect to the mask)."""
    h, c, _ = library().lstmviz_sequence_forward(
        x, kernel, recurrent_kernel, bias, h0, c0, probe_h, probe_c, [] if mask is None else [mask]
    )
    return h, c


def main() -> None:
    """`python -m lstmviz.engine.native`: build the kernels (if needed) and say what runs."""
    start = time.perf_counter()
    try:
        path = build(verbose="-v" in sys.argv)
    except RuntimeError as error:
        print(f"lstmviz: native LSTM kernels not built ({error}); the TensorFlow while-loops "
              "will run instead (slower, same results)")  # fmt: skip
        return
    print(f"lstmviz: native LSTM kernels ready ({path}, {time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
