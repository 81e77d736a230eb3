"""What the window shows, without a window: the file a trace came from is named only while
that trace is shown, a recording's file comes first, and a run that keeps nothing puts back
the trace shown before it with its file."""

from types import SimpleNamespace

from lstmviz.core.config import RunConfig
from lstmviz.gui.state.shown import Shown
from lstmviz.io.trace import GradientTrace


def trace(mode="taped"):
    return GradientTrace(mode, RunConfig(mode=mode), {})


def test_a_file_names_the_trace_it_came_with_only():
    shown = Shown()
    shown.set_file("/tmp/nothing.npz")  # nothing shown: nothing to name
    assert shown.file_name() is None
    opened = trace()
    shown.show_trace(opened)
    shown.set_file("/data/run.npz")
    assert shown.file_name() == "run.npz" and shown.seconds is None
    before = shown.trace_shown
    shown.show_run(RunConfig(mode="multipass"))
    assert shown.trace is None and shown.config.mode == "multipass" and shown.file_name() is None
    shown.trace_shown = before  # the run kept nothing
    assert shown.trace is opened and shown.file_name() == "run.npz"
    shown.show_trace(trace("multipass"), 1.5)  # a run's own trace: no file
    assert shown.file_name() is None and shown.seconds == 1.5


def test_a_recording_is_what_is_shown_and_named_first():
    shown = Shown()
    last = trace("model")
    shown.show_trace(last)
    shown.set_file("last.npz")
    shown.recording = SimpleNamespace(path=SimpleNamespace(name="fit.lvz"), last=last)
    assert shown.file_name() == "fit.lvz" and shown.current() is shown.recording
    shown.recording = None
    assert shown.file_name() == "last.npz" and shown.current() is last
