"""The view choices of `lstmviz.plot` and `lstmviz.plots.export.writer.export`: `layer` (the LSTM
direction a model trace's gates and per-unit panels show; refused by `plot` when the trace lacks it)
and `record` (the record a recording's curves show). A choice the file does not have is refused
naming it, whether the trace or recording is given as an object or as a path, and nothing is
written; a negative record counts from the end, as Python's indexing does."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

import lstmviz
from lstmviz.core.errors import LstmvizError
from lstmviz.io.recording import load_recording
from lstmviz.plots.export.writer import ExportError, export
from tests.helpers.recordings import NAMES, model_trace, write

SVG = "{http://www.w3.org/2000/svg}"
EVERY = 5


@pytest.fixture(scope="module")
def recording_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "run.lvz"
    write(path, [1, 2, 3, 4], every=EVERY)  # steps 5, 10, 15, 20
    return path


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    return model_trace(7).save(tmp_path_factory.mktemp("trace") / "model.npz")


def svg_texts(path) -> list[str]:
    root = ET.parse(path).getroot()
    return ["".join(node.itertext()).strip() for node in root.iter(f"{SVG}text")]


@pytest.mark.parametrize("layer", [len(NAMES), -1, 1.0])
def test_plot_refuses_a_layer_the_trace_lacks_given_as_a_file_or_a_trace(trace_file, layer):
    messages = []
    for source in (trace_file, lstmviz.GradientTrace.load(trace_file)):
        with pytest.raises(LstmvizError) as caught:
            lstmviz.plot(source, layer=layer)
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert messages[0] == (f"layer: {layer!r} is not an LSTM direction of this model trace "
                           f"(0 to 1: {', '.join(NAMES)})")  # fmt: skip


@pytest.mark.parametrize("as_path", [True, False])
def test_plot_refuses_a_layer_the_recording_lacks(recording_file, as_path):
    source = recording_file if as_path else load_recording(recording_file)
    with pytest.raises(LstmvizError, match=r"^layer: 7 is not an LSTM direction of this rec"):
        lstmviz.plot(source, layer=7)


def test_the_layer_chosen_is_the_one_drawn(trace_file, tmp_path):
    out = tmp_path / "a.svg"
    export(trace_file, svg=out, layer=1, panels=["gates"])
    assert f"Gates of {NAMES[1]}" in svg_texts(out)


@pytest.mark.parametrize("as_path", [True, False])
@pytest.mark.parametrize("record", [4, -5])
def test_a_record_the_recording_lacks_is_refused(recording_file, tmp_path, as_path, record):
    source = recording_file if as_path else load_recording(recording_file)
    with pytest.raises(ExportError, match=rf"record: {record} is out of range"):
        export(source, svg=tmp_path / "a.svg", record=record)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("record", "step"), [(0, 5), (2, 15), (-1, 20), (-2, 15), (-4, 5)])
def test_the_record_chosen_is_the_one_drawn(recording_file, tmp_path, record, step):
    out = tmp_path / "a.svg"
    export(recording_file, svg=out, record=record)
    titles = [t for t in svg_texts(out) if t.startswith("Gradient norm by layer at step")]
    assert len(titles) == 1 and titles[0].startswith(f"Gradient norm by layer at step {step} ")


def test_record_is_refused_for_a_trace(trace_file, tmp_path):
    with pytest.raises(ExportError, match=r"record: only for a recording"):
        export(trace_file, png=tmp_path / "a.png", record=np.int64(0))


@pytest.mark.parametrize(("record", "marked"), [(0, True), (None, False), (3, False)])
def test_model_panels_beside_another_record_say_they_show_the_last(recording_file, tmp_path,
                                                                   record, marked):  # fmt: skip
    out = tmp_path / "a.svg"
    export(recording_file, svg=out, record=record, panels=["record_norms", "layers", "gates"])
    texts = svg_texts(out)
    last = "last record, step 20 (epoch 3)"
    for title in ("Gradient norm by layer over timesteps", f"Gates of {NAMES[0]}"):
        assert (f"{title} · {last}" if marked else title) in texts, texts
    assert sum(last in text for text in texts) == (2 if marked else 0)


def test_one_panel_name_is_that_panel_not_its_letters(trace_file, tmp_path):
    one, listed = tmp_path / "one.svg", tmp_path / "listed.svg"
    export(trace_file, svg=one, panels="gates")
    export(trace_file, svg=listed, panels=["gates"])
    assert svg_texts(one) == svg_texts(listed)


@pytest.mark.parametrize(("panels", "message"), [
    ([], r"^--panel: no panel given"),
    (["layers", 5], r"^--panel: unknown panel 5 "),
    ([None], r"^--panel: unknown panel None "),
])  # fmt: skip
def test_a_panel_list_that_names_nothing_drawable_is_refused_for_what_it_is(
    trace_file, tmp_path, panels, message
):
    with pytest.raises(ExportError, match=message):
        export(trace_file, png=tmp_path / "a.png", panels=panels)
    assert list(tmp_path.iterdir()) == []


def test_model_panels_of_a_recording_read_without_its_last_trace_say_so(recording_file):
    recording = load_recording(recording_file, trace=False)
    message = (r"^--panel layers: the recording was read without its last record's trace "
               r"\(load_recording\(path\) reads it\)$")  # fmt: skip
    with pytest.raises(ExportError, match=message):
        export(recording, png=recording_file.parent / "a.png", panels=["record_norms", "layers"])


def test_plot_names_the_run_a_panel_needs_in_python_terms(trace_file):
    with pytest.raises(LstmvizError, match=r"^panels=loss: this trace has no training loss "
                       r"\(a mode='train' run\)"):  # fmt: skip
        lstmviz.plot(trace_file, panels=["loss"])
