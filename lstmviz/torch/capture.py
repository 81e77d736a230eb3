"""What a PyTorch module's recurrent layers do in one forward pass, recorded for the engine.

During `capture(module)` every `nn.LSTM`, `nn.GRU` and `nn.RNN` in the module runs as always
(PyTorch's fused op, under `torch.no_grad`), and lstmviz records a `Call`: the layer's input
(time-major, padded: a `PackedSequence` is unpacked and its lengths become a mask), its
initial state, its weights in Keras's layout, and the outputs it handed on. Those outputs are
fresh leaf tensors that require grad: PyTorch's backward of the loss stops at them, and the
gradient it leaves there is the *direct* ∂L/∂output of the layer (from everything above). The
engine (`lstmviz.torch.engine`) then runs each layer's backward recurrence with probes, layer
by layer inside the module, which gives every layer's totals and its dL/d input; that flows on
into the layers below through PyTorch again (`Call.source`: the input as the module got it).

Layouts: PyTorch's `weight_ih_l{k}[_reverse]` [G·H, I] and `weight_hh_l{k}` [G·H, H] become
Keras's kernel [I, G·H] and recurrent_kernel [H, G·H] as for a state dict
(`weights.torch_files`): LSTM's gate order (i, f, g, o) is Keras's and its two biases add; a
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
from lstmviz.weights.found import FoundLayer
from lstmviz.weights.torch_files import convert

RECURRENT = (nn.LSTM, nn.GRU, nn.RNN)
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
        if self.rows is not None:
            padded = value.new_zeros(self.steps, self.batch, value.shape[-1])
            padded[self.rows] = value
            return padded
        return value.transpose(0, 1) if self.batch_first else value

    def from_time(self, value: torch.Tensor) -> torch.Tensor:
        """[T, B, F] -> this layout (a PackedSequence's data when packed)."""
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
    """One run of one recurrent module. Arrays time-major; `weights` one dict per (layer,
    direction), layer-major, forward first: kernel, recurrent_kernel, bias in Keras's layout."""

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

    def direction_names(self) -> list[str]:
        """`{name}/l{k}` per layer, with `/forward` and `/backward` when bidirectional."""
        halves = ("/forward", "/backward") if self.directions == 2 else ("",)
        return [f"{self.name}/l{k}{half}" for k in range(self.layers) for half in halves]


def kind_of(module: nn.Module) -> tuple[str, str]:
    """(cell kind, activation) of a recurrent module."""
    if isinstance(module, nn.LSTM):
        return "lstm", "tanh"
    if isinstance(module, nn.GRU):
        return "gru", "tanh"
    return "simple_rnn", module.nonlinearity


def keras_weights(module: nn.Module, layer: int, suffix: str) -> dict[str, np.ndarray]:
    """One direction of one layer in Keras's layout (`weights.torch_files.convert`, as for a
    state dict; NumPy, the module's dtype). Without biases (bias=False) zeros of their shape."""
    w_ih = _numpy(getattr(module, f"weight_ih_l{layer}{suffix}"))
    w_hh = _numpy(getattr(module, f"weight_hh_l{layer}{suffix}"))
    biases = [np.zeros(len(w_ih), w_ih.dtype)] * 2  # bias=False: zeros (their gradient shown)
    if module.bias:
        biases = [_numpy(getattr(module, f"{b}_l{layer}{suffix}")) for b in ("bias_ih", "bias_hh")]
    found = FoundLayer(f"l{layer}{suffix}")
    convert(found, w_ih, w_hh, biases)
    return {k: np.ascontiguousarray(v, w_ih.dtype) for k, v in found.arrays.items()}


def _check(module: nn.Module, name: str) -> None:
    if getattr(module, "proj_size", 0):
        raise ModelError(f"{WHERE}: {name} is an nn.LSTM with proj_size={module.proj_size}, "
                         "which lstmviz does not support (its h_t is projected)")  # fmt: skip


def _numpy(value: torch.Tensor) -> np.ndarray:
    return value.detach().cpu().numpy()


def record(module: nn.Module, name: str, input, hx, output, state) -> Call:
    """The Call of one run of `module` (given `input` and `hx`, it returned `output` and
    `state`); its outputs replaced by leaves (`Call.outputs`, and `handed_on`)."""
    kind, activation = kind_of(module)
    layout = Layout.of(input, module.batch_first, f"{WHERE}: {name}")
    source = input.data if isinstance(input, PackedSequence) else input
    directions = 2 if module.bidirectional else 1
    hidden, layers, batch = module.hidden_size, module.num_layers, layout.batch
    zeros = np.zeros([layers * directions, batch, hidden], _numpy(source[:0]).dtype)
    h0 = c0 = None
    if hx is not None:
        h0, c0 = hx if kind == "lstm" else (hx, None)
        if h0.dim() != 3:
            raise ModelError(f"{WHERE}: {name}: give h0 with a batch axis [layers, B, H]")
    call = Call(
        name, module, kind, activation, layers, directions, hidden, layout,
        x=np.ascontiguousarray(_numpy(layout.to_time(source))),
        h0=zeros if h0 is None else _numpy(h0),
        c0=None if kind != "lstm" else (zeros if c0 is None else _numpy(c0)),
        weights=[keras_weights(module, k, suffix) for k in range(layers)
                 for suffix in ("", "_reverse")[:directions]],
        source=source,
    )  # fmt: skip
    data = output.data if isinstance(output, PackedSequence) else output
    states = list(state) if kind == "lstm" else [state]
    call.outputs = [t.detach().requires_grad_(True) for t in (data, *states)]
    return call


def handed_on(call: Call):
    """What the module returns downstream: its output and state, as leaves."""
    out, *states = call.outputs
    return call.layout.wrap(out), (tuple(states) if call.kind == "lstm" else states[0])


def recurrent_modules(module: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, module) of every recurrent module, in module order; the name is the attribute
    path with "/" (the class name in lower case for the module itself)."""
    given = getattr(module, "recurrent_names", {})  # a program's (lstmviz.torch.programs)
    found = []
    for path, sub in module.named_modules():
        if isinstance(sub, RECURRENT):
            name = given.get(sub) or path.replace(".", "/") or type(sub).__name__.lower()
            _check(sub, name)
            found.append((name, sub))
    return found


@contextlib.contextmanager
def capture(module: nn.Module) -> Iterator[list[Call]]:
    """Within: `module` in eval mode with its recurrent modules recording their Calls into the
    list yielded (in the order they ran). After: every training flag as it was, the modules'
    forwards their own, and PyTorch's CPU random state as before (nothing drawn is lost)."""
    found = recurrent_modules(module)
    if not found:
        raise ModelError(f"{WHERE}: {type(module).__name__} holds no nn.LSTM, nn.GRU or nn.RNN")
    flags = {sub: sub.training for sub in module.modules()}
    rng = torch.get_rng_state()
    calls: list[Call] = []
    patched = []
    try:
        module.eval()
        for name, sub in found:
            own = sub.__dict__.get("forward")
            patched.append((sub, own))
            sub.forward = _recording_forward(sub, name, calls)
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


def _recording_forward(sub: nn.Module, name: str, calls: list[Call]):
    original = type(sub).forward.__get__(sub)

    def forward(input, hx=None):
        if any(call.module is sub for call in calls):
            raise ModelError(f"{WHERE}: {name} ran twice in one forward; lstmviz follows each "
                             "recurrent module through one run")  # fmt: skip
        with torch.no_grad():
            output, state = original(input, hx)
        call = record(sub, name, input, hx, output, state)
        calls.append(call)
        return handed_on(call)

    return forward
