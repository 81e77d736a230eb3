"""lstmviz.lightning.GradientFlowCallback: a Lightning run under DDP (two CPU processes, gloo;
Lightning starts each rank from `tests/helpers/processes/lightning_ddp.py`) and on one device (in
this process) records what one process computes on the whole probe batch with the final weights;
`every` counts optimizer steps; a resumed fit appends; bad input is refused before training."""

import json
import subprocess

import numpy as np
import pytest
import torch

pytest.importorskip("lightning")
import lightning.pytorch as pl  # noqa: E402

import lstmviz  # noqa: E402
from lstmviz.analysis.records import trained_by  # noqa: E402
from lstmviz.core.errors import LstmvizError  # noqa: E402
from lstmviz.io.trace import GradientTrace  # noqa: E402
from tests.helpers.models.distributed_models import (  # noqa: E402
    HELPERS,
    PYTHON,
    ROOT,
    compare,
    environment,
    free_port,
    lightning_module,
    loader,
    probe,
)

QUIET = dict(accelerator="cpu", logger=False, enable_checkpointing=False,
             enable_progress_bar=False, enable_model_summary=False)  # fmt: skip


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lightning_ddp")
    run = subprocess.run([PYTHON, str(HELPERS / "lightning_ddp.py"), str(out)], cwd=ROOT,
                         env=environment(MASTER_PORT=str(free_port())), capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    return out


@pytest.mark.slow
def test_ddp_last_record_is_the_whole_batch_model_trace(ddp_run):
    recording = lstmviz.load_recording(ddp_run / "run.lvz")
    compare(recording, GradientTrace.load(ddp_run / "reference.npz"))
    assert recording.finished
    # the whole probe batch's shapes, and the app's legend says Lightning trained it
    assert str(recording.inputs_source) == (
        "Lightning GradientFlowCallback data: x [5, 5, 3], y [5, 1]")  # fmt: skip
    assert trained_by(recording.arrays) == "Lightning"


@pytest.mark.slow
def test_ddp_records_every_n_optimizer_steps_by_rank_0_alone(ddp_run):
    recording = lstmviz.load_recording(ddp_run / "run.lvz", trace=False)
    # 2 batches accumulated per optimizer step, 4 batches an epoch per rank: steps 2 and 4,
    # one per epoch (not batches 2, 4, 6, 8)
    assert list(recording.step) == [2, 4] and list(recording.epoch) == [0, 1]
    seen = [json.loads((ddp_run / f"rank{r}.json").read_text()) for r in (0, 1)]
    # each rank traced its share of the probe batch of 5 (3 + 2)
    assert seen == [{"records": 2, "global_step": 4, "ranks": 2, "sizes": [3, 2]}] * 2
    assert sorted(p.name for p in ddp_run.iterdir()) == [
        "rank0.json", "rank1.json", "reference.npz", "run.lvz"]  # fmt: skip


def fit(callback, max_steps, ckpt_path=None, module=None):
    module = module or lightning_module()
    trainer = pl.Trainer(devices=1, max_steps=max_steps, callbacks=[callback], **QUIET)
    trainer.fit(module, loader(), ckpt_path=ckpt_path)
    return trainer, module


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
    """A fit of 4 steps recording every 2nd (to TensorBoard too), its checkpoint, then a fit
    resumed from it to step 6 with a new callback (appends)."""
    from lstmviz.lightning import GradientFlowCallback
    from lstmviz.torch import model_gradients

    out = tmp_path_factory.mktemp("lightning_one")
    path = out / "run.lvz"
    trainer, module = fit(GradientFlowCallback(probe(), path, every=2, loss_fn="mse",
                                               tensorboard=out / "tb"), 4)  # fmt: skip
    first = lstmviz.load_recording(path)
    reference = model_gradients(module, *probe(), "mse")
    trainer.save_checkpoint(out / "step4.ckpt")
    callback = GradientFlowCallback(probe(), path, every=2, loss_fn="mse")
    _, module = fit(callback, 6, out / "step4.ckpt")
    return {"out": out, "path": path, "first": first, "reference": reference,
            "resumed": lstmviz.load_recording(path), "resumed_ref":
            model_gradients(module, *probe(), "mse"), "callback": callback}  # fmt: skip


@pytest.mark.slow
def test_one_device_records_the_model_trace_and_a_resumed_fit_appends(one_device):
    first, resumed = one_device["first"], one_device["resumed"]
    assert list(first.step) == [2, 4] and list(first.epoch) == [0, 0]
    compare(first, one_device["reference"])
    assert np.isfinite(first.train_loss).all()
    assert list(resumed.step) == [2, 4, 6] and resumed.finished
    compare(resumed, one_device["resumed_ref"])
    np.testing.assert_array_equal(resumed.norm_h_total_by_layer[:2], first.norm_h_total_by_layer)
    assert list((one_device["out"] / "tb").glob("events.out.tfevents*"))  # handed on


@pytest.mark.slow
def test_a_fit_behind_the_recording_is_refused_before_training(one_device):
    """The recording holds step 6; a fit resumed at step 4 (or a fit from 0 with a callback
    that has recorded) would put earlier steps after it."""
    from lstmviz.lightning import GradientFlowCallback

    path, before = one_device["path"], one_device["path"].read_bytes()
    callback = GradientFlowCallback(probe(), path, every=2, loss_fn="mse")
    with pytest.raises(LstmvizError, match=r"holds records up to training step 6, and this fit "
                       r"starts at step 4"):  # fmt: skip
        fit(callback, 8, one_device["out"] / "step4.ckpt")
    with pytest.raises(LstmvizError, match="starts at step 0"):
        fit(one_device["callback"], 2)
    assert path.read_bytes() == before


@pytest.mark.slow
def test_bad_input_is_refused_at_setup(tmp_path):
    from lstmviz.lightning import GradientFlowCallback

    class Dense(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 1)

        def forward(self, x):
            return self.layer(x[:, -1])

        def training_step(self, batch, batch_idx):
            return torch.nn.functional.mse_loss(self(batch[0]), batch[1])

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    path = tmp_path / "run.lvz"
    with pytest.raises(LstmvizError, match="Dense has no recurrent layer"):
        fit(GradientFlowCallback(probe(), path, every=1, loss_fn="mse"), 2, module=Dense())
    with pytest.raises(LstmvizError, match="missing: no such folder"):
        fit(GradientFlowCallback(probe(), tmp_path / "missing" / "run.lvz", every=1,
                                 loss_fn="mse"), 2)  # fmt: skip
    (tmp_path / "notes.lvz").write_text("mine")
    with pytest.raises(LstmvizError, match="is not a recording lstmviz may replace"):
        fit(GradientFlowCallback(probe(), tmp_path / "notes.lvz", every=1, loss_fn="mse"), 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.lvz"]


def test_strategies_that_shard_the_parameters_are_refused(tmp_path):
    from types import SimpleNamespace

    from lstmviz.lightning import GradientFlowCallback

    class FSDPStrategy:  # named as Lightning's
        pass

    callback = GradientFlowCallback(probe(), tmp_path / "run.lvz", loss_fn="mse")
    with pytest.raises(LstmvizError, match="under FSDPStrategy: it shards the parameters"):
        callback.setup(SimpleNamespace(strategy=FSDPStrategy()), lightning_module(), "fit")


def test_tensorboard_is_handed_to_the_recorder(monkeypatch, tmp_path):
    import lstmviz.lightning as lightning_callback
    import lstmviz.torch.recorder

    made = {}

    class Recorder:
        source = "GradientFlowRecorder data: x [5, 5, 3]"

        def __init__(self, module, data, path, **kwargs):
            made.update(kwargs)

    monkeypatch.setattr(lstmviz.torch.recorder, "GradientFlowRecorder", Recorder)
    callback = lightning_callback.GradientFlowCallback(probe(), tmp_path / "r.lvz",
                                                       tensorboard=tmp_path / "tb")  # fmt: skip
    callback.setup(None, lightning_module(), "fit")
    assert made["tensorboard"] == tmp_path / "tb" and made["every"] == 50
