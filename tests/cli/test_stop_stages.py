"""Ctrl-C at the stages of `lstmviz run` not covered elsewhere: while the command starts (its
imports), and a run of one unit (taped, model) under --keep-partial, which has nothing
finished to keep before its unit ends.

Each is a real process sent SIGINT; the files left in its folder are listed afterwards.
"""

import subprocess
import sys
import time

import pytest

from tests.helpers.processes.cli_process import ROOT, CliRun, cli_env, files_in

# A SIGINT delivered while `lstmviz.cli` imports its modules (as a Ctrl-C pressed right after
# Enter lands): the finder raises it when the import reaches lstmviz.cli.export.
STARTING = f"""
import signal, sys
sys.path.insert(0, {str(ROOT)!r})

class Interrupt:
    def find_spec(self, name, path=None, target=None):
        if name == "lstmviz.cli.export":
            signal.raise_signal(signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
from lstmviz.cli import main
sys.exit(main())
"""


def test_ctrl_c_while_the_command_starts_exits_130_without_a_traceback(tmp_path):
    done = subprocess.run([sys.executable, "-c", STARTING, "run", "--out", "t.npz"],
                          capture_output=True, text=True, env=cli_env(), cwd=tmp_path,
                          timeout=120)  # fmt: skip
    assert done.returncode == 130, done.stderr
    assert done.stderr == "lstmviz: interrupted; nothing written\n"
    assert files_in(tmp_path) == set()


@pytest.mark.slow
@pytest.mark.serial  # times the exit after Ctrl-C: alone under xdist
def test_ctrl_c_in_a_one_unit_run_with_keep_partial_stops_it_and_keeps_nothing(
    tmp_path, monkeypatch
):
    """The while-loop LSTM (no native kernels) cannot be interrupted: a taped run of T=20000
    takes several seconds (about 5 s on 2 cores). Its one unit is not finished, so
    --keep-partial has nothing to keep, and the run is left within the grace second as
    without it, rather than awaited and saved."""
    args = ["--mode", "taped", "--steps", "20000", "--batch", "8", "--hidden", "128",
            "--keep-partial", "--out", "t.npz"]  # fmt: skip
    monkeypatch.setenv("LSTMVIZ_NATIVE", "0")
    run = CliRun(args, tmp_path)
    run.wait_for("[taped] 0/1 taped while-loop")
    time.sleep(1.0)  # inside the compiled call
    code, elapsed = run.interrupt()
    text = run.text()
    assert code == 130, text
    assert elapsed < 6, (elapsed, text)  # the grace second, then out
    assert ("lstmviz: stopping (nothing to keep: the run has not finished); press Ctrl-C "
            "again to quit at once\nlstmviz: interrupted; nothing written\n") in text  # fmt: skip
    assert "Traceback" not in text and files_in(tmp_path) == set()
