"""Record a LightningModule's gradient flow while `trainer.fit` trains it (the extra
`lstmviz[lightning]`; docs/recording.md, "Lightning and DDP").

    from lstmviz.lightning import GradientFlowCallback
    callback = GradientFlowCallback((x[:64], y[:64]), "run.lvz", every=50, loss_fn="mse")
    trainer = lightning.Trainer(callbacks=[callback], strategy="ddp", devices=2)
    trainer.fit(model, loader)

The PyTorch recorder (`lstmviz.torch.GradientFlowRecorder`) as a Lightning `Callback`: at every
`every`-th optimizer step (the trainer's `global_step`, so gradient accumulation counts one step
per optimizer step) it runs model mode on the probe batch with the LightningModule's weights of
that moment and appends a record at that step. On one device, or under DDP (any number of
processes, CPU or GPU): every rank traces its share of the probe batch and rank 0 alone writes
the one `.lvz`, each record equal to what one process computes on the whole batch
(`lstmviz.torch.distributed`; FSDP and DeepSpeed, which shard the parameters, are refused at
set-up: each rank would need the full parameters while it traces).

A fit that starts at global step 0 starts the file afresh (replacing a recording of that name,
never another kind of file); a fit resumed from a checkpoint (global step G > 0) appends to the
recording there, and one that would write a step at or before the file's last step (the file
holds steps after G) is refused. Every refusal is one LstmvizError, raised on every rank before
the first training batch, so nothing is half-written.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch

from lstmviz.core.errors import LstmvizError
from lstmviz.io.recording import RecordingError, load_recording
from lstmviz.torch import distributed

try:  # the `lightning` package, else the older `pytorch_lightning` of the same API
    from lightning.pytorch import Callback
except ImportError:  # pragma: no cover - depends on what is installed
    from pytorch_lightning import Callback

WHERE = "GradientFlowCallback"
# Strategies that shard the parameters across ranks (by their class names): refused
SHARDED = ("FSDP", "ModelParallel", "DeepSpeed")


class GradientFlowCallback(Callback):
    """Appends a record to `path` (.lvz) every `every` optimizer steps of `trainer.fit`.

    `probe`: x, or (x, y), held fixed, batch-major (axis 0 is the batch B; under DDP it is split
    across the ranks along that axis, so B must be at least the number of ranks); x a tensor
    the LightningModule's `forward` takes, or a tuple of its arguments. `loss_fn` as for
    `lstmviz.torch.model_gradients`: a name (mse, cross_entropy, …) or a callable
    (y_pred, y) -> the mean over the samples of their losses. `tensorboard`: a log folder
    the records are also written to as TensorBoard scalars and images (by rank 0)."""

    def __init__(self, probe, path, every: int = 50, loss_fn=None, tensorboard=None):
        super().__init__()
        self.probe, self.path, self.every = probe, path, every
        self.loss_fn, self.tensorboard = loss_fn, tensorboard
        self.recorder = None  # the GradientFlowRecorder, made at set-up
        self._last = -1  # the global step of the last record (or the run's first step)

    def setup(self, trainer, pl_module, stage: str) -> None:
        """Check the module, the probe and the path (on every rank; the process group of a
        DDP run exists by now), and make the recorder."""
        if stage != "fit" or self.recorder is not None:
            return
        strategy = type(getattr(trainer, "strategy", None)).__name__
        if any(name in strategy for name in SHARDED):
            raise LstmvizError(f"{WHERE}: does not record under {strategy}: it shards the "
                               "parameters, and model mode needs them whole on the ranks "
                               "that trace (use strategy=\"ddp\")")  # fmt: skip
        # Imported here, not with this module: they import TensorFlow (seconds), which each
        # DDP rank then does side by side, after Lightning has started them all.
        from lstmviz.torch.capture import CELLS, RECURRENT
        from lstmviz.torch.modern import found
        from lstmviz.torch.recorder import GradientFlowRecorder

        if not any(isinstance(m, RECURRENT + CELLS) for m in pl_module.modules()) and not (
                found(pl_module)[0]):  # fmt: skip
            raise LstmvizError(f"{WHERE}: {type(pl_module).__name__} has no recurrent layer "
                               "(nn.LSTM, nn.GRU, nn.RNN or one of their cells, minGRU, "
                               "minLSTM, Mamba, LRU) to record")  # fmt: skip
        extra = {} if self.tensorboard is None else {"tensorboard": self.tensorboard}
        self.recorder = GradientFlowRecorder(pl_module, self.probe, self.path, every=self.every,
                                             loss_fn=self.loss_fn, **extra)  # fmt: skip
        # the recording's inputs_source names Lightning (the app's legend says what trained)
        shapes = self.recorder.source.partition(" data: ")[2]
        self.recorder.source = f"Lightning {WHERE} data: {shapes}"

    def on_train_start(self, trainer, pl_module) -> None:
        """Where this fit starts (a resumed fit's global step is known from here on): append
        to the recording of a resumed run, refuse one that holds later steps."""
        recorder = self._recorder()
        start = int(trainer.global_step)
        with distributed.agreed(recorder.ranks):
            if recorder.writer is not None:
                _resume(recorder, start)
        self._last = start
        device = pl_module.device
        recorder.x, recorder.y = _to(recorder.x, device), _to(recorder.y, device)
        recorder.shard = _to(recorder.shard, device)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        """A record when this batch made the optimizer step to a multiple of `every`."""
        step = int(trainer.global_step)
        if step == self._last or step % self.recorder.every:
            return
        self._last = step
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        with torch.enable_grad():
            self.recorder.record(step, trainer.current_epoch, loss)

    def teardown(self, trainer, pl_module, stage: str) -> None:
        """Mark the recording finished (a later fit with this callback appends to it)."""
        if stage == "fit" and self.recorder is not None:
            self.recorder.close()

    def _recorder(self):
        if self.recorder is None:
            raise LstmvizError(f"{WHERE}: not set up: add it to the Trainer's callbacks")
        return self.recorder

    @property
    def records(self) -> int:
        """Records written so far."""
        return 0 if self.recorder is None else self.recorder.records


def _resume(recorder, start: int) -> None:
    """On rank 0, before a fit that starts at global step `start`: a fit at step 0 with a
    writer that has written nothing starts the file afresh; otherwise the records go on after
    those in the file, which must all come before `start`."""
    writer = recorder.writer
    path = Path(writer.path)
    if writer.records == 0 and start == 0:
        return
    try:
        steps = load_recording(path, trace=False).step if path.is_file() else []
    except RecordingError:
        steps = []  # not a recording: checked at set-up that it may be replaced
    if len(steps) and int(steps[-1]) > start:
        raise LstmvizError(f"{WHERE}: {path} holds records up to training step "
                           f"{int(steps[-1])}, and this fit starts at step {start}: its records "
                           "would come after later ones. Resume from the last checkpoint, or "
                           "give another path (or move the file away) to record "
                           "afresh")  # fmt: skip
    if writer.records == 0 and len(steps):
        # a writer that has records reopens its file and appends (RecordingWriter.append)
        writer.records = len(steps)


def _to(data, device):
    """`data` (tensors, or tuples and lists of them) on `device`; anything else as it is."""
    if torch.is_tensor(data):
        return data.to(device)
    if isinstance(data, tuple | list):
        return type(data)(_to(item, device) for item in data)
    return data
