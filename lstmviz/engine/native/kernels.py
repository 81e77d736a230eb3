"""The native whole-sequence kernels, LSTM (`lstm_kernels.cc`), GRU (`gru_kernels.cc`) and
SimpleRNN (`rnn_kernels.cc`), with the step norms and gate statistics: build, load,
differentiate.

On the CPU the taped engine's cost is TensorFlow dispatching some 40 small ops per step of its
while-loops (a GRU's some 20); each cell's two kernels (SimpleRNN's too, `rnn_kernels.cc`) run
the forward recurrence and its BPTT as one op each (docs/performance.md; bench/bench.py). They
are compiled once per machine, TensorFlow version and source with the g++ found on PATH (or
CXX): in a source checkout by `python -m lstmviz.engine.native` (`make install` runs it) into
`lstmviz/engine/native/_lib/`; in a copy pip installed (a wheel, `pip install .`) by its first run,
into the user's cache, `~/.cache/lstmviz` (XDG_CACHE_HOME), saying so on stderr and to
`report_to`'s receivers (the window's status bar) with the time it took, or once, in one line,
why it could not and how to get them (`_first_build`). When the library is missing, fails to load, a
GPU is visible, or LSTMVIZ_NATIVE=0, `library()` is None and `lstm.lstm_sequence` uses its
while-loops, which compute the same (tests/engine/test_cell_backends.py checks both against NumPy
BPTT); so does `any_cell.cell_sequence` for a GRU, and for a GRU of activations the kernels do not
compute (`gru_native`; tests/engine/test_cells_gru_native.py checks both against Keras), and for a
SimpleRNN (`rnn_native`, `rnn_sequence`).

They are built for this CPU (-march=native) unless LSTMVIZ_NATIVE_ARCH names another g++
-march (e.g. "haswell": the AVX2 code path on an AVX-512 machine); each -march is a library
of its own, so switching between them does not rebuild.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from lstmviz.engine.cells.activations import gate_stat_bounds
from lstmviz.engine.native import interrupt
from lstmviz.engine.quiet_tensorflow import gpu_visible, tf

SOURCE = Path(__file__).with_name("src") / "lstm_kernels.cc"
# a checkout's built libraries (git ignores them)
LIBRARY_FOLDER = Path(__file__).with_name("_lib")
# compiled into one library: the LSTM's kernels, the GRU's, the SimpleRNN's, the step norms,
# the gate statistics
SOURCES = [SOURCE, *(SOURCE.with_name(name) for name in (
    "gru_kernels.cc", "rnn_kernels.cc", "step_norms.cc", "gate_stats.cc"))]  # fmt: skip
# included by the sources: part of the key
HEADERS = [SOURCE.with_name(name) for name in (
    "panel_gemm.h", "kernel_common.h", "cell_activations.h", "gate_sums.h")]  # fmt: skip
# -ffp-contract=off: the backward recomputes the forward's tanh(c_t) from the same floats and
# must get the same values, so g++ may not fuse a multiply and an add in one place only.
_FLAGS = ["-O3", "-ffp-contract=off", "-shared", "-fPIC", "-Wno-deprecated-declarations"]
# Eigen's AVX512-FP16 code, which -march=native turns on where the CPU has it (Sapphire
# Rapids and later), does not compile with g++ 12 ("expected initializer before '<'").
_FP16_OFF = ["-mno-avx512fp16"]
ARCH_VARIABLE = "LSTMVIZ_NATIVE_ARCH"
# Which vector-instruction flags of /proc/cpuinfo the benchmark names.
_VECTOR_FLAGS = re.compile(r"^(sse4_2|avx|avx2|fma|avx512.*|amx.*|asimd|sve.*)$")


def _cpu_model() -> str:
    """The CPU's model and instruction-set flags: -march=native code must not meet another
    CPU (a checkout moved to a machine without, say, AVX-512 would crash, not fall back)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            lines = [line for line in info if line.startswith(("model name", "flags", "Features"))]
        return "".join(sorted(set(lines)))
    except OSError:
        return platform.processor()


def cpu_vector_extensions() -> str:
    """The CPU's vector extensions as /proc/cpuinfo names them ("avx2 fma avx512f ..."), or
    "unknown" where there is no /proc/cpuinfo."""
    flags = {
        flag
        for line in _cpu_model().splitlines()
        if line.startswith(("flags", "Features"))
        for flag in line.split(":", 1)[1].split()
    }
    found = sorted(flag for flag in flags if _VECTOR_FLAGS.match(flag))
    return " ".join(found) or "unknown"


def arch() -> str:
    """The g++ -march the kernels are built for: LSTMVIZ_NATIVE_ARCH, or "native" (this CPU's
    every extension). "haswell" builds the AVX2 code path, to study it on an AVX-512 CPU; the
    library must not run on a CPU without what it was built for (it would crash)."""
    value = os.environ.get(ARCH_VARIABLE, "").strip() or "native"
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", value):
        raise RuntimeError(f"{ARCH_VARIABLE}={value!r} is not a g++ -march name")
    return value


def _flags() -> list[str]:
    """The compiler flags for this CPU and `arch()`."""
    fp16 = _FP16_OFF if "avx512_fp16" in _cpu_model() else []
    return [*_FLAGS, f"-march={arch()}", *fp16]


def library_path() -> Path:
    """Where the library for this source, TensorFlow, compiler flags and CPU lives (built or
    not)."""
    key = hashlib.sha256()
    sources = [path.read_bytes() for path in (*SOURCES, *HEADERS)]
    for part in (*sources, tf.__version__.encode(), " ".join(_flags()).encode(),
                 platform.machine().encode(), _cpu_model().encode()):  # fmt: skip
        key.update(part)
    name = f"lstm_kernels-{arch()}-{key.hexdigest()[:16]}.so"
    if checkout() and os.access(LIBRARY_FOLDER.parent, os.W_OK):
        return LIBRARY_FOLDER / name
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lstmviz"
    return cache / name


def checkout() -> bool:
    """Whether this package is a source checkout (installed editable: `make install` builds
    its kernels) rather than a copy pip installed into site-packages (built by its first run,
    into the user's cache: a copy pip removes or replaces keeps no files of its own)."""
    return (Path(__file__).parents[3] / "pyproject.toml").is_file()


def compiler() -> str | None:
    """The C++ compiler's path: CXX (None when it names no program found), else g++ or c++
    on PATH."""
    named = os.environ.get("CXX", "").strip()
    if named:
        return shutil.which(named)
    return shutil.which("g++") or shutil.which("c++")


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold `folder`'s build lock (the folder itself, locked: no lock file to leave behind):
    one process builds, a concurrent first run waits for it and then finds the library
    (where there is no fcntl, the atomic rename alone keeps the library whole)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def build(verbose: bool = False) -> Path:
    """Compile the kernels unless already built; return the library's path. Raises
    RuntimeError naming the problem (no compiler, compiler errors). Processes building at
    once build one library: the others wait for it (`_locked`)."""
    target = library_path()
    if target.exists():
        return target
    found = compiler()
    if found is None:
        raise RuntimeError(f"no C++ compiler: {os.environ.get('CXX') or 'g++'} not found")
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent):
        if not target.exists():  # else built by another process meanwhile
            _compile(found, target, verbose)
    _failed(target).unlink(missing_ok=True)
    return target


def _compile(compiler: str, target: Path, verbose: bool) -> None:
    """Compile and link the kernels into `target`."""
    # Each source compiled by a g++ of its own, at once (most of the time is parsing
    # TensorFlow's headers, once per source), then linked under a temporary name and renamed:
    # a concurrent build or an interrupted one never leaves a half-written library where a
    # loader would find it.
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as work:
        partial = Path(work) / target.name
        objects = [Path(work) / f"{source.stem}.o" for source in SOURCES]
        compiles = [
            [compiler, "-c", str(source), "-o", str(obj), *_flags(),
             *tf.sysconfig.get_compile_flags()]
            for source, obj in zip(SOURCES, objects, strict=True)
        ]  # fmt: skip
        link = [compiler, *map(str, objects), "-o", str(partial), *_flags(),
                *tf.sysconfig.get_link_flags()]  # fmt: skip
        if verbose:
            print("\n".join(" ".join(command) for command in (*compiles, link)), file=sys.stderr)
        _run(compiler, compiles, Path(work))
        _run(compiler, [link], Path(work))
        os.replace(partial, target)
    if target.parent != LIBRARY_FOLDER:
        return  # the user's cache serves every installed copy: each keeps its own
    # A checkout's libraries of other sources or TensorFlow versions for this -march; other
    # -march builds stay, so that switching LSTMVIZ_NATIVE_ARCH does not rebuild.
    legacy = target.parent.glob("lstm_kernels-" + "?" * 16 + ".so")  # names without -march
    for old in [*target.parent.glob(f"lstm_kernels-{arch()}-*.so"), *legacy]:
        if old != target:
            old.unlink(missing_ok=True)


def _run(compiler: str, commands: list[list[str]], work: Path) -> None:
    """Run the compiler's `commands` at once and wait for all; RuntimeError naming the first
    error if any failed."""
    running = []
    for n, command in enumerate(commands):
        with open(work / f"{n}.err", "w+b") as errors:
            running.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors))
    codes = [process.wait() for process in running]
    for n, code in enumerate(codes):
        if code != 0:
            lines = (work / f"{n}.err").read_text(errors="replace").strip().splitlines()
            errors = [line for line in lines if "error" in line.lower()]
            first = (errors or lines[-1:] or [f"exit code {code}"])[0]
            raise RuntimeError(f"{compiler} failed: {first}")


def library():
    """The loaded kernel module, or None when the while-loops should run (see the module
    docstring; `status()` says why)."""
    return _load()[0]


def kernel_name() -> str:
    """What runs `lstm.lstm_sequence` here, as traces record it (`lstm_kernel`): "native" or
    "while_loop"."""
    return "native" if library() is not None else "while_loop"


def exact_norms() -> bool:
    """Whether the graphs' per-step norms (`gradients.graph_step_norm`) are exact: the native
    ops sum a step again with each square in double where float squares would underflow or
    overflow (kernel_common.h, `Inexact`); TensorFlow's float32 reduction does not, and
    `trace_arrays.exact_norm` redoes those steps."""
    return library() is not None


def status() -> str:
    """Which LSTM implementation runs and why, in words (the status bar's tooltip, the
    benchmark's header)."""
    return _load()[1]


def build_description() -> str:
    """What the loaded kernels were built for, in words: the -march, the vector instructions
    and register tiles of their products ("-march=haswell: AVX2+FMA, 8 floats a vector, 6×16
    register tiles"); empty when the while-loops run."""
    if library() is None:
        return ""
    described = ctypes.CDLL(str(library_path())).lstmviz_kernel_build
    described.restype = ctypes.c_char_p
    return f"-march={arch()}: {described().decode()}"


# How much faster a taped run is on the kernels than on the while-loops (docs/performance.md:
# 0.52× Keras against 1.05× on two cores).
SPEEDUP = "about 2× faster"


def _stderr(text: str) -> None:
    print(f"lstmviz: {text}", file=sys.stderr, flush=True)


# Who hears about a first run's build: stderr, and whoever `report_to` adds.
_receivers: list[Callable[[str], None]] = [_stderr]


def report_to(receiver: Callable[[str], None]) -> None:
    """Also say to `receiver` (one line of text each time) what a first run's build does:
    the window's computing process sends it to the status bar (`messages.Notice`)."""
    _receivers.append(receiver)


def _say(text: str) -> None:
    for receiver in _receivers:
        receiver(text)


def _failed(target: Path) -> Path:
    """Where a failed first-run build of `target` keeps its error: later runs do not try
    again (`python -m lstmviz.engine.native` does)."""
    return target.with_name(target.name + ".failed")


def _first_build(target: Path) -> str:
    """An installed copy's first run: build the kernels into `target` (the user's cache),
    saying so and how long it took. Returns "" once built, else why not (said once, in one
    line, with what the kernels would bring and how to get them). A checkout is built by
    `make install`: nothing is compiled at run time there."""
    if checkout():
        return "native kernels not built: make install"
    found, failed = compiler(), _failed(target)
    if found is None:
        reason = f"no C++ compiler: {os.environ.get('CXX') or 'g++'} not found"
        remedy = "install g++ (Debian/Ubuntu: apt install g++) and run again"
    elif failed.exists():
        reason = f"their build failed: {failed.read_text(errors='replace').strip()}"
        remedy = "python -m lstmviz.engine.native -v builds them again and shows the commands"
    else:
        _say(f"building the native kernels for this CPU, once ({SPEEDUP} than the "
             f"while-loops; a minute or two of {Path(found).name})…")  # fmt: skip
        start = time.perf_counter()
        try:
            build()
        except (RuntimeError, OSError) as error:
            with contextlib.suppress(OSError):
                failed.write_text(f"{error}\n")
            reason = f"their build failed: {error}"
            remedy = "python -m lstmviz.engine.native -v shows the compiler's commands"
        else:
            _say(f"native kernels built in {time.perf_counter() - start:.0f} s, cached in "
                 f"{target.parent}")  # fmt: skip
            return ""
    _say(f"the native kernels ({SPEEDUP}) are not built ({reason}): {remedy}; the "
         "TensorFlow while-loops run meanwhile (same results)")  # fmt: skip
    return reason


@functools.cache
def _load():
    if os.environ.get("LSTMVIZ_NATIVE", "1") == "0":
        return None, "TensorFlow while-loops (LSTMVIZ_NATIVE=0)"
    if gpu_visible():
        return None, "TensorFlow while-loops (GPU)"
    try:
        path = library_path()
    except RuntimeError as error:  # a malformed LSTMVIZ_NATIVE_ARCH
        return None, f"TensorFlow while-loops ({error})"
    if not path.exists() and (reason := _first_build(path)):
        return None, f"TensorFlow while-loops ({reason})"
    try:
        module = tf.load_op_library(str(path))
        interrupt.register(str(path))
    except (tf.errors.NotFoundError, OSError, AttributeError) as error:
        return None, f"TensorFlow while-loops (native kernels failed to load: {error})"
    return module, "native CPU kernels"


@tf.RegisterGradient("LstmvizSequenceForward")
def _sequence_gradient(op, dh_direct, dc_direct, *_gates_and_sums):
    """BPTT for the forward op: gradients for (x, kernel, recurrent, bias, h0, c0, probe_h,
    probe_c, and the mask when there is one: None); those for the probes are the total dL/dh_t
    and dL/dc_t. A state the loss does not reach (its gradient None) enters the backward as no
    tensor at all rather than [T, B, H] of zeros. The backward op also sums the weight
    gradients over all steps (dz_t is zero at masked steps, so they need no mask)."""
    x, kernel, recurrent, _, h0, c0, _, _, *mask = op.inputs
    h, c, gates, *_ = op.outputs
    _, dh, dc, dh0, dc0, d_kernel, d_recurrent, d_bias, _, dx = (
        library().lstmviz_sequence_backward(
            x, recurrent, h0, c0, h, c, gates, _given(dh_direct), _given(dc_direct), mask, kernel,
            **_order(op),
        )
    )  # dx (dz_t·kernelᵀ, in the same products as dh_{t-1}) pruned from graphs unless asked for
    return dx, d_kernel, d_recurrent, d_bias, dh0, dc0, dh, dc, *[None] * len(mask)


def _order(op: tf.Operation) -> dict:
    """A forward op's StepOrder attributes (kernel_common.h), for its backward op."""
    return {"reverse": op.get_attr("reverse"), "share": op.get_attr("share")}


# Per backward op: {output index: its column of the norms}, the norms' output, the input
# index of the direct gradient and that norm's column.
_NORMED = {"LstmvizSequenceBackward": ({1: 0, 2: 1}, 8, 7, 2),
           "LstmvizGruBackward": ({1: 0}, 5, 5, 1),
           "LstmvizRnnBackward": ({1: 0}, 4, 4, 1)}  # fmt: skip


def backward_norms(g):
    """The per-step norms [T] of g that a backward op (LSTM, GRU, SimpleRNN) computed as it
    wrote g, when g (in a compiled graph) is its dL/dh_t (or dL/dc_t) or the direct ∂L/∂h_t it
    was given; else None. Cheaper than reading the [T, B, H] array again."""
    if tf.executing_eagerly() or not isinstance(getattr(g, "op", None), tf.Operation):
        return None
    written = _NORMED.get(g.op.type)
    if written is not None and g.value_index in written[0]:
        return g.op.outputs[written[1]][:, written[0][g.value_index]]
    for op in g.consumers():
        normed = _NORMED.get(op.type)
        if normed is None or op.get_attr("dh_given") != 1:
            continue
        _, norms, direct, column = normed
        if op.inputs[direct].name == g.name:
            return op.outputs[norms][:, column]
    return None


def _given(gradient) -> list:
    """An optional input of the backward op: [] for an absent (zero) gradient: None, or in a
    graph the zeros a tape makes for an output the loss does not reach (the tape gives None
    only to gradient functions TensorFlow lists by name): a ZerosLike, or where the shape is
    static a Fill of the constant 0 (a Const of zeros when small)."""
    op = None if gradient is None or tf.executing_eagerly() else getattr(gradient, "op", None)
    if gradient is None or (isinstance(op, tf.Operation) and _zeros(op)):
        return []
    return [gradient]


def _zeros(op: tf.Operation) -> bool:
    """Whether `op` makes an array of zeros: ZerosLike, a Const of zeros, or Fill with a
    constant value of 0."""
    if op.type == "ZerosLike":
        return True
    if op.type == "Fill" and op.inputs[1].op.type == "Const":
        op = op.inputs[1].op
    return op.type == "Const" and not np.any(tf.get_static_value(op.outputs[0]))


def unread_probes(x, h0) -> tuple[tf.Tensor, tf.Tensor]:
    """Zero probes [T, B, H] for x [T, B, I] and h0 [B, H] that cost nothing: uninitialized
    (`Empty`), never written or read. The forward op takes them as zeros (`read_probes`
    false), so they serve only as what dL/dh_t and dL/dc_t are the gradients of; zeros of
    `tf.zeros` would be written, then read at every step. For the native kernels only (the
    while-loops add the probes' values), in a compiled graph (`unread` recognizes them)."""
    shape = tf.stack([tf.shape(x)[0], tf.shape(h0)[0], tf.shape(h0)[1]])
    probe_h, probe_c = (tf.raw_ops.Empty(shape=shape, dtype=tf.float32) for _ in range(2))
    return probe_h, probe_c


def unread(probe) -> bool:
    """Whether `probe` is one of `unread_probes` in a graph."""
    op = None if tf.executing_eagerly() else getattr(probe, "op", None)
    return isinstance(op, tf.Operation) and op.type == "Empty"


def sequence(
    x,
    h0,
    c0,
    kernel,
    recurrent_kernel,
    bias,
    probe_h,
    probe_c,
    mask=None,
    with_gates=False,
    read_probes=True,
    reverse=False,
    share=1,
):
    """Every h_t and c_t [T, B, H] from the forward kernel (arguments as cell.lstm_sequence,
    the mask None or float32 [T, B] of 0/1); differentiable through `_sequence_gradient`
    (not with respect to the mask). With `with_gates` also the gate activations [T, B, 4H],
    not differentiated, and the kernel sums the gates panel's statistics of them as it runs
    (`gate_sums`). Without `read_probes` the probes count as zeros (`unread_probes`). With
    `reverse` the cell reads the sequence from its end, every array indexed by input position
    all the same (no reversed copies). `share`: how many such ops run at once (a
    Bidirectional's two directions), each on that share of the intra-op threads."""
    sums = gate_stat_bounds(LSTM_ACTIVATIONS) if with_gates else {}
    h, c, gates, *_ = library().lstmviz_sequence_forward(
        x, kernel, recurrent_kernel, bias, h0, c0, probe_h, probe_c,
        [] if mask is None else [mask], read_probes=read_probes, reverse=reverse, share=share,
        **sums,
    )  # fmt: skip
    return (h, c, tf.stop_gradient(gates)) if with_gates else (h, c)


# The LSTM kernels' activations of the gates i, f, g, o.
LSTM_ACTIVATIONS = ("sigmoid", "sigmoid", "tanh", "sigmoid")


def gate_sums(gates, attrs: dict) -> tuple[tf.Tensor, tf.Tensor] | None:
    """(sums [T, 3, 4], unit_sums [4H]) the LSTM forward op summed of `gates` (its gate
    activations, as `sequence` returns them, in a graph) with the statistics' attributes
    `attrs` (activations.gate_stat_bounds), over the unmasked (t, b) of the mask it ran with;
    None when `gates` did not come from such an op."""
    op = getattr(gates, "op", None)
    if not isinstance(op, tf.Operation) or op.type not in ("StopGradient", "Identity"):
        return None
    source = op.inputs[0]
    if source.op.type != "LstmvizSequenceForward" or source.value_index != 2:
        return None
    source = source.op
    if not source.get_attr("centres") or any(
            not np.allclose(source.get_attr(key), value, rtol=0, atol=1e-7)
            for key, value in attrs.items()):  # fmt: skip
        return None
    return source.outputs[3], source.outputs[4]


# The GRU kernels' activations (gru_kernels.cc, `WithKinds`): the gate's, the candidate's.
GRU_GATES = ("sigmoid", "hard_sigmoid", "hard_sigmoid_keras2")
GRU_CANDIDATES = ("tanh",)


def gru_native(gate: str, candidate: str, dtype) -> bool:
    """Whether the native GRU kernels run a GRU of these activations on values of `dtype`."""
    return (library() is not None and tf.as_dtype(dtype) == tf.float32
            and gate in GRU_GATES and candidate in GRU_CANDIDATES)  # fmt: skip


def gru_sequence(zx, h0, recurrent, recurrent_bias, probe, mask, gate: str, candidate: str,
                 reverse=False, share=1):  # fmt: skip
    """The GRU's forward kernel: zx [T, B, 3H] (x·kernel + the input bias), h0 [B, H],
    recurrent [H, 3H], recurrent_bias [3H] with reset_after or None, probe [T, B, H] (never
    read: its gradient is the total dL/dh_t), mask float [T, B] of 0/1 or None; activations
    by Keras name (`gru_native`); `reverse` and `share` as `sequence`'s. Returns h [T, B, H]
    and the gates z, r, h̃ [T, B, 3H] (not differentiated); differentiable through
    `_gru_gradient` (not with respect to the mask)."""
    h, gates, _ = library().lstmviz_gru_forward(
        zx, h0, recurrent, [] if recurrent_bias is None else [recurrent_bias], probe,
        [] if mask is None else [mask], reset_after=recurrent_bias is not None, gate=gate,
        activation=candidate, reverse=reverse, share=share,
    )  # fmt: skip
    return h, tf.stop_gradient(gates)


@tf.RegisterGradient("LstmvizGruForward")
def _gru_gradient(op, dh_direct, _dgates, _drecurrent_h):
    """BPTT for the GRU's forward op: gradients for (zx, h0, recurrent, the recurrent bias when
    there is one, the probe: the total dL/dh_t, the mask when there is one: None)."""
    _, h0, recurrent, *rest = op.inputs
    after = op.get_attr("reset_after")
    mask = rest[2:] if after else rest[1:]
    h, gates, recurrent_h = op.outputs
    dzx, dh, dh0, d_recurrent, d_bias, _ = library().lstmviz_gru_backward(
        recurrent, h0, h, gates, recurrent_h, _given(dh_direct), mask, reset_after=after,
        gate=op.get_attr("gate"), activation=op.get_attr("activation"), **_order(op),
    )  # fmt: skip
    return dzx, dh0, d_recurrent, *([d_bias] if after else []), dh, *[None] * len(mask)


# The SimpleRNN kernels' activations (rnn_kernels.cc, `WithKind`).
RNN_ACTIVATIONS = ("tanh", "relu", "sigmoid")


def rnn_native(name: str, dtype) -> bool:
    """Whether the native SimpleRNN kernels run a SimpleRNN of this activation on `dtype`."""
    return library() is not None and tf.as_dtype(dtype) == tf.float32 and name in RNN_ACTIVATIONS


def rnn_sequence(zx, h0, recurrent, probe, mask, name: str, reverse=False, share=1):
    """The SimpleRNN's forward kernel: zx [T, B, H] (x·kernel + bias), h0 [B, H], recurrent
    [H, H], probe, mask, `reverse` and `share` as `gru_sequence`'s, the activation by Keras
    name (`rnn_native`). Returns h [T, B, H] and act's output at every step [T, B, H] (not
    differentiated)."""
    masks = [] if mask is None else [mask]
    h, gates = library().lstmviz_rnn_forward(zx, h0, recurrent, probe, masks, activation=name,
                                             reverse=reverse, share=share)  # fmt: skip
    return h, tf.stop_gradient(gates)


@tf.RegisterGradient("LstmvizRnnForward")
def _rnn_gradient(op, dh_direct, _dgates):
    """BPTT for the SimpleRNN's forward op: gradients for (zx, h0, recurrent, the probe: the
    total dL/dh_t, the mask when there is one: None)."""
    _, h0, recurrent, _, *mask = op.inputs
    h, gates = op.outputs
    dzx, dh, dh0, d_recurrent, _ = library().lstmviz_rnn_backward(
        recurrent, h0, h, gates, _given(dh_direct), mask, activation=op.get_attr("activation"),
        **_order(op))  # fmt: skip
    return dzx, dh0, d_recurrent, dh, *[None] * len(mask)


def main() -> None:
    """`python -m lstmviz.engine.native`: build the kernels (if needed) and say what runs."""
    start = time.perf_counter()
    try:
        path = build(verbose="-v" in sys.argv)
    except RuntimeError as error:
        print(f"lstmviz: native kernels not built ({error}); the TensorFlow while-loops "
              "will run instead (slower, same results)")  # fmt: skip
        return
    print(f"lstmviz: native kernels ready ({path}, {time.perf_counter() - start:.1f} s)")

