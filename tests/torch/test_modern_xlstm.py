"""xLSTM's sLSTM (the xlstm package's "vanilla" cell) traced by lstmviz.torch.model_gradients,
against the published equations stepped in Python with retain_grad on h, c and n at every step
(tests/helpers/references/modern_reference.py, first checked against the package's own cell)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("xlstm")
from torch import nn  # noqa: E402
from xlstm import sLSTMLayer, sLSTMLayerConfig  # noqa: E402
from xlstm.blocks.slstm.cell import sLSTMCell, sLSTMCellConfig  # noqa: E402

from lstmviz.torch import model_gradients  # noqa: E402
from tests.helpers.references.modern_reference import channels, slstm_steps  # noqa: E402
from tests.helpers.references.torch_reference import assert_close  # noqa: E402

T, B, H, HEADS = 6, 2, 4, 2


class CellNet(nn.Module):
    """x [B, T, 4H] -> the sLSTM cell -> h [B, T, H] -> a head on every step."""

    def __init__(self):
        super().__init__()
        self.cell = sLSTMCell(sLSTMCellConfig(hidden_size=H, num_heads=HEADS, backend="vanilla",
                                              recurrent_weight_init="standard",
                                              dtype="float32"))  # fmt: skip
        self.head = nn.Linear(H, 3)

    def forward(self, x):
        out, _ = self.cell(x)  # [B, heads, T, head_dim]
        return self.head(out.permute(0, 2, 1, 3).reshape(x.shape[0], x.shape[1], H))


@pytest.fixture(scope="module")
def cell_net():
    torch.manual_seed(0)
    model = CellNet()
    x, y = torch.randn(B, T, 4 * H), torch.randn(B, T, 3)
    return model, x, y, model_gradients(model, x, y, loss_fn="mse")


def test_the_stepped_equations_are_the_packages_cell(cell_net):
    model, x, _, _ = cell_net
    with torch.no_grad():
        out, _ = model.cell(x)
        assert_close(slstm_steps(model.cell, x)[0], out.permute(0, 2, 1, 3).reshape(B, T, H),
                     "h")  # fmt: skip


def test_h_c_n_totals_and_directs_match_the_stepped_equations(cell_net):
    model, x, y, trace = cell_net
    source = x.clone().requires_grad_()
    h, states, reads = slstm_steps(model.cell, source)
    nn.functional.mse_loss(model.head(h), y).backward()
    assert list(trace.layer_names) == ["cell"] and str(trace.layer0_cell) == "slstm"
    assert list(trace.layer0_state_names) == ["h", "c", "n", "m"]
    for key, index in (("grad_h_total", 0), ("grad_c_total", 1), ("grad_n_total", 2)):
        expected = torch.stack([s[index].grad for s in states]).numpy()
        assert_close(trace[f"layer0_{key}"], expected, key)
    assert_close(trace.layer0_grad_h_direct, torch.stack([r.grad for r in reads]).numpy(),
                 "direct")  # fmt: skip
    for key, index in (("h", 0), ("c", 1), ("n", 2)):
        assert_close(trace[f"layer0_{key}"], torch.stack([s[index] for s in states]).detach(),
                     key)  # fmt: skip
    assert_close(trace.grad_input, source.grad.transpose(0, 1), "grad_input")
    norms = np.sqrt((torch.stack([s[1].grad for s in states]).double().numpy() ** 2).sum((1, 2)))
    assert_close(trace.norm_c_total_by_layer[0], norms, "norm c")
    recurrent = dict(model.cell.named_parameters())["_recurrent_kernel_"]
    model.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    assert_close(trace.layer0_grad_weight__recurrent_kernel_, recurrent.grad, "R")


def test_an_slstm_layer_in_a_residual_stack_is_traced_with_its_timescale():
    torch.manual_seed(1)
    layer = sLSTMLayer(sLSTMLayerConfig(embedding_dim=8, num_heads=2, backend="vanilla"))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.s = layer

        def forward(self, x):
            return x + self.s(x)

    trace = model_gradients(Net(), torch.randn(B, T, 8))
    assert list(trace.layer_names) == ["s/slstm_cell"]
    f = trace.layer0_gates_mean[list(trace.layer0_gate_names).index("f")]
    assert trace.layer0_timescale.shape == (8,) and np.all(trace.layer0_timescale > 0)
    assert f.min() > 0 and f.max() <= 1


class MCellNet(nn.Module):
    """x [B, T, W] -> q, k, v (three linear maps) -> the mLSTM cell -> a head on every step."""

    def __init__(self, width: int = 8, heads: int = 2):
        super().__init__()
        from xlstm.blocks.mlstm.cell import mLSTMCell, mLSTMCellConfig

        self.width, self.heads = width, heads
        self.qkv = nn.Linear(width, 3 * width)
        self.cell = mLSTMCell(mLSTMCellConfig(context_length=T, embedding_dim=width,
                                              num_heads=heads))  # fmt: skip
        nn.init.normal_(self.cell.fgate.weight, std=0.3)  # gates that move with the input
        nn.init.normal_(self.cell.igate.weight, std=0.3)
        self.head = nn.Linear(width, 3)

    def forward(self, x):
        return self.head(self.cell(*self.qkv(x).chunk(3, -1)))


def mlstm_reference(model: MCellNet, x):
    """The cell's recurrent form, the package's own step stepped in Python, every C_t and n_t
    kept with retain_grad: (output, [C_t], [n_t], [h̃_t])."""
    from xlstm.blocks.mlstm.backends import recurrent_step_stabilized_simple

    cell, nh, dh = model.cell, model.heads, model.width // model.heads
    q, k, v = model.qkv(x).chunk(3, -1)
    gates_in = torch.cat([q, k, v], -1)
    heads = (lambda a: a.view(B, T, nh, dh).transpose(1, 2))  # noqa: E731
    q, k, v = heads(q), heads(k), heads(v)
    i_pre = cell.igate(gates_in).transpose(-1, -2).unsqueeze(-1)
    f_pre = cell.fgate(gates_in).transpose(-1, -2).unsqueeze(-1)
    c, n, m = (torch.zeros(B, nh, *shape, dtype=x.dtype) for shape in ((dh, dh), (dh, 1), (1, 1)))
    cs, ns, hs = [], [], []
    for t in range(T):
        h, (c, n, m) = recurrent_step_stabilized_simple(
            c, n, m, q[:, :, t : t + 1].clone(), k[:, :, t : t + 1].clone(),
            v[:, :, t : t + 1].clone(), i_pre[:, :, t : t + 1], f_pre[:, :, t : t + 1])
        c.retain_grad()
        n.retain_grad()
        h.retain_grad()
        cs.append(c)
        ns.append(n)
        hs.append(h)
    h = cell.outnorm(torch.cat(hs, 2)).transpose(1, 2).reshape(B, T, model.width)
    return model.head(h), cs, ns, hs


@pytest.mark.parametrize("width, heads", [(8, 2), (40, 1)])
def test_mlstm_matrix_memory_and_normaliser_totals_match_its_recurrent_form(width, heads):
    """In float64: dL/dn_t is small (h reads n only where |q·n| beats e^{−m}), and float32
    rounding of the two forms differs by 1e-3 of it. 40 × 40 = 1,600 channels a step: C kept
    per row, the norm over its columns."""
    torch.manual_seed(2)
    model = MCellNet(width, heads).double()
    x = torch.randn(B, T, width, dtype=torch.float64)
    y = torch.randn(B, T, 3, dtype=torch.float64)
    trace = model_gradients(model, x, y, loss_fn="mse")
    output, cs, ns, hs = mlstm_reference(model, x)
    assert_close(output.detach(), model(x).detach(), "parallel and recurrent forms")
    nn.functional.mse_loss(output, y).backward(retain_graph=True)
    assert list(trace.layer_names) == ["cell"] and str(trace.layer0_cell) == "mlstm"
    assert list(trace.layer0_state_names) == ["C", "n", "m"]
    wide = width * width // heads > 1024
    total_c = torch.stack([c.grad for c in cs])  # [T, B, NH, DH, DH]
    assert_close(trace.layer0_grad_h_total, channels(total_c, reduce=wide), "dL/dC_t")
    assert_close(trace.layer0_h, channels(torch.stack(cs), reduce=wide), "C_t")
    direct = torch.stack([torch.autograd.grad(h, c, h.grad, retain_graph=True)[0]
                          for h, c in zip(hs, cs, strict=True)])  # fmt: skip
    assert_close(trace.layer0_grad_h_direct, channels(direct, reduce=wide), "direct dL/dC_t")
    norms = np.sqrt((total_c.reshape(T, -1).numpy() ** 2).sum(1))
    assert_close(trace.norm_h_total_by_layer[0], norms, "‖dL/dC_t‖")
    assert_close(trace.layer0_grad_n_total, torch.stack([n.grad for n in ns]).reshape(T, B, -1),
                 "dL/dn_t")  # fmt: skip
    assert trace.layer0_timescale.shape == (width * (1 if wide else width // heads),)


@pytest.mark.parametrize("steps, chunk, shift", [(7, 3, 0.0), (12, 4, -20.0), (9, 9, 4.0)])
def test_mlstm_chunks_compute_the_parallel_form_and_its_gradients(steps, chunk, shift):
    """`xlstm.chunked` (the traced mLSTM's form) against the package's parallel form in
    float64: h̃ and autograd's gradients of every input. shift −20: input gates so small that
    e^{−m} beats |q·n| (the stabiliser's branch of the normaliser); 7 = 3 + 3 + 1: a short
    last chunk."""
    from xlstm.blocks.mlstm.backends import parallel_stabilized_simple

    from lstmviz.torch.modern.xlstm import chunked

    torch.manual_seed(3)
    shape = (2, 2, steps)
    inputs = [torch.randn(*shape, 4, dtype=torch.float64) for _ in range(3)]
    inputs += [torch.randn(*shape, 1, dtype=torch.float64) * 3 + shift,
               torch.randn(*shape, 1, dtype=torch.float64) * 2 + 1]  # fmt: skip
    inputs = [t.requires_grad_() for t in inputs]
    want = parallel_stabilized_simple(*inputs)
    got = chunked(*inputs, chunk=chunk)
    weights = torch.randn_like(want)
    scale = want.detach().abs().max()
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12 * float(scale))
    for g, w in zip(torch.autograd.grad((got * weights).sum(), inputs),
                    torch.autograd.grad((want * weights).sum(), inputs), strict=True):  # fmt: skip
        torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-12 * float(w.abs().max()))


@pytest.mark.parametrize("width, heads", [(8, 2), (40, 1)])
def test_mlstm_anchored_norms_follow_one_steps_error_through_its_recurrent_form(width, heads):
    """The error of step 3 alone followed back (`anchors=[3]`): ‖dL_3/dC̃_t‖ per step against
    the package's recurrent steps with the output's gradient kept at step 3 only (zero after
    it: the cell is causal)."""
    torch.manual_seed(4)
    model = MCellNet(width, heads).double()
    x = torch.randn(B, T, width, dtype=torch.float64)
    y = torch.randn(B, T, 3, dtype=torch.float64)
    trace = model_gradients(model, x, y, loss_fn="mse", anchors=[3])
    output, cs, _, _ = mlstm_reference(model, x)
    d_output = torch.autograd.grad(nn.functional.mse_loss(output, y), output, retain_graph=True)[0]
    keep = torch.zeros_like(d_output)
    keep[:, 3] = 1
    output.backward(d_output * keep)
    norms = np.sqrt((torch.stack([c.grad for c in cs]).reshape(T, -1).numpy() ** 2).sum(1))
    assert trace.anchors_by_layer.tolist() == [[3]]
    assert_close(trace.anchor_norm_h_by_layer[0, 0], norms, "‖dL_3/dC_t‖")
    assert np.all(trace.anchor_norm_h_by_layer[0, 0, 4:] == 0)
