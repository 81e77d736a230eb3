"""lstmviz.torch.model_gradients against an unrolled reference
(tests/helpers/references/torch_reference.py: the cells step by step, retain_grad, loss.backward),
and float64 finite differences."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence  # noqa: E402

from lstmviz.core.errors import LstmvizError  # noqa: E402
from lstmviz.torch import model_gradients  # noqa: E402
from tests.helpers.references.torch_reference import assert_close, reference  # noqa: E402

T, B, I, H = 5, 3, 4, 3


class Net(nn.Module):
    """x -> recurrent (any cell) -> a head on every step's output and on h_n: the direct
    gradient reaches every step and the last state."""

    def __init__(self, cell=nn.LSTM, batch_first=True, tokens=False, **kw):
        super().__init__()
        self.embed = nn.Embedding(7, I) if tokens else None
        self.rnn = cell(I, H, batch_first=batch_first, **kw)
        width = H * (2 if kw.get("bidirectional") else 1)
        self.head = nn.Linear(width, 2)
        self.last = nn.Linear(H, 2)

    def forward(self, x, lengths=None, hx=None):
        if self.embed is not None:
            x = self.embed(x)
        bf = self.rnn.batch_first
        if lengths is not None:
            x = pack_padded_sequence(x, lengths, batch_first=bf, enforce_sorted=False)
        out, state = self.rnn(x, hx)
        if lengths is not None:
            out, _ = pad_packed_sequence(out, batch_first=bf, total_length=T)
        h_n = state[0] if isinstance(state, tuple) else state
        steps = out.mean(1 if bf else 0)
        return torch.tanh(self.head(steps)) + self.last(h_n[-1])


def mse(output, y):
    return ((output - y) ** 2).mean()


def check(trace, ref, mask=None, rtol=1e-5):
    """Every direction's arrays and the saliency equal the reference's."""
    assert trace.loss == pytest.approx(ref["loss"], rel=1e-5)
    assert len(trace.layer_names) == len(ref["directions"])
    keep = 1.0 if mask is None else mask[:, :, None]
    for k, one in enumerate(ref["directions"]):
        for key, theirs in one.items():
            ours = trace[f"layer{k}_{key}"]
            if ours.ndim == 3:
                ours, theirs = ours * keep, theirs * keep
            assert_close(ours, theirs, f"{trace.layer_names[k]} {key}", rtol)
    assert_close(trace.grad_input * keep, ref["grad_input"] * keep, "grad_input", rtol)


@pytest.fixture(scope="module")
def data():
    gen = torch.Generator().manual_seed(3)
    return torch.randn(B, T, I, generator=gen), torch.randn(B, 2, generator=gen)


@pytest.mark.parametrize("batch_first", [True, False])
def test_two_bidirectional_lstm_layers_equal_the_unrolled_cells(data, batch_first):
    torch.manual_seed(0)
    net = Net(nn.LSTM, batch_first, num_layers=2, bidirectional=True)
    x, y = data
    x = x if batch_first else x.transpose(0, 1).contiguous()
    trace = model_gradients(net, x, y, mse)
    check(trace, reference(net, (x,), y, mse))
    assert list(trace.layer_names) == ["rnn/l0/forward", "rnn/l0/backward", "rnn/l1/forward",
                                       "rnn/l1/backward"]  # fmt: skip
    assert trace.x.shape == (T, B, I)  # time-major, whatever batch_first
    trace.check()


def test_packed_sequences_of_different_lengths_and_a_given_state(data):
    torch.manual_seed(1)
    net = Net(nn.LSTM, True, bidirectional=True)
    x, y = data
    lengths = torch.tensor([5, 2, 4])
    h0 = torch.randn(2, B, H), torch.randn(2, B, H)
    trace = model_gradients(net, (x, lengths, h0), y, mse)
    mask = (np.arange(T)[:, None] < lengths.numpy()[None]).astype(float)
    np.testing.assert_array_equal(trace.mask, mask > 0)
    check(trace, reference(net, (x, lengths, h0), y, mse), mask)


def test_token_ids_through_an_embedding_with_a_named_loss():
    torch.manual_seed(2)
    net = Net(nn.LSTM, True, tokens=True, num_layers=2)
    x = torch.randint(0, 7, (B, T))
    y = torch.tensor([0, 1, 1])
    trace = model_gradients(net, x, y, "cross_entropy")
    check(trace, reference(net, (x,), y, nn.functional.cross_entropy))
    assert trace.saliency.shape == (B, T)
    assert trace.loss_by_sample.mean() == pytest.approx(float(trace.loss), rel=1e-6)
    np.testing.assert_array_equal(trace.x, x.numpy().T)


def test_the_module_is_left_as_it_was(data):
    torch.manual_seed(4)
    net = Net(nn.LSTM, True, num_layers=2, dropout=0.5)
    net.train()
    net.head.eval()  # mixed flags come back as they were
    x, y = data
    before = {k: v.clone() for k, v in net.state_dict().items()}
    rng = torch.get_rng_state()
    model_gradients(net, x, y, mse)
    assert net.training and net.rnn.training and not net.head.training
    assert all(p.grad is None for p in net.parameters())
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert torch.equal(rng, torch.get_rng_state())
    assert "forward" not in net.rnn.__dict__


def test_total_gradients_equal_float64_finite_differences():
    """dL/dh_t and dL/dc_t by perturbing each state in a float64 unrolled loop."""
    torch.manual_seed(5)
    net = Net(nn.LSTM, False).double()
    x = torch.randn(T, 2, I, dtype=torch.float64)
    y = torch.randn(2, 2, dtype=torch.float64)
    trace = model_gradients(net, x, y, mse)
    rnn, eps = net.rnn, 1e-6
    w = [rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, rnn.bias_hh_l0]

    def loss(at, which, delta):
        h = c = torch.zeros(2, H, dtype=torch.float64)
        outs = []
        for t in range(T):
            z = x[t] @ w[0].T + w[2] + h @ w[1].T + w[3]
            i, f, g, o = z.chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            bump = torch.zeros_like(h)
            if t == at[0]:
                bump[at[1], at[2]] = delta
            if which == "c":  # c_t perturbed where h_t reads it: the total dL/dc_t
                c = c + bump
            h = torch.sigmoid(o) * torch.tanh(c)
            if which == "h":
                h = h + bump
            outs.append(h)
        out = torch.stack(outs)
        value = torch.tanh(net.head(out.mean(0))) + net.last(h)
        return float(mse(value, y))

    with torch.no_grad():
        for t, b, j in [(0, 0, 0), (2, 1, 2), (4, 0, 1)]:
            for which in ("h", "c"):
                numeric = (loss((t, b, j), which, eps) - loss((t, b, j), which, -eps)) / (2 * eps)
                ours = trace[f"layer0_grad_{which}_total"][t, b, j]
                assert ours == pytest.approx(numeric, rel=1e-6, abs=1e-10), (which, t, b, j)


def test_a_trace_of_a_lambda_loss_saves_and_loads(tmp_path, data):
    torch.manual_seed(7)
    trace = model_gradients(Net(nn.RNN, nonlinearity="relu"), data[0], data[1],
                            lambda out, y: ((out - y) ** 2).sum())  # fmt: skip
    loaded = type(trace).load(trace.save(tmp_path / "t.npz"))
    assert loaded.config.loss == "custom_loss"
    np.testing.assert_array_equal(loaded.layer0_grad_h_total, trace.layer0_grad_h_total)


def test_proj_size_is_refused_in_one_line(data):
    net = Net(nn.LSTM, True, proj_size=2)
    with pytest.raises(LstmvizError, match="proj_size=2, which lstmviz does not support"):
        model_gradients(net, data[0], data[1], mse)


def test_a_module_without_recurrent_layers_and_an_unknown_loss_are_refused(data):
    with pytest.raises(LstmvizError, match="holds no nn.LSTM"):
        model_gradients(nn.Linear(I, 2), data[0], data[1], mse)
    with pytest.raises(LstmvizError, match="unknown loss 'hinge'"):
        model_gradients(Net(), data[0], data[1], "hinge")
    with pytest.raises(LstmvizError, match="give loss_fn"):
        model_gradients(Net(), data[0], data[1])


@pytest.mark.parametrize(
    "cell, kw",
    [(nn.GRU, {}), (nn.RNN, {"nonlinearity": "tanh"}), (nn.RNN, {"nonlinearity": "relu"}),
     (nn.GRU, {"num_layers": 2, "bidirectional": True})],  # fmt: skip
    ids=["gru", "rnn-tanh", "rnn-relu", "gru-2-bidirectional"],
)
def test_gru_and_rnn_cells_equal_the_unrolled_cells(data, cell, kw):
    torch.manual_seed(6)
    net = Net(cell, False, **kw)
    x, y = data
    x = x.transpose(0, 1).contiguous()
    lengths = torch.tensor([5, 3, 4])
    trace = model_gradients(net, (x, lengths), y, mse)
    mask = (np.arange(T)[:, None] < lengths.numpy()[None]).astype(float)
    check(trace, reference(net, (x, lengths), y, mse), mask)
    kind = "gru" if cell is nn.GRU else "simple_rnn"
    assert str(trace.layer0_cell) == kind and "layer0_c" not in trace
    assert np.isnan(trace.norm_c_total_by_layer).all()
    trace.check()


@pytest.mark.parametrize(
    "cell, kw, packed",
    [(nn.LSTM, {"num_layers": 2, "bidirectional": True}, True), (nn.GRU, {"bidirectional": True},
     True), (nn.RNN, {"nonlinearity": "relu", "num_layers": 2}, False)],  # fmt: skip
    ids=["lstm-2-bidirectional-packed", "gru-bidirectional-packed", "rnn-relu-2"],
)
def test_the_native_kernels_run_each_forward_once_and_give_the_trace_pytorch_s_ops_give(
    data, monkeypatch, cell, kw, packed
):
    """Float32 layers run forward once, on lstmviz's native kernels during the forward (their
    backward ops called after PyTorch's backward); without them PyTorch's op runs and lstmviz's
    cells run again in the backward: the same trace either way."""
    from lstmviz.engine.native import kernels
    from lstmviz.torch import fused

    if kernels.library() is None:
        pytest.skip("the native kernels are not built")
    torch.manual_seed(7)
    net = Net(cell, True, **kw)
    x, y = data
    args = (x, torch.tensor([5, 2, 4])) if packed else (x,)
    if cell is nn.LSTM:
        rows = kw["num_layers"] * 2
        args += (torch.randn(rows, B, H), torch.randn(rows, B, H)),
    ran, forward = [], fused.forward
    monkeypatch.setattr(fused, "forward", lambda call, cache: ran.append(call) or forward(
        call, cache))  # fmt: skip
    ours = model_gradients(net, args, y, mse)
    assert len(ran) == 1 and ran[0].saved is not None
    monkeypatch.setattr(fused, "runs", lambda call: False)
    theirs = model_gradients(net, args, y, mse)
    assert sorted(ours.arrays) == sorted(theirs.arrays)
    for key, value in theirs.arrays.items():
        if np.asarray(value).dtype.kind == "f" and key != "model_seconds":
            nan = np.isnan(value)  # a GRU's norm_c_total, …
            np.testing.assert_array_equal(np.isnan(ours[key]), nan, key)
            assert_close(np.where(nan, 0, ours[key]), np.where(nan, 0, value), key, 1e-5)
        elif key != "model_seconds":
            np.testing.assert_array_equal(ours[key], value, key)


def test_the_error_of_one_step_s_pass_asks_the_native_ops_for_no_weight_or_input_gradients():
    """The pass that follows one step's error back needs only the states' gradients: its
    compiled backward leaves the LSTM ops' weight-gradient outputs (5–7) and, where dL/d input
    goes nowhere, dx (9) unread, so the ops skip their products (half a step's work), while
    the loss's pass reads them."""
    from lstmviz.engine.native import kernels
    from lstmviz.torch import fused

    if kernels.library() is None:
        pytest.skip("the native kernels are not built")

    class PerStep(nn.Module):  # an output at every step: the error of one step has a pass
        def __init__(self):
            super().__init__()
            self.rnn, self.head = nn.LSTM(I, H, batch_first=True), nn.Linear(H, 2)

        def forward(self, x):
            return self.head(self.rnn(x)[0])

    fused._BACKWARD.clear()
    x = torch.randn(B, T, I)
    trace = model_gradients(PerStep(), x, torch.randn(B, T, 2), mse)
    assert trace.anchor_norm_h_by_layer.shape == (1, 1, T)
    read = {}
    for key, compiled in fused._BACKWARD.items():
        ops = [op for op in compiled.concrete.graph.get_operations()
               if op.type == "LstmvizSequenceBackward"]  # fmt: skip
        read[key[-2:]] = {i for op in ops for i in (5, 6, 7, 9) if op.outputs[i].consumers()}
    assert read == {(True, True): {5, 6, 7, 9}, (False, False): set()}


def test_the_error_of_one_step_crosses_from_one_recurrent_module_into_the_one_below():
    """Two modules stacked (a bidirectional LSTM read by an LSTM): the error of one step's
    pass computes dL/d input only where it goes on into an earlier call (the upper module's),
    and the lower module's anchored norms equal the unrolled cells' under that step's loss."""

    class Stacked(nn.Module):
        def __init__(self):
            super().__init__()
            self.low = nn.LSTM(I, H, batch_first=True, bidirectional=True)
            self.high, self.head = nn.LSTM(2 * H, H, batch_first=True), nn.Linear(H, 2)

        def forward(self, x):
            return self.head(self.high(self.low(x)[0])[0])

    torch.manual_seed(11)
    net, x, y = Stacked(), torch.randn(B, T, I), torch.randn(B, T, 2)
    trace = model_gradients(net, x, y, mse)
    assert list(trace.layer_names) == ["low/l0/forward", "low/l0/backward", "high/l0"]
    for k, anchor in enumerate((T - 1, 0, T - 1)):

        def alone(output, target, t=anchor):  # the mean's share of step t
            return ((output[:, t] - target[:, t]) ** 2).sum() / output.numel()

        ref = reference(net, (x,), y, alone)["directions"][k]
        for state in ("h", "c"):
            theirs = np.sqrt(np.square(ref[f"grad_{state}_total"].astype(np.float64)).sum((1, 2)))
            assert theirs.min() > 0  # the lower module's too: the error reached it
            assert_close(trace[f"anchor_norm_{state}_by_layer"][k, 0], theirs, f"{k} {state}",
                         2e-4)  # fmt: skip


def test_lstmviz_the_window_and_model_mode_do_not_import_torch():
    import subprocess
    import sys

    code = ("import sys, lstmviz, lstmviz.io.files, lstmviz.engine.modes.model, "
            "lstmviz.gui.main_window; "
            "lstmviz.io.files.torch_program('m.pt2'); print('torch' in sys.modules)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.stdout.strip() == "False", done.stderr
