"""One rank of a plain torch.distributed run (gloo, no Lightning): DDP trains `Net` four steps, each
rank on its own batches, with a GradientFlowRecorder recording every second step. Started once per
rank by tests/torch/test_torch_distributed.py with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
set; argument: the output folder.

Rank 0 records into OUT/run.lvz; rank 1 is given a path in a folder that does not exist, which
it never opens. Afterwards the refusals (a probe batch smaller than the ranks; rank 0's path
in a missing folder), a record whose loss fails on rank 1 alone, and rank 0 saves model mode
of the final weights on the whole probe batch (OUT/reference.npz). Then a modern module (an
sLSTM layer, residual: its other states c, n, m, their totals, its timescale; then a Mamba block
whose state is kept per D channel) DDP-wrapped is recorded once into OUT/modern.lvz, and rank 0
saves its model mode on the whole batch (OUT/modern_reference.npz). Each rank writes what it
saw to OUT/rank{r}.json."""

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from tests.helpers.models.distributed_models import Net, data, probe
from tests.helpers.models.modern_models import modern_module, modern_probe


def picky_loss(y_pred, y):
    if len(y) < 3:
        raise ValueError("a share of fewer than 3 samples")
    return ((y_pred - y) ** 2).mean()


def main(out: Path) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    from lstmviz.core.errors import LstmvizError
    from lstmviz.torch import GradientFlowRecorder, model_gradients

    torch.manual_seed(0)
    model = Net()
    ddp = nn.parallel.DistributedDataParallel(model)
    x, y = probe()
    path = out / "run.lvz" if rank == 0 else Path("/no-such-folder/run.lvz")
    recorder = GradientFlowRecorder(ddp, (x, y), path, every=2, loss_fn="mse")
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.5)
    train_x, train_y = data(8, seed=2 + rank)
    traces = []
    for step in range(4):
        optimizer.zero_grad()
        batch = slice(2 * step, 2 * step + 2)
        loss = nn.functional.mse_loss(ddp(train_x[batch]), train_y[batch])
        loss.backward()
        optimizer.step()
        traces.append(recorder.step(loss))
    recorder.close()
    seen = {"records": recorder.records, "traces": [t is not None for t in traces]}
    missing = out / "missing" / "run.lvz" if rank == 0 else path
    for name, given, where in (("small", (x[:1], y[:1]), path), ("unwritable", (x, y), missing)):
        try:
            GradientFlowRecorder(ddp, given, where, every=1, loss_fn="mse")
            seen[name] = None
        except LstmvizError as exc:
            seen[name] = str(exc)
    # a record that fails on rank 1 alone (its share is 2 samples): every rank raises
    picky = GradientFlowRecorder(ddp, (x, y), out / "failed.lvz" if rank == 0 else path,
                                 every=1, loss_fn=picky_loss)  # fmt: skip
    try:
        picky.step()
        seen["failed"] = None
    except Exception as exc:
        seen["failed"] = f"{type(exc).__name__}: {exc}"
    if rank == 0:
        model_gradients(model, x, y, "mse").save(out / "reference.npz")
    modern = modern_module("slstm+mamba")
    modern_data = modern_probe()
    recorder = GradientFlowRecorder(nn.parallel.DistributedDataParallel(modern), modern_data,
                                    out / "modern.lvz" if rank == 0 else path,
                                    loss_fn="mse")  # fmt: skip
    recorder.step()
    recorder.close()
    if rank == 0:
        model_gradients(modern, *modern_data, "mse").save(out / "modern_reference.npz")
    (out / f"rank{rank}.json").write_text(json.dumps(seen))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
