"""The inputs file across mode switches (pytest-qt, offscreen): read again only when it changed
(its path, size or modification time), since a big file blocks the window while it is read."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from lstmviz.gui.parts import file_actions  # noqa: E402


@pytest.fixture
def window(bare_window):
    return bare_window


@pytest.fixture
def reads(monkeypatch):
    """The calls of the window's two readers of an inputs file, by name."""
    counted = {"inputs": 0, "data": 0}

    def counting(name, reader):
        def read(*args, **kwargs):
            counted[name] += 1
            return reader(*args, **kwargs)

        return read

    monkeypatch.setattr(file_actions, "load_inputs", counting("inputs", file_actions.load_inputs))
    monkeypatch.setattr(file_actions, "load_data", counting("data", file_actions.load_data))
    return counted


def switch(window, mode: str) -> None:
    box = window.params.widgets["mode"]
    box.setCurrentIndex(box.findData(mode))


def sizes(window) -> tuple[int, int, int]:
    return tuple(window.params.widgets[n].value() for n in ("steps", "batch", "input_dim"))


def test_mode_switches_do_not_read_an_unchanged_inputs_file_again(window, reads, tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((3, 5, 2), np.float32))  # batch-major [B, T, I]
    assert window.files.open_inputs(str(path))
    assert reads == {"inputs": 1, "data": 0} and sizes(window) == (5, 3, 2)
    for mode in ("multipass", "taped", "train", "batchwise", "model", "taped", "model", "taped"):
        switch(window, mode)
    assert reads == {"inputs": 1, "data": 1}  # once as sequences, once as a model's data
    assert sizes(window) == (5, 3, 2) and not window.params.widgets["steps"].isEnabled()
    switch(window, "model")
    assert window.params.loaded["inputs"][1] == {"batch": 3, "steps": 5}  # the model's reading
    assert window.params.form.labelForField(window.params.widgets["inputs"]).text() == "Data"


def test_an_inputs_file_changed_on_disk_is_read_again(window, reads, tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((3, 5, 2), np.float32))
    assert window.files.open_inputs(str(path))
    before = os.stat(path).st_mtime_ns
    np.save(path, np.ones((4, 6, 2), np.float32))  # the same name, other sequences
    os.utime(path, ns=(before + 10**9, before + 10**9))  # even on a coarse-clock file system
    switch(window, "multipass")
    switch(window, "taped")
    assert reads["inputs"] == 2 and sizes(window) == (6, 4, 2)


def test_the_inputs_layout_ticked_reads_the_file_the_other_way(window, reads, tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.zeros((3, 5, 2), np.float32))
    assert window.files.open_inputs(str(path))
    window.params.widgets["time_major"].setChecked(True)  # the file is [T, B, I]
    assert reads["inputs"] == 2 and sizes(window) == (3, 5, 2)
