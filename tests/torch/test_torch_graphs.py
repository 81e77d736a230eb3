"""lstmviz.torch.model_gradients on models that call their recurrent layers many times: a
seq2seq whose decoder nn.LSTM is stepped once per token with (h, c) handed on, nn.LSTMCell and
nn.GRUCell loops, an encoder shared by two inputs, a two-layer decoder. Everything against an
unrolled reference (tests/helpers/references/torch_graph_reference.py: the cells step by step,
retain_grad on every state, loss.backward) whose directions the tests name by hand."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from lstmviz.engine.native import kernels  # noqa: E402
from lstmviz.torch import fused, inputs, model_gradients  # noqa: E402
from tests.helpers.models.torch_seq2seq import (  # noqa: E402
    SOURCE,
    TARGET,
    B,
    H,
    I,
    Seq2Seq,
    sequence_xent,
    tokens,
)
from tests.helpers.references.torch_graph_reference import Reference  # noqa: E402
from tests.helpers.references.torch_reference import assert_close  # noqa: E402


def mse(output, y):
    return ((output - y) ** 2).mean()


def check_direction(trace, k, ref: dict, rtol=1e-5):
    for key, theirs in ref.items():
        assert_close(trace[f"layer{k}_{key}"], theirs, f"{trace.layer_names[k]} {key}", rtol)


def check_weights(trace, ks, theirs: dict):
    """The weight gradients of directions `ks` summed (one layer's chains) equal PyTorch's."""
    for key, value in theirs.items():
        ours = sum(trace[f"layer{k}_{key}"].astype(np.float64) for k in ks)
        assert_close(ours, value, f"{[str(trace.layer_names[k]) for k in ks]} {key}")


@pytest.mark.parametrize(
    "layers, read, runs",
    [(1, "output", [TARGET]), (2, "output", [TARGET]), (2, "state", []), (1, "fed", [])],
    ids=["one-layer", "two-layer-decoder", "head-reads-the-state", "output-fed-back"],
)
def test_a_seq2seq_decoder_stepped_per_token_is_one_direction_linked_to_its_encoder(
    layers, read, runs, monkeypatch
):
    """`runs`: the decoder's steps have one backward (fused.backward_run) only where nothing
    PyTorch computes between them takes a gradient from them."""
    torch.manual_seed(layers)
    net = Seq2Seq(layers, read=read)
    src, tgt_in, y = tokens(layers)
    ran, backward_run = [], fused.backward_run
    monkeypatch.setattr(fused, "backward_run", lambda c, *a: ran.append(len(c)) or backward_run(
        c, *a))  # fmt: skip
    seen, follow = [], inputs.Provenance.__torch_function__
    monkeypatch.setattr(inputs.Provenance, "__torch_function__", lambda self, func, *a, **k: (
        seen.append(getattr(func, "__name__", ""))) or follow(self, func, *a, **k))  # fmt: skip
    trace = model_gradients(net, (src, tgt_in), y, sequence_xent)
    # the module's own ops are followed; lstmviz's recording of each call (its outputs made
    # leaves by requires_grad_) runs outside
    assert "embedding" in seen and "requires_grad_" not in seen
    # twice: the loss's backward, and the error of the last step's (a loss on every step)
    assert ran == (runs * 2 if kernels.library() is not None else [])
    ref = Reference(net)
    assert trace.loss == pytest.approx(ref.run((src, tgt_in), y, sequence_xent), rel=1e-5)
    enc = [f"encoder/l{k}" for k in range(layers)]
    dec = [f"decoder/l{k}" for k in range(layers)]
    assert list(trace.layer_names) == enc + dec
    steps = list(range(1, TARGET + 1))  # the decoder's calls in the log (the encoder's is 0)
    for k in range(layers):
        assert int(trace[f"layer{k}_calls"]) == 1 and int(trace[f"layer{k}_initial_from"]) == -1
        d = layers + k
        assert int(trace[f"layer{d}_calls"]) == TARGET
        assert int(trace[f"layer{d}_initial_from"]) == k  # encoder l{k} -> decoder l{k}
        encoder = ref.direction([(0, k)])
        # the hand-over carries the whole loss back: without it the encoder's totals are 0
        assert np.abs(encoder["grad_h_total"]).max() > 1e-4
        check_direction(trace, k, encoder)
        check_direction(trace, d, ref.direction([(n, k) for n in steps]))
        assert trace[f"layer{d}_h"].shape == (TARGET, B, H)
        assert trace[f"layer{d}_gates_mean"].shape == (4, TARGET)
        check_weights(trace, [k], ref.weight_grads("encoder", k))
        check_weights(trace, [d], ref.weight_grads("decoder", k))
    # [L, T] summaries over the longest direction, NaN after a shorter one's end
    rows = trace.norm_h_total_by_layer
    assert rows.shape == (2 * layers, SOURCE)
    assert np.isnan(rows[layers:, TARGET:]).all() and np.isfinite(rows[:, :TARGET]).all()
    # two inputs: each one's keys, of the first direction it feeds (the encoder; the decoder)
    assert "grad_input" not in trace.arrays and "x" not in trace.arrays
    assert_close(trace["grad_input_src"], ref.grad_input([0]), "grad_input_src")
    assert_close(trace["grad_input_tgt_in"], ref.grad_input(steps), "grad_input_tgt_in")
    assert trace["saliency_src"].shape == (B, SOURCE)
    assert trace["saliency_tgt_in"].shape == (B, TARGET)
    np.testing.assert_array_equal(trace["x_tgt_in"], tgt_in.numpy().T)
    trace.check()


def test_a_bridged_hand_over_links_nothing_but_carries_the_gradient():
    torch.manual_seed(3)
    net = Seq2Seq(bridge=True)
    src, tgt_in, y = tokens(3)
    trace = model_gradients(net, (src, tgt_in), y, sequence_xent)
    ref = Reference(net)
    ref.run((src, tgt_in), y, sequence_xent)
    assert int(trace.layer1_initial_from) == -1  # h0 is computed from h_n, not h_n itself
    check_direction(trace, 0, ref.direction([(0, 0)]))
    check_direction(trace, 1, ref.direction([(n, 0) for n in range(1, TARGET + 1)]))


class CellLoop(nn.Module):
    """A cell stepped over x [B, T, I] in a Python loop, the state carried; a head on the mean
    of the h_t and on the last one."""

    def __init__(self, cell):
        super().__init__()
        self.cell = cell(I, H)
        self.head = nn.Linear(H, 2)

    def forward(self, x):
        state, outs = None, []
        for t in range(x.shape[1]):
            state = self.cell(x[:, t], state)
            outs.append(state[0] if isinstance(state, tuple) else state)
        return torch.tanh(self.head(torch.stack(outs, 1).mean(1))) + self.head(outs[-1])


@pytest.mark.parametrize("cell", [nn.LSTMCell, nn.GRUCell], ids=["lstm-cell", "gru-cell"])
def test_a_cell_in_a_loop_is_one_direction_of_one_step_per_call(cell):
    torch.manual_seed(4)
    net = CellLoop(cell)
    gen = torch.Generator().manual_seed(4)
    x, y = torch.randn(B, SOURCE, I, generator=gen), torch.randn(B, 2, generator=gen)
    trace = model_gradients(net, x, y, mse)
    ref = Reference(net)
    assert trace.loss == pytest.approx(ref.run((x,), y, mse), rel=1e-5)
    assert list(trace.layer_names) == ["cell"]
    assert int(trace.layer0_calls) == SOURCE and int(trace.layer0_initial_from) == -1
    assert str(trace.layer0_cell) == ("lstm" if cell is nn.LSTMCell else "gru")
    check_direction(trace, 0, ref.direction([(n, 0) for n in range(SOURCE)]))
    check_weights(trace, [0], ref.weight_grads("cell"))
    assert_close(trace.grad_input, ref.grad_input(list(range(SOURCE))), "grad_input")
    np.testing.assert_array_equal(trace.x, x.numpy().transpose(1, 0, 2))
    trace.check()


class CellDecoder(nn.Module):
    """An nn.LSTM encoder handing h_n[-1], c_n[-1] (views of its state) to an nn.LSTMCell
    stepped over the target, its output fed back as the next step's input."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.LSTM(I, H, num_layers=2, batch_first=True)
        self.cell = nn.LSTMCell(H, H)
        self.head = nn.Linear(H, 2)

    def forward(self, x):
        _, (h, c) = self.encoder(x)
        h, c = h[-1], c[-1]
        feed, outs = torch.zeros_like(h), []
        for _ in range(TARGET):
            h, c = self.cell(feed, (h, c))
            feed = h
            outs.append(self.head(h))
        return torch.stack(outs, 1)


def test_a_cell_decoder_takes_a_view_of_the_encoder_state_and_feeds_its_output_back():
    torch.manual_seed(5)
    net = CellDecoder()
    gen = torch.Generator().manual_seed(5)
    x, y = torch.randn(B, SOURCE, I, generator=gen), torch.randn(B, TARGET, 2, generator=gen)
    trace = model_gradients(net, x, y, mse)
    ref = Reference(net)
    ref.run((x,), y, mse)
    assert list(trace.layer_names) == ["encoder/l0", "encoder/l1", "cell"]
    assert int(trace.layer2_initial_from) == 1 and int(trace.layer2_calls) == TARGET
    for k in range(2):
        check_direction(trace, k, ref.direction([(0, k)]))
    check_direction(trace, 2, ref.direction([(n, 0) for n in range(1, TARGET + 1)]))
    check_weights(trace, [2], ref.weight_grads("cell"))
    check_weights(trace, [1], ref.weight_grads("encoder", 1))


class Shared(nn.Module):
    """One encoder nn.LSTM run on two inputs (no state passes between the runs)."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.LSTM(I, H, batch_first=True)
        self.head = nn.Linear(2 * H, 2)

    def forward(self, a, b):
        _, (ha, _) = self.encoder(a)
        out, (hb, _) = self.encoder(b)
        return self.head(torch.cat([ha[-1], hb[-1] + out.mean(1)], -1))


def test_an_encoder_shared_by_two_inputs_makes_two_directions():
    torch.manual_seed(6)
    net = Shared()
    gen = torch.Generator().manual_seed(6)
    a, b = torch.randn(B, SOURCE, I, generator=gen), torch.randn(B, TARGET, I, generator=gen)
    y = torch.randn(B, 2, generator=gen)
    trace = model_gradients(net, (a, b), y, mse)
    ref = Reference(net)
    assert trace.loss == pytest.approx(ref.run((a, b), y, mse), rel=1e-5)
    assert list(trace.layer_names) == ["encoder/l0#0", "encoder/l0#1"]
    for k in range(2):
        assert int(trace[f"layer{k}_calls"]) == 1 and int(trace[f"layer{k}_initial_from"]) == -1
        check_direction(trace, k, ref.direction([(k, 0)]))
    assert trace.layer1_h.shape == (TARGET, B, H)  # each direction keeps its own length
    check_weights(trace, [0, 1], ref.weight_grads("encoder"))
    assert_close(trace.grad_input, ref.grad_input([0]), "grad_input")
    assert np.isnan(trace.norm_h_total_by_layer[1, TARGET:]).all()
    trace.check()


def test_an_exported_seq2seq_program_chains_its_decoder_steps_as_the_module_does():
    """torch.export unrolls the loop: one aten.lstm per token, each in its own module of the
    same name (lstmviz.torch.programs); the steps still make one direction."""
    from lstmviz.torch.programs import Program

    torch.manual_seed(7)
    net = Seq2Seq()
    src, tgt_in, y = tokens(7)
    program = Program(torch.export.export(net, (src, tgt_in)).module())
    ours = model_gradients(program, (src, tgt_in), y, sequence_xent)
    theirs = model_gradients(net, (src, tgt_in), y, sequence_xent)
    assert list(ours.layer_names) == list(theirs.layer_names) == ["encoder/l0", "decoder/l0"]
    assert int(ours.layer1_calls) == TARGET and int(ours.layer1_initial_from) == 0
    for k in range(2):
        for key in ("grad_h_total", "grad_c_total", "grad_h_direct", "grad_kernel"):
            assert_close(ours[f"layer{k}_{key}"], theirs[f"layer{k}_{key}"], f"{k} {key}")


class Branches(nn.Module):
    """A bidirectional nn.GRU (time-major) over two chunks, the state handed on, and a second
    run from the first chunk's state (a branch: that state already goes on in the chain)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(I, H, bidirectional=True)
        self.head = nn.Linear(2 * H, 2)

    def forward(self, x):
        first, h = self.rnn(x[:2])
        second, _ = self.rnn(x[2:], h)
        branch, _ = self.rnn(x[2:], h)
        return self.head(first.mean(0) + second.mean(0) + branch[-1])


def test_a_state_continued_once_chains_and_a_second_run_from_it_is_linked():
    torch.manual_seed(8)
    net = Branches()
    gen = torch.Generator().manual_seed(8)
    x, y = torch.randn(SOURCE + 1, B, I, generator=gen), torch.randn(B, 2, generator=gen)
    trace = model_gradients(net, x, y, mse)
    ref = Reference(net)
    ref.run((x,), y, mse)
    assert list(trace.layer_names) == ["rnn/l0/forward#0", "rnn/l0/backward#0",
                                       "rnn/l0/forward#1", "rnn/l0/backward#1"]  # fmt: skip
    assert [int(trace[f"layer{k}_calls"]) for k in range(4)] == [2, 2, 1, 1]
    assert [int(trace[f"layer{k}_initial_from"]) for k in range(4)] == [-1, -1, 0, 1]
    for d in range(2):
        check_direction(trace, d, ref.direction([(0, d), (1, d)]))
        check_direction(trace, 2 + d, ref.direction([(2, d)]))
    trace.check()


class ReluCellLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.RNNCell(I, H, nonlinearity="relu", dtype=torch.float64)
        self.head = nn.Linear(H, 2, dtype=torch.float64)

    def forward(self, x):  # x [T, B, I], h0 given as zeros
        h = torch.zeros(x.shape[1], H, dtype=x.dtype)
        for t in range(x.shape[0]):
            h = self.cell(x[t], h)
        return self.head(h)


def test_a_float64_relu_cell_loop_equals_the_unrolled_cells():
    torch.manual_seed(9)
    net = ReluCellLoop()
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(SOURCE, B, I, generator=gen, dtype=torch.float64)
    y = torch.randn(B, 2, generator=gen, dtype=torch.float64)
    trace = model_gradients(net, x, y, mse)
    ref = Reference(net)
    ref.run((x,), y, mse)
    assert str(trace.layer0_cell) == "simple_rnn" and int(trace.layer0_calls) == SOURCE
    check_direction(trace, 0, ref.direction([(n, 0) for n in range(SOURCE)]))
    check_weights(trace, [0], ref.weight_grads("cell"))
    assert_close(trace.grad_input, ref.grad_input(list(range(SOURCE))), "grad_input")


def test_an_exported_cell_decoder_runs_its_cell_ops_as_the_module_does():
    """torch.export keeps an nn.LSTMCell's steps as aten.lstm_cell ops (a node per step, the
    weights shared): each runs in one nn.LSTMCell of the cell's name, and the trace equals the
    module's (itself checked against the unrolled cells above)."""
    from lstmviz.torch.programs import Program

    torch.manual_seed(10)
    net = CellDecoder()
    gen = torch.Generator().manual_seed(10)
    x, y = torch.randn(B, SOURCE, I, generator=gen), torch.randn(B, TARGET, 2, generator=gen)
    program = Program(torch.export.export(net, (x,)).module())
    ours = model_gradients(program, x, y, mse)
    theirs = model_gradients(net, x, y, mse)
    assert list(ours.layer_names) == list(theirs.layer_names)
    assert int(ours.layer2_calls) == TARGET
    for k in range(len(theirs.layer_names)):
        assert int(ours[f"layer{k}_initial_from"]) == int(theirs[f"layer{k}_initial_from"])
        for key in ("grad_h_total", "grad_c_total", "grad_h_direct", "grad_kernel"):
            assert_close(ours[f"layer{k}_{key}"], theirs[f"layer{k}_{key}"], f"{k} {key}")
