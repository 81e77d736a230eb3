"""Panels drawn offscreen and written to files: `writer` (`export()`, the entry of `lstmviz
export` and the window's Export: checks, temporary files, progress), one module per format
(`png`, `svg`, `pdf`, `csv`), the figures (`figure` a trace's, `recording_figure`,
`compare_figure` two runs) and what they share: `app` (the QApplication, started in one place,
and pyqtgraph's style), `header` (the figure's text), `fitting` (panels fitted to their boxes).

pyqtgraph (imported by the figures and the formats, never by `writer` until it draws); imports
`plots.panels` and the floors below. `lstmviz.plots.export.export` and `ExportError` are
`writer`'s.
"""

from lstmviz.plots.export.writer import ExportError, export

__all__ = ["ExportError", "export"]
