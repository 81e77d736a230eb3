"""Write files atomically: to a temporary name in the same folder, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path in `path`'s folder (ending in `suffix`, for writers that check
    the extension); on success its file replaces `path`, on any error it vanishes.

    A reader never sees a half-written file, and an interrupted write leaves nothing behind.
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.", suffix=suffix)
    try:  # mkstemp makes the file private (0600); give it the mode a plain open() would
        os.chmod(fd, _file_mode(target))
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        yield Path(tmp)
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


def _file_mode(target: Path) -> int:
    """The permission bits of the file being replaced, else 0666 less the process umask."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        pass
    umask = None
    try:
        with open("/proc/self/status") as status:  # reading it does not change it (threads)
            for line in status:
                if line.startswith("Umask:"):
                    umask = int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    if umask is None:
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask
