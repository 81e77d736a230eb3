"""`export()`: a trace or a recording written as PNG, SVG, PDF, CSV and NPZ (the entry of
`lstmviz export` and the window's Export), after its arguments are checked (paths, sizes,
panels, the record). Each format has its module (`png`, `svg`, `pdf`, `csv`), the figures
theirs (`figure`, `recording_figure`); Qt is imported only to draw, and started by
`app.ensure_app`. Every file is written to a temporary name in its folder and all are renamed
once every one is complete: an error leaves no file behind and raises `ExportError` naming
the path. What each file holds: docs/traces.md#exporting-plots, docs/recording.md.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lstmviz.analysis.layout import (
    LOGICAL_DPI,
    LSTM_PANELS,
    MODEL_PANELS,
    PANEL_NAMES,
    RECORDING_PANELS,
    panels_for,
)
from lstmviz.analysis.report.tables import diagnosis_csv, recording_columns
from lstmviz.core.errors import ConfigError, ExportCancelled, ExportError, TraceError, ref
from lstmviz.core.view import ViewOptions
from lstmviz.io import files
from lstmviz.io.atomic import atomic_path
from lstmviz.io.trace import GradientTrace
from lstmviz.plots.export.csv import csv_columns, csv_of_columns, csv_text, diagnosis_path

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
    from lstmviz.plots.export import pdf, png

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
            data = png.encoded(figure.image(width, height, dpi, step.part("png")))
            if data is None:
                raise ExportError(f"{ref('png', targets['png'])}: Qt could not encode the image")
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
                if not pdf.complete(temps["pdf"]):
                    raise ExportError(f"{ref('pdf', targets['pdf'])}: Qt could not write the PDF "
                                      "(is the disk full?)")  # fmt: skip


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
