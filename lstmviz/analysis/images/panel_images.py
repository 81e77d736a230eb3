"""The panels TensorBoard shows of one record (or trace), drawn with NumPy (`raster`): no Qt,
so they are drawn in a training process without a display, on any thread.

- `layers_image(names, curves, title)`: ‖dL/dh_t‖ of each direction over t on a log axis, a
  colour per layer (the app's palette), a Bidirectional's backward half dashed, as the app's
  "Gradient norm by layer" panel;
- `layer_map_image(names, curves, title)`: the layers × timesteps heatmap of log10 ‖dL/dh_t‖
  (viridis, a colour bar in decades; blank where a direction has no value: past its own
  length, or a norm ≤ 0), as the app's `layer_map` panel.

`names` [L] the directions, `curves` [L] arrays [T_k] (a graph's directions keep their own
lengths); both return RGB [height, width, 3] uint8.
"""

from __future__ import annotations

import math

import numpy as np

from lstmviz.analysis.images.raster import (
    BLACK,
    FONT_H,
    FONT_W,
    GREY,
    PALETTE,
    Canvas,
    text_width,
    viridis,
)
from lstmviz.analysis.values import display_values, finite_range

WIDTH, CURVES_HEIGHT = 640, 240  # TensorBoard fits an image into a card ~230 px high
GRID = (232, 232, 232)
NAME_CHARS = 22  # a direction's name is cut to this many characters in a legend or row label


def nice_ticks(lo: float, hi: float, most: int = 8, least_step: float = 0.0) -> np.ndarray:
    """Tick values in [lo, hi] at a step of 1, 2 or 5 × 10^k (at least `least_step`), at most
    about `most` of them."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        return np.zeros(0)
    span = max(hi - lo, 1e-12)
    raw = span / max(most - 1, 1)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    step = max(step, least_step)
    first = math.ceil(lo / step - 1e-9) * step
    return np.arange(first, hi + step * 1e-9, step)


def decade_label(k: float) -> str:
    """10^k as a tick label: "1e-3", "1", "1e2"."""
    k = int(round(k))
    return "1" if k == 0 else f"1e{k}"


def _cut(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 2] + ".."


def styles(names: list[str]) -> list[tuple[tuple[int, int, int], int]]:
    """(colour, dash) per direction: one colour per layer (a Bidirectional's two halves share
    it), dashed (6 px) for a backward half, as the app draws them."""
    layers: list[str] = []
    out = []
    for name in names:
        base, _, half = str(name).rpartition("/")
        layer = base if half in ("forward", "backward") and base else str(name)
        if layer not in layers:
            layers.append(layer)
        out.append((PALETTE[layers.index(layer) % len(PALETTE)], 6 if half == "backward" else 0))
    return out


def _matrix(curves: list[np.ndarray]) -> np.ndarray:
    """[L, max T_k] float64, NaN past each direction's own length."""
    steps = max((len(c) for c in curves), default=0)
    out = np.full((len(curves), steps), np.nan)
    for k, curve in enumerate(curves):
        out[k, : len(curve)] = np.asarray(curve, np.float64)
    return out


def layers_image(names: list[str], curves: list[np.ndarray], title: str) -> np.ndarray:
    """‖dL/dh_t‖ per direction over t, log y axis (see the module's docstring)."""
    names = [str(n) for n in names]
    logs = display_values(_matrix(curves), log=True, normalise=False)  # NaN where ≤ 0
    canvas = Canvas(WIDTH, CURVES_HEIGHT)
    canvas.text(WIDTH // 2, 5, title, anchor="centre")
    lo, hi = finite_range(logs)
    lo, hi = (math.floor(lo), math.ceil(hi)) if math.isfinite(lo) else (0, 1)
    hi = hi if hi > lo else lo + 1
    decades = nice_ticks(lo, hi, most=7, least_step=1.0)
    labels = [decade_label(k) for k in decades]
    legend = max(text_width(_cut(n)) for n in names) + 34 if names else 0
    left = 8 + FONT_H + 4 + max((text_width(s) for s in labels), default=0) + 6
    top, right, bottom = 24, WIDTH - 10 - legend, CURVES_HEIGHT - 38
    steps = logs.shape[1]

    def x_of(t):
        return left + np.asarray(t, np.float64) * (right - left - 1) / max(steps - 1, 1)

    def y_of(v):
        return bottom - 1 - (np.asarray(v, np.float64) - lo) * (bottom - top - 1) / (hi - lo)

    t_ticks = nice_ticks(0, max(steps - 1, 0), most=9, least_step=1.0)
    for t in t_ticks:
        canvas.rect(int(x_of(t)), top, int(x_of(t)) + 1, bottom, GRID)
        canvas.text(int(x_of(t)), bottom + 4, f"{int(t)}", anchor="centre")
    for k, label in zip(decades, labels, strict=True):
        canvas.rect(left, int(y_of(k)), right, int(y_of(k)) + 1, GRID)
        canvas.text(left - 5, int(y_of(k)) - FONT_H // 2, label, anchor="right")
    canvas.frame(left - 1, top - 1, right + 1, bottom + 1, GREY)
    canvas.text((left + right) // 2, bottom + 6 + FONT_H, "t (input position)", anchor="centre")
    canvas.text(8 + FONT_H // 2, (top + bottom) // 2, "|dL/dh_t|", anchor="centre", up=True)
    if not np.isfinite(logs).any():
        canvas.text((left + right) // 2, (top + bottom) // 2, "no gradient (every norm is 0)",
                    GREY, anchor="centre")  # fmt: skip
    ts = np.arange(steps)
    for k, (colour, dash) in enumerate(styles(names)):
        canvas.polyline(x_of(ts), y_of(logs[k]), colour, width=2, dash=dash)
    rows = max(1, (bottom - top) // (FONT_H + 4))
    for k, (name, (colour, dash)) in enumerate(zip(names, styles(names), strict=True)):
        if k == rows - 1 and len(names) > rows:
            canvas.text(right + 14, top + k * (FONT_H + 4), f"+{len(names) - k} more", GREY)
            break
        y = top + k * (FONT_H + 4)
        canvas.polyline([right + 12, right + 30], [y + FONT_H // 2] * 2, colour, 2, dash // 2)
        canvas.text(right + 34, y, _cut(name))
    return canvas.pixels


def layer_map_image(names: list[str], curves: list[np.ndarray], title: str) -> np.ndarray:
    """The layers × timesteps heatmap of log10 ‖dL/dh_t‖ (see the module's docstring)."""
    names = [str(n) for n in names]
    logs = display_values(_matrix(curves), log=True, normalise=False)
    count, steps = logs.shape
    row = int(np.clip(200 // max(count, 1), FONT_H + 2, 36))
    top = 24
    height = top + count * row + 44
    canvas = Canvas(WIDTH, height)
    canvas.text(WIDTH // 2, 5, title, anchor="centre")
    lo, hi = finite_range(logs)
    lo, hi = (lo, hi) if math.isfinite(lo) else (0.0, 1.0)
    hi = hi if hi > lo else lo + 1.0
    decades = nice_ticks(math.ceil(lo), math.floor(hi), most=6, least_step=1.0)
    labels = [decade_label(k) for k in decades]
    left = 8 + max((text_width(_cut(n)) for n in names), default=0) + 6
    bar = WIDTH - 14 - max((text_width(s) for s in labels), default=FONT_W) - 6 - 14
    right, bottom = bar - 16, top + count * row
    width = max(right - left, 1)
    if steps:
        columns = np.minimum((np.arange(width) * steps) // width, steps - 1)
        cells = viridis((logs[:, columns] - lo) / (hi - lo))  # [L, width, 3]
        canvas.paste(left, top, np.repeat(cells, row, axis=0))
    canvas.frame(left - 1, top - 1, right + 1, bottom + 1, GREY)
    for k, name in enumerate(names):
        canvas.text(left - 5, top + k * row + (row - FONT_H) // 2, _cut(name), anchor="right")
    for t in nice_ticks(0, max(steps - 1, 0), most=9, least_step=1.0):
        x = left + int((t + 0.5) * width / max(steps, 1))
        canvas.rect(x, bottom, x + 1, bottom + 4, BLACK)
        canvas.text(x, bottom + 5, f"{int(t)}", anchor="centre")
    canvas.text((left + right) // 2, bottom + 7 + FONT_H, "t (input position)", anchor="centre")
    # the colour bar: the colour map from lo (bottom) to hi (top), ticked at whole decades
    span = max(bottom - top, 1)
    ramp = viridis(np.linspace(1.0, 0.0, span))[:, None, :]
    canvas.paste(bar, top, np.repeat(ramp, 14, axis=1))
    canvas.frame(bar - 1, top - 1, bar + 15, bottom + 1, GREY)
    for k, label in zip(decades, labels, strict=True):
        y = top + int(round((hi - k) / (hi - lo) * (span - 1)))
        canvas.rect(bar + 14, y, bar + 18, y + 1, BLACK)
        canvas.text(bar + 20, y - FONT_H // 2, label)
    return canvas.pixels
