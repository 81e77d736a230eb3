"""The `.lvz` recording format (lstmviz.io.recording), without TensorFlow: records written from
model-mode traces read back as written, also by another process while a writer appends
(SWMR), never half a record; damaged files give one line naming the file; a disk that fills
up ends the recording in one line, its complete records kept, the process unharmed; the CSV
export."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from lstmviz.cli import main
from lstmviz.io import files
from lstmviz.io.recording import RecordingError, RecordingWriter, load_recording, record_rows
from lstmviz.plots.export.writer import export
from tests.helpers.recordings import NAMES, L, model_trace, same_trace, write

ROOT = Path(__file__).resolve().parents[2]


def test_records_read_back_as_written(tmp_path):
    path = tmp_path / "run.lvz"
    seeds = [11, 12, 13]
    write(path, seeds)
    rec = load_recording(path)
    traces = [model_trace(s, nonfinite=n % 3) for n, s in enumerate(seeds, 1)]
    assert len(rec) == 3 and rec.finished and int(rec["every"]) == 5
    np.testing.assert_array_equal(rec.step, [5, 10, 15])
    np.testing.assert_array_equal(rec.epoch, [0, 1, 1])
    np.testing.assert_allclose(rec.train_loss, [0.5, 0.25, 0.5 / 3], rtol=1e-6)
    np.testing.assert_array_equal(rec.loss, [t.loss for t in traces])
    for key in ("norm_h_total_by_layer", "norm_h_direct_by_layer", "norm_c_total_by_layer"):
        np.testing.assert_array_equal(rec[key], np.stack([t[key] for t in traces]))
    np.testing.assert_allclose(rec.saliency, np.stack([t.saliency.mean(0) for t in traces]),
                               rtol=1e-6)  # fmt: skip
    assert list(rec.layer_names) == NAMES and "Embedding" in str(rec.model_summary)
    same_trace(rec.last, traces[-1])  # the last record's full trace, text keys included
    assert load_recording(path, trace=False).last is None
    assert repr(rec) == (f"Recording({str(path)!r}, 3 records, steps 5–15, directions "
                         f"{NAMES}, finished=True)")  # a line in a notebook, not the rows


def test_a_later_fit_appends_to_the_same_file(tmp_path):
    path = tmp_path / "run.lvz"
    writer = write(path, [1, 2])
    assert load_recording(path).finished
    trace = model_trace(3)
    writer.append(record_rows(trace, 99, 7), trace)
    rec = load_recording(path)
    assert not rec.finished  # open again, for the second fit
    np.testing.assert_array_equal(rec.step, [5, 10, 99])
    same_trace(rec.last, trace)
    writer.close()
    assert load_recording(path).finished


def test_the_file_appears_whole_with_its_first_record(tmp_path):
    path = tmp_path / "run.lvz"
    path.write_bytes(b"an older recording")
    writer = write(path, [4], close=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.lvz"]  # renamed into place
    rec = load_recording(path)
    assert len(rec) == 1 and not rec.finished
    writer.close()


WRITER = """
import sys, time
sys.path.insert(0, {root!r})
from tests.helpers.recordings import model_trace
from lstmviz.io.recording import RecordingWriter, record_rows
writer = RecordingWriter({path!r}, 1)
for n in range(1, {count} + 1):
    trace = model_trace(n)
    writer.append(record_rows(trace, n, 0), trace)
    if n == 1:
        print("first", flush=True)
    time.sleep({pause})
writer.close()
"""


@pytest.mark.slow
def test_a_reader_never_sees_half_a_record_while_another_process_writes(tmp_path):
    """A writer process appends 400 records, one every millisecond (far faster than any
    `model.fit` records); this process reads all the while. Every read holds complete
    records: its rows are those of records 1…n, and its full trace is record n's (so the slot
    was not being overwritten under it)."""
    path = tmp_path / "live.lvz"
    code = WRITER.format(root=str(ROOT), tests=str(ROOT / "tests" / "io"), path=str(path),
                         count=400, pause=0.001)
    writer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert writer.stdout.readline().strip() == "first"
    reads, counts = 0, set()
    while True:
        done = writer.poll() is not None
        rec = load_recording(path)
        n = len(rec)
        counts.add(n)
        np.testing.assert_array_equal(rec.step, np.arange(1, n + 1))
        expected = model_trace(n)
        np.testing.assert_array_equal(rec.norm_h_total_by_layer[-1],
                                      expected.norm_h_total_by_layer)  # fmt: skip
        for key in ("layer1_grad_h_total", "grad_input", "loss", "norm_c_total_by_layer"):
            np.testing.assert_array_equal(rec.last[key], expected[key], err_msg=f"{key} at {n}")
        reads += 1
        if done:
            break
    assert writer.wait() == 0
    assert n == 400 and rec.finished
    assert reads > 5 and len(counts) > 3, (reads, sorted(counts))  # it did read while growing


def one_line_error(path, match: str) -> None:
    with pytest.raises(RecordingError) as info:
        load_recording(path)
    text = str(info.value)
    assert "\n" not in text and text.startswith(str(path)) and match in text, text


def test_truncated_or_foreign_files_are_one_line_errors(tmp_path):
    whole = tmp_path / "whole.lvz"
    write(whole, [1, 2, 3])
    data = whole.read_bytes()
    for name, content, match in [
        ("half.lvz", data[: len(data) // 2], "truncated"),
        ("head.lvz", data[:20], "not a recording"),
        ("text.lvz", b"not hdf5 at all" * 10, "not a recording"),
        ("empty.lvz", b"", "not a recording"),
    ]:
        (tmp_path / name).write_bytes(content)
        one_line_error(tmp_path / name, match)
    one_line_error(tmp_path / "missing.lvz", "no such recording")
    other = tmp_path / "other.lvz"
    with h5py.File(other, "w", libver="latest") as f:
        f["kernel"] = np.zeros((2, 8))
    one_line_error(other, "not an lstmviz recording")


def test_a_killed_writer_leaves_its_records_readable_and_a_cut_copy_is_refused(tmp_path):
    path = tmp_path / "killed.lvz"
    code = WRITER.replace("writer.close()", "import os; os._exit(3)")
    code = code.format(root=str(ROOT), tests=str(ROOT / "tests" / "io"), path=str(path), count=4,
                       pause=0)
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 3
    rec = load_recording(path)
    assert len(rec) == 4 and not rec.finished
    same_trace(rec.last, model_trace(4))
    cut = tmp_path / "cut.lvz"
    cut.write_bytes(path.read_bytes()[: os.path.getsize(path) - 100])
    one_line_error(cut, "truncated")


def test_a_writer_the_process_leaves_open_is_closed_as_finished_at_its_end(tmp_path):
    """A fit interrupted by Ctrl-C never closes its recording: the uncaught KeyboardInterrupt
    ends the process, and the file is finished then, with its complete records."""
    path = tmp_path / "interrupted.lvz"
    code = WRITER.replace("writer.close()", "raise KeyboardInterrupt")
    code = code.format(root=str(ROOT), tests=str(ROOT / "tests" / "io"), path=str(path), count=2,
                       pause=0)  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0 and "KeyboardInterrupt" in done.stderr, done.stderr[-3000:]
    rec = load_recording(path)
    assert len(rec) == 2 and rec.finished
    same_trace(rec.last, model_trace(2))


def test_a_second_writer_of_a_file_takes_it_over_and_the_first_one_stops(tmp_path):
    """Two callbacks given one path: the writer that starts the file anew takes it over; the
    other, still holding the file it replaced, takes no more records (else they would go
    into a file that is no longer there)."""
    path = tmp_path / "run.lvz"
    first = write(path, [1], close=False)
    second = write(path, [7, 8], close=False)
    trace = model_trace(2)
    with pytest.raises(RecordingError, match="another writer in this process took the file over"):
        first.append(record_rows(trace, 10, 0), trace)
    second.close()
    rec = load_recording(path)
    assert len(rec) == 2 and rec.finished
    same_trace(rec.last, model_trace(8, nonfinite=2))


def test_a_recording_through_a_symbolic_link_is_written_to_its_target(tmp_path):
    """The link was replaced by a new recording and the recording it pointed to left as it
    was; now the link stays and the file it points to is the recording, appended to later."""
    (tmp_path / "runs").mkdir()
    real, link = tmp_path / "runs" / "real.lvz", tmp_path / "link.lvz"
    write(real, [9])
    link.symlink_to(real)
    writer = write(link, [1, 2])
    trace = model_trace(3)
    writer.append(record_rows(trace, 15, 1), trace)
    writer.close()
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert list(load_recording(real).step) == [5, 10, 15]
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.lvz"]


def test_a_later_fit_finding_its_file_gone_or_replaced_says_so_and_leaves_it(tmp_path):
    path = tmp_path / "run.lvz"
    writer = write(path, [1, 2])
    path.write_text("my notes")  # the user's own file, where the recording was
    trace = model_trace(3)
    for _ in range(2):
        with pytest.raises(RecordingError, match=f"^{path}: cannot open it to append a record"):
            writer.append(record_rows(trace, 15, 1), trace)
    assert path.read_text() == "my notes"
    path.unlink()
    with pytest.raises(RecordingError, match="no such recording any more .deleted or moved"):
        writer.append(record_rows(trace, 15, 1), trace)
    assert not path.exists()


FULL = """
import gc, json, sys
sys.path.insert(0, {root!r})
from lstmviz.io.recording import RecordingError, RecordingWriter, record_rows
from tests.helpers.recordings import fill_the_disk, model_trace
fill_the_disk({counter!r}, {value})
writer, errors = RecordingWriter({path!r}, 1), []
for action in {actions!r} + "c":  # a: append a record, c: close
    try:
        if action == "a":
            trace = model_trace(writer.records + 1)
            writer.append(record_rows(trace, writer.records + 1, 0), trace)
        else:
            writer.close()
    except RecordingError as exc:
        errors.append(str(exc))
gc.collect()
print(json.dumps(errors), flush=True)
"""
ENOSPC = "No space left on device"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize(("counter", "value", "actions", "kept"), [
    ("writing", 1, "aaaaa", 0), ("writing", 4, "aaaaa", 3), ("finished", 1, "aaaa", 4),
    ("finished", 0, "aacaa", 2),
], ids=["first-record", "fourth-record", "close", "second-fit"])  # fmt: skip
def test_a_full_disk_ends_the_recording_in_one_line_and_the_process_goes_on(
    tmp_path, counter, value, actions, kept
):
    """HDF5's writes fail (ENOSPC) in the middle of a record, as `close` marks the file
    finished, or as a second fit reopens it: one RecordingError saying so and what the file
    keeps, its complete records (never the half one) or nothing when the first record failed;
    later records refused; and the process runs on and ends normally (HDF5 crashed it, or
    hung it, at the next close)."""
    path = tmp_path / "run.lvz"
    code = FULL.format(root=str(ROOT), path=str(path), counter=counter, value=value,
                       actions=actions)  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    errors = json.loads(done.stdout.strip().splitlines()[-1])
    what = f"it keeps its {kept} complete records" if kept else "nothing written"
    refused = f"{path}: takes no more records after a failed write ({ENOSPC})"
    assert errors == [f"{path}: cannot write the recording ({ENOSPC}); {what}",
                      *[refused] * max(0, actions.count("a") - kept - 1)], errors  # fmt: skip
    if not kept:
        assert list(tmp_path.iterdir()) == []  # nor a temporary file
        return
    assert [p.name for p in tmp_path.iterdir()] == ["run.lvz"]
    rec = load_recording(path)
    np.testing.assert_array_equal(rec.step, np.arange(1, kept + 1))
    same_trace(rec.last, model_trace(kept))
    # /dev/full takes no write at all, not even `finished` = 1: only the first fit's close
    # marked the file finished.
    assert rec.finished == ("c" in actions)


H5PY_ENOSPC = (
    "Unable to flush dataset (file write failed: time = Sat Dec  5 04:26:29 2026\n, filename = "
    "'run.lvz', file descriptor = 3, errno = 28, error message = 'No space left on device', "
    "buf = 0x56515ee8cf70, total write size = 19496, bytes this sub-write = 19496, offset = "
    "204800)"
)


@pytest.mark.parametrize("error", [RuntimeError(H5PY_ENOSPC), OSError(errno.ENOSPC, ENOSPC)],
                         ids=["h5py", "OSError"])  # fmt: skip
def test_a_failed_write_names_the_reason_and_keeps_the_records_finished(tmp_path, monkeypatch,
                                                                         error):  # fmt: skip
    """A write that raises what h5py raises on a full disk: the reason in the system's words,
    the records kept and the file marked finished (that write fits in place)."""
    path = tmp_path / "run.lvz"
    writer = write(path, [1, 2], close=False)

    def refuse(*args):
        raise error

    monkeypatch.setattr(RecordingWriter, "_write", refuse)
    trace = model_trace(3)
    with pytest.raises(RecordingError) as info:
        writer.append(record_rows(trace, 15, 1), trace)
    text = f"{path}: cannot write the recording ({ENOSPC}); it keeps its 2 complete records"
    assert str(info.value) == text
    rec = load_recording(path)
    assert len(rec) == 2 and rec.finished
    same_trace(rec.last, model_trace(2, nonfinite=2))
    with pytest.raises(RecordingError, match="takes no more records"):
        writer.append(record_rows(trace, 15, 1), trace)
    writer.close()  # closed already: nothing to do


def test_arrays_that_do_not_belong_together_are_refused(tmp_path):
    path = tmp_path / "run.lvz"
    write(path, [1, 2])
    with h5py.File(path, "r+") as f:  # the last record's text (record 2: slot 1)
        text = json.loads(f["trace_text/1"][()].tobytes())
        text["layer_names"] = ["a", "b", "c"]
        del f["trace_text/1"]
        f["trace_text/1"] = np.frombuffer(json.dumps(text).encode(), np.uint8)
    one_line_error(path, "layer_names")
    write(path, [1, 2])
    with h5py.File(path, "r+") as f:  # as written before each record's text was kept
        del f["trace_text"], f["loss_name"], f["text/layer_names"]
        f["text/layer_names"] = np.array(["a", "b", "c"], dtype=h5py.string_dtype())
    one_line_error(path, "layer_names")
    write(path, [1, 2])
    with h5py.File(path, "r+") as f:
        f.attrs["format_version"] = 99
    one_line_error(path, "newer lstmviz")


def test_the_csv_has_one_row_per_record(tmp_path, capsys):
    path = tmp_path / "run.lvz"
    write(path, [5, 6, 7, 8])
    assert main(["export", str(path), "--csv", str(tmp_path / "r.csv")]) == 0
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text())))
    rec = load_recording(path)
    assert [int(r["step"]) for r in rows] == [5, 10, 15, 20]
    assert [int(r["epoch"]) for r in rows] == [0, 1, 1, 2]
    assert np.allclose([float(r["loss"]) for r in rows], rec.loss, rtol=1e-7)
    counted = np.asarray(rec.last.arrays["mask"], bool).any(axis=1)  # [T]: not all padding
    norms = rec.norm_c_total_by_layer[:, 1][:, counted]  # [S, T'] of bi/backward
    for stat, expected in (("mean", norms.mean(1)), ("min", norms.min(1)), ("max", norms.max(1))):
        column = [float(r[f"bi/backward_norm_c_total_{stat}"]) for r in rows]
        np.testing.assert_allclose(column, expected, rtol=1e-6)
    assert len(rows[0]) == 5 + 3 * L * 3  # three norms × two directions × mean, min, max
    assert list(rows[0])[5:8] == [f"bi/forward_norm_h_total_{s}" for s in ("mean", "min", "max")]


def test_export_refuses_damaged_recordings_in_one_line(tmp_path, capsys):
    path = tmp_path / "run.lvz"
    write(path, [1])
    half = tmp_path / "half.lvz"
    half.write_bytes(path.read_bytes()[:5000])
    assert main(["export", str(half), "--csv", str(tmp_path / "h.csv")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(half) in err and "truncated" in err, err
    for flag in ("csv", "png"):
        with pytest.raises(Exception, match="would overwrite the recording"):
            export(path, **{flag: path.with_suffix(".lvz")})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["half.lvz", "run.lvz"]


def test_a_recording_is_its_own_kind_of_file(tmp_path, capsys):
    path = tmp_path / "Run.LVZ"
    path.write_bytes(b"")
    assert files.kind(path) == "recording"
    assert main(["gui", str(path), "--run"]) == 2  # shown as it grows, not run
    err = capsys.readouterr().err.strip()
    assert err == f"lstmviz: error: --run: {path}: a recording is shown as it grows, not run; " \
                  "drop --run"


def test_reading_a_recording_needs_neither_tensorflow_nor_qt():
    code = (
        "import sys, lstmviz\n"
        "assert callable(lstmviz.load_recording) and lstmviz.Recording\n"
        "import lstmviz.plots.export.writer, lstmviz.io.recording\n"
        "assert 'tensorflow' not in sys.modules and 'PySide6' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=os.environ | {"PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 0, done.stderr
