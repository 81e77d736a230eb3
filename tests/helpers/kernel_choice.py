"""Both LSTM kernels, one test each: the `kernel` fixture runs a test on the native CPU kernels
(skipped where they are not built) and on the TensorFlow while-loops (as LSTMVIZ_NATIVE=0),
counting the native forward's uses (`Kernel.ran` checks the one asked for ran); `BACKENDS`,
the two sequence functions themselves by name."""

from __future__ import annotations

import pytest

from lstmviz.engine.autodiff import gradients
from lstmviz.engine.cells import lstm
from lstmviz.engine.cells.lstm import lstm_sequence
from lstmviz.engine.modes import model as model_engine
from lstmviz.engine.modes import multipass
from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import tf


def _forget_compiled() -> None:
    """Drop every compiled graph that holds one kernel or the other."""
    gradients._compiled_step.cache_clear()
    model_engine._COMPILED.clear()


class Kernel:
    """Which LSTM kernel a test runs on, and how often the native forward was built into a
    graph or run since the test began."""

    def __init__(self, name: str):
        self.name, self.calls = name, 0

    def ran(self, trace=None) -> None:
        """The native op was used exactly when the kernel is "native" (no graph compiled with
        the other kernel was reused), and `trace` (its arrays) says which ran."""
        assert (self.calls > 0) == (self.name == "native"), self.calls
        if trace is not None:
            assert str(trace["lstm_kernel"]) == self.name


@pytest.fixture(params=["native", "while_loop"])
def kernel(request, monkeypatch):
    """Run the test on the native kernels (skipped where they are not built) or on the
    while-loops (as LSTMVIZ_NATIVE=0: `native.library()` is None). Compiled graphs are dropped
    before and after, so that none traced with the other kernel is reused."""
    if request.param == "native" and kernels.library() is None:
        pytest.skip(kernels.status())
    used = Kernel(request.param)
    if request.param == "while_loop":
        monkeypatch.setattr(kernels, "library", lambda: None)
    sequence = kernels.sequence

    def counted(*args, **kwargs):
        used.calls += 1
        return sequence(*args, **kwargs)

    monkeypatch.setattr(kernels, "sequence", counted)
    fresh = tf.function(lstm_sequence, input_signature=multipass.pass_states.input_signature,
                        reduce_retracing=True)  # fmt: skip
    monkeypatch.setattr(multipass, "pass_states", fresh)
    _forget_compiled()
    yield used
    _forget_compiled()


def native_sequence(*args):
    """The native kernels' sequence op (the test is skipped where they are not built)."""
    if kernels.library() is None:
        pytest.skip(kernels.status())
    return kernels.sequence(*args)


BACKENDS = {"native": native_sequence, "loops": lstm._lstm_sequence}
