"""Record a PyTorch module's gradient flow while the user's own loop trains it.

    from lstmviz.torch import GradientFlowRecorder
    recorder = GradientFlowRecorder(model, (x[:64], y[:64]), "run.lvz", every=50, loss_fn="mse")
    for epoch in range(5):
        for xb, yb in loader:
            ...; loss.backward(); optimizer.step()
            recorder.step(loss, epoch)
    recorder.close()

Every N-th `step()` runs model mode (`lstmviz.torch.gradients`) on the fixed data with the
module's current weights and appends a record to the `.lvz` (`lstmviz.io.recording`, the format
the Keras callback writes and the app follows live). Training goes on exactly as without it:
the trace runs in eval mode (no dropout) and restores every training flag, reads the weights
and writes nothing back (the parameters' .grad included), and restores PyTorch's random state.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from lstmviz.core.errors import LstmvizError
from lstmviz.io import files
from lstmviz.io.recording import RecordingWriter, check_replaceable, record_rows
from lstmviz.io.trace import GradientTrace
from lstmviz.torch.gradients import Tracer

WHERE = "GradientFlowRecorder"


class GradientFlowRecorder:
    """Appends a record to `path` (.lvz) every `every` calls of `step()`. `data`: x, or (x, y),
    held fixed (x as `model_gradients` takes it: a tensor or a tuple of the module's
    arguments); `loss_fn` as for `model_gradients`."""

    def __init__(self, module, data, path, every: int = 1, loss_fn=None):
        if isinstance(every, bool) or not isinstance(every, int | np.integer) or every < 1:
            raise LstmvizError(f"{WHERE}: every must be a whole number ≥ 1, got {every!r}")
        self.path = files.check_output(path, WHERE, files.RECORDINGS, "recordings")
        check_replaceable(Path(self.path), WHERE)
        if isinstance(data, tuple) and len(data) == 2:
            self.x, self.y = data
        else:
            self.x, self.y = data, None
        self.every = int(every)
        self.tracer = Tracer(module, loss_fn, self.y is not None)
        self.writer = RecordingWriter(self.path, self.every)
        self.steps = 0
        given = (("x", self.x), ("y", self.y))
        shapes = ", ".join(f"{n} {list(a.shape)}" for n, a in given if hasattr(a, "shape"))
        self.source = f"{WHERE} data: {shapes}"

    @property
    def records(self) -> int:
        """Records written so far."""
        return self.writer.records

    def trace(self) -> GradientTrace:
        """Model mode at the module's current weights on the recorder's data."""
        return self.tracer.trace(self.x, self.y, self.source)

    def step(self, loss=None, epoch: int = 0) -> GradientTrace | None:
        """Count one training step (call it after `optimizer.step()`); every N-th writes a
        record and returns its trace. `loss`: the training loss of the step (a tensor or a
        number; shown beside the recorded loss), `epoch` the epoch it belongs to."""
        self.steps += 1
        if self.steps % self.every:
            return None
        start = time.perf_counter()
        trace = self.trace()
        train_loss = np.nan if loss is None else float(loss.detach() if hasattr(
            loss, "detach") else loss)  # fmt: skip
        rows = record_rows(trace, self.steps, int(epoch), train_loss,
                           time.perf_counter() - start, self.tracer.loss_name)  # fmt: skip
        self.writer.append(rows, trace)
        return trace

    def close(self) -> None:
        """Mark the recording finished (readers and the app see it so); a later `step()`
        appends to it again."""
        self.writer.close()

    def __enter__(self) -> GradientFlowRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
