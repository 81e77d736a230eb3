import contextlib
import fcntl
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _has_gpu() -> bool:
    try:
        from lstmviz.engine.quiet_tensorflow import tf
    except Exception:
        return False
    return bool(tf.config.list_physical_devices("GPU"))


def pytest_collection_modifyitems(config, items):
    if any("gpu" in item.keywords for item in items) and not _has_gpu():
        skip = pytest.mark.skip(reason="no GPU visible to TensorFlow")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the files' order is the plan's
        items[:] = heaviest_files_first(items)


def heaviest_files_first(items: list) -> list:
    """The tests, each file's together in its order, the files by their estimated cost (the
    heaviest first): a test 1, one with the computing process (`window`) 10, a `slow` one 30.
    With `--dist loadfile --no-loadscope-reorder` (make test) the long files start first and
    the short ones fill in at the end, instead of a long file starting last."""
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)

    def cost(tests: list) -> int:
        slow = sum(1 for test in tests if test.get_closest_marker("slow"))
        window = sum(1 for test in tests if "window" in getattr(test, "fixturenames", ()))
        return len(tests) + 9 * window + 29 * slow

    return [item for tests in sorted(files.values(), key=cost, reverse=True) for item in tests]


# ---- parallel runs (pytest-xdist, `make test`) ------------------------------------------------

# A test marked `serial` measures how quickly something happens (a stop within a second, a
# window's thread never blocked): with `-n` it runs while the other workers wait, so that their
# load does not make it fail. Two lock files shared by the workers: every test holds `main`
# shared; a serial test's call takes `gate` exclusively first, so that no new test starts, then
# `main` exclusively once the running ones have ended, and so does its tear-down (a window's
# close gives its worker 1.5 s to end). Its set-up (a window waiting for TensorFlow in its
# computing process, a module's fixtures) times nothing: it holds `main` shared as any test does,
# so that the others go on meanwhile.


@contextlib.contextmanager
def _locked(path, mode: int):
    with open(path, "a") as file:
        fcntl.flock(file, mode)
        try:
            yield
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


@contextlib.contextmanager
def _held(item, alone: bool):
    """The locks above for `item` under xdist: shared, or exclusively (`alone`)."""
    basetemp = getattr(item.config.option, "basetemp", None)
    if not os.environ.get("PYTEST_XDIST_WORKER") or not basetemp:
        yield
        return
    shared = Path(basetemp).parent  # the session's folder; each worker's basetemp is in it
    gate, main = shared / "serial-gate.lock", shared / "serial-main.lock"
    if alone:
        with _locked(gate, fcntl.LOCK_EX), _locked(main, fcntl.LOCK_EX):
            yield
        return
    with contextlib.ExitStack() as held:
        with _locked(gate, fcntl.LOCK_SH):
            held.enter_context(_locked(main, fcntl.LOCK_SH))
        yield


def _serial(item) -> bool:
    return item.get_closest_marker("serial") is not None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under xdist, every test's set-up, call and tear-down (of module fixtures too) hold the
    locks above shared; a `serial` test's phases take them each on their own (below): its
    set-up shared, its call and tear-down alone."""
    if _serial(item):
        return (yield)
    with _held(item, alone=False):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    with _held(item, alone=False) if _serial(item) else contextlib.nullcontext():
        return (yield)


_ALONE = pytest.StashKey[contextlib.ExitStack]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A `serial` test's call: alone, until its tear-down has ended."""
    if _serial(item):
        alone = item.stash[_ALONE] = contextlib.ExitStack()
        alone.enter_context(_held(item, alone=True))
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    if not _serial(item):
        return (yield)
    # alone since its call; shared if its set-up failed (no call)
    with item.stash.get(_ALONE, None) or _held(item, alone=False):
        return (yield)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# ---- GUI fixtures (Qt imported only by the tests that use them) --------------------------------

# Qt's modal dialogs: each runs an event loop of its own until someone answers, which offscreen
# nobody does, so one a test did not expect would hang the whole run (until CI's time limit).
MODAL = {
    "QMessageBox": ("question", "information", "warning", "critical", "about", "exec"),
    "QDialog": ("exec",),
    "QFileDialog": ("getOpenFileName", "getOpenFileNames", "getSaveFileName", "exec"),
    "QInputDialog": ("getItem", "getText", "getInt", "getDouble", "exec"),
}


@pytest.fixture(autouse=True)
def no_unexpected_dialogs(request, monkeypatch):
    """In tests that use qtbot, a modal dialog the test did not mock (monkeypatch after this
    fixture) fails the test, naming the dialog, instead of waiting for an answer forever."""
    if "qtbot" not in request.fixturenames:
        return
    from PySide6 import QtWidgets

    def refuse(where: str):
        def refused(*args, **kwargs):
            texts = [a for a in args if isinstance(a, str)]
            shown = getattr(args[0], "text", None) if args else None
            if callable(shown) and isinstance(shown(), str):
                texts.append(shown())
            raise AssertionError(f"unexpected modal dialog {where}: {' | '.join(texts)}")

        return refused

    for name, methods in MODAL.items():
        for method in methods:
            monkeypatch.setattr(getattr(QtWidgets, name), method, refuse(f"{name}.{method}"))


@pytest.fixture
def errors(monkeypatch):
    """Error dialogs, recorded instead of shown."""
    from PySide6.QtWidgets import QMessageBox

    shown = []
    monkeypatch.setattr(QMessageBox, "critical", lambda parent, title, text: shown.append(text))
    return shown


@pytest.fixture
def settings(tmp_path):
    """A throw-away settings file, so tests never touch the user's."""
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def bare_window(qtbot, settings):
    """The main window, shown, not waiting for TensorFlow, its error dialogs not shown (the
    window's own `quiet_errors`); closed afterwards."""
    from lstmviz.gui.main_window import MainWindow

    win = MainWindow(settings=settings, quiet_errors=True)
    qtbot.addWidget(win)
    win.show()
    yield win
    win.close()


@pytest.fixture
def idle(qtbot, settings, errors):
    """A main window that starts no computing process, shown, its error dialogs recorded
    (`errors`); closed afterwards."""
    from tests.helpers.gui_checks import idle_window

    win = idle_window(qtbot, settings)
    win.show()
    yield win
    win.close()


@pytest.fixture
def window(qtbot, settings, errors):
    """The main window, shown, with TensorFlow loaded in its worker; closed afterwards."""
    from lstmviz.gui.main_window import MainWindow

    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.show()
    # TensorFlow loads in ~5 s here; a machine loaded with other suites took over 120 s
    qtbot.waitUntil(lambda: win.device is not None, timeout=300_000)
    yield win
    win.close()
    assert win.worker.isFinished()
