"""SVG: a figure (`lstmviz.plots.export.figure.Figure`) as one SVG document (`svg`: vector
curves and text, heatmaps as embedded PNG images), made of pyqtgraph's SVG of each plot as a
group (`as_group`), heatmap images upscaled so viewers do not blur their cells, and a fix for
pyqtgraph's parser of Qt's paths (`closed_path_fix`), which also maps the paths' points in bulk
(pyqtgraph maps them one by one: seconds for a curve of 20 000 points)."""

from __future__ import annotations

import base64
import contextlib
import importlib
import math
import re
from collections.abc import Iterator
from xml.sax.saxutils import escape

import numpy as np
import pyqtgraph as pg
import pyqtgraph.exporters  # noqa: F401  (registers SVGExporter)
from PySide6.QtCore import QBuffer, QIODevice, QRectF, Qt
from PySide6.QtGui import QImage

from lstmviz.analysis.layout import LOGICAL_DPI
from lstmviz.plots.export.app import gui_style
from lstmviz.plots.export.header import svg_text

MIN_SVG_IMAGE_PX = 1024  # heatmaps are upscaled (nearest) so no SVG viewer blurs their cells


def _svg_module():
    # `pyqtgraph.exporters.SVGExporter` is the class; the module holds the helper to patch.
    return importlib.import_module("pyqtgraph.exporters.SVGExporter")


@contextlib.contextmanager
def closed_path_fix() -> Iterator[None]:
    """pyqtgraph 0.14's SVG exporter cannot parse the closing "Z" that Qt 6.12 writes at the end
    of a path (github.com/pyqtgraph/pyqtgraph/issues/3495; the ViewBox's clip rectangle has
    one): hide it from the
    parser and put it back."""
    module = _svg_module()
    original = module.correctCoordinates

    def correct(node, defs, item, options):
        closed = [p for p in node.getElementsByTagName("path") if "Z" in p.getAttribute("d")]
        for path in closed:
            d = re.sub(r"(^|\s)Z(?=\s|$)", r"\1Z0,0", path.getAttribute("d").strip())
            path.setAttribute("d", d)
        mapped = _map_paths(node, options, module.fn.transformCoordinates)
        for path, _ in mapped:  # an empty path: pyqtgraph leaves it alone
            path.setAttribute("d", "")
        original(node, defs, item, options)
        for path, d in mapped:
            path.setAttribute("d", d)
        for path in closed:
            path.setAttribute("d", re.sub(r"Z[^\sA-Za-z]*", "Z", path.getAttribute("d")))

    module.correctCoordinates = correct
    try:
        yield
    finally:
        module.correctCoordinates = original


def _map_path(d: str, m: list[float]) -> str:
    """The path data `d` ("M x,y L x,y …", as Qt writes it) through the matrix `m` (an SVG
    matrix(a, b, c, d, e, f)), written as pyqtgraph's `correctCoordinates` writes it: the
    same arithmetic on whole arrays, the same text."""
    letters, xs, ys = [], [], []
    for token in d.split(" "):
        x, y = token.split(",")
        letter = x[0] if x[0].isalpha() else ""
        letters.append(letter)
        xs.append(x[len(letter):])
        ys.append(y)
    x, y = np.array(xs, dtype=float), np.array(ys, dtype=float)
    with np.errstate(all="ignore"):  # NaN and Inf points are gaps, as in pyqtgraph
        new_x = (m[0] * x + m[2] * y + m[4]).tolist()
        new_y = (m[1] * x + m[3] * y + m[5]).tolist()
    text = "".join(f"{t}{a},{b} " for t, a, b in zip(letters, new_x, new_y, strict=True))
    return text if text[0] == "M" else "M" + text[1:]  # a path must start with a move


def _map_paths(node, options, transform) -> list:
    """Map the points of every path in a group of `node` holding paths only (pyqtgraph's
    `correctCoordinates` does the rest: its groups, texts, and removing the transforms) and
    set their stroke widths as it would (`transform`: its `transformCoordinates`). Returns
    [(path, its mapped data)] for the caller to blank while pyqtgraph runs and put back."""
    mapped = []
    for group in node.getElementsByTagName("g"):
        paths = [c for c in group.childNodes if c.nodeType == c.ELEMENT_NODE]
        if not paths or any(c.tagName != "path" or not c.getAttribute("d").strip()
                            for c in paths):  # fmt: skip
            continue
        match = re.match(r"matrix\((.*)\)", group.getAttribute("transform"))
        m = [float(a) for a in match.groups()[0].split(",")] if match else [1, 0, 0, 1, 0, 0]
        try:
            data = [_map_path(path.getAttribute("d").strip(), m) for path in paths]
        except ValueError:  # not Qt's plain form: pyqtgraph's own parser takes it
            continue
        width = group.getAttribute("stroke-width")
        for path, d in zip(paths, data, strict=True):
            scaling = path.getAttribute("vector-effect") == "non-scaling-stroke"
            if not scaling and width != "":
                ends = transform(np.array([[m[0], m[2], m[4]], [m[1], m[3], m[5]]]),
                                 np.array([[float(width), 0], [0, 0]]), transpose=True)  # fmt: skip
                path.setAttribute("stroke-width", str(((ends[0] - ends[1]) ** 2).sum() ** 0.5))
            if options.get("scaling stroke") is True and scaling:
                path.removeAttribute("vector-effect")
            mapped.append((path, d))
    return mapped


def upscale_png(match: re.Match) -> str:
    data = base64.b64decode(match.group(1))
    image = QImage.fromData(data, "PNG")
    side = max(image.width(), image.height())
    if image.isNull() or side >= MIN_SVG_IMAGE_PX:
        return match.group(0)
    k = math.ceil(MIN_SVG_IMAGE_PX / side)
    while k > 1 and image.width() * image.height() * k * k > 4_000_000:
        k -= 1
    if k <= 1:
        return match.group(0)
    big = image.scaled(
        image.width() * k, image.height() * k, Qt.IgnoreAspectRatio, Qt.FastTransformation
    )
    buffer = QBuffer()
    buffer.open(QIODevice.WriteOnly)
    big.save(buffer, "PNG")
    encoded = base64.b64encode(bytes(buffer.data())).decode("ascii")
    return f'xlink:href="data:image/png;base64,{encoded}"'


def unstroked(match: re.Match) -> str:
    """A <clipPath> whose shapes are neither stroked nor filled: viewers that do not clip
    (Qt's SVG Tiny renderer) draw them as shapes, and they inherit pyqtgraph's black stroke,
    a frame around every plot that the PNG does not have. Clipping ignores both."""
    return re.sub(r"<(path|rect)\b", r'<\1 stroke="none" fill="none"', match.group(0))


def as_group(inner: str, prefix: str, box: QRectF) -> str:
    """pyqtgraph's SVG document of one plot as a group at `box`, clipped to it, its ids
    made unique and its images upscaled. (A group, not a nested <svg>, which SVG Tiny
    viewers such as Qt's skip.)"""
    w, h = f"{box.width():.0f}", f"{box.height():.0f}"
    inner = re.sub(r"<\?xml[^>]*\?>\s*", "", inner)
    inner = re.sub(r"<title>.*?</title>\s*|<desc>.*?</desc>\s*", "", inner, flags=re.S)
    inner = re.sub(r"<style>.*?</style>\s*", "", inner, flags=re.S)
    inner = re.sub(r'(\bid="|url\(#|href="#)', rf"\1{prefix}", inner)
    inner = re.sub(r'xlink:href="data:image/png;base64,([^"]+)"', upscale_png, inner)
    inner = re.sub(r"<clipPath\b.*?</clipPath>", unstroked, inner, flags=re.S)
    inner = inner.replace('<rect width="100%" height="100%"', f'<rect width="{w}" height="{h}"')
    head = (
        f'<defs><clipPath id="{prefix}box"><rect width="{w}" height="{h}"/></clipPath></defs>'
        f'<g id="{prefix}plot" transform="translate({box.x():.0f},{box.y():.0f})" '
        f'clip-path="url(#{prefix}box)">'
    )
    inner = re.sub(r"<svg\b[^>]*>", lambda _: head, inner, count=1)
    return re.sub(r"</svg>\s*$", "</g>\n", inner)


def svg(figure, width: int, height: int, dpi: float, step=None) -> bytes:
    """`figure` as SVG, its physical size `width` × `height` px at `dpi` (as the PNG). `step`:
    called with the fraction of the plots written after each."""
    scale = dpi / LOGICAL_DPI
    w, h = width / scale, height / scale
    factor = figure.fit(w, h)
    w, h = round(w * factor), round(h * factor)
    parts = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        '<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" '
        f'version="1.1" width="{width / dpi:.3f}in" height="{height / dpi:.3f}in" '
        f'viewBox="0 0 {w} {h}">\n'
        f"<title>{escape(figure.title())}</title>\n"
        "<style>image { image-rendering: pixelated; }</style>\n"
        '<rect width="100%" height="100%" fill="#ffffff"/>\n'
    ]
    parts += svg_text(figure, w)
    with gui_style(), closed_path_fix():
        for index, (panel, box) in enumerate(figure.cells, start=1):
            exporter = pg.exporters.SVGExporter(panel.plot.getPlotItem())
            inner = exporter.export(toBytes=True).decode("utf-8")
            parts.append(as_group(inner, f"panel{index}_", box))
            if step is not None:
                step(index / len(figure.cells))
    parts.append("</svg>\n")
    return "".join(parts).encode("utf-8")
