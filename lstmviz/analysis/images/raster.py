"""Pictures drawn with NumPy alone: for a training process with no display, on any thread (the
TensorBoard panels, `lstmviz.analysis.images.panel_images`), where Qt cannot draw.

`Canvas(width, height)` holds `pixels` [height, width, 3] uint8 RGB; it fills rectangles, draws
polylines (any width, dashed; NaN breaks a line), pastes images and writes text in a bitmap
font (ASCII; anything else is drawn as "?"), across or up the page. `viridis(v)` colours values
in [0, 1] with the colour map the app's heatmaps use; `png(pixels)` encodes a picture as PNG.
Coordinates are pixels, x to the right and y down from the top-left corner.
"""

from __future__ import annotations

import base64
import functools
import struct
import zlib

import numpy as np

RGB = tuple[int, int, int]
WHITE, BLACK, GREY = (255, 255, 255), (34, 34, 34), (120, 120, 120)
# The app's curve palette (`lstmviz.plots.style.PALETTE`) as RGB.
PALETTE = [(0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E), (0x2C, 0xA0, 0x2C), (0xD6, 0x27, 0x28),
           (0x94, 0x67, 0xBD), (0x8C, 0x56, 0x4B), (0xE3, 0x77, 0xC2), (0x7F, 0x7F, 0x7F),
           (0xBC, 0xBD, 0x22), (0x17, 0xBE, 0xCF)]  # fmt: skip
BLANK = (224, 224, 224)  # a heatmap cell without a value (NaN, or ≤ 0 on a log scale)

# Viridis, the app's heatmap colour map (`lstmviz.plots.style.COLOR_MAP`), at 33 evenly spaced
# points of [0, 1] as RGB hex; linear between them it stays within 2/255 of pyqtgraph's
# 256-entry table (tests/callbacks/test_tensorboard.py compares them).
_VIRIDIS = (
    "440154470d6048186a482374472d7b4537814240863e49893b528b375b8d33638d2f6b8e2c728e297a8e"
    "26828e23898e21908c1f978b1f9f8821a68527ad8131b57b3ebc744dc26c5cc8636ece5882d34d95d840"
    "aadc32c0df25d5e21aeae51afde725"
)

# A bitmap font: the ASCII characters 32–126, each a cell FONT_W × FONT_H pixels of coverage
# in four levels (0, 1/3, 2/3, 1), 2 bits a pixel, row by row, packed four pixels a byte (the
# first in the high bits) and base64-encoded: DejaVu Sans Mono at 11 px, rendered once.
FONT_W, FONT_H = 7, 12
_FONT = (
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAcAHABwAcAGAAgAAAHAAAAAAAAAABiAYgGIAAAAAAAAAAAAAAAAAAAAAAYgJUf"
    "/gjAYg//CJAiAAAAAAAAAAAIAf0NgDYAbkAnAJw/0AgAIAAAAAH0CWAfSAFAJAYeAIkB4AAAAAAAAAB+AkAJAC0BnFka"
    "WCgvZAAAAAAAAAAIACAAgAAAAAAAAAAAAAAAAAAAAUAMAGACQAkAJACQAYADAAUAAAAACAAYADAAwAJACQAwAMAGACAA"
    "AAAAAAAIAiUC4AuAiUAgAAAAAAAAAAAAAAAAAAAAgAIC/8AgAIAAAAAAAAAAAAAAAAAAAAAAAAAAAcAGACQAAAAAAAAA"
    "AAAAAAAAPgAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAcAHAAAAAAAAAAABgAwAYAMAGACQBgAkAYAAAAAAAAB+AkkMGHBx"
    "2cMGCSQfgAAAAAAAAAC9ADQA0ANADQA0ANAv8AAAAAAAAAB+AgkAKADQCQCQCQB/4AAAAAAAAAB+AgoAJA+AAkAGFCgv"
    "gAAAAAAAAAALAGwCMBTAgwf/ADAAwAAAAAAAAAD/QwAMAD+AAoAGACR/gAAAAAAAAAAvQoAMAGuB0oMHDSgbgAAAAAAA"
    "AAH/gAkAMAGACQBwAkAMAAAAAAAAAAB+A0oNKB+A0ocHDSgfgAAAAAAAAAB+A0kYGDSwfoAGAHQvQAAAAAAAAAAAAAAB"
    "wAcAAAAAAcAHAAAAAAAAAAAAAAABwAcAAAAAAcAGACQAAAAAAAAAAAAAGBpC0AGkABgAAAAAAAAAAAAAAAAAAL/wAAv/"
    "AAAAAAAAAAAAAAAAAAAZABqAAsGoGQAAAAAAAAAAAAC+AAoANAJAGABgAAAGAAAAAAAAAAAvQ0cYCYbmJJiSZflgAKAA"
    "vQAAAAAsAKQDYBjAkkP+GAyQNAAAAAAAAAD+QwYMKD/AwYMDDBw/kAAAAAAAAAAvQoIMAHABwAMACggL0AAAAAAAAAH5"
    "Bh0YGGBxgcYGGHR+QAAAAAAAAAD/gwAMAD/gwAMADAA/8AAAAAAAAAC/wkAJAC/gkAJACQAkAAAAAAAAAAAuQoUcAGAB"
    "h8cDCRwL0AAAAAAAAAGBxgcYHH/xgcYHGBxgcAAAAAAAAAD/gHABwAcAHABwAcA/4AAAAAAAAAA/AAwAMADAAwAMFHAv"
    "QAAAAAAAAAGBxhwZ0H4B3QYcGChgNAAAAAAAAADQA0ANADQA0ANADQA/8AAAAAAAAALByksqbJpyXMkDJAyQMAAAAAAA"
    "AAHRx4caHGZxjcYrGDxgsAAAAAAAAABuA0ocHGBxgccHDSgbgAAAAAAAAAD+QwcMDDBw/kMADAAwAAAAAAAAAABuA0oc"
    "HGBxgccHDSgbgAJAAAAAAAH+BwocGHCR/gcdHBhwJAAAAAAAAAB+A0UcACkAFkAHCCgfgAAAAAAAAAL/0HABwAcAHABw"
    "AcAHAAAAAAAAAAHBhwYcGHBhwYcGDSgfgAAAAAAAAAKAxgcMGCSQYwDYApAHAAAAAAAAAAMAqQJlyVpxpcaKDjg0kAAA"
    "AAAAAAHAwokDYAcALQGMDRigNAAAAAAAAAKAw0oGMAtAHABwAcAHAAAAAAAAAAD/wAYAMAJAGADACQA/9AAAAAAAC4Ak"
    "AJACQAkAJACQAkAJAC4AAAAAAAGAAkAGAAkAGAAwAGAAwAGAAAAADwAMADAAwAMADAAwAMADADwAAAAAAAAtAZwYGAAA"
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAD/+CAAYAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAP4ACgf4MGHCgv"
    "oAAAAAAAMADAAwAO4DigwMMDDSg7gAAAAAAAAAAAAAAC+CgA0ANACgAL4AAAAAAAAGABgAYH6DShgYYGDSgfoAAAAAAA"
    "AAAAAAAG5DRh/8YADQAb4AAAAAAAAuAYAGAP+AYAGABgAYAGAAAAAAAAAAAAAAAH6DShgYYGDSgfoAJC+AAAMADAAwAN"
    "4DSgwYMGDBgwYAAAAAAAAwAAAAALwAMADAAwAMA/8AAAAAAAAkAAAAAH0AJACQAkAJACQAwD4AAAJACQAkAJKCaAvAJo"
    "CSQkMAAAAAAAPQAkAJACQAkAJACQAYAC4AAAAAAAAAAAAAAbeGcxSIUiFIhSIAAAAAAAAAAAAAAN4DSgwYMGDBgwYAAA"
    "AAAAAAAAAAAH4DShwYcGDSgfgAAAAAAAAAAAAAAN4DigwMMDDSg7gMADAAAAAAAAAAAH6DShwYcGDSgfoAGABgAAAAAA"
    "AAADvQ4AMADAAwAMAAAAAAAAAAAAAAAH9CQApQBtACQ/gAAAAAAAAAAkAJAf+AkAJACQAkAH4AAAAAAAAAAAAAAMGDBg"
    "wYMGCSgfoAAAAAAAAAAAAAAYDDBgkkGMA5ALAAAAAAAAAAAAAAAwBpAlnMamDmgo0AAAAAAAAAAAAAAMGBmALAC0BjBw"
    "YAAAAAAAAAAAAAAYDCRgYgDYApAHACgDgAAAAAAAAAAL+ACACQCQBgA/4AAAAAAAAtAMADABgC0AKABwAMADAAtAAAAA"
    "AgAIACAAgAIACAAgAIACAAgAIAAALQAYAGAAwALQDQBgAYAGALQAAAAAAAAAAAAAAAABtEUuAAAAAAAAAAAA"
)


@functools.cache
def _glyphs() -> np.ndarray:
    """The font's cells, [95, FONT_H, FONT_W] float32 coverage in [0, 1]."""
    packed = np.frombuffer(base64.b64decode("".join(_FONT)), np.uint8)
    levels = np.stack([(packed >> shift) & 3 for shift in (6, 4, 2, 0)], axis=1).ravel()
    return (levels.reshape(95, FONT_H, FONT_W) / 3.0).astype(np.float32)


@functools.cache
def _viridis_points() -> np.ndarray:
    """[33, 3] float64: the colour map's points."""
    raw = bytes.fromhex(_VIRIDIS)
    return np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.float64)


def viridis(values: np.ndarray) -> np.ndarray:
    """Values [...] in [0, 1] (clipped) → RGB [..., 3] uint8; NaN → BLANK."""
    values = np.asarray(values, np.float64)
    points = _viridis_points()
    at = np.linspace(0.0, 1.0, len(points))
    clipped = np.clip(np.nan_to_num(values, nan=0.0), 0.0, 1.0)
    out = np.stack([np.interp(clipped, at, points[:, c]) for c in range(3)], axis=-1)
    out = np.round(out).astype(np.uint8)
    out[np.isnan(values)] = BLANK
    return out


def text_width(text: str) -> int:
    """Pixels a line of `text` takes across."""
    return FONT_W * len(text)


def text_mask(text: str) -> np.ndarray:
    """Coverage of a line of text, [FONT_H, FONT_W · len(text)] float32 in [0, 1]."""
    codes = np.array([ord(c) - 32 if 32 <= ord(c) < 127 else ord("?") - 32 for c in text],
                     np.int64)  # fmt: skip
    if codes.size == 0:
        return np.zeros((FONT_H, 0), np.float32)
    cells = _glyphs()[codes]  # [n, H, W]
    return np.concatenate(list(cells), axis=1)


class Canvas:
    """An RGB picture being drawn: `pixels` [height, width, 3] uint8, filled with `background`.
    Whatever falls outside it is clipped."""

    def __init__(self, width: int, height: int, background: RGB = WHITE):
        self.pixels = np.empty((int(height), int(width), 3), np.uint8)
        self.pixels[...] = background

    @property
    def width(self) -> int:
        return self.pixels.shape[1]

    @property
    def height(self) -> int:
        return self.pixels.shape[0]

    def rect(self, x0: int, y0: int, x1: int, y1: int, colour: RGB) -> None:
        """Fill the pixels x0 ≤ x < x1, y0 ≤ y < y1."""
        x0, x1 = max(0, int(x0)), min(self.width, int(x1))
        y0, y1 = max(0, int(y0)), min(self.height, int(y1))
        if x0 < x1 and y0 < y1:
            self.pixels[y0:y1, x0:x1] = colour

    def frame(self, x0: int, y0: int, x1: int, y1: int, colour: RGB) -> None:
        """A one-pixel outline just inside the box x0 ≤ x < x1, y0 ≤ y < y1."""
        self.rect(x0, y0, x1, y0 + 1, colour)
        self.rect(x0, y1 - 1, x1, y1, colour)
        self.rect(x0, y0, x0 + 1, y1, colour)
        self.rect(x1 - 1, y0, x1, y1, colour)

    def paste(self, x0: int, y0: int, image: np.ndarray) -> None:
        """Put `image` [h, w, 3] uint8 with its top-left corner at (x0, y0)."""
        h, w = image.shape[:2]
        xs, ys = slice(max(0, -x0), max(0, min(w, self.width - x0))), slice(
            max(0, -y0), max(0, min(h, self.height - y0)))  # fmt: skip
        part = image[ys, xs]
        if part.size:
            y, x = max(0, y0), max(0, x0)
            self.pixels[y : y + part.shape[0], x : x + part.shape[1]] = part

    def polyline(self, x, y, colour: RGB, width: int = 1, dash: int = 0) -> None:
        """A line through the points (x[i], y[i]) [N]; a point with a NaN or infinite
        coordinate leaves a gap. `dash` > 0: dashes and gaps of `dash` pixels along it."""
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        ok = np.isfinite(x) & np.isfinite(y)
        if x.size == 1 and ok[0]:
            self._dots(x, y, colour, width)
            return
        keep = ok[:-1] & ok[1:]
        lone = ok & ~np.concatenate([[False], keep]) & ~np.concatenate([keep, [False]])
        self._dots(x[lone], y[lone], colour, width)  # a point between two gaps
        x0, y0, x1, y1 = x[:-1][keep], y[:-1][keep], x[1:][keep], y[1:][keep]
        if x0.size == 0:
            return
        dx, dy = x1 - x0, y1 - y0
        n = np.ceil(np.maximum(np.abs(dx), np.abs(dy))).astype(np.int64) + 1  # samples
        segment = np.repeat(np.arange(n.size), n)
        first = np.repeat(np.cumsum(n) - n, n)
        frac = (np.arange(n.sum()) - first) / np.maximum(np.repeat(n - 1, n), 1)
        px, py = x0[segment] + frac * dx[segment], y0[segment] + frac * dy[segment]
        if dash > 0:
            length = np.hypot(dx, dy)
            along = np.repeat(np.cumsum(length) - length, n) + frac * length[segment]
            on = (along // dash) % 2 == 0
            px, py = px[on], py[on]
        self._dots(px, py, colour, width)

    def _dots(self, x: np.ndarray, y: np.ndarray, colour: RGB, width: int) -> None:
        """Squares `width` pixels wide centred on the points."""
        x, y = np.rint(x).astype(np.int64), np.rint(y).astype(np.int64)
        for oy in range(-(width // 2), width - width // 2):
            for ox in range(-(width // 2), width - width // 2):
                xs, ys = x + ox, y + oy
                inside = (xs >= 0) & (xs < self.width) & (ys >= 0) & (ys < self.height)
                self.pixels[ys[inside], xs[inside]] = colour

    def text(self, x: int, y: int, text: str, colour: RGB = BLACK, anchor: str = "left",
             up: bool = False) -> None:  # fmt: skip
        """Write one line of `text`. `anchor` "left", "centre" or "right": where x is along
        the line; y is the line's top edge (its middle for text going up). `up`: the line runs
        from the bottom up (an axis label), centred on (x, y) lengthwise when anchor is
        "centre"."""
        mask = text_mask(text)
        if up:
            mask = np.rot90(mask)  # [len · FONT_W, FONT_H]
            h, w = mask.shape
            x0 = int(x) - w // 2
            y0 = {"left": int(y) - h, "centre": int(y) - h // 2, "right": int(y)}[anchor]
        else:
            h, w = mask.shape
            x0 = {"left": int(x), "centre": int(x) - w // 2, "right": int(x) - w}[anchor]
            y0 = int(y)
        self._blend(x0, y0, mask, colour)

    def _blend(self, x0: int, y0: int, mask: np.ndarray, colour: RGB) -> None:
        h, w = mask.shape
        xa, ya = max(0, x0), max(0, y0)
        xb, yb = min(self.width, x0 + w), min(self.height, y0 + h)
        if xa >= xb or ya >= yb:
            return
        a = mask[ya - y0 : yb - y0, xa - x0 : xb - x0, None]
        region = self.pixels[ya:yb, xa:xb].astype(np.float32)
        blended = region * (1.0 - a) + np.asarray(colour, np.float32) * a
        self.pixels[ya:yb, xa:xb] = np.rint(blended).astype(np.uint8)


def png(pixels: np.ndarray) -> bytes:
    """A PNG file of an RGB picture [height, width, 3] uint8 (8 bits a channel, no filter)."""
    pixels = np.ascontiguousarray(pixels, np.uint8)
    height, width = pixels.shape[:2]
    rows = np.concatenate([np.zeros((height, 1), np.uint8), pixels.reshape(height, -1)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b""))  # fmt: skip
