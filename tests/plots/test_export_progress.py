"""Export's `progress` callback: every format reports its steps in order up to the end, and a
False from it cancels with nothing written, no temporary file left either."""

import numpy as np
import pytest

from lstmviz.io.trace import GradientTrace
from lstmviz.plots.export.writer import ExportCancelled, export
from tests.helpers.trace_fixtures import long_trace
from tests.helpers.trace_fixtures import traces as traces  # the fixture: a trace of each mode

FORMATS = ("png", "svg", "pdf", "csv", "npz")


def outputs(folder) -> dict:
    return {fmt: folder / f"fig.{fmt}" for fmt in FORMATS}


def test_progress_rises_through_every_format_to_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr("lstmviz.plots.export.csv.CSV_BLOCK", 100)  # 300 rows: three blocks
    seen = []
    export(long_trace(), **outputs(tmp_path), width=640, height=400, dpi=96,
           progress=lambda done, what: seen.append((done, what)))  # None: go on  # fmt: skip
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[0] == 0 and done[-1] == 1
    whats = list(dict.fromkeys(w for _, w in seen))
    assert whats[:5] == ["Writing the CSV", "Drawing the panels", "Rendering the PNG",
                         "Rendering the SVG", "Rendering the PDF"]  # fmt: skip
    assert "Saving the trace" in whats
    assert sum(w == "Writing the CSV" for _, w in seen) == 1 + 3  # its start, each block
    assert sum(w == "Rendering the SVG" for _, w in seen) >= 1 + 2  # its start, each plot
    written = [f"fig.{f}" for f in FORMATS] + ["fig_diagnosis.csv"]  # the CSV's diagnosis beside
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(written)


@pytest.mark.parametrize("stop_at", ["Writing the CSV", "Rendering the SVG", "Rendering the PDF",
                                     "Writing the files"])  # fmt: skip
def test_a_cancel_at_any_step_writes_nothing(tmp_path, stop_at):
    old = tmp_path / "fig.png"
    old.write_bytes(b"keep me")  # a file the export would replace stays as it was

    def progress(done, what):
        return what != stop_at

    with pytest.raises(ExportCancelled, match="cancelled"):
        export(long_trace(), **outputs(tmp_path), width=640, height=400, dpi=96,
               progress=progress)  # fmt: skip
    assert [p.name for p in tmp_path.iterdir()] == ["fig.png"]  # no temporary file either
    assert old.read_bytes() == b"keep me"


def test_csv_of_a_long_trace_matches_the_arrays_to_float32(tmp_path):
    trace = long_trace(steps=2_500, rows=3)
    trace.arrays["norm_h_total"][[5, 6, 7]] = [np.nan, np.inf, -np.inf]
    export(trace, csv=tmp_path / "t.csv")
    lines = (tmp_path / "t.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert len(lines) == 1 + 2_500
    table = np.array([[float(v) for v in line.split(",")] for line in lines[1:]])
    np.testing.assert_array_equal(table[:, 0], np.arange(2_500))
    for name in ("norm_h_total", "norm_c_total", "step0_norm_h_total"):
        if name in trace.arrays:  # float32 round-trips through 9 significant digits
            got = table[:, header.index(name)].astype(np.float32)
            np.testing.assert_array_equal(got, trace.arrays[name])
    by_step = trace.arrays["norm_h_total_by_step"]
    for s in range(3):
        got = table[:, header.index(f"norm_h_total_step{s + 1}")].astype(np.float32)
        np.testing.assert_array_equal(got, by_step[s])
    assert lines[1 + 5].split(",")[1:2] == ["nan"] and lines[1 + 7].split(",")[1] == "-inf"
    assert lines[1].split(",")[0] == "0"  # the timestep as an integer


@pytest.mark.parametrize("file", ["multipass", "long"])
def test_svg_paths_mapped_in_bulk_are_pyqtgraphs_own_to_the_byte(traces, tmp_path, monkeypatch,
                                                                 file):  # fmt: skip
    import lstmviz.plots.export.svg as svg

    shown = traces["multipass"] if file == "multipass" else long_trace(steps=3_000, rows=30)
    arrays = {key: np.array(value) for key, value in shown.arrays.items()}
    arrays["norm_h_total"][[4, 9]] = [np.nan, np.inf]  # gaps in the curves
    trace = GradientTrace(shown.mode, shown.config, arrays)
    export(trace, svg=tmp_path / "bulk.svg", width=900, height=600, dpi=120)
    monkeypatch.setattr(svg, "_map_paths", lambda node, options, transform: [])
    export(trace, svg=tmp_path / "one_by_one.svg", width=900, height=600, dpi=120)
    bulk = (tmp_path / "bulk.svg").read_bytes()
    assert bulk.count(b"<path") > 10
    assert bulk == (tmp_path / "one_by_one.svg").read_bytes()
