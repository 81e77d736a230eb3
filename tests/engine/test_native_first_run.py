"""A copy pip installed (`pip install` of a clone, not editable, without `make install`) builds
the native kernels on its first run, once, into the user's cache, and runs on them; without a
compiler it says so once, in one line (`native.kernels._first_build`).

The copy: the checkout's tracked files (what a fresh clone holds) installed by
`pip install --no-deps --no-build-isolation` into a new venv that reads `.venv`'s packages
through a `.pth` file (TensorFlow is not installed again). Its runs use XDG_CACHE_HOME in
tmp_path and a stand-in compiler (tests/helpers/processes/fake_cxx.py: CXX) that takes the commands
g++ would get and links by copying the checkout's own library, built by `make install` from the
same sources: a real build is a minute of both cores. So this exercises everything of a first
run but g++ itself: the sources in the installed package and the library's key computed from
them (the same name as the checkout's), the cache, the trigger, the lock that lets two first
runs build once, the rename, the lines on stderr and in the window's messages, loading the
library and the trace's `lstm_kernel`. The compiler's own part is what `make install` runs
(tests/engine/test_cell_backends.py, test_native_kernels_build_and_load).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import gpu_visible

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / "tests" / "helpers" / "processes"
RUN = ["run", "--mode", "taped", "--steps", "12", "--batch", "2", "--input-dim", "3",
       "--hidden", "4", "--quiet"]  # fmt: skip
TIMEOUT = 300


class Installed:
    """The installed copy: its venv's Python and `lstmviz` command, and the checkout's own
    library (what the stand-in compiler links)."""

    def __init__(self, root: Path, python: Path, library: Path) -> None:
        self.root, self.python, self.library = root, python, library
        self.lstmviz = python.with_name("lstmviz")
        self.compiler = root / "cxx"
        self.compiler.write_text(f"#!{sys.executable}\n{(HELPERS / 'fake_cxx.py').read_text()}")
        self.compiler.chmod(0o755)

    def env(self, folder: Path, **extra: str) -> dict[str, str]:
        """The environment of a run in `folder`: its own user cache, the stand-in compiler
        and its log."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "CXX", "LSTMVIZ_NATIVE")}  # fmt: skip
        env.update(XDG_CACHE_HOME=str(folder / "cache"), FAKE_CXX_LOG=str(folder / "cxx.log"),
                   FAKE_CXX_LIBRARY=str(self.library), CXX=str(self.compiler))  # fmt: skip
        env.update(extra)
        return env

    def start(self, command: list[str], folder: Path, env: dict) -> subprocess.Popen:
        """Start `command` in `folder` (never the checkout: `python` puts its folder first on
        sys.path, and the checkout's lstmviz would be imported instead)."""
        return subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip

    def cli(self, folder: Path, env: dict, out: str = "t.npz") -> subprocess.Popen:
        return self.start([str(self.lstmviz), *RUN, "--out", out], folder, env)


def _ended(process: subprocess.Popen) -> tuple[str, str]:
    out, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0, err
    return out, err


def _kernel(path: Path) -> str:
    with np.load(path, allow_pickle=False) as trace:
        return str(trace["lstm_kernel"])


def _said(err: str) -> list[str]:
    """The lines about the native kernels a run wrote on stderr."""
    return [line for line in err.splitlines() if line.startswith("lstmviz:") and "native" in line]


def _calls(folder: Path) -> list[list[str]]:
    log = folder / "cxx.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    if gpu_visible() or os.environ.get("LSTMVIZ_NATIVE") == "0":
        pytest.skip("the while-loops run here by design")
    root = tmp_path_factory.mktemp("installed")
    clone = root / "clone"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                            check=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    venv = root / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib, "lstmviz_test_packages.pth").write_text("\n".join(sorted(ours)) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "--disable-pip-version-check",
                    str(clone)], check=True, cwd=root, timeout=TIMEOUT)  # fmt: skip
    package = Path(purelib) / "lstmviz" / "engine" / "native" / "src"
    assert {p.name for p in kernels.SOURCES + kernels.HEADERS} <= {p.name for p in
                                                                 package.iterdir()}  # fmt: skip
    return Installed(root, python, kernels.library_path())


def _until(stream, text: str) -> list[str]:
    """The lines read from `stream` up to and including the first that holds `text`."""
    lines = []
    while not lines or text not in lines[-1]:
        line = stream.readline()
        assert line, f"ended before saying {text!r}: {lines}"
        lines.append(line)
    return lines


@pytest.mark.slow
def test_two_first_runs_build_the_kernels_once_and_run_on_them(installed, tmp_path):
    """The CLI and the window's computing process start at once on a fresh user cache. Both
    say they build, held at the cache's build lock (the test holds it until both have said
    so); then one builds while the other waits for it, and both run on the native kernels.
    The CLI says so on stderr, the computing process in `Notice` messages before `Ready`
    (the status bar's). A later run finds the library and says nothing."""
    if not installed.library.exists():  # what the stand-in compiler links
        pytest.skip(f"the checkout's kernels are not built (make install): {kernels.status()}")
    env = installed.env(tmp_path)
    cache = tmp_path / "cache" / "lstmviz"
    cache.mkdir(parents=True)
    held = os.open(cache, os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        window = installed.start([str(installed.python),
                                  str(HELPERS / "computing_process_start.py")], tmp_path, env)
        cli = installed.cli(tmp_path, env)
        first_err = _until(cli.stderr, "building the native kernels")
        first_out = _until(window.stdout, "building the native kernels")
    finally:
        os.close(held)
    err = "".join(first_err) + _ended(cli)[1]
    out, window_err = _ended(window)
    said = _said(err)
    assert said[0] == (
        "lstmviz: building the native kernels for this CPU, once (about 2× faster than the "
        "while-loops; a minute or two of cxx)…"
    )
    assert said[1].startswith("lstmviz: native kernels built in "), err
    assert said[1].endswith(f" s, cached in {cache}") and len(said) == 2
    assert _kernel(tmp_path / "t.npz") == "native"

    messages = [json.loads(line) for line in [*first_out, *out.splitlines()]]
    notices = [m["text"] for m in messages if m.get("kind") == "Notice"]
    assert [text.split(" in ")[0] for text in notices] == [
        "building the native kernels for this CPU, once (about 2× faster than the while-loops; "
        "a minute or two of cxx)…", "native kernels built"], messages  # fmt: skip
    assert messages[-2] == {"kind": "Ready", "lstm": "native"}, window_err
    assert messages[-1]["lstmviz"].startswith(str(installed.root / "venv"))  # not the checkout

    calls = _calls(tmp_path)
    links = [call for call in calls if "-c" not in call]
    assert len(links) == 1 and len(calls) == len(kernels.SOURCES) + 1, calls  # built once
    # the installed sources give the checkout's key: the same library name, nothing else left
    assert [p.name for p in cache.iterdir()] == [installed.library.name]

    _, again = _ended(installed.cli(tmp_path, env, "again.npz"))
    assert _said(again) == [] and _kernel(tmp_path / "again.npz") == "native"
    assert len(_calls(tmp_path)) == len(calls)


@pytest.mark.slow
def test_without_a_compiler_a_first_run_says_once_what_the_kernels_bring(installed, tmp_path):
    """No compiler: one line saying how much faster the kernels are and how to get them; the
    while-loops run. A compiler that fails: one line with its error, kept in the cache, so a
    later run does not try again (`python -m lstmviz.engine.native` does)."""
    missing = installed.env(tmp_path, CXX="/nonexistent/g++")
    _, err = _ended(installed.cli(tmp_path, missing))
    assert _said(err) == [
        "lstmviz: the native kernels (about 2× faster) are not built (no C++ compiler: "
        "/nonexistent/g++ not found): install g++ (Debian/Ubuntu: apt install g++) and run "
        "again; the TensorFlow while-loops run meanwhile (same results)"
    ]
    assert _kernel(tmp_path / "t.npz") == "while_loop"

    failing = installed.env(tmp_path, FAKE_CXX_FAIL="1")
    _, err = _ended(installed.cli(tmp_path, failing, "failed.npz"))
    said = _said(err)
    assert len(said) == 2 and said[0].startswith("lstmviz: building the native kernels"), err
    assert "are not built (their build failed: " in said[1], err
    assert "error: fake compiler failure" in said[1] and _kernel(tmp_path / "failed.npz") == (
        "while_loop")  # fmt: skip
    tried = len(_calls(tmp_path))
    assert tried >= 1
    _, err = _ended(installed.cli(tmp_path, failing, "later.npz"))
    (line,) = _said(err)
    assert "their build failed: " in line and "python -m lstmviz.engine.native -v" in line
    assert len(_calls(tmp_path)) == tried  # not tried again
    cache = tmp_path / "cache" / "lstmviz"
    assert [p.suffix for p in cache.iterdir()] == [".failed"]  # no library, no half-built one


def test_the_worker_hands_a_notice_on_to_the_window(qtbot):
    """The computing process's `Notice` (a first run building the kernels) becomes the
    worker's `notice` signal, which the window shows in its status line."""
    from lstmviz.engine.process import messages
    from lstmviz.gui.threads.worker import Worker

    worker = Worker()
    with qtbot.waitSignal(worker.notice, timeout=1000) as got:
        worker._handle(messages.Notice("native kernels built in 61 s, cached in /x"))
    assert got.args == ["native kernels built in 61 s, cached in /x"]


def test_the_window_shows_a_notice_in_its_status_line(qtbot, idle):
    window = idle  # nothing here runs: no computing process
    window.worker.notice.emit("native kernels built in 61 s, cached in /x")
    qtbot.waitUntil(lambda: window.message.text() == "native kernels built in 61 s, cached in /x",
                    timeout=2000)  # fmt: skip
