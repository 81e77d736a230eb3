"""`lstmviz run`'s progress on stderr: a line redrawn in place on a terminal; plain lines, a
few per run, in a log (a file, a pipe, CI, a notebook cell), and no blank line before the
messages that follow it."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from lstmviz.core import progress as progress_module
from lstmviz.core.progress import FIRST, INTERVAL, TENTHS, Progress
from lstmviz.io.trace import TraceUpdate
from tests.helpers.clock import Clock
from tests.helpers.processes.cli_process import ROOT, cli_env

LINE = re.compile(r"\[(\w+)\] (\d+)/(\d+) (.*) · (\d+\.\d) s")  # one progress line in a log


def _log(clock: Clock) -> tuple[Progress, io.StringIO]:
    stream = io.StringIO()
    return Progress("train", stream, terminal=False, clock=clock), stream


# --- the rule, on a clock the test moves -----------------------------------------------------


def test_a_long_run_in_a_log_is_a_few_plain_lines_first_tenths_and_last():
    """10 000 updates over 20 s: the first FIRST, one per tenth of the units and the last,
    each a plain line; the last one's time is its own."""
    clock = Clock()
    progress, stream = _log(clock)
    total = 10_000
    for done in range(total + 1):
        progress.update(done, total, f"loss {done}")
        clock.now += 0.002
    progress.end()
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text and text.endswith(" s\n"), text
    lines = text.splitlines()
    assert all(LINE.fullmatch(line) for line in lines), lines
    done = [int(LINE.fullmatch(line)[2]) for line in lines]
    assert done == [0, 1, 2, *range(1000, total + 1, 1000)], done  # tenths 2 s apart
    assert lines[-1] == f"[train] {total}/{total} loss {total} · 20.0 s"


def test_a_slow_run_in_a_log_gets_a_line_every_interval_and_its_last_update_at_the_end():
    """Updates 0.5 s apart for 60 s within one tenth of the units: a line every INTERVAL
    seconds; the last update, skipped when it came, is written by `end` (once), with the time
    it came at."""
    clock = Clock()
    progress, stream = _log(clock)
    for done in range(121):
        progress.update(done, 100_000, "")
        clock.now += 0.5
    written = stream.getvalue().splitlines()
    assert len(written) == FIRST + int(60 / INTERVAL) - 1, written  # the 60 s line is pending
    times = [float(LINE.fullmatch(line)[5]) for line in written]
    assert times[:FIRST] == [0.0, 0.5, 1.0]
    assert times[FIRST:] == [1.0 + INTERVAL * k for k in range(1, len(times) - FIRST + 1)], times
    clock.now += 30
    progress.end()
    progress.end()
    last = stream.getvalue().splitlines()[len(written):]
    assert last == ["[train] 120/100000  · 60.0 s"], last


def test_the_line_limit_holds_for_any_run_length():
    clock = Clock()
    progress, stream = _log(clock)
    seconds, total = 600, 3_000_000
    for done in range(0, total + 1, 100):  # every 0.02 s
        progress.update(done, total, "")
        clock.now += seconds * 100 / total
    progress.end()
    lines = stream.getvalue().splitlines()
    assert len(lines) <= FIRST + TENTHS + seconds / INTERVAL + 1, len(lines)
    assert lines[-1].startswith(f"[train] {total}/{total} ")


def test_on_a_terminal_every_update_redraws_the_one_line():
    clock = Clock()
    stream = io.StringIO()
    progress = Progress("taped", stream, terminal=True, clock=clock)
    progress.end()  # nothing drawn: nothing to end
    assert stream.getvalue() == ""
    progress.update(0, 1, "taped, T=6")
    clock.now += 1.25
    progress.update(1, 1, "done")
    progress.end()
    progress.end()
    assert stream.getvalue() == ("\r[taped] 0/1 taped, T=6 · 0.0 s\x1b[K"
                                 "\r[taped] 1/1 done · 1.2 s\x1b[K\n")  # fmt: skip
    progress.end(ctrl_c=True)  # past the ^C the terminal echoed
    assert stream.getvalue().endswith("\x1b[K\n\n")


def test_the_stream_decides_unless_told():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert Progress("taped", Terminal()).terminal and not Progress("taped", io.StringIO()).terminal
    closed = io.StringIO()
    closed.close()
    assert not progress_module.is_terminal(closed)


# --- the CLI, with a generator that stands in for the engine --------------------------------


def _engine(monkeypatch, units: int, then: str):
    """`lstmviz run` runs a generator of `units` multipass updates, then: "interrupt" (Ctrl-C
    to this process, waiting for the cancel) or "fail" (a LstmvizError)."""
    from lstmviz.core.errors import LstmvizError
    from lstmviz.engine import runner

    def fake(config, cancelled, keep):
        for done in range(1, units + 1):
            yield TraceUpdate(done, units + 1, f"pass {done}/{units}")
        if then == "fail":
            raise LstmvizError("x.npy: broken")
        time.sleep(0.5)  # the CLI has shown every update
        os.kill(os.getpid(), signal.SIGINT)
        end = time.monotonic() + 10
        while not cancelled() and time.monotonic() < end:
            time.sleep(0.01)

    monkeypatch.setattr(runner, "run", fake)


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "progress"])
def test_ctrl_c_messages_in_a_log_start_their_own_lines_without_a_blank_one(
    tmp_path, monkeypatch, capsys, quiet
):
    from lstmviz.cli import main

    _engine(monkeypatch, 50, "interrupt")
    argv = ["run", "--mode", "multipass", "--out", str(tmp_path / "t.npz")] + ["--quiet"] * quiet
    assert main(argv) == 130
    err = capsys.readouterr().err
    stop = ("lstmviz: stopping (nothing will be written); press Ctrl-C again to quit at once\n"
            "lstmviz: interrupted; nothing written\n")  # fmt: skip
    if quiet:
        assert err == stop, err
    else:
        lines = err.splitlines()
        assert "\r" not in err and "\x1b" not in err and err.endswith(stop), err
        assert lines[-3] == "[multipass] 50/51 pass 50/50 · " + lines[-3].split(" · ")[-1]
        assert all(LINE.fullmatch(line) for line in lines[:-2]) and len(lines) < 20, lines


def test_an_error_in_a_log_follows_the_last_update_without_a_blank_line(
    tmp_path, monkeypatch, capsys
):
    from lstmviz.cli import main

    _engine(monkeypatch, 50, "fail")
    assert main(["run", "--mode", "multipass", "--out", str(tmp_path / "t.npz")]) == 2
    lines = capsys.readouterr().err.split("\n")
    assert lines[-2:] == ["lstmviz: error: x.npy: broken", ""], lines
    assert lines[-3].startswith("[multipass] 50/51 pass 50/50 · "), lines
    assert all(LINE.fullmatch(line) for line in lines[:-2]), lines


def test_ctrl_c_before_the_run_starts_is_one_line_in_a_log(monkeypatch, capsys):
    from lstmviz import cli
    from lstmviz.cli import run as cli_run

    def interrupted(args, report):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_run, "run_command", interrupted)
    assert cli.main(["run", "--out", "t.npz"]) == 130
    assert capsys.readouterr().err == "lstmviz: interrupted; nothing written\n"


# --- the real thing, in a subprocess: stderr a pipe, then a terminal ------------------------

SMALL_MULTIPASS = ["--mode", "multipass", "--passes", "300", "--steps", "2", "--batch", "1",
                   "--input-dim", "1", "--hidden", "2"]  # fmt: skip


def test_a_run_into_a_pipe_writes_a_few_plain_lines(tmp_path):
    # Bytes: text mode would turn a \r into \n.
    done = subprocess.run([sys.executable, "-m", "lstmviz", "run", *SMALL_MULTIPASS, "--out",
                           str(tmp_path / "t.npz")], capture_output=True, env=cli_env(),
                          timeout=300)  # fmt: skip
    err = done.stderr.decode()
    assert done.returncode == 0, err[-3000:]
    assert "\r" not in err and "\x1b" not in err, repr(err[:500])
    lines = [line for line in err.splitlines() if line.startswith("[multipass]")]
    assert err.endswith("\n") and "" not in err.splitlines(), repr(err)
    assert all(LINE.fullmatch(line) for line in lines), lines
    assert lines[0].startswith("[multipass] 1/301 pass 1/300 · "), lines
    assert lines[-1].startswith("[multipass] 301/301 full backward · "), lines
    assert FIRST + 2 <= len(lines) <= FIRST + TENTHS + 1 + 60 / INTERVAL, lines  # 300 updates
    assert done.stdout.startswith(b"wrote ")


def test_a_run_on_a_terminal_redraws_its_line_as_before(tmp_path):
    """stderr a pseudo-terminal: each update `\\r…\\x1b[K` on the one line, then a newline
    (the terminal's `\\r\\n`)."""
    leader, follower = os.openpty()
    args = ["--mode", "taped", "--steps", "3", "--batch", "1", "--input-dim", "1", "--hidden",
            "2", "--out", str(tmp_path / "t.npz")]  # fmt: skip
    with subprocess.Popen([sys.executable, "-m", "lstmviz", "run", *args], stderr=follower,
                          stdout=subprocess.PIPE, env=cli_env(), cwd=ROOT) as proc:  # fmt: skip
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=300) == 0
    os.close(leader)
    err = b"".join(chunks).decode()
    drawn = re.search(r"\r\[taped\] 0/1 taped[^\r\n]* · \d+\.\d s\x1b\[K"
                      r"\r\[taped\] 1/1 done · \d+\.\d s\x1b\[K\r\n", err)  # fmt: skip
    assert drawn, repr(err)
