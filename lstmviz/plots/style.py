"""Colours: pyqtgraph's options for every plot, the curve palette, the heatmaps' colour map
(`colour`, values to RGBA; `finished_image`, a finished trace's whole heatmap) and `opaque` (a
translucent pen made opaque over a background)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor, QPen

from lstmviz.analysis.values import display_values, finite_range, kept

STYLE = {"antialias": True, "background": "w", "foreground": "#222"}  # pg.setConfigOptions
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]  # fmt: skip
COLOR_MAP = "viridis"
# The colour map as 256 RGBA entries, one uint32 per colour: what pyqtgraph's ColorBarItem
# gives an image it colours (`getLookupTable(nPts=256)`).
_TABLE = pg.colormap.get(COLOR_MAP).getLookupTable(nPts=256, alpha=True).astype(np.uint8)
_TABLE32 = np.ascontiguousarray(_TABLE).view(np.uint32).ravel()


def colour(shown: np.ndarray, levels: tuple[float, float], out: np.ndarray | None = None):
    """RGBA (uint8, [..., 4]) of display values, the colours pyqtgraph gives a float image
    with `levels` and the colour map's 256-entry table: index ⌊(v − lo)·256/(hi − lo)⌋ clipped
    to 0..255; NaN fully transparent. The heatmaps upload this, so a redraw does not
    re-colour the whole image (pyqtgraph does; bench/bench_gui.py --only latency)."""
    lo, hi = levels
    scale = 256.0 / ((hi - lo) or 1.0)
    index = np.subtract(shown, lo, dtype=np.float32)
    index *= np.float32(scale)
    nan = np.isnan(index)
    np.clip(index, 0, 255, out=index)
    index[nan] = 0
    if out is None:
        out = np.empty((*np.shape(shown), 4), np.uint8)
    packed = out.view(np.uint32).reshape(np.shape(shown))
    # mode="clip" (indices are 0..255 anyway): with the default, NumPy buffers `out`, and a
    # first call on a big image is very slow
    np.take(_TABLE32, index.astype(np.uint8), out=packed, mode="clip")
    if nan.any():
        packed[nan] = 0
    return out


def levels_of(lo: float, hi: float) -> tuple[float, float]:
    """A heatmap's colour levels for display values of finite range [lo, hi] ((inf, -inf):
    none finite)."""
    lo, hi = (lo, hi) if np.isfinite(lo) else (0.0, 1.0)
    return lo, hi if hi > lo else lo + 1.0


def finished_image(matrix: np.ndarray, log: bool, normalise: bool):
    """A finished trace's heatmap of `matrix` [R, T]: its display values ([R, T] float32, NaN
    blank; read-only), their finite (min, max), the colour levels and the RGBA image
    ([R, T, 4] uint8), as `HeatmapPanel` shows them. Kept with `matrix` while it lives:
    `plots.prepare` makes them in the window's worker thread, so the window's thread does not
    allocate and fill ~7 arrays of the image's size (each new page faults on its first write,
    slowly while the computing process writes a trace: bench/bench_gui.py --only life)."""

    def make(m: np.ndarray):
        shown = display_values(m, log, normalise, np.float32)
        found = finite_range(shown)
        levels = levels_of(*found)
        shown.setflags(write=False)
        return shown, found, levels, colour(shown, levels)

    return kept(matrix, f"image log={log} normalise={normalise}", make)


def opaque(pen: QPen, background: QColor) -> QPen:
    """pen with its translucent colour replaced by that colour composed over `background`:
    the same pixels on that background, but Qt strokes an opaque line much faster (grid lines;
    long noisy curves: the loss, the faded history)."""
    color = pen.color()
    alpha = color.alphaF()
    if alpha >= 1.0:
        return pen
    pairs = zip(color.getRgbF()[:3], background.getRgbF()[:3], strict=True)
    rgb = (alpha * c + (1.0 - alpha) * b for c, b in pairs)
    opaque = QPen(pen)
    opaque.setColor(QColor.fromRgbF(*rgb))
    return opaque
