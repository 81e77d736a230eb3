"""TensorBoard event files read back with TensorBoard's own EventAccumulator (`read`), a
scalar's steps and values (`scalar_series`), and lstmviz's panel images checked
(`check_images`). TensorBoard and Qt are imported by the functions (TensorBoard is optional)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lstmviz.analysis.images.raster import PALETTE
from lstmviz.tensorboard import PANELS

if TYPE_CHECKING:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def read(logdir: Path) -> EventAccumulator:
    """The event files in `logdir`, every image and scalar kept."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(logdir), size_guidance={"images": 0, "scalars": 0})
    events.Reload()
    return events


def scalar_series(events: EventAccumulator, tag: str) -> tuple[list[int], np.ndarray]:
    """(the steps, the values) of scalar `tag`."""
    found = events.Scalars(tag)
    return [e.step for e in found], np.array([e.value for e in found], np.float64)


def check_images(events: EventAccumulator, steps: list[int]) -> None:
    """One PNG per record per panel, at the records' steps, of the size it says, not blank."""
    from PySide6.QtGui import QImage

    for panel in PANELS:
        found = events.Images(f"lstmviz/panels/{panel}")
        assert [e.step for e in found] == steps, panel
        for e in found:
            image = QImage.fromData(e.encoded_image_string)
            assert not image.isNull() and (image.width(), image.height()) == (e.width, e.height)
            assert image.width() == 640 and image.height() >= 100
            rgb = image.convertToFormat(QImage.Format.Format_RGB888)
            pixels = np.frombuffer(rgb.constBits(), np.uint8).reshape(e.height, -1)
            colours = np.unique(pixels[:, : 3 * e.width].reshape(-1, 3), axis=0)
            assert len(colours) >= 5  # the background, grid, text, curves or a colour map
            if panel == "layers":  # the first layer's curves in the app's first colour
                assert (colours == PALETTE[0]).all(axis=1).any()
            assert (pixels != 255).mean() > 0.03, panel  # not blank
