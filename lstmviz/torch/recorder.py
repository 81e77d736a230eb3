"""Record a PyTorch module's gradient flow while the user's own loop trains it.

    from lstmviz.torch import GradientFlowRecorder
    recorder = GradientFlowRecorder(model, (x[:64], y[:64]), "run.lvz", every=50, loss_fn="mse")
    for epoch in range(5):
        for xb, yb in loader:
            ...; loss.backward(); optimizer.step()
            recorder.step(loss, epoch)
    recorder.close()

Every N-th `step()` runs model mode (`lstmviz.torch.tracer`) on the fixed data with the
module's current weights and appends a record to the `.lvz` (`lstmviz.io.recording`, the format
the Keras callback writes and the app follows live). Training goes on exactly as without it:
the trace runs in eval mode (no dropout) and restores every training flag, reads the weights
and writes nothing back (the parameters' .grad included), and restores PyTorch's random state.

Under `torch.distributed` (an initialised process group of N > 1 ranks; the module may be
wrapped in DistributedDataParallel, whose `.module` is traced) every rank makes the recorder
and calls `step()` alike: each traces its share of the data, rank 0 combines the shares into
the record one process would compute on the whole batch and alone opens and writes the file
(`lstmviz.torch.distributed`). An error on any rank is raised on every rank.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from lstmviz.core.errors import LstmvizError
from lstmviz.io import files
from lstmviz.io.recording import RecordingWriter, check_replaceable, record_rows
from lstmviz.io.trace import GradientTrace
from lstmviz.tensorboard import TensorBoardWriter
from lstmviz.torch import distributed
from lstmviz.torch.tracer import Tracer

WHERE = "GradientFlowRecorder"


class GradientFlowRecorder:
    """Appends a record to `path` (.lvz) every `every` calls of `step()`. `data`: x, or (x, y),
    held fixed (x as `model_gradients` takes it: a tensor or a tuple of the module's
    arguments); `loss_fn` as for `model_gradients`. `tensorboard`: a folder to write each
    record to as TensorBoard scalars and images as well (`lstmviz.tensorboard`; rank 0 alone),
    checked here."""

    def __init__(self, module, data, path, every: int = 1, loss_fn=None, tensorboard=None):
        if isinstance(every, bool) or not isinstance(every, int | np.integer) or every < 1:
            raise LstmvizError(f"{WHERE}: every must be a whole number ≥ 1, got {every!r}")
        self.rank, self.ranks = distributed.world()
        with distributed.agreed(self.ranks):  # every rank stops, or none
            self.path = Path(path)
            if self.rank == 0:  # the one rank that opens the file
                self.path = files.check_output(path, WHERE, files.RECORDINGS, "recordings")
                check_replaceable(Path(self.path), WHERE)
            self.tensorboard = None  # rank 0's TensorBoard writer, when asked for
            if self.rank == 0 and tensorboard is not None:
                self.tensorboard = TensorBoardWriter(tensorboard, f"{WHERE} tensorboard")
            if isinstance(data, tuple) and len(data) == 2:
                self.x, self.y = data
            else:
                self.x, self.y = data, None
            self.every = int(every)
            self.tracer = Tracer(distributed.unwrap(module), loss_fn, self.y is not None)
            batch = distributed.batch_size(self.x, WHERE) if self.ranks > 1 else 0
            # each rank's share of the data: [start, stop) of the batch, and every rank's size
            self.sizes = distributed.shares(batch, self.ranks, WHERE) if self.ranks > 1 else []
            start = sum(self.sizes[: self.rank])
            stop = start + (self.sizes[self.rank] if self.sizes else 0)
            self.shard = (self.x, self.y) if self.ranks == 1 else tuple(
                distributed.share(d, batch, start, stop) for d in (self.x, self.y))  # fmt: skip
        self.writer = RecordingWriter(self.path, self.every) if self.rank == 0 else None
        self.steps = 0
        self._records = 0  # on a rank other than 0, which writes nothing: records made
        given = (("x", self.x), ("y", self.y))
        shapes = ", ".join(f"{n} {list(a.shape)}" for n, a in given if hasattr(a, "shape"))
        self.source = f"{WHERE} data: {shapes}"

    @property
    def records(self) -> int:
        """Records written so far (on a rank other than 0: made with rank 0)."""
        return self.writer.records if self.writer is not None else self._records

    def trace(self) -> GradientTrace | None:
        """Model mode at the module's current weights on the recorder's data. Under
        torch.distributed every rank calls it: rank 0 gets the whole batch's trace, the
        others None."""
        if self.ranks == 1:
            return self.tracer.trace(self.x, self.y, self.source)
        trace, error = None, None
        try:
            trace = self.tracer.trace(*self.shard, self.source)
        except Exception as exc:  # the others are told at the gather, then it is raised
            error = exc
        parts = distributed.gather(trace, None if error is None else str(error), self.rank,
                                   self.ranks)  # fmt: skip
        with distributed.agreed(self.ranks):
            if error is not None:
                raise error
            failed = [(r, p[0]) for r, p in enumerate(parts) if len(p) == 1]
            if failed:
                raise LstmvizError(f"rank {failed[0][0]}: {failed[0][1]}")
            if self.rank == 0:
                return distributed.combine(parts, self.sizes, WHERE)
        return None

    def step(self, loss=None, epoch: int = 0) -> GradientTrace | None:
        """Count one training step (call it after `optimizer.step()`); every N-th writes a
        record and returns its trace. `loss`: the training loss of the step (a tensor or a
        number; shown beside the recorded loss), `epoch` the epoch it belongs to."""
        self.steps += 1
        if self.steps % self.every:
            return None
        return self.record(self.steps, epoch, loss)

    def record(self, step: int, epoch: int = 0, loss=None) -> GradientTrace | None:
        """Write a record at training step `step` now (what `step()` does every N-th call;
        the Lightning callback calls it at the trainer's global step) and return its trace;
        under torch.distributed every rank calls it, rank 0 writes and gets the trace, the
        others None."""
        start = time.perf_counter()
        trace = self.trace()
        train_loss = np.nan if loss is None else float(loss.detach() if hasattr(
            loss, "detach") else loss)  # fmt: skip
        with distributed.agreed(self.ranks):  # a failed write stops every rank
            if self.writer is not None:
                rows = record_rows(trace, int(step), int(epoch), train_loss,
                                   time.perf_counter() - start, self.tracer.loss_name)  # fmt: skip
                self.writer.append(rows, trace)
                if self.tensorboard is not None:  # a failed write warns; training goes on
                    self.tensorboard.record(rows, trace, WHERE)
        self._records += 1
        return trace

    def close(self) -> None:
        """Mark the recording finished (readers and the app see it so); a later `step()`
        appends to it again."""
        if self.writer is not None:
            self.writer.close()
        if self.tensorboard is not None:
            self.tensorboard.close()

    def __enter__(self) -> GradientFlowRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
