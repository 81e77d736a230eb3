"""The dock's caption of a loaded inputs file says what the mode shown reads from it: an input
sequence x [T, B, I], or, in training mode, the sequences training takes (`read_task_file`:
an .npy of series [N, T+1, I], an .npz of x [N, T, I] with y)."""

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from lstmviz.engine.problem.tasks import read_task_file  # noqa: E402


@pytest.fixture
def window(idle):
    """The window without a computing process: the captions are the window's, nothing runs."""
    return idle


def _mode(window, name: str) -> None:
    box = window.params.widgets["mode"]
    box.setCurrentIndex(box.findData(name))


def _caption(window) -> str:
    return window.params.sources.text()


def test_an_npy_reads_as_series_in_training_and_as_x_elsewhere(window, tmp_path):
    path = tmp_path / "series.npy"
    np.save(path, np.random.default_rng(0).standard_normal((8, 7, 2)))
    x, y = read_task_file(path)  # what training takes: 8 sequences of 6 steps
    assert x.shape == (8, 6, 2) and y.shape == (8, 6, 2)
    assert window.files.open_inputs(str(path))
    assert "x [T, B, I] = [7, 8, 2]" in _caption(window)
    _mode(window, "train")
    text = _caption(window)
    assert "series.npy" in text and "series [N, T+1, I] = [8, 7, 2]" in text, text
    assert "8 sequences of T=6" in text and "[T, B, I]" not in text, text
    assert "8 sequences of T=6" in window.params.sources.toolTip()
    _mode(window, "taped")
    assert "x [T, B, I] = [7, 8, 2]" in _caption(window)


def test_an_npz_reads_as_x_and_y_in_training_and_says_when_y_is_missing(window, tmp_path):
    rng = np.random.default_rng(1)
    both, alone = tmp_path / "both.npz", tmp_path / "alone.npz"
    np.savez(both, x=rng.standard_normal((5, 4, 3)), y=rng.standard_normal((5, 1)))
    np.savez(alone, x=rng.standard_normal((5, 4, 3)))
    assert read_task_file(both)[0].shape == (5, 4, 3)
    _mode(window, "train")
    assert window.files.open_inputs(str(both))
    text = _caption(window)
    assert "x [N, T, I] = [5, 4, 3] with y" in text and "[T, B, I]" not in text, text
    assert "x [N, T, I] = [5, 4, 3] with y" in window.message.text()  # the status line too
    assert window.files.open_inputs(str(alone))
    assert "x [N, T, I] = [5, 4, 3]; no y: training needs x and y" in _caption(window)
    _mode(window, "taped")
    assert "x [T, B, I] = [4, 5, 3]" in _caption(window)


def test_time_major_inputs_are_still_series_to_training(window, tmp_path):
    """Read time-major, the file's own array is [T, B, I]; training reads it as it is."""
    path = tmp_path / "tm.npy"
    np.save(path, np.zeros((9, 4, 2)))
    window.params.widgets["time_major"].setChecked(True)
    assert window.files.open_inputs(str(path))
    assert "x [T, B, I] = [9, 4, 2]" in _caption(window)
    _mode(window, "train")
    assert "series [N, T+1, I] = [9, 4, 2]" in _caption(window)
    assert "9 sequences of T=3" in _caption(window)
