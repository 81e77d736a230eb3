"""GradientFlowRecorder under torch.distributed without Lightning: two processes (gloo, on
loopback) train a DDP-wrapped model; each traces its share of the probe batch (3 + 2 samples),
rank 0 alone writes, and the last record equals `lstmviz.torch.model_gradients` of the final
weights on the whole batch; so does a record of a DDP-wrapped modern module (sLSTM, Mamba). One
run (`tests/helpers/processes/ddp_recorder.py`) is checked several ways. The rules that split and
combine (`lstmviz.torch.distributed`) are checked in this process (the modern layers' in
tests/torch/test_modern_distributed.py)."""

import json
import subprocess

import numpy as np
import pytest
import torch

from lstmviz.core.errors import LstmvizError
from tests.helpers.models.distributed_models import (
    HELPERS,
    PYTHON,
    ROOT,
    compare,
    environment,
    free_port,
)


def run_ranks(script: str, out, ranks: int = 2, timeout: float = 240) -> None:
    """Start `script` once per rank (RANK, WORLD_SIZE set) and wait for all; fail with their
    output when one fails."""
    port = str(free_port())
    procs = [subprocess.Popen(
        [PYTHON, str(HELPERS / script), str(out)], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
        env=environment(MASTER_PORT=port, RANK=str(r), WORLD_SIZE=str(ranks)))
        for r in range(ranks)]  # fmt: skip
    outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    for r, (p, text) in enumerate(zip(procs, outputs, strict=True)):
        assert p.returncode == 0, f"rank {r} exited {p.returncode}:\n{text[-4000:]}"


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp_recorder")
    run_ranks("ddp_recorder.py", out)
    return out


@pytest.mark.slow
def test_the_last_record_is_the_whole_batch_model_trace(ddp_run):
    import lstmviz
    from lstmviz.io.trace import GradientTrace

    recording = lstmviz.load_recording(ddp_run / "run.lvz")
    assert list(recording.step) == [2, 4] and recording.finished
    compare(recording, GradientTrace.load(ddp_run / "reference.npz"))
    assert "x [5, 5, 3]" in str(recording.inputs_source)  # the whole batch's shape


@pytest.mark.slow
def test_rank_0_alone_writes_and_gets_the_traces(ddp_run):
    seen = [json.loads((ddp_run / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [s["records"] for s in seen] == [2, 2]
    assert seen[0]["traces"] == [False, True, False, True]
    assert seen[1]["traces"] == [False] * 4  # its path (a missing folder) was never opened
    assert sorted(p.name for p in ddp_run.iterdir()) == [
        "modern.lvz", "modern_reference.npz", "rank0.json", "rank1.json", "reference.npz",
        "run.lvz"]  # fmt: skip


@pytest.mark.slow
def test_a_modern_modules_record_is_its_whole_batch_model_trace(ddp_run):
    """sLSTM (other states c, n, m and their totals, timescale, gates) under a Mamba block kept
    per D channel, shares of 3 + 2 samples gathered and combined on rank 0."""
    import lstmviz
    from lstmviz.io.trace import GradientTrace

    recording = lstmviz.load_recording(ddp_run / "modern.lvz")
    reference = GradientTrace.load(ddp_run / "modern_reference.npz")
    assert list(recording.step) == [1] and recording.finished
    assert [str(reference.arrays[f"layer{k}_cell"]) for k in range(3)] == ["slstm", "mamba",
                                                                          "mamba"]  # fmt: skip
    assert "layer0_grad_n_total" in reference.arrays
    compare(recording, reference)


@pytest.mark.slow
def test_bad_input_stops_every_rank_with_one_message(ddp_run):
    seen = [json.loads((ddp_run / f"rank{r}.json").read_text()) for r in (0, 1)]
    for s in seen:
        assert "probe batch holds 1 sample, fewer than the 2 ranks" in s["small"]
    assert seen[0]["unwritable"].endswith("missing: no such folder")
    assert seen[1]["unwritable"] == f"rank 0: {seen[0]['unwritable']}"
    # a record failing on one rank: raised there, and on the others naming it; nothing written
    assert seen[1]["failed"] == "ValueError: a share of fewer than 3 samples"
    assert seen[0]["failed"] == "LstmvizError: rank 1: a share of fewer than 3 samples"
    assert not (ddp_run / "failed.lvz").exists()


def test_the_probe_batch_is_shared_out_along_axis_0():
    from lstmviz.torch import distributed

    assert distributed.shares(5, 2, "w") == [3, 2]
    assert distributed.shares(4, 4, "w") == [1, 1, 1, 1]
    with pytest.raises(LstmvizError, match="holds 3 samples, fewer than the 4 ranks"):
        distributed.shares(3, 4, "w")
    x, y, h0 = torch.zeros(5, 7, 2), np.zeros((5, 1)), torch.zeros(2, 6, 4)
    part = distributed.share(((x, h0), y), 5, 3, 5)
    assert part[0][0].shape == (2, 7, 2) and part[1].shape == (2, 1)
    assert part[0][1] is h0  # not of the batch: whole
    assert distributed.batch_size((x, h0), "w") == 5
    assert distributed.world() == (0, 1)  # no process group here


def squared_error(y_pred, y):  # a user's callable: the mean over the samples
    return ((y_pred - y) ** 2).mean()


@pytest.mark.parametrize("loss", ["mse", squared_error, None])  # None: "mean", without y
def test_shares_of_a_model_trace_combine_into_the_whole_batch_one(loss):
    """Combined in this process from traces of two shares: equal to the whole batch's trace
    (the rules `lstmviz.torch.distributed.combine` applies, without processes)."""
    from lstmviz.torch import distributed, model_gradients
    from tests.helpers.models.distributed_models import Net, probe

    torch.manual_seed(0)
    model = Net()
    x, y = probe()
    y = None if loss is None else y
    whole = model_gradients(model, x, y, loss)
    parts = [model_gradients(model, x[a:b], None if y is None else y[a:b], loss)
             for a, b in ((0, 3), (3, 5))]  # fmt: skip
    combined = distributed.combine([(p.arrays, p.config) for p in parts], [3, 2], "w")

    class Recorded:  # the rows `compare` reads, of one record
        last = combined
        loss = [combined.arrays["loss"]]

        def __getitem__(self, key):
            return [combined.arrays[key]]

    compare(Recorded(), whole)
    with pytest.raises(LstmvizError, match="batch-major"):  # shares told wrongly
        distributed.combine([(p.arrays, p.config) for p in parts], [2, 3], "w")


def test_shares_of_a_two_input_trace_combine_each_inputs_keys():
    """A seq2seq of two inputs: each input's x_, grad_input_ and saliency_ join along B."""
    from lstmviz.torch import distributed, model_gradients
    from tests.helpers.models.torch_seq2seq import Seq2Seq, sequence_xent, tokens

    torch.manual_seed(3)
    net = Seq2Seq()
    src, tgt_in, y = tokens(3)  # B = 2: one sample a share
    whole = model_gradients(net, (src, tgt_in), y, sequence_xent)
    parts = [model_gradients(net, (src[b:b + 1], tgt_in[b:b + 1]), y[b:b + 1], sequence_xent)
             for b in (0, 1)]  # fmt: skip
    combined = distributed.combine([(p.arrays, p.config) for p in parts], [1, 1], "w")
    for key in ("x_src", "x_tgt_in", "grad_input_src", "grad_input_tgt_in", "saliency_src",
                "saliency_tgt_in"):  # fmt: skip
        np.testing.assert_allclose(combined.arrays[key], whole.arrays[key], rtol=1e-5,
                                   atol=1e-8, err_msg=key)  # fmt: skip
