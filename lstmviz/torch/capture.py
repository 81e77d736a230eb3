"""What a PyTorch module's recurrent layers do in one forward pass, recorded for the engine.

During `capture(module)` every `nn.LSTM`, `nn.GRU`, `nn.RNN` and every `nn.LSTMCell`,
`nn.GRUCell`, `nn.RNNCell` in the module runs as often as the forward calls it — on lstmviz's
native kernels where they apply (float32 on the CPU: `fused.forward`, which keeps what the
backward takes in `Call.saved`), else as PyTorch's own op under `torch.no_grad` — and lstmviz
records a `Call` per run: the layer's input (time-major, padded: a `PackedSequence` is unpacked
and its lengths become a mask; a cell's one step is T = 1), its initial state, its weights in
Keras's layout, and the outputs it handed on. Those outputs are fresh leaf tensors that require
grad: PyTorch's backward of the loss stops at them, and the gradient it leaves there is the
*direct* ∂L/∂output of the layer (from everything above). Each call's backward recurrence
(`fused.backward`: the native backward ops; else `lstmviz.torch.probed`, lstmviz's cells run
again with probes), layer by layer inside the module, gives every layer's totals, its dL/d
input and its dL/d(initial state); those flow on into the calls before it through PyTorch
again (`Call.source`: the input as the module got it; `Call.hx`: the initial state as it was
given).

Where an initial state is a state an earlier call returned, `Call.initial` says which: for each
row of h0 ([layers·directions, B, H]; a cell's one row) the (call, row) whose final state it is,
found by identity (the leaf itself, or a view of some of its rows: `h_n[-1]`, `h_n[:1]`). A call
of the same layer whose every row continues the same rows of one earlier call, h and c alike,
*chains* to it (`Call.chained_from`): the decoder stepped once per token, a cell in a loop.

Layouts: PyTorch's `weight_ih_l{k}[_reverse]` [G·H, I] and `weight_hh_l{k}` [G·H, H] become
Keras's kernel [I, G·H] and recurrent_kernel [H, G·H] as for a state dict
(`weights.formats.torch_files`): LSTM's gate order (i, f, g, o) is Keras's and its two biases add; a
GRU's blocks r, z, n become z, r, h̃ with reset_after's bias [2, 3H].
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from lstmviz.core.errors import ModelError
from lstmviz.torch import fused
from lstmviz.torch.inputs import carry, outside
from lstmviz.weights.formats.found import FoundLayer
from lstmviz.weights.formats.torch_files import convert

RECURRENT = (nn.LSTM, nn.GRU, nn.RNN)
CELLS = (nn.LSTMCell, nn.GRUCell, nn.RNNCell)
WHERE = "lstmviz.torch"


@dataclass
class Layout:
    """How a recurrent layer's sequences are laid out: `batch_first`, or packed (`rows`: for
    each row of the packed data its (t, b) in the padded [T, B] grid)."""

    steps: int
    batch: int
    batch_first: bool = False
    packed: PackedSequence | None = None
    rows: tuple[torch.Tensor, torch.Tensor] | None = None
    step: bool = False  # a cell's input [B, F]: one step, T = 1

    @classmethod
    def of(cls, value, batch_first: bool, where: str) -> Layout:
        if isinstance(value, PackedSequence):
            sizes = value.batch_sizes.cpu()
            steps, batch = len(sizes), int(sizes[0])
            order = value.sorted_indices
            order = torch.arange(batch) if order is None else order.cpu()
            t = torch.repeat_interleave(torch.arange(steps), sizes)
            j = torch.cat([torch.arange(int(n)) for n in sizes])
            return cls(steps, batch, packed=value, rows=(t, order[j]))
        if not torch.is_tensor(value) or value.dim() != 3:
            shape = list(value.shape) if torch.is_tensor(value) else type(value).__name__
            raise ModelError(f"{where}: takes a batch of sequences [B, T, I] or [T, B, I] (or "
                             f"a PackedSequence); got {shape}")  # fmt: skip
        batch, steps = value.shape[:2] if batch_first else value.shape[1::-1]
        return cls(int(steps), int(batch), batch_first)

    def lengths(self) -> np.ndarray | None:
        """[B] each sequence's length, or None when every sequence has all T steps."""
        if self.rows is None:
            return None
        return np.bincount(self.rows[1].numpy(), minlength=self.batch)

    def to_time(self, value) -> torch.Tensor:
        """A sequence in this layout (a tensor, or a PackedSequence's data) -> [T, B, F]."""
        if self.step:
            return value[None]
        if self.rows is not None:
            padded = value.new_zeros(self.steps, self.batch, value.shape[-1])
            padded[self.rows] = value
            return padded
        return value.transpose(0, 1) if self.batch_first else value

    def from_time(self, value: torch.Tensor) -> torch.Tensor:
        """[T, B, F] -> this layout (a PackedSequence's data when packed)."""
        if self.step:
            return value[0]
        if self.rows is not None:
            return value[self.rows]
        return value.transpose(0, 1) if self.batch_first else value

    def wrap(self, data: torch.Tensor):
        """`data` in this layout as the layer hands it on (a PackedSequence when packed)."""
        if self.packed is None:
            return data
        p = self.packed
        return PackedSequence(data, p.batch_sizes, p.sorted_indices, p.unsorted_indices)


@dataclass
class Call:
    """One run of one recurrent module or cell. Arrays time-major; `weights` one dict per
    (layer, direction), layer-major, forward first: kernel, recurrent_kernel, bias in Keras's
    layout. A cell (`cell`) is one layer, one direction, T = 1; its outputs are its states."""

    name: str
    module: nn.Module
    kind: str  # "lstm", "gru" or "simple_rnn"
    activation: str  # simple_rnn's nonlinearity ("tanh" or "relu"); "tanh" otherwise
    layers: int
    directions: int
    hidden: int
    layout: Layout
    x: np.ndarray  # [T, B, I]
    h0: np.ndarray  # [layers·directions, B, H]
    c0: np.ndarray | None
    weights: list[dict[str, np.ndarray]]
    source: torch.Tensor  # the input as the module got it (a PackedSequence's data)
    outputs: list[torch.Tensor] = field(default_factory=list)  # leaves: output, h_n (, c_n)
    cell: bool = False  # an nn.LSTMCell/GRUCell/RNNCell: outputs are h' (, c') only
    hx: list[torch.Tensor] = field(default_factory=list)  # the given h0 (, c0), as given
    # per row of h0: (index of the call, row) whose final state it is, or None
    initial: list[tuple[int, int] | None] = field(default_factory=list)
    chained_from: int | None = None  # the call of this layer whose state it continues
    continued: bool = False  # a later call chains to this one
    saved: object | None = None  # fused.Saved: it ran on the native kernels (`fused.forward`)

    @property
    def states(self) -> list[torch.Tensor]:
        """The leaves of the final state: h_n (, c_n) [L·D, B, H], or a cell's h' (, c') [B, H]."""
        return self.outputs if self.cell else self.outputs[1:]

    def direction_names(self) -> list[str]:
        """`{name}/l{k}` per layer, with `/forward` and `/backward` when bidirectional; a cell's
        `{name}`."""
        if self.cell:
            return [self.name]
        halves = ("/forward", "/backward") if self.directions == 2 else ("",)
        return [f"{self.name}/l{k}{half}" for k in range(self.layers) for half in halves]


def kind_of(module: nn.Module) -> tuple[str, str]:
    """(cell kind, activation) of a recurrent module or cell."""
    if isinstance(module, nn.LSTM | nn.LSTMCell):
        return "lstm", "tanh"
    if isinstance(module, nn.GRU | nn.GRUCell):
        return "gru", "tanh"
    return "simple_rnn", module.nonlinearity


def keras_weights(module: nn.Module, layer: int, suffix: str) -> dict[str, np.ndarray]:
    """One direction of one layer in Keras's layout (`weights.formats.torch_files.convert`, as for a
    state dict; NumPy, the module's dtype). Without biases (bias=False) zeros of their shape.
    A cell's weights have no `_l{layer}` (layer 0, suffix "")."""
    at = "" if isinstance(module, CELLS) else f"_l{layer}{suffix}"
    w_ih = _numpy(getattr(module, f"weight_ih{at}"))
    w_hh = _numpy(getattr(module, f"weight_hh{at}"))
    biases = [np.zeros(len(w_ih), w_ih.dtype)] * 2  # bias=False: zeros (their gradient shown)
    if module.bias:
        biases = [_numpy(getattr(module, f"{b}{at}")) for b in ("bias_ih", "bias_hh")]
    found = FoundLayer(f"l{layer}{suffix}")
    convert(found, w_ih, w_hh, biases)
    return {k: np.ascontiguousarray(v, w_ih.dtype) for k, v in found.arrays.items()}


def _check(module: nn.Module, name: str) -> None:
    if getattr(module, "proj_size", 0):
        raise ModelError(f"{WHERE}: {name} is an nn.LSTM with proj_size={module.proj_size}, "
                         "which lstmviz does not support (its h_t is projected)")  # fmt: skip


def _numpy(value: torch.Tensor) -> np.ndarray:
    return value.detach().cpu().numpy()


def record(module: nn.Module, name: str, input, hx, weights=None) -> Call:
    """The Call of one run of `module` given `input` and `hx`, before it runs (its outputs
    are set by `ran`). `weights`: the module's, converted (else converted here)."""
    kind, activation = kind_of(module)
    cell = isinstance(module, CELLS)
    if cell:
        if not torch.is_tensor(input) or input.dim() != 2:
            shape = list(input.shape) if torch.is_tensor(input) else type(input).__name__
            raise ModelError(f"{WHERE}: {name}: takes a batch of steps [B, I]; got {shape}")
        layout = Layout(1, int(input.shape[0]), step=True)
        directions, layers = 1, 1
    else:
        layout = Layout.of(input, module.batch_first, f"{WHERE}: {name}")
        directions, layers = (2 if module.bidirectional else 1), module.num_layers
    source = input.data if isinstance(input, PackedSequence) else input
    hidden, batch = module.hidden_size, layout.batch
    zeros = np.zeros([layers * directions, batch, hidden], _numpy(source[:0]).dtype)
    h0 = c0 = None
    if hx is not None:
        h0, c0 = hx if kind == "lstm" else (hx, None)
        if h0.dim() != (2 if cell else 3):
            wanted = "[B, H]" if cell else "with a batch axis [layers, B, H]"
            raise ModelError(f"{WHERE}: {name}: give h0 {wanted}")

    def rows(value):  # [L·D, B, H] (a cell's [B, H] as one row)
        return _numpy(value[None] if cell else value)

    if weights is None:
        weights = [keras_weights(module, k, suffix) for k in range(layers)
                   for suffix in ("", "_reverse")[:directions]]  # fmt: skip
    call = Call(
        name, module, kind, activation, layers, directions, hidden, layout,
        x=_numpy(layout.to_time(source.detach()).contiguous()),
        h0=zeros if h0 is None else rows(h0),
        c0=None if kind != "lstm" else (zeros if c0 is None else rows(c0)),
        weights=weights, source=source, cell=cell,
        hx=[t for t in (h0, c0) if t is not None],
    )  # fmt: skip
    return call


def ran(call: Call, produced: list[torch.Tensor]) -> None:
    """Set the call's outputs to leaves of what it `produced`: its output (a PackedSequence's
    data) and h_n (, c_n), a cell's h′ (, c′)."""
    call.outputs = [t.detach().requires_grad_(True) for t in produced]


def pytorch_outputs(call: Call, output, state=None) -> list[torch.Tensor]:
    """What PyTorch's own op returned (`output` and `state`; a cell's state is its `output`),
    as `ran` takes it."""
    if call.cell:
        return list(output) if call.kind == "lstm" else [output]
    data = output.data if isinstance(output, PackedSequence) else output
    return [data, *(list(state) if call.kind == "lstm" else [state])]


def handed_on(call: Call):
    """What the module returns downstream: its output and state (a cell: its state), as
    leaves."""
    states = call.states
    state = tuple(states) if call.kind == "lstm" else states[0]
    if call.cell:
        return state
    return call.layout.wrap(call.outputs[0]), state


def recurrent_modules(module: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, module) of every recurrent module and cell, in module order; the name is the
    attribute path with "/" (the class name in lower case for the module itself)."""
    given = getattr(module, "recurrent_names", {})  # a program's (lstmviz.torch.programs)
    found = []
    for path, sub in module.named_modules():
        if isinstance(sub, RECURRENT + CELLS):
            name = given.get(sub) or path.replace(".", "/") or type(sub).__name__.lower()
            _check(sub, name)
            found.append((name, sub))
    return found


@contextlib.contextmanager
def capture(module: nn.Module) -> Iterator[list[Call]]:
    """Within: `module` in eval mode with its recurrent modules and cells recording their
    Calls into the list yielded (in the order they ran; each initial state traced to the call
    that returned it, `Call.initial`, `Call.chained_from`). After: every training flag as it
    was, the modules' forwards their own, and PyTorch's CPU random state as before (nothing
    drawn is lost)."""
    found = recurrent_modules(module)
    if not found:
        raise ModelError(f"{WHERE}: {type(module).__name__} holds no nn.LSTM, nn.GRU or nn.RNN "
                         "(nor an nn.LSTMCell, nn.GRUCell or nn.RNNCell)")  # fmt: skip
    flags = {sub: sub.training for sub in module.modules()}
    rng = torch.get_rng_state()
    calls: list[Call] = []
    owners: dict[int, tuple[int, int]] = {}  # id of a state leaf -> (call, h 0 or c 1)
    patched = []
    try:
        module.eval()
        for name, sub in found:
            own = sub.__dict__.get("forward")
            patched.append((sub, own))
            sub.forward = _recording_forward(sub, name, calls, owners)
        yield calls
    finally:
        for sub, own in patched:
            if own is None:
                sub.__dict__.pop("forward", None)
            else:
                sub.forward = own
        for sub, flag in flags.items():
            sub.training = flag
        torch.set_rng_state(rng)


def _recording_forward(sub: nn.Module, name: str, calls: list[Call], owners: dict):
    original = type(sub).forward.__get__(sub)
    converted: list = []  # the weights in Keras's layout, once per capture
    tensors: list = []  # and in TensorFlow (`fused`)

    def forward(input, hx=None):
        with outside():
            call = record(sub, name, input, hx, converted[0] if converted else None)
            converted[:1] = [call.weights]
            if fused.runs(call):
                ran(call, fused.forward(call, tensors))
            else:
                with torch.no_grad():
                    result = original(input, hx)
                ran(call, pytorch_outputs(call, *((result, None) if call.cell else result)))
            _link(call, calls, owners)
            for s, leaf in enumerate(call.states):
                owners[id(leaf)] = (len(calls), s)
            calls.append(call)
            returned = handed_on(call)
        carry([call.outputs, returned], (input, hx))
        return returned

    return forward


def _link(call: Call, calls: list[Call], owners: dict) -> None:
    """Set `call.initial` (per row of its h0, the (call, row) whose final state it is) and
    `call.chained_from` (the earlier call of the same layer whose every row, h and c, it
    continues, when no call continued that one yet)."""
    count = call.layers * call.directions
    found = [_rows(t, owners, calls) for t in call.hx]
    h_rows = found[0] if found and found[0] is not None else [None] * count
    if len(h_rows) != count:
        h_rows = [None] * count
    call.initial = [None if r is None or r[1] != 0 else (r[0], r[2]) for r in h_rows]
    if call.initial[0] is None:
        return
    n = call.initial[0][0]
    before = calls[n]
    if before.name != call.name or before.continued:
        return
    if call.initial != [(n, r) for r in range(count)]:
        return
    if call.kind == "lstm" and found[1] != [(n, 1, r) for r in range(count)]:
        return
    call.chained_from, before.continued = n, True


def _rows(tensor, owners: dict, calls: list[Call]) -> list | None:
    """Per row of `tensor` (h0 [R, B, H], or a cell's [B, H] as one row): (call, state, row)
    when the tensor is a state leaf an earlier call returned or a view of some of its rows;
    else None."""
    if not torch.is_tensor(tensor):
        return None
    base = tensor if id(tensor) in owners else tensor._base
    if base is None or id(base) not in owners:
        return None
    n, s = owners[id(base)]
    if calls[n].cell:  # [B, H]: itself, or itself with a row axis in front
        if tensor is base:
            return [(n, s, 0)]
        same = tensor.storage_offset() == base.storage_offset()
        fits = tensor.shape[-2:] == base.shape and tensor.stride()[-2:] == base.stride()
        return [(n, s, 0)] if same and fits and tensor.dim() in (2, 3) and (
            tensor.dim() == 2 or tensor.shape[0] == 1) else None  # fmt: skip
    if tensor is base:
        return [(n, s, r) for r in range(base.shape[0])]
    offset = tensor.storage_offset() - base.storage_offset()
    if offset % base.stride(0) or tensor.shape[-2:] != base.shape[1:]:
        return None
    if tensor.stride()[-2:] != base.stride()[1:]:
        return None
    start = offset // base.stride(0)
    if tensor.dim() == 2:
        return [(n, s, start)]
    if tensor.dim() == 3 and (tensor.shape[0] == 1 or tensor.stride(0) == base.stride(0)):
        return [(n, s, start + i) for i in range(tensor.shape[0])]
    return None
