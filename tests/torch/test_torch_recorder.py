"""lstmviz.torch.GradientFlowRecorder: training with it equals training without it, and its
last record is model mode at the final weights."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from lstmviz.core.errors import LstmvizError  # noqa: E402
from lstmviz.io.recording import load_recording  # noqa: E402
from lstmviz.torch import GradientFlowRecorder, model_gradients  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 4, num_layers=2, batch_first=True, dropout=0.3)
        self.drop = nn.Dropout(0.2)
        self.head = nn.Linear(4, 1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(self.drop(out[:, -1]))


def train(steps: int, recorder_path=None):
    """(the trained module, the random state after, the recorder) from one seed."""
    torch.manual_seed(0)
    net = Net()
    x, y = torch.randn(16, 6, 3), torch.randn(16, 1)
    optimizer = torch.optim.Adam(net.parameters(), lr=0.05)
    recorder = None
    if recorder_path is not None:
        recorder = GradientFlowRecorder(net, (x[:4], y[:4]), recorder_path, every=2,
                                        loss_fn="mse")  # fmt: skip
    net.train()
    for step in range(steps):
        batch = torch.randperm(16)[:8]  # draws from the random stream the recorder keeps
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(net(x[batch]), y[batch])
        loss.backward()
        optimizer.step()
        if recorder is not None:
            recorder.step(loss, epoch=step // 3)
    if recorder is not None:
        recorder.close()
    return net, torch.get_rng_state(), (x, y)


def test_training_is_unchanged_and_the_last_record_is_model_mode_at_the_final_weights(tmp_path):
    path = tmp_path / "run.lvz"
    plain, plain_rng, _ = train(4)
    recorded, recorded_rng, (x, y) = train(4, path)
    for (name, a), b in zip(plain.state_dict().items(), recorded.state_dict().values(),
                            strict=True):  # fmt: skip
        assert torch.equal(a, b), name
    assert torch.equal(plain_rng, recorded_rng)
    assert recorded.training  # the recorder's eval mode did not stay

    recording = load_recording(path)
    assert recording.finished
    np.testing.assert_array_equal(recording.step, [2, 4])
    np.testing.assert_array_equal(recording.epoch, [0, 1])
    assert np.isfinite(recording.train_loss).all()
    final = model_gradients(recorded, x[:4], y[:4], "mse")
    assert list(recording.layer_names) == ["lstm/l0", "lstm/l1"]
    np.testing.assert_allclose(recording.norm_h_total_by_layer[-1], final.norm_h_total_by_layer,
                               rtol=1e-6)  # fmt: skip
    last = recording.last
    for key in ("layer0_grad_h_total", "layer1_grad_c_total", "saliency", "loss"):
        np.testing.assert_allclose(last[key], final[key], rtol=1e-6, err_msg=key)
    assert recording.loss[-1] == pytest.approx(float(final.loss))


def test_bad_arguments_are_refused_in_one_line(tmp_path):
    with pytest.raises(LstmvizError, match="every must be a whole number"):
        GradientFlowRecorder(Net(), torch.zeros(2, 3, 3), tmp_path / "a.lvz", every=0)
    with pytest.raises(LstmvizError, match=r"recordings end in \.lvz"):
        GradientFlowRecorder(Net(), torch.zeros(2, 3, 3), tmp_path / "a.npz")
    (tmp_path / "b.lvz").write_text("not a recording")
    with pytest.raises(LstmvizError, match="is there already and is not a recording"):
        GradientFlowRecorder(Net(), torch.zeros(2, 3, 3), tmp_path / "b.lvz")
