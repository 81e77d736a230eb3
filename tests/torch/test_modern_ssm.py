"""Mamba (mambapy's MambaBlock) and the LRU (lru-pytorch) traced by
lstmviz.torch.model_gradients, against the layers stepped one step at a time with retain_grad
on every state (tests/helpers/references/modern_reference.py, first checked against the packages'
own forwards), the timescales' closed forms, and the layers lstmviz names as not traced."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mambapy")
pytest.importorskip("LRU_pytorch")
from LRU_pytorch import LRU  # noqa: E402
from mambapy.mamba import MambaBlock, MambaConfig  # noqa: E402
from minGRU_pytorch import minGRU  # noqa: E402
from torch import nn  # noqa: E402

from lstmviz.analysis.diagnosis import diagnose  # noqa: E402
from lstmviz.core.errors import ModelError  # noqa: E402
from lstmviz.torch import model_gradients  # noqa: E402
from lstmviz.torch.modern.scan import timescale  # noqa: E402
from tests.helpers.references.modern_reference import (  # noqa: E402
    Stack,
    channels,
    lru_steps,
    mamba_inputs,
    mamba_steps,
    reference,
)
from tests.helpers.references.torch_reference import assert_close  # noqa: E402

T, B, D = 6, 2, 4


def mamba(d_state: int = 3, **kw) -> MambaBlock:
    return MambaBlock(MambaConfig(d_model=D, n_layers=1, d_state=d_state, **kw))


@pytest.fixture(scope="module")
def stack():
    """A Mamba block (parallel scan) under an LRU of 5 complex channels, residual, a head."""
    torch.manual_seed(0)
    model = Stack([mamba(), LRU(D, D, 5)], D)
    x, y = torch.randn(B, T, D), torch.randn(B, T, 3)
    return model, x, y, model_gradients(model, x, y, loss_fn="mse")


def test_the_sequential_references_are_the_packages_forwards(stack):
    model, x, _, _ = stack
    with torch.no_grad():
        for layer, step in zip(model.layers, (mamba_steps, lru_steps), strict=True):
            assert_close(step(layer, x)[0], layer(x), "output")


def test_states_totals_directs_weights_and_input_match_the_stepped_layers(stack):
    model, x, y, trace = stack
    output, per_layer, grad_input, grads = reference(model, (mamba_steps, lru_steps), x, y)
    assert_close(trace.y_pred, output, "y_pred")
    assert [str(trace[f"layer{k}_cell"]) for k in (0, 1)] == ["mamba", "lru"]
    assert trace.layer0_h.shape == (T, B, 2 * D * 3)  # D·N ≤ 1024: every channel
    assert trace.layer1_h.shape == (T, B, 5)  # the complex state's modulus
    for k, (total, direct) in enumerate(per_layer):
        assert_close(trace[f"layer{k}_grad_h_total"], channels(total), f"total {k}")
        assert_close(trace[f"layer{k}_grad_h_direct"], channels(direct), f"direct {k}")
        norms = np.sqrt((channels(total) ** 2).sum((1, 2)))
        assert_close(trace.norm_h_total_by_layer[k], norms, f"norm {k}")
        for name, param in model.layers[k].named_parameters():
            grad = grads[param]
            grad = torch.view_as_real(grad) if grad.is_complex() else grad
            assert_close(trace[f"layer{k}_grad_weight_{name.replace('.', '_')}"], grad,
                         f"{k} {name}")  # fmt: skip
    assert_close(trace.grad_input, grad_input, "grad_input")
    assert all(p.grad is None for p in model.parameters())


def test_a_state_over_1024_channels_is_kept_per_d_channel_its_step_norm_exact():
    """D·N = 8·130 > 1024: [T, B, D], the norm over N; the sequential scan (pscan=False)."""
    torch.manual_seed(1)
    model = Stack([mamba(d_state=130, pscan=False)], D)
    x, y = torch.randn(B, T, D), torch.randn(B, T, 3)
    trace = model_gradients(model, x, y, loss_fn="mse")
    _, [(total, direct)], _, _ = reference(model, (mamba_steps,), x, y)
    assert trace.layer0_grad_h_total.shape == (T, B, 2 * D)
    assert_close(trace.layer0_grad_h_total, channels(total, reduce=True), "total")
    assert_close(trace.layer0_grad_h_direct, channels(direct, reduce=True), "direct")
    assert_close(trace.norm_h_total_by_layer[0], np.sqrt((channels(total) ** 2).sum((1, 2))),
                 "norm")  # fmt: skip


def test_mamba_timescale_is_one_over_delta_times_a():
    """x_proj zero: Δ = softplus(dt bias) per channel on every step, so 1/(Δ·min_n |A|)."""
    torch.manual_seed(2)
    block = mamba(d_state=3)
    with torch.no_grad():
        block.x_proj.weight.zero_()
    trace = model_gradients(nn.Sequential(block), torch.randn(B, T, D))
    delta = nn.functional.softplus(block.dt_proj.bias).detach().double()
    a = torch.exp(block.A_log).detach().double()  # |A| [D, N]
    assert_close(trace.layer0_timescale, (1 / (delta[:, None] * a)).flatten(), "timescale")
    _, _, found, *_ = mamba_inputs(block, torch.randn(B, T, D))
    assert_close(found[0, 0].detach(), delta, "Δ")


def test_an_lru_with_modulus_0_9_decays_by_0_9_a_step():
    torch.manual_seed(3)
    layer = LRU(D, D, 5)
    with torch.no_grad():
        layer.nu_log.fill_(math.log(-math.log(0.9)))
    trace = model_gradients(nn.Sequential(layer), torch.randn(B, T, D),
                            loss_fn=lambda out, y: out[:, -1].sum())  # fmt: skip
    g = trace.layer0_grad_h_total.astype(np.float64)  # |dL/dx_t| per channel
    assert_close(g, g[-1] * 0.9 ** np.arange(T - 1, -1, -1)[:, None, None], "totals", 1e-5)
    assert_close(trace.layer0_timescale, np.full(5, -1 / math.log(0.9)), "timescale", 1e-5)
    assert list(trace.layer0_state_names) == ["x"]
    assert diagnose(trace).layers[0].h.decay_per_step == pytest.approx(0.9, rel=1e-4)


def test_timescales_of_decays_of_one_are_infinite_not_negative():
    """ln|λ| = +0.0 (an LRU with |λ| = 1) or −0.0: no decay, an infinite timescale."""
    found = timescale(torch.tensor([0.0, -0.0, -0.5]))
    assert found.tolist() == [math.inf, math.inf, 2.0]


def test_a_cuda_only_block_is_named_not_traced_and_the_rest_is_traced():
    torch.manual_seed(4)
    cuda = mamba()
    cuda.config.use_cuda = True  # what a machine with mamba_ssm would run
    model = Stack([minGRU(D), cuda], D)
    with pytest.raises(ModelError, match="layers/1 is not traced .*CUDA.*its forward failed"):
        model_gradients(model, torch.randn(B, T, D))  # mamba_ssm's kernel: none on the CPU
    cuda.selective_scan_cuda = lambda u, delta, *args, z, **kw: u * nn.functional.silu(z)
    trace = model_gradients(model, torch.randn(B, T, D))  # a stand-in that runs on the CPU
    assert list(trace.layer_names) == ["layers/0"]
    lines = [line for line in str(trace.model_summary).splitlines() if "not traced" in line]
    assert len(lines) == 1 and "layers/1" in lines[0] and "CUDA" in lines[0], lines
    with pytest.raises(ModelError, match="layers/0.*CUDA"):
        model_gradients(Stack([cuda], D), torch.randn(B, T, D))
