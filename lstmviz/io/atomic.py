"""Write files atomically: to a temporary name in the same folder, then rename."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def _create(folder: Path, prefix: str, suffix: str, mode: int | None) -> Path:
    """A new empty file with a random name in `folder`. Without `mode` it is created with
    0666 and the kernel applies the process's umask, as a plain open() would (reading the
    umask would mean setting it, which races with other threads)."""
    for _ in range(100):
        path = folder / f"{prefix}{secrets.token_hex(4)}{suffix}"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        try:
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
        return path
    raise FileExistsError(f"{folder}: no free temporary name")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path in `path`'s folder (ending in `suffix`, for writers that check
    the extension); on success its file replaces `path`, on any error it vanishes. The result
    has the permissions of the file it replaces, or those a new file gets.

    A reader never sees a half-written file, and an interrupted write leaves nothing behind.
    A symbolic link is written through: the file it points to is replaced (created, for a
    link to nothing yet) and the link stays, as a plain open() for writing would do.
    """
    # Renaming onto the link itself would replace the link with a regular file and leave the
    # file the user pointed it at as it was.
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode & 0o777
    except OSError:
        mode = None
    tmp = _create(target.parent, f".{target.name}.", suffix, mode)
    try:
        yield tmp
        with open(tmp, "rb") as written:
            os.fsync(written.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Yield a binary file object; on success it replaces `path`, on any error it vanishes."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        yield handle
