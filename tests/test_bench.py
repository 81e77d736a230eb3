"""The benchmark script runs end to end on a tiny shape (a smoke test: no timing is asserted)."""

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench.py"


def test_bench_runs_every_mode_on_a_tiny_shape(capsys):
    spec = importlib.util.spec_from_file_location("lstmviz_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--shapes", "8x2x4", "--input-dim", "3", "--repeats", "1", "--no-extras"])
    rows = capsys.readouterr().out.splitlines()
    modes = {line.split()[3] for line in rows if line.split()[:3] == ["8", "2", "4"]}
    assert modes == {"keras", "taped", "multipass", "batchwise", "connectivity"}
