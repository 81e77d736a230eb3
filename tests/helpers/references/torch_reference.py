"""An independent reference for lstmviz.torch: each recurrent module of a model replaced by its
cells unrolled in Python (PyTorch's own cell functions step by step), every state kept with
`retain_grad()`, and one `loss.backward()`.

`reference(model, args, y, loss)` returns, per direction in lstmviz's order (module order,
layer-major, forward first), the total dL/dh_t and dL/dc_t (the states' .grad), the direct
∂L/∂h_t (the .grad of the direction's stacked output, which h_n reads too), h, c, the weight
gradients in Keras's layout, and dL/d(input of the first recurrent module) — all [T, B, ·],
indexed by input position; and the loss. Packed sequences: each sequence runs its own length.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

RECURRENT = (nn.LSTM, nn.GRU, nn.RNN)


def _cell(module, x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One step of the module's cell from PyTorch's own cell functions: (h, c)."""
    if isinstance(module, nn.LSTM):
        return torch._VF.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh)
    if isinstance(module, nn.GRU):
        return torch._VF.gru_cell(x, h, w_ih, w_hh, b_ih, b_hh), None
    step = torch._VF.rnn_tanh_cell if module.nonlinearity == "tanh" else torch._VF.rnn_relu_cell
    return step(x, h, w_ih, w_hh, b_ih, b_hh), None


class Unrolled(nn.Module):
    """`module` run step by step; `self.found` collects each direction's kept tensors."""

    def __init__(self, module):
        super().__init__()
        self.inner = module
        self.found = []
        self.first_input = None
        self.batch_first = module.batch_first

    def forward(self, input, hx=None):
        m = self.inner
        packed = isinstance(input, PackedSequence)
        if packed:
            x, lengths = pad_packed_sequence(input)  # [T, B, I], original order
        else:
            x = input.transpose(0, 1) if m.batch_first else input
            lengths = torch.full([x.shape[1]], x.shape[0])
        if not x.requires_grad:
            x = x.detach().requires_grad_(True)
        x.retain_grad()
        self.first_input = x
        steps, batch = x.shape[:2]
        dirs = 2 if m.bidirectional else 1
        zeros = x.new_zeros(m.num_layers * dirs, batch, m.hidden_size)
        if hx is None:
            h0, c0 = zeros, zeros
        elif isinstance(m, nn.LSTM):
            h0, c0 = hx
        else:
            h0, c0 = hx, zeros
        value, h_n, c_n = x, [], []
        for layer in range(m.num_layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                w = [getattr(m, f"weight_ih{sfx}"), getattr(m, f"weight_hh{sfx}")]
                w += [getattr(m, f"bias_ih{sfx}"), getattr(m, f"bias_hh{sfx}")] if m.bias else [
                    None, None]
                hs, cs = [None] * steps, [None] * steps
                for b in range(batch):  # each sequence its own length, as packing does
                    n = int(lengths[b])
                    h, c = h0[k, b : b + 1], c0[k, b : b + 1]
                    order = range(n) if d == 0 else range(n - 1, -1, -1)
                    for t in order:
                        h, c = _cell(m, value[t, b : b + 1], h, c, *w)
                        h.retain_grad()
                        if c is not None:
                            c.retain_grad()
                        hs[t] = (hs[t] or {}) | {b: h}
                        cs[t] = (cs[t] or {}) | {b: c}
                rows_h = []
                for t in range(steps):
                    rows_h.append(torch.cat([hs[t][b] if hs[t] and b in hs[t] else
                                             x.new_zeros(1, m.hidden_size)
                                             for b in range(batch)]))  # fmt: skip
                out = torch.stack(rows_h)  # [T, B, H], zero after each sequence's end
                out.retain_grad()
                last = [int(lengths[b]) - 1 if d == 0 else 0 for b in range(batch)]
                lasts_h = torch.stack([out[last[b], b] for b in range(batch)])
                if isinstance(m, nn.LSTM):
                    lasts_c = torch.cat([cs[last[b]][b] for b in range(batch)])
                    c_n.append(lasts_c)
                h_n.append(lasts_h)
                self.found.append({"out": out, "hs": hs, "cs": cs, "w": w, "lengths": lengths})
                outs.append(out)
            value = torch.cat(outs, -1)
        h_n = torch.stack(h_n)
        if packed:
            from torch.nn.utils.rnn import pack_padded_sequence

            output = pack_padded_sequence(value, lengths, enforce_sorted=False)
        else:
            output = value.transpose(0, 1) if m.batch_first else value
        state = (h_n, torch.stack(c_n)) if isinstance(m, nn.LSTM) else h_n
        return output, state


def reference(model: nn.Module, args: tuple, y, loss_fn) -> dict:
    """The reference arrays of `model` (a copy is unrolled; the model is not changed)."""
    copied = copy.deepcopy(model).eval()
    unrolled = []
    for path, sub in list(copied.named_modules()):
        if isinstance(sub, RECURRENT):
            parent = copied.get_submodule(path.rpartition(".")[0]) if "." in path else copied
            wrapper = Unrolled(sub)
            setattr(parent, path.rpartition(".")[2], wrapper)
            unrolled.append(wrapper)
    output = copied(*args)
    loss = loss_fn(output, y)
    loss.backward()
    directions = []
    for wrapper in unrolled:
        for found in wrapper.found:
            directions.append(_direction(wrapper.inner, found))
    first = next(w for w in unrolled if w.found).first_input
    return {"loss": float(loss), "directions": directions,
            "grad_input": first.grad.detach().numpy()}  # fmt: skip


def unrolled_directions(wrapper: Unrolled) -> list[dict]:
    """The directions an `Unrolled` module ran, as `reference` gives them (after the loss's
    backward): layer-major, forward first."""
    return [_direction(wrapper.inner, found) for found in wrapper.found]


def _direction(module, found: dict) -> dict:
    out = found["out"]
    steps, batch, hidden = out.shape

    def gather(rows, what):
        result = np.zeros([steps, batch, hidden])
        for t, row in enumerate(rows):
            for b, tensor in (row or {}).items():
                value = tensor.grad if what == "grad" else tensor
                if value is not None:
                    result[t, b] = value.detach().numpy()[0]
        return result

    w_ih, w_hh, b_ih, b_hh = found["w"]
    gru = isinstance(module, nn.GRU)

    def keras(grad):  # Keras's gate order: a GRU's rows r, z, n become z, r, n
        grad = grad.detach().numpy()
        if not gru:
            return grad
        r, z, n = np.split(grad, 3)
        return np.concatenate([z, r, n])

    one = {"grad_h_total": gather(found["hs"], "grad"), "h": gather(found["hs"], "value"),
           "grad_h_direct": out.grad.detach().numpy(),
           "grad_kernel": keras(w_ih.grad).T,
           "grad_recurrent_kernel": keras(w_hh.grad).T}  # fmt: skip
    if b_ih is not None:  # a GRU's [2, 3H] (input, recurrent); else the biases' one gradient
        one["grad_bias"] = np.stack([keras(b_ih.grad), keras(b_hh.grad)]) if gru else (
            b_ih.grad.detach().numpy())  # fmt: skip
    if isinstance(module, nn.LSTM):
        one["grad_c_total"] = gather(found["cs"], "grad")
        one["c"] = gather(found["cs"], "value")
    return one


def assert_close(ours, theirs, what: str, rtol: float = 1e-5) -> None:
    """Equal within `rtol` of the larger array's largest entry (float32 sums differ in
    order; a relative test per entry would fail on entries near zero)."""
    ours, theirs = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} vs {theirs.shape}"
    scale = max(np.abs(theirs).max(), 1e-30)
    worst = np.abs(ours - theirs).max() / scale
    assert worst <= rtol, f"{what}: differs by {worst:.2e} of its largest entry"


class Tagger(nn.Module):
    """Embedding(vocabulary, 4) → bidirectional nn.LSTM(4, 3, `layers`, batch_first) → Linear
    on every step: a tagger, whose loss (`tagger_loss`) enters at every step."""

    def __init__(self, vocabulary: int, layers: int = 1):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, 4)
        self.lstm = nn.LSTM(4, 3, num_layers=layers, bidirectional=True, batch_first=True)
        self.head = nn.Linear(6, vocabulary)

    def forward(self, x):
        return self.head(self.lstm(self.embed(x))[0])


def tagger_loss(out, y):
    """Cross-entropy over every step of a tagger's output [B, T, V]."""
    return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
