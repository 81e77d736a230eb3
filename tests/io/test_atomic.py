"""Atomic writes: a new file gets the mode a plain open() gives it, a replaced file keeps its
own, and the process's umask is never touched (other threads may be creating files)."""

import os
import threading

import pytest

from lstmviz.io.atomic import atomic_path, atomic_write


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_new_file_mode_follows_the_umask(tmp_path, umask_027):
    with atomic_write(tmp_path / "a.bin") as handle:
        handle.write(b"x")
    plain = tmp_path / "plain.bin"
    plain.write_bytes(b"x")
    assert (tmp_path / "a.bin").stat().st_mode & 0o777 == plain.stat().st_mode & 0o777 == 0o640


def test_replaced_file_keeps_its_mode_and_errors_leave_nothing(tmp_path):
    target = tmp_path / "t.png"
    target.write_bytes(b"old")
    target.chmod(0o604)
    with atomic_path(target, suffix=".png") as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new" and target.stat().st_mode & 0o777 == 0o604
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError
    assert target.read_bytes() == b"new" and sorted(tmp_path.iterdir()) == [target]


def test_the_umask_is_never_changed_while_writing(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "umask", lambda *a: calls.append(a) or 0o022)
    done = threading.Event()

    def write():
        with atomic_write(tmp_path / "b.bin") as handle:
            handle.write(b"y")
        done.set()

    threading.Thread(target=write).start()
    assert done.wait(10) and not calls


def test_a_symbolic_link_is_written_through_to_its_target(tmp_path):
    """The link was replaced by a regular file and the file it points to left as it was."""
    (tmp_path / "real").mkdir()
    real = tmp_path / "real" / "t.npz"
    real.write_bytes(b"old")
    real.chmod(0o604)
    link = tmp_path / "link.npz"
    link.symlink_to(real)
    with atomic_write(link) as handle:
        handle.write(b"new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == b"new" and real.stat().st_mode & 0o777 == 0o604
    dangling = tmp_path / "dangling.npz"
    dangling.symlink_to(tmp_path / "real" / "new.npz")
    with atomic_path(dangling, suffix=".npz") as tmp:
        assert tmp.parent == tmp_path / "real"
        tmp.write_bytes(b"made")
    assert dangling.is_symlink() and (tmp_path / "real" / "new.npz").read_bytes() == b"made"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling.npz", "link.npz", "real"]
