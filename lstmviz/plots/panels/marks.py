"""Marks that span a plot's height over some x range, whatever its y range or log mode:
`PassBoundaries` (dotted lines between passes) and `NonFiniteMarks` (red bands over the steps
where a trace holds NaN or Inf)."""

from __future__ import annotations

import numpy as np
import numpy.ma  # noqa: F401 (np.unique imports it on first use: a stall inside a panel's draw)
import pyqtgraph as pg
from PySide6.QtCore import QLineF, QRectF, Qt


class FullHeight(pg.GraphicsObject):
    """One item for any number of marks that span the plot's height over some x range,
    whatever the y range or log mode, and never stretch the auto range."""

    def x_extent(self) -> tuple[float, float] | None:
        """The marks' leftmost and rightmost x (None: nothing to draw)."""
        raise NotImplementedError

    def viewRangeChanged(self) -> None:  # noqa: N802 (pyqtgraph's name)
        self.prepareGeometryChange()
        super().viewRangeChanged()

    def _view(self) -> QRectF | None:
        view = self.viewRect()
        return None if view is None or self.x_extent() is None else view

    def boundingRect(self) -> QRectF:  # noqa: N802
        view = self._view()
        if view is None:
            return QRectF()
        a, b = self.x_extent()
        return QRectF(a, view.top(), b - a, view.height()).normalized()

    def dataBounds(self, axis, frac=1.0, orthoRange=None):  # noqa: N802,N803
        return None


class PassBoundaries(FullHeight):
    """Dotted lines between passes, one item (P=400 as 399 InfiniteLines stalled the window)."""

    def __init__(self):
        super().__init__()
        self.positions = np.zeros(0)
        self.setZValue(-10)  # under the curves
        self.pen = pg.mkPen("#888", width=1, style=Qt.DotLine)
        self.pen.setCosmetic(True)

    def set_positions(self, positions) -> None:
        positions = np.asarray(positions, np.float64)
        if np.array_equal(positions, self.positions):
            return
        self.prepareGeometryChange()
        self.positions = positions
        self.update()

    def x_extent(self) -> tuple[float, float] | None:
        return (self.positions[0], self.positions[-1]) if self.positions.size else None

    def paint(self, painter, *args) -> None:
        view = self._view()
        if view is None:
            return
        painter.setPen(self.pen)
        shown = self.positions[(self.positions >= view.left()) & (self.positions <= view.right())]
        painter.drawLines([QLineF(x, view.top(), x, view.bottom()) for x in shown])


class NonFiniteMarks(FullHeight):
    """Red see-through bands over the steps where a trace holds NaN or Inf (a run of
    neighbouring steps is one band), at least a pixel wide (the outline's cosmetic pen)."""

    COLOR = (220, 0, 0)

    def __init__(self):
        super().__init__()
        self.steps = np.zeros(0, np.int64)
        self.spans: list[tuple[int, int]] = []
        self.setZValue(-20)  # under the curves
        self.pen = pg.mkPen(*self.COLOR, 200, width=1)
        self.pen.setCosmetic(True)
        self.brush = pg.mkBrush(*self.COLOR, 60)

    def set_steps(self, steps) -> None:
        steps = np.unique(np.asarray(steps if steps is not None else [], np.int64).ravel())
        if np.array_equal(steps, self.steps):
            return
        self.prepareGeometryChange()
        self.steps = steps
        breaks = np.flatnonzero(np.diff(steps) > 1)
        starts = np.r_[steps[:1], steps[breaks + 1]] if steps.size else []
        ends = np.r_[steps[breaks], steps[-1:]] if steps.size else []
        self.spans = [(int(a), int(b)) for a, b in zip(starts, ends, strict=True)]
        self.update()

    def x_extent(self) -> tuple[float, float] | None:
        return (self.spans[0][0] - 0.5, self.spans[-1][1] + 0.5) if self.spans else None

    def paint(self, painter, *args) -> None:
        view = self._view()
        if view is None:
            return
        painter.setPen(self.pen)
        painter.setBrush(self.brush)
        for a, b in self.spans:
            painter.drawRect(QRectF(a - 0.5, view.top(), b - a + 1.0, view.height()))
