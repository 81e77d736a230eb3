"""A run's life in the window (pytest-qt, offscreen): Stop keeping nothing (No to "Keep …?", a
run with nothing done, a failed run) shows again what the window showed before the run — the
same trace in the same panels with its summary, title and exports, or the empty panels —
while Cancel goes on and Yes keeps the units done; an opened trace ends a run and stays."""

from __future__ import annotations

import functools

import numpy as np
import pytest

pytest.importorskip("pytestqt")
from PySide6.QtWidgets import QMessageBox  # noqa: E402

from lstmviz.core.config import RunConfig  # noqa: E402
from lstmviz.gui.parts.run_view import NOTHING_KEPT  # noqa: E402
from tests.helpers import gui_fakes  # noqa: E402
from tests.helpers.gui_fakes import PASSES, TP  # noqa: E402

SMALL = RunConfig(mode="multipass", steps=TP, passes=PASSES, batch=3, input_dim=2, hidden=5)
LONG = RunConfig(mode="multipass", steps=TP, passes=PASSES, batch=4, input_dim=2, hidden=6,
                 seed=9)  # fmt: skip


def drain(window) -> None:
    """Run the draws the panel area staged (one per event-loop turn) now."""
    while window.area.busy():
        window.area.turn()


def seen(window) -> dict:
    """What the window shows: the panels (and what the heatmap holds), the summary, the title,
    the elapsed time and which file actions work."""
    drain(window)
    rows = window.area.rows
    shown = rows.stack.currentWidget() is rows.plot
    return {
        "panels": tuple(sorted(n for n, p in window.area.by_name.items()
                               if p.isVisibleTo(window))),  # fmt: skip
        "rows": np.array(rows.data, copy=True) if shown else None,
        "placeholders": tuple(sorted(n for n, p in window.area.by_name.items()
                                     if p.isVisibleTo(window)
                                     and p.stack.currentWidget() is p.placeholder)),
        "summary": window.summary.text.text(),
        "title": window.windowTitle(),
        "elapsed": window.elapsed.text(),
        "export": window.export_action.isEnabled(),
        "save": window.save_action.isEnabled(),
        "verify": window.verify_action.isEnabled(),
    }  # fmt: skip


def same(a: dict, b: dict) -> None:
    for key in a:
        if key == "rows" and a[key] is not None:
            np.testing.assert_array_equal(a[key], b[key])
        else:
            assert a[key] == b[key], key


def finish(qtbot, window, config=SMALL) -> None:
    window.worker.engine = gui_fakes.multipass
    with qtbot.waitSignal(window.settled, timeout=60_000):
        assert window.start_run(config)
    assert window.trace is not None


def start_slow(qtbot, window, passes_done: int = 1) -> None:
    """Start a fake multi-pass run (0.4 s a pass) and wait for `passes_done` passes."""
    window.worker.engine = functools.partial(gui_fakes.multipass, delay=0.4)
    assert window.start_run(LONG)
    qtbot.waitUntil(lambda: window.state.done >= passes_done, timeout=30_000)
    qtbot.waitUntil(lambda: window.area.rows.stack.currentWidget() is window.area.rows.plot,
                    timeout=5_000)  # fmt: skip


def answer(monkeypatch, button) -> list[str]:
    asked: list[str] = []

    def question(parent, title, text, *args):
        asked.append(text)
        return button

    monkeypatch.setattr(QMessageBox, "question", question)
    return asked


def test_no_to_keep_shows_the_trace_from_before_the_run_again(qtbot, window, monkeypatch):
    finish(qtbot, window)
    trace, before = window.trace, seen(window)
    assert before["export"] and before["rows"] is not None
    start_slow(qtbot, window)
    assert window.trace is None and not window.export_action.isEnabled()
    asked = answer(monkeypatch, QMessageBox.No)
    with qtbot.waitSignal(window.worker.cancelled, timeout=5_000):
        window.stop_button.click()
    assert "discard them and show the trace from before this run again" in asked[0]
    assert not window.state.running and window.run_button.isEnabled()
    assert window.trace is trace
    same(before, seen(window))  # the same panels, data, summary, title, run time and actions
    assert "stopped" in window.message.text() and "from before" in window.message.text()
    assert window.progress.format() == "stopped"
    # the window goes on as before: export works on it, the next run replaces it
    finish(qtbot, window, RunConfig(mode="multipass", steps=TP, passes=PASSES, seed=3))
    assert window.trace is not trace


def test_a_run_with_nothing_done_or_failed_also_shows_the_trace_from_before(
    qtbot, window, errors, monkeypatch
):
    finish(qtbot, window)
    trace, before = window.trace, seen(window)
    window.worker.engine = functools.partial(gui_fakes.multipass, delay=0.6)
    assert window.start_run(LONG)
    window.stop_action.trigger()  # no pass done yet: nothing to ask
    assert window.trace is trace
    same(before, seen(window))
    window.worker.engine = gui_fakes.broken
    with qtbot.waitSignal(window.settled, timeout=30_000):
        assert window.start_run(LONG)
    assert errors and "engine exploded" in errors[-1]
    assert window.trace is trace and "run failed" in window.message.text()
    assert window.progress.format() == "failed"
    same(before, seen(window))


def test_no_to_keep_with_nothing_before_shows_the_empty_panels(qtbot, window, monkeypatch):
    drain(window)
    start_slow(qtbot, window, passes_done=2)
    answer(monkeypatch, QMessageBox.No)
    with qtbot.waitSignal(window.worker.cancelled, timeout=5_000):
        window.stop_button.click()
    after = seen(window)
    assert window.trace is None and after["rows"] is None
    assert after["placeholders"] == after["panels"] == ("norm", "rows", "units")
    assert after["summary"] == NOTHING_KEPT and after["elapsed"] == ""
    assert not (after["export"] or after["save"] or after["verify"])
    assert "stopped" in window.message.text() and "from before" not in window.message.text()


def test_cancel_goes_on_and_yes_keeps_the_passes_done(qtbot, window, monkeypatch):
    finish(qtbot, window)
    start_slow(qtbot, window)
    answer(monkeypatch, QMessageBox.Cancel)
    window.stop_button.click()
    assert window.state.running and window.trace is None
    done = window.state.done
    qtbot.waitUntil(lambda: window.state.done > done, timeout=10_000)  # it goes on
    answer(monkeypatch, QMessageBox.Yes)
    with qtbot.waitSignal(window.settled, timeout=30_000):
        window.stop_button.click()
        assert "building the trace" in window.message.text()  # said while it is built
    kept = window.trace
    assert kept is not None and kept.config.seed == LONG.seed
    assert 0 < kept.config.passes < PASSES and int(kept["units_done"]) == kept.config.passes
    assert window.message.text().startswith(f"kept {kept.config.passes} pass")
    assert window.export_action.isEnabled() and window.progress.format() == "done"


def test_a_trace_opened_during_a_run_ends_it_and_stays(qtbot, window, tmp_path):
    finish(qtbot, window)
    first = window.trace
    path = tmp_path / "other.npz"
    first.save(path)
    start_slow(qtbot, window)
    assert window.open_path(str(path))
    drain(window)
    assert not window.state.running and window.trace is not first
    assert window.trace.config == first.config and window.message.text().startswith("opened")
    assert window.elapsed.text() == ""  # an opened trace has no run time
    np.testing.assert_array_equal(window.area.rows.data, first["norm_h_total_by_pass"])


def test_the_dock_lists_only_the_files_the_mode_reads(qtbot):
    """Weights loaded for a taped run are not "Weights: …" under a training or model run's
    fields (those runs do not read them); back in taped mode they are again."""
    from lstmviz.gui.widgets.params import ParamsEditor

    params = ParamsEditor()
    qtbot.addWidget(params)
    params.set_loaded("weights", "/data/w.npz", {"input_dim": 3, "hidden": 8}, "w.npz: NumPy")
    assert "Weights:" in params.sources.text() and not params.sources.isHidden()
    for mode, listed in (("train", False), ("model", False), ("multipass", True)):
        params.widgets["mode"].setCurrentIndex(params.widgets["mode"].findData(mode))
        assert ("Weights:" in params.sources.text()) is listed, mode
        assert params.sources.isHidden() is not listed


def test_batchwise_files_take_one_weights_file_per_batch_from_the_dialog(
    qtbot, window, errors, monkeypatch, tmp_path
):
    """Generator "files": File → Open weights… takes several files at once (batch k gets the
    k-th by name), Batches N follows their count; a count that does not match is refused in
    the dock's words before anything runs."""
    from PySide6.QtWidgets import QFileDialog

    from lstmviz.weights import random_weights

    rng = np.random.default_rng(0)
    made = {}
    for name in ("b.npz", "a.npz"):
        w = random_weights(2, 3, rng)
        np.savez(tmp_path / name, kernel=w.kernel, recurrent_kernel=w.recurrent_kernel,
                 bias=w.bias)  # fmt: skip
        made[name] = w
    widgets = window.params.widgets
    widgets["mode"].setCurrentIndex(widgets["mode"].findData("batchwise"))
    widgets["generator"].setCurrentIndex(widgets["generator"].findData("files"))
    for name, value in (("batches", 4), ("steps", 5), ("batch", 2)):
        widgets[name].setValue(value)
    chosen = [str(tmp_path / "b.npz"), str(tmp_path / "a.npz")]
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: (chosen, ""))
    window.files.open_weights_dialog()
    assert window.params.config().weights == ",".join(sorted(chosen)) and not errors
    assert widgets["batches"].value() == 2 and "2 files" in window.params.sources.text()
    assert (widgets["input_dim"].value(), widgets["hidden"].value()) == (2, 3)
    assert not widgets["hidden"].isEnabled()
    widgets["batches"].setValue(3)
    assert not window.start_run()
    assert errors[-1] == "Weights: 2 weight file(s), but Batches N is 3: give one per batch"
    widgets["batches"].setValue(2)
    with qtbot.waitSignal(window.settled, timeout=120_000):
        assert window.start_run()
    assert len(errors) == 1 and window.trace is not None
    for k, name in enumerate(("a.npz", "b.npz")):
        np.testing.assert_array_equal(window.trace["kernel"][k], made[name].kernel)


def test_batchwise_weights_named_by_a_folder_are_read_again_as_its_files(idle, tmp_path):
    """A config from the CLI may name the per-batch weights as a folder (`--weights DIR`):
    reopened in the window (a trace, the settings) its files are read, I and H locked."""
    window = idle  # nothing here runs: no computing process
    from lstmviz.weights import random_weights

    rng = np.random.default_rng(0)
    for name in ("b.npz", "a.npz"):
        w = random_weights(3, 4, rng)
        np.savez(tmp_path / name, kernel=w.kernel, recurrent_kernel=w.recurrent_kernel,
                 bias=w.bias)  # fmt: skip
    config = RunConfig(mode="batchwise", generator="files", weights=str(tmp_path), batches=2,
                       input_dim=1, hidden=1)  # fmt: skip
    window.params.set_config(config)
    window.files.reload_sources()
    widgets = window.params.widgets
    assert (widgets["input_dim"].value(), widgets["hidden"].value()) == (3, 4)
    assert not widgets["hidden"].isEnabled()
    assert window.params.config().weights == f"{tmp_path / 'a.npz'},{tmp_path / 'b.npz'}"


def test_panels_needed_while_their_modules_import_wait_for_that_import(
    qtbot, settings, tmp_path, monkeypatch
):
    """A trace to show before the importing thread is done (a loaded machine, a fast run):
    the window waits for the thread instead of importing the same modules beside it, which
    can hand it modules half made and run PySide's type set-up in two threads at once."""
    import importlib
    import threading

    from lstmviz.gui import main_window

    slow = f"lstmviz_test_slow_panels_{tmp_path.name}"
    (tmp_path / f"{slow}.py").write_text("import time\ntime.sleep(0.5)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(main_window, "PANEL_MODULES", (slow, *main_window.PANEL_MODULES))
    win = main_window.MainWindow(settings=settings)
    qtbot.addWidget(win)
    imported, beside_the_thread = importlib.import_module, []

    def watched(name):
        if win.importing is not None and threading.current_thread() is threading.main_thread():
            beside_the_thread.append(win.importing.is_alive())
        return imported(name)

    monkeypatch.setattr(importlib, "import_module", watched)
    win.prepare_panels()  # PySide's types first (`qt_types`), in the window's idle turns
    qtbot.waitUntil(lambda: win.importing is not None, timeout=10_000)
    assert win.importing.is_alive()
    assert win.area is not None
    assert beside_the_thread and not any(beside_the_thread)
    win.close()
