"""What the distributed tests share: a tiny recurrent model (two bidirectional LSTM layers → Linear
on the last step: four directions), its LightningModule, fixed data, and how to start processes that
meet on loopback (`tests/torch/test_lightning.py`, `tests/torch/test_torch_distributed.py`; the
scripts `processes/lightning_ddp.py` and `processes/ddp_recorder.py`), and a recording's last record
checked against the single-process trace (`compare`).

Sizes: T = 5 steps of I = 3 inputs, H = 4 units; the probe batch B = 5 (split 3 + 2 over two
ranks: unequal shares, so a share's gradients wrongly scaled or put together show)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[3]
HELPERS = Path(__file__).resolve().parents[1] / "processes"  # the scripts the ranks run
STEPS, INPUTS, UNITS, PROBE = 5, 3, 4, 5


class Net(nn.Module):
    """x [B, T, I] → y [B, 1]."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(INPUTS, UNITS, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * UNITS, 1)

    def forward(self, x):
        return self.out(self.lstm(x)[0][:, -1])


def data(samples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(x [samples, T, I], y [samples, 1]), the same for a seed in every process."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, STEPS, INPUTS, generator=generator)
    return x, x.sum((1, 2))[:, None] / 4


def probe() -> tuple[torch.Tensor, torch.Tensor]:
    return data(PROBE, seed=1)


def lightning_module():
    """A LightningModule around a fresh `Net` (seeded: the same weights in every process)."""
    import lightning.pytorch as pl

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.net = Net()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.mse_loss(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.5)

    return Module()


def loader(samples: int = 16):
    """Training data in batches of 2, in order (a DDP run shares it out by rank)."""
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*data(samples, seed=2)),
                                       batch_size=2)  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(**extra: str) -> dict[str, str]:
    """The environment of a process a test starts: this checkout importable, the ranks
    meeting on loopback, one thread each (two ranks share two cores)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), MASTER_ADDR="127.0.0.1",
               GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONWARNINGS="ignore")  # fmt: skip
    env.update(extra)
    return env


PYTHON = sys.executable


# a record's rows: the norms, and the error of one step's (anchors [L, A], norms [L, A, T])
NORMS = ("norm_h_total_by_layer", "norm_h_direct_by_layer", "norm_c_total_by_layer",
         "anchors_by_layer", "anchor_norm_h_by_layer", "anchor_norm_c_by_layer")  # fmt: skip


def compare(recording, reference) -> None:
    """The recording's last record against the single-process model trace: its norm rows and
    loss, and its full trace's arrays (states, gradients, gate summaries, inputs)."""
    for key in NORMS:
        np.testing.assert_allclose(recording[key][-1], reference.arrays[key], rtol=1e-5,
                                   atol=1e-9, err_msg=key)  # fmt: skip
    np.testing.assert_allclose(recording.loss[-1], reference.arrays["loss"], rtol=1e-5)
    last = recording.last
    assert last.config.batch == reference.config.batch
    for key, value in reference.arrays.items():
        value = np.asarray(value)
        if key == "model_seconds":
            continue
        got = np.asarray(last.arrays[key])
        if value.dtype.kind == "f":
            scale = max(float(np.abs(value).max(initial=0)), 1e-30)
            np.testing.assert_allclose(got / scale, value / scale, rtol=0, atol=1e-5,
                                       err_msg=key)  # fmt: skip
        else:
            assert np.array_equal(got, value), key
