"""Export a trace: PNG and SVG of the plots, a one-page PDF report, CSV of the curves.

    from lstmviz.plots.export.writer import export
    export("t.npz", png="t.png", svg="t.svg", pdf="t.pdf", csv="t.csv")

The plots are the window's own panels drawn offscreen (`lstmviz.plots.export.figure`; Qt is imported
only for PNG, SVG and PDF, and runs offscreen when there is no display), the same panels the
window shows for the trace (the loss and the connectivity map of a training run included).
Every file is written to a temporary name in its folder and renamed at the end, all of them
after every one has been rendered: an error (a missing folder, no permission) leaves no file
behind, partial or whole, and raises `ExportError` naming the path.

CSV: one row per timestep of the sequence (P·Tp rows in multi-pass mode), comma-separated, a
header naming each column after the trace key it comes from:

- `t` (0-based); in multi-pass mode also `pass` (1-based) and `t_in_pass`;
- every per-timestep norm of the trace: `norm_h_total`, `norm_h_direct`, `norm_c_total`, then
  any others in schema order (multi-pass: `norm_h_reference`, `norm_h_truncated`,
  `norm_c_truncated`), last the initial weights' of a training run (`step0_norm_h_total`, …);
- per-row norms [rows, T], one column per row, numbered from 1: per-batch weights
  `norm_h_total_batch1`, … (likewise `norm_h_direct_batch*`, `norm_c_total_batch*`); training
  `norm_h_total_step1` … `norm_h_total_stepS` (step s before its update, while the plain
  `norm_h_total` is for the final weights). Multi-pass `*_by_pass` arrays are the plain columns
  cut into passes, so they are not repeated.
- a model trace: with a mask, `unmasked_samples` (how many samples step t counts for; 0: a
  gap in the figure), then one block of columns per recurrent direction, named by
  `layer_names`: `<layer>_norm_h_total`, `<layer>_norm_h_direct`, `<layer>_norm_c_total` (e.g.
  `bi/forward_norm_h_total`), from the `*_by_layer` rows; the last for LSTM directions only
  (a GRU or SimpleRNN has no cell state). A graph's direction shorter than the longest has
  empty fields after its own steps (the rows' NaN padding).

Values are written with 9 significant digits (float32 exactly); NaN and Inf as `nan`, `inf`;
a header with a comma or a quote (Keras allows them in a layer's name) in double quotes.
Beside `F.csv` goes `F_diagnosis.csv`: the diagnosis, a row per direction and curve (a
recording: per record; `lstmviz.analysis.report.tables`, docs/diagnosis.md).

A recording (`.lvz`, `lstmviz.io.recording`) exports the app's recording panels
(`lstmviz.plots.export.recording_figure`): ‖dL/dh_t‖ per direction at the last record over earlier
records faded, the loss per record, and the directions × training steps heatmap; `panels` may
add the model panels of its last record. Its CSV has one row per record: `step`, `epoch`,
`loss`, `train_loss`, `record_seconds`, then a block per recurrent direction: the mean, min and
max over t of each norm (`bi/forward_norm_h_total_mean`, …; the steps padded in every sample
left out, as the panels leave them blank; no cell norm for a GRU or SimpleRNN); `npz` saves
its last record's trace.
"""

from __future__ import annotations

import contextlib
import csv as csv_module  # `csv` is export's keyword for the CSV file
import errno
import io
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lstmviz.analysis.layers import direction_steps
from lstmviz.analysis.layout import (
    LOGICAL_DPI,
    LSTM_PANELS,
    MODEL_PANELS,
    PANEL_NAMES,
    RECORDING_PANELS,
    panels_for,
)
from lstmviz.analysis.report.tables import diagnosis_csv, recording_columns, without_c
from lstmviz.core import schema
from lstmviz.core.errors import ConfigError, LstmvizError, TraceError, ref
from lstmviz.core.view import ViewOptions
from lstmviz.io import files
from lstmviz.io.atomic import atomic_path
from lstmviz.io.trace import GradientTrace

FORMATS = ("png", "svg", "pdf", "csv")
# The names each output may have: (suffixes, what files of it are called in a refusal).
SUFFIXES = {"png": ((".png",), "PNG images"), "svg": ((".svg",), "SVG images"),
            "pdf": ((".pdf",), "PDF reports"), "csv": ((".csv",), "CSV files"),
            "npz": (files.TRACES, "trace files")}  # fmt: skip
# What a trace lacks when a panel asked for has nothing to draw, and how to get it.
PANEL_DATA = {
    "loss": f"training loss (a {ref('mode', 'train')} run)",
    "connectivity": f"connectivity map (run with {ref('connectivity')})",
    **{name: f"model layers (a {ref('mode', 'model')} run)" for name in MODEL_PANELS},
}
DEFAULT_WIDTH, DEFAULT_HEIGHT, DEFAULT_DPI = 1600, 1000, 144
MAX_PIXELS = 20_000  # per side
class ExportError(LstmvizError):
    """An export cannot be written (bad path, size or content). Names the path or flag."""


class ExportCancelled(ExportError):
    """The `progress` callback of `export` asked to stop; nothing was written."""


STAGES = {"csv": "Writing the CSV", "figure": "Drawing the panels", "png": "Rendering the PNG",
          "svg": "Rendering the SVG", "pdf": "Rendering the PDF", "npz": "Saving the trace"}


class _Progress:
    """Reports `export`'s progress through the stages it has (`STAGES` keys, in order) to
    `report(fraction done in [0, 1], what is being done)`; False from it cancels:
    ExportCancelled, raised before the temporary files are renamed."""

    def __init__(self, report, stages: list[str]) -> None:
        self.report, self.stages = report, stages

    def __call__(self, stage: str, part: float = 0.0) -> None:
        if self.report is None:
            return
        done = (self.stages.index(stage) + part) / len(self.stages) if stage else 1.0
        if self.report(min(done, 1.0), STAGES.get(stage, "Writing the files")) is False:
            raise ExportCancelled("export cancelled: nothing written")

    def part(self, stage: str):
        """A callback for the work of `stage`: called with the fraction of it done."""
        return lambda fraction: self(stage, fraction)


# ---- CSV ----------------------------------------------------------------------------------------


def csv_columns(trace: GradientTrace) -> list[tuple[str, np.ndarray]]:
    """(header, values [T]) for every column of the CSV, in order (see the module docstring):
    the trace's curves and rows as `lstmviz.core.schema` names them."""
    a, mode = trace.arrays, trace.mode
    curves = [k for k in schema.keys_with(schema.CURVE, a, mode) if np.ndim(a[k]) == 1]
    rows = [k for k in schema.keys_with(schema.ROWS, a, mode) if np.ndim(a[k]) == 2]
    joined = {k: schema.lookup(k)[0].joins for k in rows if schema.lookup(k)[0].joins}
    if curves:
        length = len(a[curves[0]])
    elif rows:
        first = np.shape(a[rows[0]])
        length = first[0] * first[1] if rows[0] in joined else first[1]
    else:
        raise ExportError("the trace has no per-timestep gradient norms (norm_h_total)")
    t = np.arange(length)
    columns: list[tuple[str, np.ndarray]] = [("t", t)]
    if joined:  # passes side by side on the time axis
        tp = int(a.get("pass_length", np.shape(a[next(iter(joined))])[-1]))
        columns += [("pass", t // tp + 1), ("t_in_pass", t % tp)]
    mask = a.get("mask")
    if mask is not None and np.shape(mask)[:1] == (length,):  # 0: padded in every sample,
        columns.append(("unmasked_samples", np.asarray(mask).sum(axis=1).astype(np.int64)))
    late = [k for k in curves if k.startswith("step0_")]  # the initial weights' curves last
    columns += [(k, np.asarray(a[k])) for k in curves if k not in late]
    by_layer = [k for k in rows if schema.row_name(k) == "layer"]
    columns += _layer_columns(a, by_layer, length)
    for key in (k for k in rows if k not in by_layer):
        value = np.asarray(a[key])
        if key in joined:
            if joined[key] not in a:  # else the same numbers are already a column
                columns.append((joined[key], value.reshape(-1)))
        elif value.shape[1] == length and value.dtype.kind == "f":
            base, row = key.rsplit("_by_", 1)[0], schema.row_name(key)
            columns += [(f"{base}_{row}{r + 1}", value[r]) for r in range(len(value))]
    columns += [(k, np.asarray(a[k])) for k in late]
    return columns


def _layer_columns(a, keys: list[str], length: int) -> list[tuple[str, np.ndarray]]:
    """One block per recurrent direction of the rows `keys` ([L, T] each): `<layer>_<base>`."""
    shaped = [k for k in keys if np.shape(a[k])[1:] == (length,)]
    if not shaped:
        return []
    count = np.shape(a[shaped[0]])[0]
    names = [str(n) for n in np.ravel(a.get("layer_names", []))]
    if len(names) != count:
        names = [f"layer{k + 1}" for k in range(count)]
    return [(f"{name}_{key.rsplit('_by_', 1)[0]}", _own_steps(np.asarray(a[key][k]), a, k))
            for k, name in enumerate(names) for key in shaped
            if not without_c(a, key, k)]  # fmt: skip


def _own_steps(row: np.ndarray, a, k: int) -> np.ndarray:
    """Direction k's row [T]; masked after its own T_k (a graph's shorter direction): empty
    fields, not its NaN padding."""
    steps = direction_steps(a, k)
    if steps is None or steps >= len(row):
        return row
    return np.ma.masked_array(row, mask=np.arange(len(row)) >= steps)


def diagnosis_path(csv_path: Path) -> Path:
    """Where the diagnosis CSV goes beside the curves' CSV `F.csv`: `F_diagnosis.csv`."""
    return csv_path.with_name(f"{csv_path.stem}_diagnosis.csv")


def csv_text(trace: GradientTrace) -> str:
    """The trace's curves, one row per timestep."""
    return csv_of_columns(csv_columns(trace))


CSV_BLOCK = 20_000  # rows formatted between two progress reports


def csv_of_columns(columns: list[tuple[str, np.ndarray]], step=None) -> str:
    """The columns as CSV text: a header, then a row per value; a field with a comma or a
    quote (a Keras layer's name may hold them) quoted as RFC 4180 says. Integers as they are,
    floats with 9 significant digits (`nan`, `inf`, `-inf` as Python writes them). `step`:
    called with the fraction of rows done after each block of `CSV_BLOCK` rows."""
    text = io.StringIO()
    writer = csv_module.writer(text, lineterminator="\n")
    writer.writerow(name for name, _ in columns)
    # one %-format per row: the fields are numbers, never quoted; a masked array's masked
    # values (a direction's steps past its own length) are empty fields
    formats = ["%d" if np.asarray(values).dtype.kind in "iub" else "%.9g" for _, values in columns]
    data = [_fields(values, f) if np.ma.isMaskedArray(values) else np.asarray(values).tolist()
            for (_, values), f in zip(columns, formats, strict=True)]  # fmt: skip
    row_format = ",".join("%s" if np.ma.isMaskedArray(values) else f
                          for (_, values), f in zip(columns, formats, strict=True)) + "\n"
    rows = list(zip(*data, strict=True))
    for start in range(0, len(rows), CSV_BLOCK):
        text.write("".join([row_format % row for row in rows[start:start + CSV_BLOCK]]))
        if step is not None:
            step(min(start + CSV_BLOCK, len(rows)) / len(rows))
    return text.getvalue()


def _fields(values: np.ma.MaskedArray, spec: str) -> list[str]:
    """A masked column's CSV fields: its values as `spec` formats them, "" where masked."""
    mask = np.ma.getmaskarray(values)
    return ["" if m else spec % v for v, m in zip(np.ma.getdata(values).tolist(), mask.tolist(),
                                                   strict=True)]  # fmt: skip


# ---- paths and atomic writes ------------------------------------------------------------------


def _check_target(path: Path, fmt: str) -> None:
    """Refuse an output `files.check_output` refuses (the rule `run --out` follows): a name
    without its format's suffix (`--png a.jpg` would be a PNG under another name), a folder,
    a folder that does not exist or cannot be written, a write-protected file."""
    try:
        files.check_output(path, fmt, *SUFFIXES[fmt])
    except ConfigError as exc:
        raise ExportError(exc.template, exc.field) from None


def _os_message(exc: OSError) -> str:
    return exc.strerror or errno.errorcode.get(exc.errno or 0, "") or str(exc)


def load_subject(trace, full: bool) -> tuple:
    """(the GradientTrace or Recording to export, the file it came from or None). `full`: a
    recording is read with its last record's trace (for figures and npz)."""
    if isinstance(trace, GradientTrace):
        return trace, None
    if not isinstance(trace, str | os.PathLike):
        from lstmviz.io.recording import Recording

        if not isinstance(trace, Recording):
            raise ExportError(f"export takes a GradientTrace, a Recording or a file name, not "
                              f"a {type(trace).__name__}")  # fmt: skip
        return trace, str(trace.path)
    if files.suffix_of(trace, files.RECORDINGS):
        from lstmviz.io.recording import load_recording

        return load_recording(trace, trace=full), str(trace)
    return GradientTrace.load(trace), str(trace)


def _integer(value) -> bool:
    """An int or a NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _size(width: int, height: int, dpi: float) -> tuple[int, int, float]:
    for name, value in (("width", width), ("height", height)):
        if not _integer(value):
            raise ExportError(f"must be an integer number of pixels, got {value!r}", name)
        if not 16 <= value <= MAX_PIXELS:
            raise ExportError(f"{value} is out of range [16, {MAX_PIXELS}]", name)
    if not (isinstance(dpi, (int, float, np.integer, np.floating)) and 24 <= dpi <= 2400):
        raise ExportError(f"{dpi!r} is out of range [24, 2400]", "dpi")
    if width * LOGICAL_DPI / dpi < 200 or height * LOGICAL_DPI / dpi < 150:
        raise ExportError(
            f"{width}×{height} px at {dpi:g} dpi leaves no room for the plots (at least "
            f"200×150 px at 96 dpi); lower {ref('dpi')} or enlarge the image", "size"
        )
    return int(width), int(height), float(dpi)


def _directions(trace) -> list[str]:
    """The LSTM directions `layer` chooses among in `trace` (a GradientTrace or a Recording):
    a model's `layer_names`, else one unnamed direction."""
    return [str(n) for n in np.ravel(trace.arrays.get("layer_names", []))] or [""]


def check_layer(trace, layer) -> None:
    """ExportError unless `layer` indexes one of `trace`'s LSTM directions (`_directions`)."""
    names = _directions(trace)
    if not (_integer(layer) and 0 <= layer < len(names)):
        which = f"0 to {len(names) - 1}: {', '.join(names)}" if len(names) > 1 else "0 only"
        what = "recording" if not isinstance(trace, GradientTrace) else f"{trace.mode} trace"
        raise ExportError(f"layer: {layer!r} is not an LSTM direction of this {what} ({which})")


def _record(trace, record, t_range) -> int | None:
    """`record` checked against `trace` (a GradientTrace or a Recording) and counted from 0 (a
    negative one from the end, as Python indexes): a record the recording does not have, or a
    record or t_range for a trace, is an ExportError naming the keyword, not a figure of
    another record."""
    if isinstance(trace, GradientTrace):
        for name, value in (("record", record), ("t_range", t_range)):
            if value is not None:
                raise ExportError(f"{name}: only for a recording; this is a {trace.mode} trace")
        return None
    if record is None:
        return None
    records = len(np.ravel(trace.arrays["step"]))
    if not (_integer(record) and -records <= record < records):
        raise ExportError(f"record: {record!r} is out of range: the recording has {records} "
                          f"record{'s' * (records != 1)} (0 to {records - 1}, or negative "
                          "from the end)")  # fmt: skip
    return int(record) % records


def export(
    trace: GradientTrace | str | os.PathLike,
    png: str | os.PathLike | None = None,
    svg: str | os.PathLike | None = None,
    pdf: str | os.PathLike | None = None,
    csv: str | os.PathLike | None = None,
    npz: str | os.PathLike | None = None,
    width: int = DEFAULT_WIDTH,
    height: int = DEFAULT_HEIGHT,
    dpi: float = DEFAULT_DPI,
    panels: Sequence | None = None,
    log: bool = True,
    normalise: bool = False,
    layer: int = 0,
    record: int | None = None,
    t_range: tuple[int, int] | None = None,
    progress=None,
    view: ViewOptions | None = None,
) -> list[Path]:
    """Write the outputs asked for; return their paths. `trace` is a GradientTrace or a trace
    file, or a recording (a `Recording` or an `.lvz`). PNG is `width` × `height`
    px with `dpi` recorded (text and lines scale with `dpi`, less when the panels would not
    fit otherwise: then the figure is drawn larger and scaled down to the size; the SVG has
    the same physical size); PDF is one A4 landscape page. `panels`: names from
    `PANEL_NAMES` (or panel classes; one name alone is that panel); by default those the
    window shows for the trace.
    `log`/`normalise`: as View → Log scale / Normalise per pass in the GUI. `layer`: the LSTM
    direction a model trace's gates and per-unit panels show (index into `layer_names`).
    `record`, `t_range`: a recording's record its curves show (from 0, negative from the
    end; None: the last) and the timestep range of its heatmap (None: every t), as the
    window's slider and range. `view`: a `ViewOptions` holding those five at once (the
    keywords given besides it override its fields).
    `npz` saves the trace itself (a recording's last record's).
    `progress`: None, or `progress(fraction done in [0, 1], what: str)`, called between the
    steps of the work (each format; each plot; blocks of CSV rows): returning False cancels,
    raising ExportCancelled with nothing written (None, e.g. `print`, goes on).

    Each output must end in its format's suffix (`SUFFIXES`), and every panel asked for by name
    must have something to draw. Raises ExportError (or TraceError, RecordingError for an
    unreadable file) naming the path or the flag; then nothing is written.
    """
    view = ViewOptions.given(view, log=log, normalise=normalise, layer=layer, record=record,
                             t_range=t_range)  # fmt: skip
    outputs = {"png": png, "svg": svg, "pdf": pdf, "csv": csv, "npz": npz}
    targets = {fmt: Path(p) for fmt, p in outputs.items() if p is not None and str(p) != ""}
    if not targets:
        raise ExportError("nothing to export: give at least one of "
                          + ", ".join(ref(fmt) for fmt in FORMATS))
    needs_qt = any(fmt in targets for fmt in ("png", "svg", "pdf"))
    # a recording with its last trace: figures and npz draw or save it, the CSV takes its mask
    trace, source = load_subject(trace, full=True)
    recording = not isinstance(trace, GradientTrace)
    what = "recording" if recording else "trace"
    seen: dict[Path, str] = {}
    for fmt, path in targets.items():
        key = path.resolve()
        if key in seen:
            raise ExportError(f"{ref(fmt, path)}: the same file as {ref(seen[key])}")
        if source is not None and key == Path(source).resolve():
            raise ExportError(f"{ref(fmt, path)}: would overwrite the {what} being exported")
        _check_target(path, fmt)
        seen[key] = fmt
    if isinstance(panels, str):  # one name: not its letters
        panels = [panels]
    if panels is not None:
        panels = list(panels)
        if not panels:
            raise ExportError("no panel given (leave it out for the panels the window shows)",
                              "panels")  # fmt: skip
        for entry in panels:
            # names, or the window's panel classes (`lstmviz.plots.export.figure` checks those)
            if not isinstance(entry, type) and not (isinstance(entry, str)
                                                    and entry in PANEL_NAMES):  # fmt: skip
                raise ExportError(
                    f"unknown panel {entry!r} (choose from {', '.join(PANEL_NAMES)})", "panels"
                )
        # a recording's panels draw its rows, the others a trace (for a recording, its last)
        fitting = RECORDING_PANELS + MODEL_PANELS if recording else LSTM_PANELS + MODEL_PANELS
        for entry in panels:
            if isinstance(entry, str) and entry not in fitting:
                raise ExportError(f"{ref('panels', entry)}: not a panel of a {what} (a {what} "
                                  f"has {', '.join(fitting)})")  # fmt: skip
    if needs_qt:
        width, height, dpi = _size(width, height, dpi)
        view = view.but(record=_record(trace, view.record, view.t_range))
    if "npz" in targets and recording and trace.last is None:
        raise ExportError(f"{source}: the recording's last trace was not read", "npz")
    stages = [k for k in ("csv", "figure", "png", "svg", "pdf", "npz")
              if k in targets or (k == "figure" and needs_qt)]  # fmt: skip
    step = _Progress(progress, stages)
    csv_data = beside = None
    if "csv" in targets:
        step("csv")
        columns = recording_columns(trace) if recording else csv_columns(trace)
        csv_data = csv_of_columns(columns, step.part("csv")).encode("utf-8")
        beside = diagnosis_path(targets["csv"])  # the diagnosis, beside the curves
        diagnosis = diagnosis_csv(trace.diagnosis).encode("utf-8")

    temps: dict[str, Path] = {}
    try:
        with contextlib.ExitStack() as stack:
            for fmt, path in targets.items():
                with _writing(fmt, path):
                    temps[fmt] = stack.enter_context(atomic_path(path, suffix="." + fmt))
            if needs_qt:
                _render(trace, source, temps, targets, (width, height, dpi), panels, view,
                        step)  # fmt: skip
            if csv_data is not None:
                with _writing("csv", targets["csv"]):
                    temps["csv"].write_bytes(csv_data)
                with _writing("csv", beside):
                    stack.enter_context(atomic_path(beside, suffix=".csv")).write_bytes(diagnosis)
            if "npz" in temps:
                step("npz")
                with _writing("npz", targets["npz"]):
                    (trace.last if recording else trace).save(temps["npz"])
            step("")  # the last chance to cancel: every file is complete, none renamed
            # leaving the stack renames every temporary file to its target
    except OSError as exc:
        raise ExportError(_rename_error(exc, temps, targets)) from None
    return [*targets.values(), *([beside] if beside is not None else [])]


@contextlib.contextmanager
def _writing(fmt: str, path: Path):
    """Turn an OSError while writing format `fmt` (a full disk, say) into an ExportError
    naming `path`, the file the user gave, not the temporary file being written."""
    try:
        yield
    except OSError as exc:
        raise ExportError(f"{ref(fmt, path)}: cannot write ({_os_message(exc)})") from None


def _rename_error(exc: OSError, temps: dict[str, Path], targets: dict[str, Path]) -> str:
    """The message for a temporary file that could not be synced or renamed to its target:
    the flag and the path the user gave, found by the temporary name the error carries."""
    names = {str(name) for name in (exc.filename, exc.filename2) if name is not None}
    fmt = next((f for f in targets if str(temps.get(f)) in names or str(targets[f]) in names),
               None)  # fmt: skip
    where = f"{ref(fmt, targets[fmt])}: " if fmt else ""
    return f"{where}cannot write ({_os_message(exc)})"


def _render(trace, source, temps, targets, size, panels, view: ViewOptions, step) -> None:
    """Draw the figure of `trace` (a GradientTrace or a Recording) into the temporary files
    `temps` of `targets` (messages name the targets, not the temporary files). `size`: (width,
    height, dpi); `view`: how it is drawn (a recording: its record and t_range checked);
    `step`: `_Progress`."""
    width, height, dpi = size
    step("figure")
    try:
        if isinstance(trace, GradientTrace):
            from lstmviz.plots.export.figure import Figure

            figure = Figure(trace, panels, view, source=source)
        else:
            from lstmviz.plots.export.recording_figure import RecordingFigure

            figure = RecordingFigure(trace, panels, view, source=source)
    except ValueError as exc:
        _check_drawn(trace, panels, drawn=[])
        raise ExportError(str(exc)) from None
    with figure:
        _check_drawn(trace, panels, figure.names)
        if "png" in temps:
            step("png")
            data = _png(figure.image(width, height, dpi, step.part("png")), targets["png"])
            with _writing("png", targets["png"]):
                temps["png"].write_bytes(data)
        if "svg" in temps:
            step("svg")
            data = figure.svg(width, height, dpi, step.part("svg"))
            with _writing("svg", targets["svg"]):
                temps["svg"].write_bytes(data)
        if "pdf" in temps:
            step("pdf")
            with _writing("pdf", targets["pdf"]):
                figure.pdf(str(temps["pdf"]), step.part("pdf"))
                if not _complete_pdf(temps["pdf"]):
                    raise ExportError(f"{ref('pdf', targets['pdf'])}: Qt could not write the PDF "
                                      "(is the disk full?)")  # fmt: skip


def _complete_pdf(path: Path) -> bool:
    """Whether the PDF at `path` has its header and its end: Qt's PDF writer says nothing
    when a write fails, and a full disk leaves the first blocks of the file only."""
    data = path.read_bytes()
    return data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")


def _png(image, path: Path) -> bytes:
    """`image` encoded as PNG in memory, written by the caller like every other format: a full
    disk is then an OSError naming `path`, not a bare False from Qt and libpng's own line on
    stderr."""
    from PySide6.QtCore import QBuffer, QIODevice

    buffer = QBuffer()
    buffer.open(QIODevice.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise ExportError(f"{ref('png', path)}: Qt could not encode the image")
    return bytes(buffer.data())


def _check_drawn(trace, panels, drawn: list[str]) -> None:
    """Refuse a panel asked for by name that has nothing to draw (only `drawn` have): say
    which, what the trace lacks for it, and the panels it has. (Panels given as classes, the
    window's, are left out quietly when empty.)"""
    missing = [p for p in panels or () if isinstance(p, str) and p not in drawn]
    if not missing:
        return
    name = missing[0]
    if not isinstance(trace, GradientTrace) and trace.last is None and name in MODEL_PANELS:
        raise ExportError(f"{ref('panels', name)}: the recording was read without its last "
                          "record's trace (load_recording(path) reads it)")  # fmt: skip
    if isinstance(trace, GradientTrace):
        what, has = "trace", panels_for(trace.arrays, trace.config)
    else:
        last = [] if trace.last is None else panels_for(trace.last.arrays, trace.last.config)
        what, has = "recording", [*RECORDING_PANELS, *(p for p in last if p in MODEL_PANELS)]
    lacks = PANEL_DATA.get(name, f"data for the {name} panel")
    raise ExportError(f"{ref('panels', name)}: this {what} has no {lacks}; it has: "
                      f"{', '.join(has)}")  # fmt: skip


def export_png(trace, path, width=DEFAULT_WIDTH, height=DEFAULT_HEIGHT, dpi=DEFAULT_DPI, **kw):
    """The panels as one PNG of `width` × `height` px, `dpi` recorded in the file."""
    return export(trace, png=path, width=width, height=height, dpi=dpi, **kw)[0]


def export_svg(trace, path, width=DEFAULT_WIDTH, height=DEFAULT_HEIGHT, dpi=DEFAULT_DPI, **kw):
    """The panels as one SVG: vector curves and text, heatmaps as embedded images."""
    return export(trace, svg=path, width=width, height=height, dpi=dpi, **kw)[0]


def export_pdf(trace, path, **kw):
    """A one-page A4 report: title, the panels, the run's configuration and summary."""
    return export(trace, pdf=path, **kw)[0]


def export_csv(trace, path):
    """The curves, one row per timestep (columns: see the module docstring)."""
    return export(trace, csv=path)[0]


__all__ = [
    "DEFAULT_DPI",
    "DEFAULT_HEIGHT",
    "DEFAULT_WIDTH",
    "ExportCancelled",
    "ExportError",
    "FORMATS",
    "PANEL_NAMES",
    "TraceError",
    "csv_columns",
    "csv_text",
    "export",
    "export_csv",
    "export_pdf",
    "export_png",
    "export_svg",
    "recording_columns",
]
