"""`lstmviz export`'s progress on stderr (only once an export has taken a second; `--quiet`
none) and its Ctrl-C: exit 130 with nothing written, no temporary file left either."""

from __future__ import annotations

import io
import re
import signal
import subprocess
import sys
import time

import pytest

from lstmviz.core.progress import Progress
from tests.helpers.clock import Clock
from tests.helpers.processes.cli_process import ROOT, cli_env
from tests.helpers.trace_fixtures import long_trace

LINE = re.compile(r"\[export\] (\d+)% (.*) · (\d+\.\d) s")  # one progress line in a log


# --- the rule, on a clock the test moves -----------------------------------------------------


@pytest.mark.parametrize("terminal", [False, True], ids=["log", "terminal"])
def test_updates_before_the_delay_show_nothing_and_a_quick_end_writes_nothing(terminal):
    clock, stream = Clock(), io.StringIO()
    progress = Progress("export", stream, terminal=terminal, clock=clock, after=1.0,
                        percent=True)  # fmt: skip
    for done in range(0, 1000, 100):  # 0.9 s in all
        progress.update(done, 1000, "Writing the CSV")
        clock.now += 0.1
    progress.end()
    assert stream.getvalue() == ""


def test_after_the_delay_a_log_gets_percent_lines_timed_from_the_start():
    clock, stream = Clock(), io.StringIO()
    progress = Progress("export", stream, terminal=False, clock=clock, after=1.0, percent=True)
    for done in range(0, 1001, 50):  # 0.25 s apart: the first line at 1.0 s, 20%
        progress.update(done, 1000, "Rendering the PNG")
        clock.now += 0.25
    progress.end()
    lines = stream.getvalue().splitlines()
    assert all(LINE.fullmatch(line) for line in lines), lines
    assert lines[0] == "[export] 20% Rendering the PNG · 1.0 s"
    assert lines[-1] == "[export] 100% Rendering the PNG · 5.0 s"
    assert len(lines) <= 3 + 10 + 1, lines  # the first three, the tenths, the last


def test_percent_on_a_terminal_redraws_one_line():
    clock, stream = Clock(), io.StringIO()
    progress = Progress("export", stream, terminal=True, clock=clock, after=1.0, percent=True)
    progress.update(0, 1000, "Writing the CSV")
    clock.now += 1.5
    progress.update(455, 1000, "Rendering the SVG")
    progress.end()
    assert stream.getvalue() == "\r[export] 45% Rendering the SVG · 1.5 s\x1b[K\n"


# --- the CLI in this process, on real files --------------------------------------------------


@pytest.fixture()
def small(tmp_path):
    path = tmp_path / "t.npz"
    long_trace(steps=40, rows=3).save(path)
    return path


def _names(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_quick_export_stays_silent(small, capsys):
    from lstmviz.cli import main

    assert main(["export", str(small), "--csv", str(small.with_suffix(".csv"))]) == 0
    out, err = capsys.readouterr()
    beside = small.with_name("t_diagnosis.csv")
    assert err == "" and out == f"wrote {small.with_suffix('.csv')}, {beside}\n"


@pytest.mark.parametrize("quiet", [False, True], ids=["progress", "quiet"])
def test_a_slow_export_shows_its_progress_unless_quiet(small, capsys, monkeypatch, quiet):
    """A delay of 0 s stands for an export that has taken longer than it."""
    from lstmviz.cli import export as cli_export
    from lstmviz.cli import main

    monkeypatch.setattr(cli_export, "SILENT_SECONDS", 0.0)
    outputs = ["--png", str(small.with_suffix(".png")), "--csv", str(small.with_suffix(".csv"))]
    assert main(["export", str(small), *outputs, "--width", "640", "--height", "400", "--dpi", "96"]
                + ["--quiet"] * quiet) == 0  # fmt: skip
    out, err = capsys.readouterr()
    assert _names(small.parent) == ["t.csv", "t.npz", "t.png", "t_diagnosis.csv"]
    if quiet:
        assert (out, err) == ("", "")
        return
    lines = err.splitlines()
    assert lines and all(LINE.fullmatch(line) for line in lines), err
    percents = [int(LINE.fullmatch(line)[1]) for line in lines]
    assert percents == sorted(percents) and percents[0] == 0 and percents[-1] == 100, lines
    whats = {LINE.fullmatch(line)[2] for line in lines}
    assert {"Writing the CSV", "Rendering the PNG"} <= whats, whats
    assert out.startswith("wrote ")


def test_ctrl_c_inside_a_plots_paint_writes_nothing(small, capsys, monkeypatch):
    """pyqtgraph prints and ignores an exception raised while a curve paints: Ctrl-C then must
    not be a KeyboardInterrupt there, or the export goes on and writes every file."""
    import pyqtgraph as pg

    from lstmviz.cli import main

    original = pg.PlotCurveItem._shouldUseDrawLineSegments
    sent = []

    def interrupting(self, pen):
        if not sent:
            sent.append(True)
            signal.raise_signal(signal.SIGINT)
        return original(self, pen)

    monkeypatch.setattr(pg.PlotCurveItem, "_shouldUseDrawLineSegments", interrupting)
    png = small.with_suffix(".png")
    assert main(["export", str(small), "--png", str(png), "--width", "640", "--height",
                 "400", "--dpi", "96"]) == 130  # fmt: skip
    assert sent
    out, err = capsys.readouterr()
    assert out == "" and err.endswith("lstmviz: interrupted; nothing written\n"), err
    assert "stopping (nothing will be written)" in err
    assert _names(small.parent) == ["t.npz"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


# --- the real thing: a long export in a subprocess, a real SIGINT ----------------------------


def test_sigint_to_a_long_export_after_its_progress_shows_exits_130_with_nothing_written(
    tmp_path,
):
    trace = tmp_path / "long.npz"
    long_trace(steps=20_000, rows=300).save(trace)
    outputs = [f"--{fmt}={tmp_path / f'out.{fmt}'}" for fmt in ("csv", "png", "svg", "pdf")]
    proc = subprocess.Popen([sys.executable, "-m", "lstmviz", "export", str(trace), *outputs],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=cli_env(),
                            cwd=ROOT)  # fmt: skip
    started = time.monotonic()
    first = proc.stderr.readline().decode()  # blocks until the export has taken a second
    shown = time.monotonic() - started
    proc.send_signal(signal.SIGINT)
    out, rest = proc.communicate(timeout=120)
    err = first + rest.decode()
    assert LINE.fullmatch(first.rstrip("\n")), err
    assert float(LINE.fullmatch(first.rstrip("\n"))[3]) >= 1.0 and shown >= 1.0
    assert proc.returncode == 130, err
    assert err.endswith("lstmviz: interrupted; nothing written\n"), err
    assert "Traceback" not in err and out == b""
    assert _names(tmp_path) == ["long.npz"]  # no output, no temporary file
