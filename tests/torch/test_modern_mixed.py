"""Modules that mix classic nn.LSTM/GRU layers with modern ones (minGRU, Mamba) traced by
lstmviz.torch.model_gradients: every direction of both kinds in one trace, in the order the
forward calls them, against a copy of the module with its classic layers unrolled cell by cell
(tests/helpers/references/torch_reference.py) and its modern layers stepped from their equations
(tests/helpers/references/modern_reference.py), every state kept with retain_grad, one backward: the
gradient of a layer below a layer of the other kind comes back through that layer's backward."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("minGRU_pytorch")
pytest.importorskip("mambapy")
import torch.nn.functional as F  # noqa: E402
from mambapy.mamba import MambaBlock, MambaConfig  # noqa: E402
from minGRU_pytorch import minGRU  # noqa: E402
from torch import nn  # noqa: E402

from lstmviz.torch import model_gradients  # noqa: E402
from tests.helpers.references.modern_reference import channels, mamba_steps, mingru_steps  # noqa: E402
from tests.helpers.references.torch_reference import (  # noqa: E402
    Unrolled,
    assert_close,
    reference,
    unrolled_directions,
)

T, B, I, H = 5, 2, 3, 4


class LstmThenMinGRU(nn.Module):
    """x → nn.LSTM → minGRU → a head on every step (the minGRU declared first)."""

    def __init__(self):
        super().__init__()
        self.mingru = minGRU(H)
        self.lstm = nn.LSTM(I, H, batch_first=True)
        self.head = nn.Linear(H, 2)

    def forward(self, x):
        return self.head(self.mingru(self.lstm(x)[0]))


class MinGRUThenBiGRU(nn.Module):
    """x → minGRU → bidirectional nn.GRU → a head on every step (the GRU declared first): the
    minGRU's gradient comes back through both GRU directions' backward."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(I, H, batch_first=True, bidirectional=True)
        self.mingru = minGRU(I)
        self.head = nn.Linear(2 * H, 2)

    def forward(self, x):
        return self.head(self.gru(self.mingru(x))[0])


class Hybrid(nn.Module):
    """x → minGRU → nn.LSTM → Mamba → nn.GRU whose initial state is the LSTM's h_n → a head on
    every step; declared in another order than called."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(H, H, batch_first=True)
        self.mamba = MambaBlock(MambaConfig(d_model=H, n_layers=1, d_state=3))
        self.lstm = nn.LSTM(I, H, batch_first=True)
        self.mingru = minGRU(I)
        self.head = nn.Linear(H, 2)

    def forward(self, x):
        out, (h_n, _) = self.lstm(self.mingru(x))
        return self.head(self.gru(self.mamba(out), h_n)[0])


class ContextBeside(nn.Module):
    """A GRU reads a context of 3 steps; its last state joins every step of a minGRU over the
    sequence → a head on every step: the output follows the minGRU's steps, not the GRU's."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(I, H, batch_first=True)
        self.mingru = minGRU(H)
        self.head = nn.Linear(H, 2)

    def forward(self, x, context):
        last = self.gru(context)[1][-1]  # called first
        return self.head(self.mingru(x) + last[:, None])


class Stepped(nn.Module):
    """A modern layer run by its `*_steps` reference; keeps its input's alias (whose .grad is
    dL/d input through the layer alone), states and reads."""

    def __init__(self, layer, steps):
        super().__init__()
        self.layer, self.steps, self.kept = layer, steps, None

    def forward(self, x):
        read = x.view_as(x) if x.requires_grad else x.detach().requires_grad_()
        read.retain_grad()
        out, states, reads = self.steps(self.layer, read)
        self.kept = (read, states, reads)
        return out


def stepped_reference(model, args: tuple, y, anchor=None) -> tuple[dict, dict]:
    """({direction name: its arrays as the trace names them, `input` dL/d its layer's input
    [T, B, ·]}, {modern layer's name: {parameter: grad}}) of a copy of `model` with its classic
    layers unrolled and its modern ones stepped, under MSE — or, `anchor` a step, with the
    loss's gradient kept at that step of the output alone."""
    copied = copy.deepcopy(model)
    wrappers = {}
    for name, sub in list(copied.named_children()):
        if isinstance(sub, nn.LSTM | nn.GRU):
            wrappers[name] = Unrolled(sub)
        elif isinstance(sub, minGRU | MambaBlock):
            wrappers[name] = Stepped(sub, mingru_steps if isinstance(sub, minGRU) else mamba_steps)
        else:
            continue
        setattr(copied, name, wrappers[name])
    output = copied(*args)
    loss = F.mse_loss(output, y)
    if anchor is None:
        loss.backward()
    else:
        d_output = torch.autograd.grad(loss, output, retain_graph=True)[0]
        keep = torch.zeros_like(d_output)
        keep[:, anchor] = 1
        output.backward(d_output * keep)
    found, weights = {}, {}
    for name, wrapper in wrappers.items():
        if isinstance(wrapper, Unrolled):
            sides = ["/forward", "/backward"] if wrapper.inner.bidirectional else [""]
            for side, one in zip(sides, unrolled_directions(wrapper), strict=True):
                found[f"{name}/l0{side}"] = one | {"input": wrapper.first_input.grad.numpy()}
            continue
        read, states, reads = wrapper.kept
        found[name] = {"grad_h_total": channels(torch.stack([s.grad for s in states])),
                       "grad_h_direct": channels(torch.stack([r.grad for r in reads])),
                       "input": read.grad.transpose(0, 1).numpy()}  # fmt: skip
        weights[name] = {key.replace(".", "_"): p.grad for key, p in
                         wrapper.layer.named_parameters()}  # fmt: skip
    return found, weights


def norms(value: np.ndarray) -> np.ndarray:
    """[T] ‖value_t‖ over batch and channels of [T, B, ·]."""
    return np.sqrt(np.square(value).sum((1, 2)))


def check(trace, found: dict, weights: dict, names: list[str], rtol: float) -> None:
    """The trace's directions are `names` in this order and equal the reference's: states'
    totals, directs, c's totals, weight gradients, the norm rows; `grad_input` the first's."""
    assert [str(n) for n in trace.layer_names] == names
    for k, name in enumerate(names):
        one = found[name]
        for key, theirs in one.items():
            if key in ("input", "h", "c"):
                continue
            assert_close(trace[f"layer{k}_{key}"], theirs, f"{name} {key}", rtol)
        assert_close(trace.norm_h_total_by_layer[k], norms(one["grad_h_total"]), name, rtol)
        assert_close(trace.norm_h_direct_by_layer[k], norms(one["grad_h_direct"]), name, rtol)
        if "grad_c_total" in one:
            assert_close(trace.norm_c_total_by_layer[k], norms(one["grad_c_total"]), name, rtol)
        else:
            assert np.isnan(trace.norm_c_total_by_layer[k]).all()
        for key, grad in weights.get(name, {}).items():
            assert_close(trace[f"layer{k}_grad_weight_{key}"], grad, f"{name} {key}", rtol)
    assert_close(trace.grad_input, found[names[0]]["input"], "grad_input", rtol)
    assert "not traced" not in str(trace.model_summary)


def data(dtype, width: int = I):
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(B, T, width, generator=gen, dtype=dtype)
    return x, torch.randn(B, T, 2, generator=gen, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_an_lstm_under_a_minGRU_gets_its_gradient_back_through_the_minGRU(dtype):
    """float32: the LSTM on lstmviz's native kernels; float64: on PyTorch's ops, probed."""
    torch.manual_seed(0)
    model = LstmThenMinGRU().to(dtype)
    x, y = data(dtype)
    trace = model_gradients(model, x, y, loss_fn="mse")
    found, weights = stepped_reference(model, (x,), y)
    rtol = 1e-5 if dtype == torch.float32 else 1e-6  # the trace keeps float32
    check(trace, found, weights, ["lstm/l0", "mingru"], rtol)
    assert [str(trace[f"layer{k}_cell"]) for k in (0, 1)] == ["lstm", "mingru"]
    assert trace.anchors_by_layer.tolist() == [[T - 1], [T - 1]]
    assert trace.norm_h_total_by_layer.shape == (2, T)
    assert all(p.grad is None for p in model.parameters())  # the module is left as it was


def test_a_minGRU_below_a_bidirectional_gru_gets_its_gradient_through_the_gru():
    """Called first, declared last: the minGRU is direction 0, its gradient what comes back
    through both GRU directions; the default anchors stay each direction's own end."""
    torch.manual_seed(1)
    model = MinGRUThenBiGRU().double()
    x, y = data(torch.float64)
    trace = model_gradients(model, x, y, loss_fn="mse")
    found, weights = stepped_reference(model, (x,), y)
    check(trace, found, weights, ["mingru", "gru/l0/forward", "gru/l0/backward"], 1e-6)
    assert trace.anchors_by_layer.tolist() == [[T - 1], [T - 1], [0]]
    for k, (name, anchor) in enumerate([("mingru", T - 1), ("gru/l0/forward", T - 1),
                                        ("gru/l0/backward", 0)]):  # fmt: skip
        one = stepped_reference(model, (x,), y, anchor)[0][name]
        assert_close(trace.anchor_norm_h_by_layer[k, 0], norms(one["grad_h_total"]), name, 1e-6)


def test_a_hybrid_stack_orders_its_directions_as_called_and_follows_given_anchors():
    """minGRU → LSTM → Mamba → GRU (the LSTM's state handed to the GRU): the modern layers
    between classic ones, the GRU's initial state numbered in call order, two anchors the
    same steps for every direction."""
    torch.manual_seed(2)
    model = Hybrid().double()
    x, y = data(torch.float64)
    anchors = [1, T - 1]
    trace = model_gradients(model, x, y, loss_fn="mse", anchors=anchors)
    found, weights = stepped_reference(model, (x,), y)
    names = ["mingru", "lstm/l0", "mamba", "gru/l0"]
    check(trace, found, weights, names, 1e-6)
    assert [str(trace[f"layer{k}_cell"]) for k in range(4)] == ["mingru", "lstm", "mamba", "gru"]
    assert int(trace.layer3_initial_from) == 1  # the LSTM, direction 1
    assert int(trace.layer1_initial_from) == -1
    assert trace.anchors_by_layer.tolist() == [anchors] * 4
    assert trace.anchor_norm_h_by_layer.shape == (4, 2, T)
    for a, step in enumerate(anchors):
        kept = stepped_reference(model, (x,), y, step)[0]
        for k, name in enumerate(names):
            assert_close(trace.anchor_norm_h_by_layer[k, a], norms(kept[name]["grad_h_total"]),
                         f"{name} t*={step}", 1e-6)  # fmt: skip
        assert_close(trace.anchor_norm_c_by_layer[1, a], norms(kept["lstm/l0"]["grad_c_total"]),
                     f"lstm c t*={step}", 1e-6)  # fmt: skip
    assert trace.config.steps == T and trace.config.input_dim == I


def test_xlstm_blocks_over_a_gru_trace_both_the_slstm_as_on_its_own():
    """nn.GRU → sLSTMLayer → a head on every step: the GRU's gradient (through the sLSTM) equals
    the unrolled GRU's with the sLSTM run by its package; the sLSTM's arrays are those of the
    sLSTM traced alone on the GRU's output computed separately (nothing above it to differ)."""
    pytest.importorskip("xlstm")
    from xlstm import sLSTMLayer, sLSTMLayerConfig

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = sLSTMLayer(sLSTMLayerConfig(embedding_dim=H, num_heads=2,
                                                      backend="vanilla"))  # fmt: skip
            self.gru = nn.GRU(I, H, batch_first=True)
            self.head = nn.Linear(H, 2)

        def forward(self, x):
            return self.head(self.blocks(self.gru(x)[0]))

    class Top(nn.Module):
        def __init__(self, net):
            super().__init__()
            self.blocks, self.head = net.blocks, net.head

        def forward(self, h):
            return self.head(self.blocks(h))

    torch.manual_seed(3)
    model = Net().double()
    x, y = data(torch.float64)
    trace = model_gradients(model, x, y, loss_fn="mse")
    assert [str(n) for n in trace.layer_names] == ["gru/l0", "blocks/slstm_cell"]
    ref = reference(model, (x,), y, F.mse_loss)
    for key, theirs in ref["directions"][0].items():
        assert_close(trace[f"layer0_{key}"], theirs, f"gru {key}", 1e-6)
    assert_close(trace.grad_input, ref["grad_input"], "grad_input", 1e-6)
    with torch.no_grad():
        h = model.gru(x)[0]
    alone = model_gradients(Top(model), h, y, loss_fn="mse")
    for key in ("h", "c", "n", "grad_h_total", "grad_h_direct", "grad_c_total", "grad_n_total"):
        assert_close(trace[f"layer1_{key}"], alone[f"layer0_{key}"], f"slstm {key}", 1e-6)
    for row in ("norm_h_total_by_layer", "norm_h_direct_by_layer", "norm_c_total_by_layer"):
        assert_close(trace[row][1], alone[row][0], row, 1e-6)
    assert "not traced" not in str(trace.model_summary)


def test_a_context_gru_beside_a_minGRU_follows_the_output_steps_the_minGRU_makes():
    """The output has the minGRU's T steps, the GRU 3: the given anchors are followed back into
    both (the GRU's row is its error of output step t* alone), and `grad_input`, the GRU's (it
    runs first), is NaN after its 3 steps."""
    torch.manual_seed(4)
    model = ContextBeside().double()
    x, y = data(torch.float64, H)
    context = torch.randn(B, 3, I, dtype=torch.float64)
    anchors = [1, T - 1]
    trace = model_gradients(model, (x, context), y, loss_fn="mse", anchors=anchors)
    found, weights = stepped_reference(model, (x, context), y)
    assert [str(n) for n in trace.layer_names] == ["gru/l0", "mingru"]
    assert trace.norm_h_total_by_layer.shape == (2, T)
    assert np.isnan(trace.norm_h_total_by_layer[0, 3:]).all()
    for k, name in enumerate(["gru/l0", "mingru"]):
        steps = 3 if k == 0 else T
        for key in ("grad_h_total", "grad_h_direct"):
            assert_close(trace[f"layer{k}_{key}"], found[name][key], f"{name} {key}", 1e-6)
        assert_close(trace.norm_h_total_by_layer[k, :steps], norms(found[name]["grad_h_total"]),
                     name, 1e-6)  # fmt: skip
    assert_close(trace.grad_input[:3], found["gru/l0"]["input"], "grad_input", 1e-6)
    assert np.isnan(trace.grad_input[3:]).all()
    assert trace.anchors_by_layer.tolist() == [anchors] * 2
    for a, step in enumerate(anchors):
        kept = stepped_reference(model, (x, context), y, step)[0]
        assert_close(trace.anchor_norm_h_by_layer[0, a, :3],
                     norms(kept["gru/l0"]["grad_h_total"]), f"gru t*={step}", 1e-6)  # fmt: skip
        assert_close(trace.anchor_norm_h_by_layer[1, a], norms(kept["mingru"]["grad_h_total"]),
                     f"mingru t*={step}", 1e-6)  # fmt: skip


def test_a_modern_layer_the_forward_does_not_call_leaves_the_classic_trace_as_it_is():
    class Unused(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(I, H, batch_first=True)
            self.spare = minGRU(H)
            self.head = nn.Linear(H, 2)

        def forward(self, x):
            return self.head(self.lstm(x)[0])

    torch.manual_seed(5)
    model = Unused().double()
    x, y = data(torch.float64)
    trace = model_gradients(model, x, y, loss_fn="mse")
    assert [str(n) for n in trace.layer_names] == ["lstm/l0"]
    ref = reference(model, (x,), y, F.mse_loss)
    assert_close(trace.layer0_grad_h_total, ref["directions"][0]["grad_h_total"], "total", 1e-6)
