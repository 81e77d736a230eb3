"""The real app in a subprocess for the tests: `python main.py ARGS` (or `-c CODE ARGS`)
offscreen in a session of its own, its LSTMVIZ_TIMING stamps read from stdout by a thread and
its stderr kept in a file."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


class App:
    def __init__(self, tmp: Path, *args: str, code: str | None = None):
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp),
                   LSTMVIZ_TIMING="1")  # fmt: skip
        command = [sys.executable, *(["-c", code] if code else ["main.py"]), *args]
        self.stderr = open(tmp / f"stderr-{time.monotonic_ns()}.txt", "w+")  # noqa: SIM115
        self.proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True,
                                     start_new_session=True)  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("<eof>")

    def wait_for(self, word: str, timeout: float = 120) -> str:
        """The first stdout line holding the word `word` (a stamp name or a driver's message)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.proc.kill()
                raise AssertionError(f"no {word!r} within {timeout} s") from None
            if word in line.split():
                return line
            if line == "<eof>":
                raise AssertionError(f"exited ({self.proc.wait()}) before {word!r}:" + self.err())

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    def exit_code(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.close()
            raise AssertionError(f"still running {timeout} s later:" + self.err()) from None

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()

    def err(self) -> str:
        return "\n" + self.stderr_text()[-3000:]

    def close(self) -> None:
        """End the app and its session's processes if still running."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.stderr.close()
