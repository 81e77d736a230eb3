"""Panels drawn offscreen and written to files: `writer` (`export()`: PNG, SVG, PDF, CSV and
NPZ, the entry `lstmviz export` and the window's Export call), `figure` (a trace's figure),
`recording_figure`, `compare_figure` (two runs), `fitting` (panels fitted to their boxes) and
`svg`.

pyqtgraph (imported by the figures, never by `writer` until it draws); imports `plots.panels`
and the floors below. `lstmviz.plots.export.export` and `ExportError` are `writer`'s.
"""

from lstmviz.plots.export.writer import ExportError, export

__all__ = ["ExportError", "export"]
