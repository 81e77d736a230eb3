import os

import numpy as np
import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _has_gpu() -> bool:
    try:
        from lstmviz.engine.tfload import tf
    except Exception:
        return False
    return bool(tf.config.list_physical_devices("GPU"))


def pytest_collection_modifyitems(config, items):
    if any("gpu" in item.keywords for item in items) and not _has_gpu():
        skip = pytest.mark.skip(reason="no GPU visible to TensorFlow")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# ---- GUI fixtures (Qt imported only by the tests that use them) --------------------------------


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
def window(qtbot, settings, errors):
    """The main window, shown, with TensorFlow loaded in its worker; closed afterwards."""
    from lstmviz.gui.main_window import MainWindow

    win = MainWindow(settings=settings)
    qtbot.addWidget(win)
    win.show()
    qtbot.waitUntil(lambda: win.device is not None, timeout=120_000)
    yield win
    win.close()
    assert win.worker.isFinished()
