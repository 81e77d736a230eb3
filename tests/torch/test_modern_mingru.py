"""minGRU and minLSTM (mingru-pytorch) traced by lstmviz.torch.model_gradients, against the
layers stepped one step at a time with retain_grad on every state (tests/helpers/
modern_reference.py, first checked against the package's parallel output), float64 finite
differences through a bumped state, and the timescale's closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("minGRU_pytorch")
from minGRU_pytorch import minGRU  # noqa: E402
from minGRU_pytorch.minLSTM import minLSTM  # noqa: E402
from torch import nn  # noqa: E402

from lstmviz.analysis.diagnosis import diagnose  # noqa: E402
from lstmviz.torch import model_gradients  # noqa: E402
from tests.helpers.references.modern_reference import (  # noqa: E402
    Stack,
    channels,
    mingru_steps,
    minlstm_steps,
    reference,
)
from tests.helpers.references.torch_reference import assert_close  # noqa: E402

T, B, D = 6, 2, 4


@pytest.fixture(scope="module")
def stack():
    """minGRU (with its output projection) under a minLSTM, residual, a head on every step."""
    torch.manual_seed(0)
    model = Stack([minGRU(D, expansion_factor=1.5), minLSTM(D)], D)
    x, y = torch.randn(B, T, D), torch.randn(B, T, 3)
    return model, x, y, model_gradients(model, x, y, loss_fn="mse")


def test_the_sequential_reference_is_the_packages_parallel_forward(stack):
    model, x, _, _ = stack
    with torch.no_grad():
        for layer, step in zip(model.layers, (mingru_steps, minlstm_steps), strict=True):
            assert_close(step(layer, x)[0], layer(x), "output")


def test_states_totals_directs_weights_and_input_match_the_stepped_layers(stack):
    model, x, y, trace = stack
    output, per_layer, grad_input, grads = reference(model, (mingru_steps, minlstm_steps), x, y)
    assert_close(trace.y_pred, output, "y_pred")
    assert list(trace.layer_names) == ["layers/0", "layers/1"]
    assert [str(trace[f"layer{k}_cell"]) for k in (0, 1)] == ["mingru", "minlstm"]
    for k, (total, direct) in enumerate(per_layer):
        assert_close(trace[f"layer{k}_grad_h_total"], channels(total), f"total {k}")
        assert_close(trace[f"layer{k}_grad_h_direct"], channels(direct), f"direct {k}")
        norms = np.sqrt((channels(total) ** 2).sum((1, 2)))
        assert_close(trace.norm_h_total_by_layer[k], norms, f"norm {k}")
        for name, param in model.layers[k].named_parameters():
            assert_close(trace[f"layer{k}_grad_weight_{name.replace('.', '_')}"],
                         grads[param], f"{k} {name}")  # fmt: skip
    assert trace.layer0_h.shape == (T, B, 6)  # minGRU's inner width, 1.5 D
    assert_close(trace.grad_input, grad_input, "grad_input")
    assert all(p.grad is None for p in model.parameters())  # the module is left as it was
    assert np.isnan(trace.norm_c_total_by_layer).all()
    assert "minGRU" not in str(trace.model_summary) or "not traced" not in str(
        trace.model_summary)  # fmt: skip


def test_a_minGRU_stepped_per_token_is_one_direction_equal_to_its_parallel_run():
    """The package's sequential mode (seq_len 1, the state handed on) makes one direction of T
    calls with the parallel run's numbers: the hand-over is the recurrence, not direct."""
    torch.manual_seed(1)
    layer = minGRU(D)

    class Stepped(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = layer

        def forward(self, x):
            h, outs = None, []
            for t in range(x.shape[1]):
                out, h = self.cell(x[:, t : t + 1], h, return_next_prev_hidden=True)
                outs.append(out)
            return torch.cat(outs, 1)

    class Parallel(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = layer

        def forward(self, x):
            return self.cell(x)

    x, y = torch.randn(B, T, D), torch.randn(B, T, D)
    stepped = model_gradients(Stepped(), x, y, loss_fn="mse")
    parallel = model_gradients(Parallel(), x, y, loss_fn="mse")
    assert list(stepped.layer_names) == ["cell"] and int(stepped.layer0_calls) == T
    for key in ("layer0_h", "layer0_grad_h_total", "layer0_grad_h_direct", "layer0_timescale"):
        assert_close(stepped[key], parallel[key], key)


def test_float64_finite_differences_through_a_bumped_state():
    """dL/dh_t[b, j]: the loss of the stepped minGRU with h_t[b, j] moved by ±ε (the recurrence
    going on from the moved state), against the trace's total."""
    torch.manual_seed(2)
    layer = minGRU(D).double()
    model = Stack([layer], D).double()
    x, y = torch.randn(B, T, D, dtype=torch.float64), torch.randn(B, T, 3, dtype=torch.float64)
    trace = model_gradients(model, x, y, loss_fn="mse")

    def loss(t0, b, j, eps):
        hidden, gate = layer.to_hidden_and_gate(x).chunk(2, dim=-1)
        h, hs = torch.zeros(B, D, dtype=torch.float64), []
        for t in range(T):
            z = torch.sigmoid(gate[:, t])
            cand = torch.where(hidden[:, t] >= 0, hidden[:, t] + 0.5, torch.sigmoid(hidden[:, t]))
            h = (1 - z) * h + z * cand
            if t == t0:
                h = h.clone()
                h[b, j] += eps
            hs.append(h)
        return nn.functional.mse_loss(model.head(x + torch.stack(hs, 1)), y).item()

    eps = 1e-6
    with torch.no_grad():
        for t0, b, j in ((0, 0, 1), (2, 1, 3), (T - 1, 0, 0)):
            numeric = (loss(t0, b, j, eps) - loss(t0, b, j, -eps)) / (2 * eps)
            assert math.isclose(trace.layer0_grad_h_total[t0, b, j], numeric, rel_tol=1e-5,
                                abs_tol=1e-9), (t0, b, j)  # fmt: skip


def test_a_constant_gate_decays_exactly_by_one_minus_z_a_step():
    """Gate weights zero: z = σ(0) = 1/2 everywhere, so the error of the last step falls by
    exactly 1/2 a step back, the timescale is −1/ln(1/2) and the diagnosis measures 1/2."""
    torch.manual_seed(3)
    layer = minGRU(D)
    with torch.no_grad():
        layer.to_hidden_and_gate.weight[D:] = 0
    model = nn.Sequential(layer)
    trace = model_gradients(model, torch.randn(B, T, D), loss_fn=lambda out, y: out[:, -1].sum())
    g = trace.layer0_grad_h_total.astype(np.float64)
    assert_close(g, g[-1] * 0.5 ** np.arange(T - 1, -1, -1)[:, None, None], "totals", 1e-6)
    assert_close(trace.layer0_timescale, np.full(D, -1 / math.log(0.5)), "timescale", 1e-6)
    assert_close(trace.layer0_gates_mean, np.full((1, T), 0.5), "z", 1e-6)
    found = diagnose(trace).layers[0]
    assert found.cell == "mingru" and found.h.decay_per_step == pytest.approx(0.5, rel=1e-4)


def test_the_recorder_records_a_minGRU_model(tmp_path):
    from lstmviz import load_recording
    from lstmviz.torch import GradientFlowRecorder

    torch.manual_seed(4)
    model = nn.Sequential(minGRU(D), nn.Linear(D, 2))
    x, y = torch.randn(B, T, D), torch.randn(B, T, 2)
    recorder = GradientFlowRecorder(model, (x, y), tmp_path / "r.lvz", every=1, loss_fn="mse")
    for _ in range(2):
        loss = nn.functional.mse_loss(model(x), y)
        recorder.step(loss)
    recorder.close()
    found = load_recording(tmp_path / "r.lvz")
    assert found.arrays["norm_h_total_by_layer"].shape == (2, 1, T)
    assert str(found.last.arrays["layer0_cell"]) == "mingru"


@pytest.mark.parametrize("cls", [minGRU, minLSTM])
def test_parallel_chunks_handing_the_state_on_are_one_direction(cls):
    """Two parallel calls, the second from the first's last state: one direction of 2 calls
    whose total at the first call's last step is the gradient the package's own run leaves at
    that state (its direct part plus all that flows back through the second call; minLSTM's
    parallel mode starts from g(prev_hidden): g′ is in the decay there)."""
    torch.manual_seed(5)
    layer = cls(D)

    class Chunks(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = layer

        def forward(self, x):
            first, h = self.cell(x[:, :3], return_next_prev_hidden=True)
            second = self.cell(x[:, 3:], h)
            return torch.cat([first, second], 1)

    x, y = torch.randn(B, T, D), torch.randn(B, T, D)
    trace = model_gradients(Chunks(), x, y, loss_fn="mse")
    assert list(trace.layer_names) == ["cell"] and int(trace.layer0_calls) == 2
    first, h = layer(x[:, :3], return_next_prev_hidden=True)  # the package's own forward
    first.retain_grad()
    nn.functional.mse_loss(torch.cat([first, layer(x[:, 3:], h)], 1), y).backward()
    assert_close(trace.layer0_grad_h_total[2], first.grad[:, 2], "total at the hand-over")
    assert_close(trace.layer0_grad_h_direct[:2], first.grad[:, :2].transpose(0, 1), "direct")


def test_a_subclass_with_its_own_forward_is_an_unknown_variant_named_not_traced():
    torch.manual_seed(6)

    class Kept(minGRU):  # its forward is the package's: traced
        pass

    class Variant(minGRU):
        def forward(self, x):
            return super().forward(x) * 2

    model = Stack([Kept(D), Variant(D)], D)
    trace = model_gradients(model, torch.randn(B, T, D))
    assert list(trace.layer_names) == ["layers/0"] and str(trace.layer0_cell) == "mingru"
    lines = [line for line in str(trace.model_summary).splitlines() if "not traced" in line]
    assert lines == ["not traced: layers/1 (Variant: a subclass of minGRU with a forward of its "
                     "own (an unknown variant))"]  # fmt: skip
