"""Start the desktop app: `lstmviz gui`, `python main.py`."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence


def _stamp(event: str) -> None:
    # stdout: TensorFlow's import points fd 2 at /dev/null for a few seconds
    # (engine/quiet_tensorflow.py)
    sys.stdout.write(f"lstmviz-timing {event} {time.time():.4f}\n")
    sys.stdout.flush()


def _report_timing(app, window) -> None:
    """With LSTMVIZ_TIMING set, print `lstmviz-timing EVENT EPOCH_SECONDS` lines on stdout when
    the window is built, when its first widget is painted, when it first settles with
    TensorFlow loaded, and when a run's first update is shown. Read by bench/bench_gui.py and
    tests/gui/test_gui_robust.py."""
    from PySide6.QtCore import QEvent, QObject

    class FirstPaint(QObject):
        def eventFilter(self, watched, event):  # noqa: N802 (Qt's name)
            if event.type() == QEvent.Type.Paint:
                app.removeEventFilter(self)
                _stamp("window-shown")
            return False

    window.first_paint = FirstPaint(window)
    app.installEventFilter(window.first_paint)
    ready = []

    def settled() -> None:
        if not ready:
            ready.append(True)
            _stamp("tf-ready")

    window.settled.connect(settled)

    def progressed(value: int) -> None:  # main thread: the window's own progress bar
        if value >= 1:
            window.progress.valueChanged.disconnect(progressed)
            _stamp("first-update")

    window.progress.valueChanged.connect(progressed)
    _stamp("window-built")


def use_small_pages() -> None:
    """Back this process's new NumPy arrays with ordinary pages. NumPy asks the kernel for
    transparent huge pages on every array of 4 MB or more; on virtual machines the first
    write to such memory is sometimes many times slower than with ordinary pages, and
    unpredictably so: a stall of the window where it draws a big image (bench/bench_gui.py
    --only life)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # a NumPy without it: NUMPY_MADVISE_HUGEPAGE=0 does the same
        return
    _set_madvise_hugepage(False)


def freeze_long_lived(window) -> None:
    """Leave the objects made so far out of the garbage collector's full collections, now
    and once the window first settles (panels made, TensorFlow ready). They live as long as
    the window, and a full collection walks every tracked object on the window's thread, a
    stall while the panels are made (bench/bench_gui.py --only life)."""
    import gc

    gc.freeze()
    done = []

    def settled() -> None:
        if not done:
            done.append(True)
            gc.freeze()

    window.settled.connect(settled)


def main(
    files: Sequence[str] = (), run: bool = False, demo: bool = False,
    screenshot: str | None = None, layer: str | None = None, compare: bool = False,
    module: str | None = None,
) -> int:
    """Show the main window, open `files` as if dropped on it (`layer`: the LSTM layer of a
    weights file with several; `module`: the factory of a PyTorch state dict's module, set in
    the dock before the files open), and start a run (`run`: the parameters shown once the files
    are open; `demo`: the demo). With `screenshot`, save the
    window as PNG once the run is drawn (or, without a run, once the files are shown and
    TensorFlow is ready) and quit. `compare`: `files` are A and B, A is shown and compared
    with B in a window of its own (File → Compare with…).

    Returns 0, or 1 when `screenshot` was asked for and an error occurred or nothing was saved.
    """
    if os.environ.get("LSTMVIZ_TIMING"):
        _stamp("gui-main")
    # SIGINT/SIGTERM close the window like File → Quit, once the event loop runs: a signal that
    # comes while Qt is imported or the window built is kept for then (the heartbeat below lets
    # Python see a signal while Qt waits).
    window = None
    signalled = []

    def close_soon(*_) -> None:
        signalled.append(True)
        if window is not None:
            from PySide6.QtCore import QTimer

            QTimer.singleShot(0, close_all)

    def close_all() -> None:
        from PySide6.QtWidgets import QApplication

        modal = QApplication.activeModalWidget()  # a dialog open (a layer picker) first
        if modal is not None and modal is not window:
            modal.close()
        window.close()

    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, close_soon)
    # Qt and the window only before its first paint: the panels' modules (pyqtgraph) and the
    # computing process (TensorFlow) come after it (MainWindow.prepare_panels, Worker)
    from PySide6.QtCore import QEvent, QTimer
    from PySide6.QtWidgets import QApplication

    from lstmviz.gui.main_window import MainWindow

    use_small_pages()
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setOrganizationName("lstmviz")
    app.setApplicationName("lstmviz")
    app.setStyle("Fusion")
    window = MainWindow(quiet_errors=bool(screenshot), styled=True)
    window.show()
    freeze_long_lived(window)
    if os.environ.get("LSTMVIZ_TIMING"):
        _report_timing(app, window)
    saved = []

    if screenshot:

        def shoot() -> None:
            saved.append(window.grab().save(screenshot, "PNG"))
            window.close()

        window.settled.connect(lambda: QTimer.singleShot(400, shoot))
        QTimer.singleShot(180_000, close_all)  # never hang an automated run

    def open_files() -> None:
        # in the event loop, so that a dialog these open (a layer picker, an error) leaves
        # the heartbeat and a signal's close working
        if module:
            window.params.widgets["module"].setText(module)
        if compare:
            opened = window.open_path(str(files[0])) and window.diagnosis.compare_with(
                str(files[1]), str(files[0]))
        else:
            opened = all([window.open_path(str(path), layer) for path in files])
        if demo:
            window.start_demo()
        elif run and opened:
            window.start_run()

    QTimer.singleShot(0, open_files)
    if signalled:
        QTimer.singleShot(0, close_all)
    heartbeat = QTimer(interval=200)
    heartbeat.timeout.connect(lambda: None)
    heartbeat.start()

    code = app.exec()
    heartbeat.stop()
    if screenshot and (window.errors or not saved or not saved[0]):
        code = code or 1
    if not window.shutdown():
        # the worker thread did not end (it never waits on TensorFlow: not seen); a thread
        # left running can abort the interpreter at exit. Leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    window.deleteLater()
    app.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    return int(code)
