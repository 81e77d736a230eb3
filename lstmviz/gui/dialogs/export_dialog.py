"""File → Export…, "Export panel under cursor" and each panel's right-click Export: the same
files as `lstmviz export` (`lstmviz.plots.export.writer`), drawn with the window's View options."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressDialog,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

from lstmviz.core.errors import LstmvizError, cli_term
from lstmviz.core.view import ViewOptions
from lstmviz.plots.export.figure import panel_name
from lstmviz.plots.export.writer import (
    DEFAULT_DPI,
    DEFAULT_HEIGHT,
    DEFAULT_WIDTH,
    MAX_PIXELS,
    ExportCancelled,
    export,
)
from lstmviz.plots.panels.panel import Panel, panel_title

FORMATS = {  # key: (check box text, suffix, file-dialog filter)
    "png": ("PNG image", ".png", "PNG image (*.png)"),
    "svg": ("SVG vector image", ".svg", "SVG vector image (*.svg)"),
    "pdf": ("PDF report (one page: panels, configuration, summary)", ".pdf", "PDF report (*.pdf)"),
    "csv": ("CSV of the curves (one row per timestep; a recording's: per record)", ".csv",
            "CSV of the curves (*.csv)"),
    "npz": ("Trace (.npz, reopens in lstmviz)", ".npz", "Trace (*.npz)"),
}
PANEL_FORMATS = ("png", "svg", "pdf", "csv")
IMAGE_FORMATS = ("png", "svg", "pdf")  # the formats that draw the panels
TIPS = {  # the format check boxes' tooltips
    "png": "A raster image of the panels, title and summary line, at the size and DPI below",
    "svg": "Curves, axes and text as vectors (heatmaps embedded as images): scales without blur",
    "pdf": "One A4 landscape page: the panels (vector), the run's configuration and summary",
    "csv": "The curves as numbers, one row per timestep (a recording: one row per record)",
    "npz": "The trace itself, to reopen in lstmviz or load with numpy.load",
}


def window_panels(window) -> list[Panel]:
    """The window's plot panels that are not hidden (View menu), in layout order."""
    return [p for p in window.findChildren(Panel) if not p.isHidden()]


def _view_options(window) -> ViewOptions:
    """How the window draws what it shows: View's log scale and normalising, the LSTM
    direction a model's gates and units panels show, the error of one step and its anchor,
    a recording's record and timesteps."""
    view = ViewOptions(log=window.log_action.isChecked(),
                       normalise=window.normalise_action.isChecked(),
                       layer=window.area.layer, anchored=window.shown.view.anchored,
                       anchor=window.shown.view.anchor)  # fmt: skip
    if window.recording is not None:
        view = view.but(record=window.area.record, t_range=window.area.t_range)
    return view


def _subject(window):
    """What the window exports: the recording shown (its panels, and its last record's), else
    the trace shown."""
    return window.recording if window.recording is not None else window.trace


def _text_setting(settings, key: str) -> str:
    """The settings' text under `key`; "" when it is missing or not text (an edited file)."""
    value = settings.value(key, "")
    return value if isinstance(value, str) else ""


def _number_setting(settings, key: str, default: int, low: int, high: int) -> int:
    """The settings' whole number under `key` within [low, high]; `default` when it is
    missing or cannot be read (as every other setting: an edited file never stops the app)."""
    try:
        value = round(float(settings.value(key, default)))
    except (TypeError, ValueError, OverflowError):
        return default
    return value if low <= value <= high else default


def _sizes(settings) -> tuple[int, int, int]:
    """The export width, height (px) and dpi last chosen, or the defaults."""
    return (_number_setting(settings, "export/width", DEFAULT_WIDTH, 16, MAX_PIXELS),
            _number_setting(settings, "export/height", DEFAULT_HEIGHT, 16, MAX_PIXELS),
            _number_setting(settings, "export/dpi", DEFAULT_DPI, 24, 2400))  # fmt: skip


def _default_base(window) -> str:
    folder = _text_setting(window.settings, "export/dir") or os.getcwd()
    what = "recording" if window.recording is not None else window.trace.mode
    name = _text_setting(window.settings, "export/name") or f"lstmviz-{what}"
    return str(Path(folder) / name)


def _remember(window, path: Path, name: bool = True) -> None:
    window.settings.setValue("export/dir", str(path.parent))
    if name:  # a panel's file name is not the next export's base (it would grow "-norm-rows…")
        window.settings.setValue("export/name", path.stem)


# The export's arguments, as the dialog names what they set
DIALOG_TERMS = {"size": "Image size", "width": "width", "height": "height", "dpi": "dpi",
                **{key: key.upper() for key in FORMATS}}  # fmt: skip


def dialog_term(name: str, value: str | None = None) -> str:
    """The dialog's words for export argument `name` (`errors.Term`): "PNG /x.png", "Image
    size"; an argument it has no field for, as the command line names it."""
    if name not in DIALOG_TERMS:
        return cli_term(name, value)
    return f"{DIALOG_TERMS[name]} {value}" if value else DIALOG_TERMS[name]


def in_dialog_terms(exc: Exception) -> str:
    """An export's error in the dialog's words: "--png /x.png: …" -> "PNG /x.png: …"."""
    return str(exc.worded(dialog_term) if isinstance(exc, LstmvizError) else exc)


PROGRESS_STEPS = 1000
PROGRESS_AFTER_MS = 300  # a quicker export shows no progress dialog


class ExportProgress:
    """A window-modal progress dialog with Cancel for an export (a long trace takes seconds
    per format): `report` is `export`'s `progress` callback. Shown once the export has taken
    `PROGRESS_AFTER_MS`; Cancel (or Esc) stops it at its next step, writing nothing."""

    def __init__(self, window) -> None:
        self.dialog = QProgressDialog("Exporting…", "Cancel", 0, PROGRESS_STEPS, window)
        self.dialog.setWindowTitle("Export")
        self.dialog.setWindowModality(Qt.WindowModal)
        self.dialog.setMinimumDuration(PROGRESS_AFTER_MS)
        self.dialog.setAutoReset(False)  # reaching the end is not a cancel, nor a restart
        self.dialog.setAutoClose(False)

    def report(self, fraction: float, what: str) -> bool:
        """Show `fraction` done and `what` is being done; False once Cancel was pressed."""
        self.dialog.setLabelText(what + "…")
        self.dialog.setValue(round(fraction * PROGRESS_STEPS))  # modal: handles the events
        return not self.dialog.wasCanceled()

    def close(self) -> None:
        self.dialog.close()
        self.dialog.deleteLater()


def _write(window, targets: dict[str, str], remember_name: bool = True, **options) -> bool:
    """Export the window's trace to `targets` ({format: path}), with a progress dialog that
    can cancel; errors go to a dialog."""
    progress = ExportProgress(window)
    try:
        try:
            written = export(_subject(window), **targets, view=_view_options(window), **options,
                             progress=progress.report)  # fmt: skip
        finally:
            progress.close()  # before an error dialog
    except ExportCancelled:
        window.message.setText("export cancelled: nothing written")
        return False
    except (LstmvizError, OSError) as exc:
        window.show_error("Cannot export", in_dialog_terms(exc))
        return False
    if "npz" in targets:
        window.files.add_recent(str(Path(targets["npz"]).resolve()))
    _remember(window, written[0], remember_name)
    window.message.setText("exported " + ", ".join(str(p) for p in written))
    return True


class ExportDialog(QDialog):
    """Formats, one base file name (each format adds its suffix), size, and the panels."""

    def __init__(self, window, panel: Panel | None = None):
        super().__init__(window)
        self.setWindowTitle("Export")
        s = window.settings
        self.checks = {}
        formats = QVBoxLayout()
        chosen = (_text_setting(s, "export/formats") or "png,svg,csv").split(",")
        for key, (text, _, _) in FORMATS.items():
            box = QCheckBox(text, checked=key in chosen, toolTip=TIPS[key])
            self.checks[key] = box
            formats.addWidget(box)
        self.base = QLineEdit(_default_base(window))
        self.base.setToolTip("Each format adds its suffix: NAME.png, NAME.svg, …")
        browse = QPushButton("Browse…", toolTip="Choose the folder and file name")
        browse.clicked.connect(self.browse)
        where = QHBoxLayout()
        where.addWidget(self.base, 1)
        where.addWidget(browse)
        self.width_box = QSpinBox(minimum=16, maximum=MAX_PIXELS, suffix=" px")
        self.height_box = QSpinBox(minimum=16, maximum=MAX_PIXELS, suffix=" px")
        self.dpi_box = QSpinBox(minimum=24, maximum=2400, suffix=" dpi")
        width, height, dpi = _sizes(s)
        self.width_box.setValue(width)
        self.height_box.setValue(height)
        self.dpi_box.setValue(dpi)
        self.dpi_box.setToolTip("Recorded in the PNG; text and lines scale with it (96: 1:1)")
        self.width_box.setToolTip("Width of the PNG and SVG in pixels (the PDF is A4)")
        self.height_box.setToolTip("Height of the PNG and SVG in pixels (the PDF is A4)")
        size = QHBoxLayout()
        for widget in (self.width_box, QLabel("×"), self.height_box, self.dpi_box):
            size.addWidget(widget)
        self.panels = window_panels(window)
        self.panel_box = QComboBox(toolTip="Every panel shown, laid out as in the window, "
                                   "or one of them")
        self.panel_box.addItem("All panels", None)
        for p in self.panels:
            self.panel_box.addItem(panel_title(p), p)
        if panel is not None and panel in self.panels:
            self.panel_box.setCurrentIndex(self.panels.index(panel) + 1)
        form = QFormLayout()
        form.addRow("Formats", formats)
        form.addRow("File name", where)
        form.addRow("Image size", size)
        form.addRow("Panels", self.panel_box)
        note = QLabel("Drawn as on screen (View → Log scale, Normalise); the same files as\n"
                      "lstmviz export TRACE.npz --png … --svg … --pdf … --csv …")  # fmt: skip
        note.setStyleSheet("color: #555")
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Export")
        buttons.button(QDialogButtonBox.Ok).setToolTip("Write the files (asks before replacing)")
        buttons.button(QDialogButtonBox.Cancel).setToolTip("Close without writing anything")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.settings = s

    def browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export to", self.base.text())
        if path:
            self.base.setText(self.strip_suffix(path))

    @staticmethod
    def strip_suffix(path: str) -> str:
        p = Path(path)
        return (
            str(p.with_suffix("")) if p.suffix.lower() in {f[1] for f in FORMATS.values()} else path
        )

    def targets(self) -> dict[str, str]:
        base = self.strip_suffix(os.path.expanduser(self.base.text().strip()))
        return {k: base + FORMATS[k][1] for k, box in self.checks.items() if box.isChecked()}

    def options(self) -> dict:
        panel = self.panel_box.currentData()
        return {
            "width": self.width_box.value(),
            "height": self.height_box.value(),
            "dpi": self.dpi_box.value(),
            "panels": [type(p) for p in ([panel] if panel else self.panels)],
        }

    def save_choices(self) -> None:
        s = self.settings
        s.setValue("export/formats", ",".join(k for k, b in self.checks.items() if b.isChecked()))
        s.setValue("export/width", self.width_box.value())
        s.setValue("export/height", self.height_box.value())
        s.setValue("export/dpi", self.dpi_box.value())


def export_dialog(window, panel: Panel | None = None) -> bool:
    """File → Export…: ask, then write. True when files were written."""
    if window.trace is None:
        return False
    dialog = ExportDialog(window, panel)
    if dialog.exec() != QDialog.Accepted:
        return False
    targets = dialog.targets()
    base = dialog.base.text().strip()
    if not targets or not base:
        window.show_error("Cannot export", "choose at least one format and a file name")
        return False
    if Path(base).expanduser().is_dir():
        window.show_error("Cannot export", f"{base} is a folder: add a file name to it, "
                          f"e.g. {Path(base) / 'lstmviz'}")  # fmt: skip
        return False
    options = dialog.options()
    if not options["panels"]:  # every panel hidden (View menu)
        if any(fmt in targets for fmt in IMAGE_FORMATS):
            window.show_error("Cannot export", "every panel is hidden: show one (View menu) "
                              "to export a PNG, SVG or PDF")  # fmt: skip
            return False
        options["panels"] = None  # the CSV and the trace draw no panel
    if not replace_ok(window, list(targets.values())):
        return False
    dialog.save_choices()
    return _write(window, targets, **options)


def replace_ok(window, paths: list[str]) -> bool:
    """True when none of `paths` exists, or the user agrees to replace those that do."""
    existing = [p for p in paths if Path(p).exists()]
    if not existing:
        return True
    answer = QMessageBox.question(
        window, "Replace files?",
        "These files exist already:\n\n" + "\n".join(existing) + "\n\nReplace them?",
        QMessageBox.Yes | QMessageBox.No, QMessageBox.No)  # fmt: skip
    return answer == QMessageBox.Yes


def export_panel(window, panel: Panel) -> bool:
    """Right-click → Export panel…: one panel to the file chosen (format from its suffix or
    the filter), at the export width and the panel's on-screen aspect ratio."""
    if window.trace is None:
        return False
    filters = ";;".join(FORMATS[k][2] for k in PANEL_FORMATS)
    start = _default_base(window) + "-" + panel_name(type(panel)) + ".png"
    path, chosen = QFileDialog.getSaveFileName(window, "Export panel", start, filters)
    if not path:
        return False
    suffix = Path(path).suffix.lower()
    fmt = next((k for k in PANEL_FORMATS if FORMATS[k][1] == suffix), None)
    if fmt is None:
        fmt = next((k for k in PANEL_FORMATS if FORMATS[k][2] == chosen), "png")
        path += FORMATS[fmt][1]  # a name the file dialog did not check: ask here
        if not replace_ok(window, [path]):
            return False
    width, _, dpi = _sizes(window.settings)
    aspect = panel.height() / panel.width() if panel.width() > 0 else 0.6
    height = max(int(round(width * min(max(aspect, 0.3), 2.0))), int(200 * dpi / 96))
    return _write(window, {fmt: path}, remember_name=False, width=width, height=height, dpi=dpi,
                  panels=[type(panel)])


def panel_at(window, pos: QPoint) -> Panel | None:
    """The window's panel under the global position `pos`, if any."""
    for panel in window_panels(window):
        if panel.isVisible() and panel.rect().contains(panel.mapFromGlobal(pos)):
            return panel
    return None


def export_under_cursor(window, pos: QPoint | None = None) -> bool:
    """File → Export panel under cursor: the panel the mouse points at, else say so."""
    panel = panel_at(window, QCursor.pos() if pos is None else pos)
    if panel is None:
        window.message.setText("export: point the mouse at a panel, then press Ctrl+Shift+E")
        return False
    return export_panel(window, panel)
