"""What a file is: one list of suffixes, and a look inside .npz files."""

from pathlib import Path

import numpy as np
import pytest

from lstmviz.core.errors import LstmvizError
from lstmviz.io import files
from lstmviz.weights import loaders


def test_kind_of_each_file(tmp_path):
    np.savez(tmp_path / "t.npz", config_json=np.array("{}"), mode=np.array("taped"))
    np.savez(tmp_path / "x.npz", x=np.zeros((2, 3, 1)))
    np.savez(tmp_path / "w.npz", kernel=np.zeros((1, 4)), recurrent_kernel=np.zeros((1, 4)),
             bias=np.zeros(4), x=np.zeros(1))  # fmt: skip
    np.save(tmp_path / "x.npy", np.zeros((2, 3, 1)))
    (tmp_path / "m.weights.h5").write_bytes(b"")
    (tmp_path / "M.SAFETENSORS").write_bytes(b"")
    kinds = {p.name: files.kind(p) for p in tmp_path.iterdir()}
    assert kinds == {"t.npz": "trace", "x.npz": "inputs", "w.npz": "weights", "x.npy": "inputs",
                     "m.weights.h5": "weights", "M.SAFETENSORS": "weights"}  # fmt: skip


@pytest.mark.parametrize(("name", "content", "message"), [
    ("notes.txt", b"hello", "lstmviz opens a trace"),
    ("broken.npz", b"PK\x03\x04 not a zip", "not a readable .npz"),
    ("missing.npz", None, "no such file"),
])  # fmt: skip
def test_unknown_or_broken_files_are_named(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(LstmvizError, match=message) as info:
        files.kind(path)
    assert name in str(info.value)


def test_the_weight_readers_follow_the_one_list():
    assert tuple(loaders.WEIGHT_SUFFIXES) == files.WEIGHTS
    assert files.suffix_of("a/model.weights.h5", files.WEIGHTS) == ".weights.h5"
    assert files.pattern(files.INPUTS) == "*.npy *.npz"


def test_an_output_is_refused_with_the_one_rule_every_writer_follows(tmp_path, monkeypatch):
    """`files.check_output`, which run --out, fit's --record and every export flag use: the
    suffix, a folder, a missing or read-only folder, a write-protected file (os.access is
    patched for the last two: root, who runs CI, may write anywhere)."""
    import os

    from lstmviz.core.errors import ConfigError

    def refused(path, flag="--png", suffixes=(".png",), what="PNG images") -> str:
        with pytest.raises(ConfigError) as caught:
            files.check_output(path, flag, suffixes, what)
        return str(caught.value)

    (tmp_path / "old.png").write_bytes(b"")
    (tmp_path / "dir.png").mkdir()
    assert refused(tmp_path / "a.jpg") == f"--png: {tmp_path / 'a.jpg'}: PNG images end in .png"
    assert refused(tmp_path / "dir.png").endswith("dir.png: is a folder, not a file name")
    assert refused(tmp_path / "no" / "a.png") == f"--png: {tmp_path / 'no'}: no such folder"
    assert files.check_output(tmp_path / "old.png", "--png", (".png",), "") == tmp_path / "old.png"
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p).name != "old.png" and real(p, mode))
    assert refused(tmp_path / "old.png").endswith("old.png: file is write-protected")
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != tmp_path and real(p, mode))
    assert refused(tmp_path / "new.png") == f"--png: {tmp_path}: folder is not writable"
