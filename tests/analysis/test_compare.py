"""Comparing two runs (lstmviz.compare, `lstmviz compare`) and `lstmviz diagnose`: a trace
compared with itself has log-ratio 0 everywhere, with a copy whose gradients are scaled by k
log10 k everywhere; different lengths align at the last step; directions match by name; a
trace and a recording cannot be compared (exit 2, nothing written)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import lstmviz
from lstmviz.analysis.compare import compare
from lstmviz.cli import main
from lstmviz.core.errors import InputError
from tests.helpers.recordings import model_trace, write
from tests.helpers.trace_fixtures import decaying_trace, scaled_copy

T, B, H = 12, 2, 3


def test_a_trace_against_itself_and_a_scaled_copy():
    trace = decaying_trace()
    same = compare(trace, trace)
    (layer,) = same.layers
    np.testing.assert_array_equal(layer.log10_ratio_h, 0.0)
    np.testing.assert_array_equal(layer.log10_ratio_c, 0.0)
    k = 7.5
    scaled = compare(trace, scaled_copy(trace, k)).layers[0]
    np.testing.assert_allclose(scaled.log10_ratio_h, np.log10(k), rtol=1e-6)
    np.testing.assert_allclose(scaled.log10_ratio_c, np.log10(k), rtol=1e-6)
    # scaling moves no decay: both diagnoses agree
    assert scaled.a.h.decay_per_step == pytest.approx(scaled.b.h.decay_per_step, rel=1e-5)
    assert scaled.a.h.reach == scaled.b.h.reach
    out = json.loads(json.dumps(compare(trace, scaled_copy(trace, k)).to_dict()))
    assert set(out) == {"layers", "only_in_a", "only_in_b", "config_diff"}
    assert set(out["layers"][0]) == {"name", "log10_ratio_h", "log10_ratio_c", "a", "b"}
    assert out["layers"][0]["log10_ratio_h"] == pytest.approx([np.log10(k)] * T, rel=1e-6)


def test_zero_norms_give_null_and_lengths_align_at_the_last_step():
    short, long = decaying_trace(T), decaying_trace(T + 5, seed=1)
    long.arrays["norm_h_total"][-2] = 0.0
    long.config.seed = 3
    c = compare(short, long)
    assert c.T == T and "aligned at the last step" in c.notes[0]
    np.testing.assert_array_equal(c.layers[0].b_h, long.norm_h_total[-T:])
    assert c.to_dict()["layers"][0]["log10_ratio_h"][-2] is None
    assert c.config_diff == {"steps": (T, T + 5), "seed": (0, 3)}
    assert c.to_dict()["config_diff"] == {"steps": [T, T + 5], "seed": [0, 3]}


def test_directions_match_by_name_and_the_others_are_listed():
    a, b = model_trace(1), model_trace(2)
    b.arrays["layer_names"] = np.array(["bi/forward", "other"])
    c = compare(a, b)
    assert [layer.name for layer in c.layers] == ["bi/forward"]
    assert (c.only_in_a, c.only_in_b) == (["bi/backward"], ["other"])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    decaying_trace().save(folder / "a.npz")
    scaled_copy(decaying_trace(), 10.0).save(folder / "b.npz")
    write(folder / "r1.lvz", [1, 2, 3])
    write(folder / "r2.lvz", [4, 5])
    return folder


def test_recordings_compare_their_last_records_and_their_reach_over_steps(files):
    c = lstmviz.compare(files / "r1.lvz", files / "r2.lvz")
    assert [layer.name for layer in c.layers] == ["bi/forward", "bi/backward"]
    assert list(c.records_a["step"]) == [5, 10, 15] and list(c.records_b["step"]) == [5, 10]
    assert set(c.to_dict()["records"]["a"]["reach"]) == {"bi/forward", "bi/backward"}
    with pytest.raises(InputError, match="cannot compare a trace with a recording"):
        lstmviz.compare(files / "a.npz", files / "r1.lvz")
    rec = lstmviz.load_recording(files / "r1.lvz").diagnosis.to_dict()
    assert rec["T"] == 6 and [r["step"] for r in rec["records"]] == [5, 10, 15]


def test_cli_compare_prints_json_and_writes_csv_and_png(files, capsys):
    assert main(["compare", str(files / "a.npz"), str(files / "b.npz"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["layers"][0]["log10_ratio_h"] == pytest.approx([1.0] * T, rel=1e-6)
    csv = files / "c.csv"
    assert main(["compare", str(files / "a.npz"), str(files / "b.npz"), "--out", str(csv)]) == 0
    assert capsys.readouterr().out.endswith(f"wrote {csv}\n")
    header, *rows = csv.read_text().splitlines()
    assert header == "t,lstm_a_h,lstm_b_h,lstm_log10_ratio_h,lstm_a_c,lstm_b_c,lstm_log10_ratio_c"
    assert len(rows) == T and float(rows[0].split(",")[3]) == pytest.approx(1.0, rel=1e-6)
    png = files / "c.png"
    assert main(["compare", str(files / "a.npz"), str(files / "b.npz"), "--out", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("argv, message", [
    (["compare", "{a}", "{r}"], "cannot compare a trace with a recording"),
    (["compare", "{a}", "{a}", "--out", "{f}/x.jpg"], "--out: "),
    (["compare", "{a}", "{f}/missing.npz", "--out", "{f}/x.png"], "missing.npz"),
    (["diagnose", "{f}/missing.lvz"], "missing.lvz: no such"),
    (["diagnose", "{a}", "--inputs", ""], "--inputs: empty file name"),
    (["diagnose", "{a}", "--loss", "mse"], "--loss: "),
    (["compare", "{r}", "{r}", "--inputs", "{a}"], "--inputs: "),
])  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_nothing_written(files, capsys, argv, message):
    before = sorted(p.name for p in files.iterdir())
    names = {"a": files / "a.npz", "r": files / "r1.lvz", "f": files}
    assert main([arg.format(**names) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("lstmviz: error: ") and message in err
    assert sorted(p.name for p in files.iterdir()) == before


def test_cli_diagnose_table_and_json(files, capsys):
    assert main(["diagnose", str(files / "a.npz")]) == 0
    table = capsys.readouterr().out
    assert "vanishing: falls 10× every 6.46 steps" in table  # ln 10 / |ln 0.7|
    assert main(["diagnose", str(files / "r1.lvz"), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["records"]) == 3


def test_two_models_on_one_data_file(files, capsys):
    """The demo model against itself on the same samples: every log-ratio is 0; `diagnose`
    runs a model the same way."""
    from pathlib import Path

    model = Path(__file__).resolve().parents[2] / "resources" / "demo_lstm.keras"
    rng = np.random.default_rng(0)
    data = files / "data.npz"
    np.savez(data, x=rng.standard_normal((4, 20, 2)).astype(np.float32),
             y=rng.standard_normal((4, 1)).astype(np.float32))  # fmt: skip
    argv = [str(model), str(model), "--inputs", str(data), "--loss", "mse", "--json"]
    assert main(["compare", *argv]) == 0
    (layer,) = json.loads(capsys.readouterr().out)["layers"]
    assert layer["name"] == "lstm" and layer["log10_ratio_h"] == [0.0] * 20
    assert main(["diagnose", str(model), "--inputs", str(data), "--loss", "mse", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["layers"][0]["h"] == layer["a"]["h"]


def test_exports_carry_the_diagnosis(files):
    """The CSV export writes F_diagnosis.csv beside F.csv (a recording: a row per record,
    direction and curve); the PDF report's summary has each direction's verdict."""
    import csv

    from lstmviz.plots.export.figure import Figure
    from lstmviz.plots.export.writer import export

    written = export(files / "r1.lvz", csv=files / "rec.csv")
    assert written == [files / "rec.csv", files / "rec_diagnosis.csv"]
    with open(files / "rec_diagnosis.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["record"] for r in rows] == ["5"] * 4 + ["10"] * 4 + ["15"] * 4
    assert {r["of"] for r in rows} == {"h", "c"} and rows[0]["direction"] == "bi/forward"
    with Figure(decaying_trace()) as figure:
        lines = figure.summary_lines()
    assert "diagnosis · lstm: vanishing: falls 10× every 6.46 steps, reaches back 12 of 12 " \
           "steps" in lines  # fmt: skip


@pytest.mark.parametrize("names, message", [
    (["{a}", "{r}"], "two traces or two recordings"),
    (["{a}"], "give two files"),
    (["{a}", "{f}/x.keras"], "x.keras: no such file"),
])  # fmt: skip
def test_gui_compare_refuses_what_it_cannot_compare(files, capsys, names, message):
    paths = {"a": files / "a.npz", "r": files / "r1.lvz", "f": files}
    assert main(["gui", *[n.format(**paths) for n in names], "--compare"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
