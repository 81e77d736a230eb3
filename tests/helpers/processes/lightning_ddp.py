"""A Lightning run under DDP on the CPU (two processes, gloo) with lstmviz's callback:
Lightning starts every rank from this file (`sys.argv[0]`). Started by tests/torch/test_lightning.py
with MASTER_ADDR and MASTER_PORT set; argument: the output folder.

16 samples in batches of 2, shared out by rank (8 each: 4 batches an epoch), two batches
accumulated per optimizer step, 4 optimizer steps (2 epochs); a record every 2 optimizer
steps (at steps 2 and 4, not batches 2, 4, 6, 8); rank 1 is given a path in a missing folder,
which it never opens. Rank 0 then saves model mode of the final weights on the whole probe
batch (OUT/reference.npz); each rank writes its record count and share sizes to
OUT/rank{r}.json."""

import json
import os
import sys
from pathlib import Path

import lightning.pytorch as pl

from tests.helpers.models.distributed_models import lightning_module, loader, probe


def main(out: Path) -> None:
    from lstmviz.lightning import GradientFlowCallback

    module = lightning_module()
    # Lightning sets LOCAL_RANK for the ranks it starts; rank 1's path (a missing folder) is
    # never opened
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    path = out / "run.lvz" if rank == 0 else Path("/no-such-folder/run.lvz")
    callback = GradientFlowCallback(probe(), path, every=2, loss_fn="mse")
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_steps=4,
                         accumulate_grad_batches=2, callbacks=[callback], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)  # fmt: skip
    trainer.fit(module, loader())
    if trainer.is_global_zero:
        from lstmviz.torch import model_gradients

        model_gradients(module, *probe(), "mse").save(out / "reference.npz")
    recorder = callback.recorder
    (out / f"rank{trainer.global_rank}.json").write_text(json.dumps(
        {"records": callback.records, "global_step": trainer.global_step,
         "ranks": recorder.ranks, "sizes": recorder.sizes}))  # fmt: skip


if __name__ == "__main__":
    main(Path(sys.argv[1]))
