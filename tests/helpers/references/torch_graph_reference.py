"""An independent reference for lstmviz.torch on models that call their recurrent layers many
times (decoders stepped per token, cells in a loop, an encoder shared by two inputs).

`Reference(model)` is a copy of the model whose every nn.LSTM/GRU/RNN and nn.LSTMCell/GRUCell/
RNNCell is unrolled in Python with PyTorch's own cell functions, every state h_t, c_t kept with
`retain_grad()`, and run with one `loss.backward()`. Each call is logged (`log`): per row (layer
and direction, forward first) its states, its stacked output, and the state it returned.

What a call returns is a *public* copy of its final state (`h_n + 0`): its .grad is what the
model did with it. When the very next thing that reads it is a call of the same layer given
exactly that state (the chain), the reference routes the *private* final state instead (the
last h_t, c_t themselves), so the public copy's .grad holds everything but the recurrence going
on: the direct gradient. The test says which calls make which direction (`direction(pieces)`),
so the grouping is not lstmviz's.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn

RECURRENT = (nn.LSTM, nn.GRU, nn.RNN)
CELLS = (nn.LSTMCell, nn.GRUCell, nn.RNNCell)


def _step(module, x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One step of the module's cell from PyTorch's own cell functions: (h, c or None)."""
    if isinstance(module, nn.LSTM | nn.LSTMCell):
        return torch._VF.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh)
    if isinstance(module, nn.GRU | nn.GRUCell):
        return torch._VF.gru_cell(x, h, w_ih, w_hh, b_ih, b_hh), None
    step = torch._VF.rnn_tanh_cell if module.nonlinearity == "tanh" else torch._VF.rnn_relu_cell
    return step(x, h, w_ih, w_hh, b_ih, b_hh), None


def _weights(module, suffix: str) -> list:
    w = [getattr(module, f"weight_ih{suffix}"), getattr(module, f"weight_hh{suffix}")]
    if module.bias:
        return w + [getattr(module, f"bias_ih{suffix}"), getattr(module, f"bias_hh{suffix}")]
    return w + [None, None]


class _Unrolled(nn.Module):
    """One recurrent module or cell, run step by step; its calls go to `log`."""

    def __init__(self, module, log: list):
        super().__init__()
        self.inner = module
        self.log = log
        # this layer's returned states: id(public h) -> (public h, public c, private h, c rows)
        self.private: dict = {}
        self.batch_first = getattr(module, "batch_first", False)

    def _initial(self, hx, rows: int, batch: int, like):
        """(h rows, c rows): lists of [B, H], from hx, or the private state of a chain."""
        m = self.inner
        lstm = isinstance(m, nn.LSTM | nn.LSTMCell)
        h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
        kept = self.private.get(id(h0))
        if kept is not None and kept[0] is h0 and (not lstm or kept[1] is c0):
            del self.private[id(h0)]  # a state continues one chain only
            return kept[2], kept[3]
        zeros = like.new_zeros(batch, m.hidden_size)
        cell = isinstance(m, CELLS)

        def split(value):
            if value is None:
                return [zeros] * rows
            return [value] if cell else list(value.unbind(0))

        return split(h0), split(c0)

    def forward(self, input, hx=None):
        m = self.inner
        cell = isinstance(m, CELLS)
        x = input[None] if cell else (input.transpose(0, 1) if m.batch_first else input)
        if not x.requires_grad:
            x = x.detach().requires_grad_(True)
        x.retain_grad()
        steps, batch = x.shape[:2]
        dirs = 1 if cell else (2 if m.bidirectional else 1)
        layers = 1 if cell else m.num_layers
        h_rows, c_rows = self._initial(hx, layers * dirs, batch, x)
        value, record = x, {"x": x, "rows": []}
        last_h, last_c = [], []
        for layer in range(layers):
            outs = []
            for d in range(dirs):
                k = layer * dirs + d
                w = _weights(m, "" if cell else f"_l{layer}" + ("_reverse" if d else ""))
                h, c = h_rows[k], c_rows[k]
                hs, cs = [None] * steps, [None] * steps
                for t in range(steps) if d == 0 else range(steps - 1, -1, -1):
                    h, c = _step(m, value[t], h, c, *w)
                    h.retain_grad()
                    if c is not None:
                        c.retain_grad()
                    hs[t], cs[t] = h, c
                out = torch.stack(hs)
                out.retain_grad()
                record["rows"].append({"hs": hs, "cs": cs, "out": out})
                last_h.append(h)
                last_c.append(c)
                outs.append(out)
            value = outs[0] if dirs == 1 else torch.cat(outs, -1)
        lstm = isinstance(m, nn.LSTM | nn.LSTMCell)
        if cell:
            h_pub = last_h[0] + 0
            c_pub = last_c[0] + 0 if lstm else None
        else:
            h_pub = torch.stack(last_h) + 0
            c_pub = torch.stack(last_c) + 0 if lstm else None
        for public in (h_pub, c_pub):
            if public is not None:
                public.retain_grad()
        record |= {"h_n": h_pub, "c_n": c_pub, "cell": cell, "dirs": dirs}
        self.log.append(record)
        self.private[id(h_pub)] = (h_pub, c_pub, last_h, last_c)
        state = (h_pub, c_pub) if lstm else h_pub
        if cell:
            return state
        output = value.transpose(0, 1) if m.batch_first else value
        return output, state


class Reference:
    """`model` copied and unrolled; `run(args, y, loss_fn)` runs it and backpropagates."""

    def __init__(self, model: nn.Module):
        self.model = copy.deepcopy(model).eval()
        self.log: list[dict] = []
        for path, sub in list(self.model.named_modules()):
            if isinstance(sub, RECURRENT + CELLS):
                parent = self.model.get_submodule(path.rpartition(".")[0]) if "." in path else (
                    self.model)  # fmt: skip
                setattr(parent, path.rpartition(".")[2], _Unrolled(sub, self.log))

    def run(self, args: tuple, y, loss_fn) -> float:
        loss = loss_fn(self.model(*args), y)
        loss.backward()
        return float(loss.detach())

    def direction(self, pieces: list[tuple[int, int]]) -> dict[str, np.ndarray]:
        """The arrays of the direction made of `pieces`, (call, row) in call order: h, c,
        grad_h_total, grad_c_total, grad_h_direct [T, B, H] (its calls' steps joined)."""
        parts = []
        for n, row in pieces:
            record = self.log[n]
            one = record["rows"][row]
            direct = _grad(one["out"])
            public = _grad(record["h_n"])
            if public is not None:  # what the model did with the returned state
                at = 0 if row % record["dirs"] == 1 else -1  # a backward direction ends at 0
                direct[at] += public if record["cell"] else public[row]
            part = {"h": _stack(one["hs"]), "grad_h_total": _stack(one["hs"], True),
                    "grad_h_direct": direct}  # fmt: skip
            if one["cs"][0] is not None:
                part |= {"c": _stack(one["cs"]), "grad_c_total": _stack(one["cs"], True)}
            parts.append(part)
        return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}

    def grad_input(self, calls: list[int]) -> np.ndarray:
        """dL/d input of these calls, [T, B, I] joined in call order."""
        return np.concatenate([self.log[n]["x"].grad.numpy() for n in calls])

    def weight_grads(self, path: str, layer: int = 0, suffix: str = "") -> dict[str, np.ndarray]:
        """PyTorch's gradients of one layer's weights (all its calls) in Keras's layout."""
        m = self.model.get_submodule(path).inner
        at = "" if isinstance(m, CELLS) else f"_l{layer}{suffix}"
        w_ih, w_hh, b_ih, b_hh = (None if w is None else w.grad.numpy() for w in _weights(m, at))
        gru = isinstance(m, nn.GRU | nn.GRUCell)

        def keras(grad):  # a GRU's rows r, z, n become Keras's z, r, n
            if not gru:
                return grad
            r, z, n = np.split(grad, 3)
            return np.concatenate([z, r, n])

        found = {"grad_kernel": keras(w_ih).T, "grad_recurrent_kernel": keras(w_hh).T}
        if b_ih is not None:
            found["grad_bias"] = np.stack([keras(b_ih), keras(b_hh)]) if gru else b_ih
        return found


def _grad(tensor) -> np.ndarray | None:
    if tensor is None:
        return None
    return np.zeros(tensor.shape) if tensor.grad is None else tensor.grad.numpy().astype(float)


def _stack(tensors: list, grad: bool = False) -> np.ndarray:
    rows = []
    for tensor in tensors:
        value = tensor.grad if grad else tensor
        rows.append(np.zeros(tensor.shape) if value is None else value.detach().numpy())
    return np.stack(rows).astype(float)
