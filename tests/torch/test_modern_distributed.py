"""The modern layers' traces under torch.distributed, without processes: for each kind a tiny
residual module (tests/helpers/models/modern_models.py) traced on the whole probe batch and on its
two uneven shares (3 + 2 samples, `lstmviz.torch.distributed.shares`/`share`), the shares combined
as rank 0 combines them (`distributed.combine`): every key equal to the whole batch's. A key
`combine` has no rule for, shares holding different keys or of different layers are refused.
A modern direction beside a classic one with a mask: each one's gate summaries weighted by its
own counts.
(One real run of two processes with a modern layer: tests/torch/test_torch_distributed.py.)"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
for package in ("minGRU_pytorch", "mambapy", "LRU_pytorch", "xlstm"):
    pytest.importorskip(package)

from lstmviz.core.errors import LstmvizError  # noqa: E402
from lstmviz.torch import distributed, model_gradients  # noqa: E402
from tests.helpers.models.modern_models import KINDS, PROBE, modern_module, modern_probe  # noqa: E402

RANKS = 2


# each kind alone, and a module mixing a classic nn.LSTM with an sLSTM (an LSTM's c and an
# sLSTM's c, n, m, its gate unit means beside the sLSTM's timescale, in one trace)
CASES = (*KINDS, "lstm+slstm")


@pytest.fixture(scope="module", params=CASES)
def traced(request):
    """(kind, the whole batch's trace, the shares' traces, their sizes [3, 2]). In float64 (the
    shares' sums then differ from the whole batch's by float32's rounding of what is kept, not
    by float32 arithmetic on other batch sizes), but for the LRU: lru-pytorch's complex
    parameters stay complex64 under `.double()`."""
    model, (x, y) = modern_module(request.param), modern_probe()
    if request.param != "lru":
        model, x, y = model.double(), x.double(), y.double()
    sizes = distributed.shares(distributed.batch_size(x, "w"), RANKS, "w")
    bounds = np.cumsum([0, *sizes])
    parts = [model_gradients(model, *distributed.share((x, y), PROBE, a, b), loss_fn="mse")
             for a, b in zip(bounds[:-1], bounds[1:], strict=True)]  # fmt: skip
    return request.param, model_gradients(model, x, y, loss_fn="mse"), parts, sizes


def combined(parts, sizes):
    return distributed.combine([(p.arrays, p.config) for p in parts], sizes, "w")


# the keys beyond an LSTM's each kind's trace holds: its other states and their totals, its
# parameters' gradients (LRU's complex B as [..., 2]), a state kept per D channel (Mamba's
# first block: [T, B, D], the norm over N), mLSTM's C [T, B, NH·DH·DH] (2 heads of 4) and its
# timescale per head repeated over C's channels
SHAPES = {
    "mingru": {"layer0_h": (4, 5, 6), "layer0_grad_weight_to_out_weight": (4, 6)},
    "minlstm": {"layer0_grad_weight_to_hidden_and_f_i_gate_weight": (12, 4)},
    "mamba": {"layer0_h": (4, 5, 8), "layer0_timescale": (8,), "layer1_h": (4, 5, 24),
              "layer1_grad_weight_A_log": (8, 3)},
    "lru": {"layer0_h": (4, 5, 5), "layer0_grad_weight_B": (5, 4, 2)},
    "slstm": {"layer0_c": (4, 5, 4), "layer0_n": (4, 5, 4), "layer0_m": (4, 5, 4),
              "layer0_grad_c_total": (4, 5, 4), "layer0_grad_n_total": (4, 5, 4)},
    "mlstm": {"layer0_h": (4, 5, 32), "layer0_n": (4, 5, 8), "layer0_m": (4, 5, 2),
              "layer0_grad_n_total": (4, 5, 8), "layer0_timescale": (32,)},
    "lstm+slstm": {"layer0_c": (4, 5, 4), "layer0_gates_unit_mean": (4, 4),
                   "layer1_grad_n_total": (4, 5, 4), "layer1_timescale": (4,)},
}  # fmt: skip


def test_shares_of_a_modern_trace_combine_into_the_whole_batch_one(traced):
    kind, whole, parts, sizes = traced
    assert sizes == [3, 2]
    out = combined(parts, sizes)
    assert out.config == whole.config
    for key, shape in SHAPES[kind].items():
        assert np.shape(whole.arrays[key]) == shape, key
    assert_same(out, whole, kind)


def assert_same(out, whole, kind: str) -> None:
    """Every key of `whole` in `out`, and no other: of its dtype and shape, its values to float32
    rounding (the float32 of float64 sums) of the key's largest finite entry."""
    assert sorted(out.arrays) == sorted(whole.arrays)
    for key, value in whole.arrays.items():
        value, got = np.asarray(value), np.asarray(out.arrays[key])
        assert got.dtype == value.dtype and got.shape == value.shape, key
        if key == "model_seconds":
            continue
        if value.dtype.kind == "f":
            scale = max(float(np.abs(value[np.isfinite(value)]).max(initial=0)), 1e-30)
            np.testing.assert_allclose(got, value, rtol=1e-6, atol=1e-6 * scale,
                                       err_msg=f"{kind} {key}")  # fmt: skip
        else:
            assert np.array_equal(got, value), f"{kind} {key}"


class PackedThenMinGRU(torch.nn.Module):
    """x, lengths -> a packed nn.LSTM (the trace's `mask` [T, B]) -> + minGRU -> a head."""

    def __init__(self):
        super().__init__()
        from minGRU_pytorch import minGRU

        self.lstm = torch.nn.LSTM(4, 4, batch_first=True)
        self.mingru = minGRU(4)
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x, lengths):
        from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out = pad_packed_sequence(self.lstm(packed)[0], batch_first=True,
                                  total_length=x.shape[1])[0]  # fmt: skip
        return self.head(out + self.mingru(out))


def test_a_modern_direction_beside_a_masked_classic_one_weighs_every_sample():
    """The LSTM's gate summaries are over its unmasked samples, the minGRU's over every sample
    (padding too): each weighted by its own counts."""
    torch.manual_seed(0)
    model = PackedThenMinGRU().double()
    x, y = torch.randn(PROBE, 4, 4, dtype=torch.float64), torch.randn(PROBE, 4, 3).double()
    lengths = torch.tensor([4, 1, 3, 2, 4])
    whole = model_gradients(model, (x, lengths), y, loss_fn="mse")
    assert whole.arrays["mask"].shape == (4, PROBE) and "layer1_state_names" in whole.arrays
    parts = [model_gradients(model, distributed.share((x, lengths), PROBE, a, b), y[a:b],
                             loss_fn="mse") for a, b in ((0, 3), (3, 5))]  # fmt: skip
    assert_same(combined(parts, [3, 2]), whole, "packed")


def test_a_key_with_no_rule_is_refused_not_passed_on(traced):
    _, _, parts, sizes = traced
    for key in ("layer0_unheard_of", "unheard_of"):
        arrays = [dict(p.arrays, **{key: np.zeros(3, np.float32)}) for p in parts]
        with pytest.raises(LstmvizError, match=f"no rule to combine the ranks' {key}$"):
            distributed.combine([(a, p.config) for a, p in zip(arrays, parts, strict=True)],
                                sizes, "w")  # fmt: skip


def test_shares_holding_different_keys_are_refused_not_dropped(traced):
    _, _, parts, sizes = traced
    second = {k: v for k, v in parts[1].arrays.items() if k != "layer0_grad_h_total"}
    with pytest.raises(LstmvizError, match=r"rank 0 and rank 1 hold different arrays "
                                           r"\(layer0_grad_h_total\)"):  # fmt: skip
        distributed.combine([(parts[0].arrays, parts[0].config), (second, parts[1].config)],
                            sizes, "w")  # fmt: skip


def test_shares_of_different_layers_are_refused(traced):
    _, _, parts, sizes = traced
    second = dict(parts[1].arrays, layer0_cell=np.array("other"))
    with pytest.raises(LstmvizError, match=r"the ranks' layer0_cell differ \(\w+, other\)"):
        distributed.combine([(parts[0].arrays, parts[0].config), (second, parts[1].config)],
                            sizes, "w")  # fmt: skip
