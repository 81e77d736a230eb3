"""The `lstmviz` command run as a user runs it, in a process of its own, on this checkout: the
command (`console`: the installed console script, else `python -m lstmviz`), its environment
(`cli_env`), a run whose stderr is collected live and that Ctrl-C can stop (`CliRun`), the
files a folder holds afterwards (`files_in`), and the small sizes a run takes (`SMALL`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SMALL = ["--steps", "4", "--batch", "2", "--hidden", "3", "--quiet"]


def console() -> list[str]:
    """The installed `lstmviz` console script (else `python -m lstmviz`), run on this tree."""
    script = Path(sys.executable).with_name("lstmviz")
    return [str(script)] if script.exists() else [sys.executable, "-m", "lstmviz"]


def cli_env() -> dict[str, str]:
    return os.environ | {"PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2"}


def files_in(tmp: Path) -> set[str]:
    return {p.name for p in tmp.rglob("*")}


class CliRun:
    """A CLI run in a subprocess whose stderr (progress lines end in \\r) is collected live."""

    def __init__(self, args: list[str], cwd: Path):
        self.proc = subprocess.Popen(
            [*console(), "run", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli_env(),
            cwd=cwd,
        )
        self.err = bytearray()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while chunk := self.proc.stderr.read1(4096):
            self.err.extend(chunk)

    def wait_for(self, text: str, timeout: float = 120) -> None:
        end = time.monotonic() + timeout
        while text.encode() not in self.err:
            assert self.proc.poll() is None, self.text()
            assert time.monotonic() < end, self.text()
            time.sleep(0.02)

    def interrupt(self) -> tuple[int, float]:
        start = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=60)
        elapsed = time.monotonic() - start
        self.proc.stdout.close()
        time.sleep(0.05)
        return code, elapsed

    def text(self) -> str:
        return self.err.decode(errors="replace")
