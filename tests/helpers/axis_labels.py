"""The tick labels a panel's axis draws, read back: with their boxes (`axis_labels` of a panel's
side, `tick_texts` of an axis), a log axis label's number (`label_value`), labels that do not
overlap and say the value at their height (`check_labels`), on a gradient-norm panel shown
offscreen (`shown_norm_panel`). Qt is imported by the functions."""

from __future__ import annotations

import re

import numpy as np


def axis_labels(panel, side: str = "left") -> list[tuple]:
    """(rect, text) of the tick labels the axis draws at its current size."""
    from PySide6.QtGui import QImage, QPainter

    axis = panel.plot.getAxis(side)
    image = QImage(8, 8, QImage.Format_ARGB32)
    painter = QPainter(image)
    try:
        if axis.style["tickFont"] is not None:
            painter.setFont(axis.style["tickFont"])
        _, _, texts = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _, text in texts if text]


def shown_norm_panel(qtbot, y: np.ndarray, height: int, log: bool = True):
    """A gradient-norm panel of `y`, `height` px high, painted once offscreen."""
    from PySide6.QtCore import Qt

    from lstmviz.plots.panels.curves import NormPanel

    panel = NormPanel()
    qtbot.addWidget(panel)
    panel.setAttribute(Qt.WA_DontShowOnScreen)
    panel.resize(900, height)
    panel.set_options(log, False)
    panel.draw({"norm_h_total": np.asarray(y, np.float32)})
    panel.show()
    panel.grab()  # a first paint sizes the axes
    qtbot.wait(10)
    return panel


SUPERSCRIPTS = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")


def label_value(text: str) -> float:
    """The number a log axis label says: "0.002", "10⁻²⁰", "2·10⁻³"."""
    power = re.fullmatch(r"(?:([0-9.]+)·)?10([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)", text)
    if power is None:
        return float(text)
    return float(power.group(1) or 1) * 10.0 ** int(power.group(2).translate(SUPERSCRIPTS))


def check_labels(panel, labels: list[tuple]) -> None:
    """The labels do not overlap, and each says the value at its own height on the axis."""
    rects = sorted((rect for rect, _ in labels), key=lambda r: r.top())
    for a, b in zip(rects, rects[1:], strict=False):
        assert a.bottom() <= b.top(), [text for _, text in labels]
    axis = panel.plot.getAxis("left")
    lo, hi = axis.range
    height = axis.mapRectFromParent(axis.geometry()).height()
    for rect, text in labels:
        at = hi - rect.center().y() / height * (hi - lo)  # log10 of the value at the label
        assert abs(np.log10(label_value(text)) - at) * height / (hi - lo) < 1.5, (text, 10**at)


def tick_texts(axis) -> list[tuple]:
    """The tick labels the axis draws at its present size, with their boxes."""
    from PySide6.QtGui import QImage, QPainter

    image = QImage(10, 10, QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    try:
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _, text in specs[2]]
