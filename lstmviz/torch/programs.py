"""PyTorch model files: TorchScript (`torch.jit.save`) and `torch.export` programs (`.pt2`).

Neither runs pickled Python code when loaded: TorchScript is read by `torch.jit.load` (its own
format: TorchScript source and tensors), a `.pt2` by `torch.export.load` (a JSON graph and
tensors). A TorchScript module is turned into an exported program for the data at hand
(`torch._export.converter`); either way the program is a graph of ATen ops, which `Program`
runs node by node with every recurrent op (`aten.lstm`, `aten.gru`, `aten.rnn_tanh`,
`aten.rnn_relu`) handed to an `nn.LSTM`/`nn.GRU`/`nn.RNN` holding that op's weights, so that
model mode (`lstmviz.torch.tracer`) follows it as it follows a module written in Python.

`run_program` is model mode's runner for these files (`lstmviz run --mode model --model F`, the
window): the data from `--inputs` (x as the program takes it), or the example inputs a `.pt2`
keeps; the loss by name (`--loss`: mse, l1, cross_entropy, nll, bce_with_logits, bce, mean).
"""

from __future__ import annotations

import contextlib
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import torch
from torch import fx, nn

from lstmviz.core.config import PYTORCH_KERAS_NAMES, RunConfig
from lstmviz.core.errors import ConfigError, ModelError, ref
from lstmviz.io import files
from lstmviz.io.model_data import load_data
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.torch.tracer import LOSSES, Tracer

_ATEN = torch.ops.aten
OPS = {_ATEN.lstm.input: "lstm", _ATEN.gru.input: "gru", _ATEN.rnn_tanh.input: "tanh",
       _ATEN.rnn_relu.input: "relu"}  # fmt: skip
# One step of a cell (an nn.LSTMCell/GRUCell/RNNCell stepped in the exported loop: a node per
# step); the steps of one cell share its weights, and so one module
CELL_OPS = {_ATEN.lstm_cell.default: "lstm", _ATEN.gru_cell.default: "gru",
            _ATEN.rnn_tanh_cell.default: "tanh", _ATEN.rnn_relu_cell.default: "relu"}  # fmt: skip
# Keras's names of the losses that have a PyTorch one (the window's loss field offers them)
_WEIGHT = re.compile(r"^(?P<prefix>.*?)\.?weight_ih_l0$")


class Program(nn.Module):
    """An exported program's graph, run node by node (`torch.fx.Interpreter`); each recurrent
    op runs in its own nn.LSTM/GRU/RNN child (`recurrent`), named as in the original module
    (`recurrent_names`)."""

    def __init__(self, graph: fx.GraphModule, names: dict[int, str] | None = None):
        super().__init__()
        self.graph_module = graph
        self.recurrent = nn.ModuleList()
        self.recurrent_names: dict[nn.Module, str] = {}
        self.by_node: dict[str, nn.Module] = {}
        cells: dict[str, nn.Module] = {}  # a cell's modules by its weight's name
        for node in graph.graph.nodes:
            if node.op == "call_function" and node.target in OPS:
                module, name = _module_of(graph, node, names or {}, len(self.recurrent))
            elif node.op == "call_function" and node.target in CELL_OPS:
                weight = node.args[2].target
                if weight in cells:
                    self.by_node[node.name] = cells[weight]
                    continue
                module, name = _cell_of(graph, node, len(self.recurrent))
                cells[weight] = module
            else:
                continue
            self.recurrent.append(module)
            self.recurrent_names[module] = name
            self.by_node[node.name] = module

    def forward(self, *args):
        return _Run(self).run(*args)

    def train(self, mode: bool = True) -> Program:
        """Set the flags only: an exported graph's own train() raises (its ops were fixed
        when it was exported)."""
        for module in self.modules():
            module.training = mode
        return self


class _Run(fx.Interpreter):
    def __init__(self, program: Program):
        super().__init__(program.graph_module)
        self.program = program

    def run_node(self, n: fx.Node):
        self._node = n
        return super().run_node(n)

    def call_function(self, target, args, kwargs):
        if target in CELL_OPS:  # one step: (h′, c′) of an LSTM cell, h′ of the others
            module = self.program.by_node[self._node.name]
            state = tuple(args[1]) if CELL_OPS[target] == "lstm" else args[1]
            return module(args[0], state)
        if target not in OPS:
            return super().call_function(target, args, kwargs)
        module = self.program.by_node[self._node.name]
        hx = tuple(args[1]) if OPS[target] == "lstm" else args[1]
        output, state = module(args[0], hx)
        return (output, *state) if OPS[target] == "lstm" else (output, state)


def _module_of(graph: fx.GraphModule, node: fx.Node, names: dict, index: int):
    """(an nn.LSTM/GRU/RNN with the op's weights, its name) for a recurrent op `node`."""
    kind = OPS[node.target]
    _, _, params, has_biases, layers, _, _, bidirectional, batch_first = node.args
    tensors = [graph.get_parameter(p.target) if p.target in dict(graph.named_parameters())
               else getattr(graph, p.target) for p in params]  # fmt: skip
    w_ih, w_hh = tensors[0], tensors[1]
    hidden = w_hh.shape[1]
    cls = {"lstm": nn.LSTM, "gru": nn.GRU}.get(kind, nn.RNN)
    extra = {"nonlinearity": kind} if cls is nn.RNN else {}
    module = cls(w_ih.shape[1], hidden, num_layers=layers, bias=has_biases,
                 batch_first=batch_first, bidirectional=bidirectional, dtype=w_ih.dtype,
                 **extra)  # fmt: skip
    wanted = module._flat_weights_names
    if len(wanted) != len(tensors):
        raise ModelError(f"{node.name}: {len(tensors)} weights for a {cls.__name__} of "
                         f"{len(wanted)}; lstmviz does not read it")  # fmt: skip
    with torch.no_grad():
        for key, value in zip(module._flat_weights_names, tensors, strict=True):
            getattr(module, key).copy_(value)
    match = _WEIGHT.match(params[0].target)
    name = names.get(id(w_ih)) or (match["prefix"] if match else "") or f"{cls.__name__}{index}"
    return module, name.lower().replace(".", "/") if not match else name.replace(".", "/")


def _cell_of(graph: fx.GraphModule, node: fx.Node, index: int):
    """(an nn.LSTMCell/GRUCell/RNNCell with the cell op's weights, its name: the attribute
    path of the cell its weights came from) for a cell op `node`."""
    kind = CELL_OPS[node.target]
    params = dict(graph.named_parameters()) | dict(graph.named_buffers())
    tensors = [None if n is None else params.get(n.target, getattr(graph, n.target, None))
               for n in (list(node.args[2:6]) + [None] * 4)[:4]]  # fmt: skip
    w_ih, w_hh, b_ih, b_hh = tensors
    cls = {"lstm": nn.LSTMCell, "gru": nn.GRUCell}.get(kind, nn.RNNCell)
    extra = {"nonlinearity": kind} if cls is nn.RNNCell else {}
    module = cls(w_ih.shape[1], w_hh.shape[1], bias=b_ih is not None, dtype=w_ih.dtype, **extra)
    with torch.no_grad():
        module.weight_ih.copy_(w_ih)
        module.weight_hh.copy_(w_hh)
        if b_ih is not None:
            module.bias_ih.copy_(b_ih)
            module.bias_hh.copy_(b_hh if b_hh is not None else torch.zeros_like(b_ih))
    target = node.args[2].target
    name = target.rsplit(".", 1)[0] if "." in target else f"{cls.__name__}{index}"
    return module, name.replace(".", "/")


def program_kind(path) -> str:
    """"TorchScript" or "torch.export", from what the file's archive holds (nothing run)."""
    return "torch.export" if files.torch_program(path) == "export" else "TorchScript"


def load_program(path, x=None) -> tuple[Program, tuple | None]:
    """(the Program of the file at `path`, the example inputs a .pt2 keeps or None). A
    TorchScript file needs `x` (the arguments it will be run with: it is converted for them).
    A program PyTorch cannot convert, or whose graph holds no recurrent op lstmviz follows:
    ModelError, one line with the reason and the way out (`way_out`)."""
    kind = files.torch_program(path)
    where = f"{path}: {program_kind(path)}"
    with _quiet(), _refused(where):
        if kind == "export":
            program = torch.export.load(str(path))
            example = program.example_inputs[0] if program.example_inputs else None
            return _followed(Program(program.module()), where, kind), example
        scripted = torch.jit.load(str(path), map_location="cpu")
        from torch._export.converter import TS2EPConverter

        arguments = _tuple(x)
        try:
            program = TS2EPConverter(scripted, arguments).convert()
        except Exception as exc:  # noqa: BLE001 - the converter fails in many ways: one line
            raise ModelError(f"{where}: PyTorch cannot convert it into the graph lstmviz runs "
                             f"({_reason(exc)}); {way_out(kind)}") from None  # fmt: skip
        named = _names(program.module(), scripted)
        return _followed(Program(program.module(), named), where, kind), None


def way_out(kind: str | None) -> str:
    """What to do with a program lstmviz cannot follow: run the module's own Python class
    (a state dict and `--module`), or (TorchScript) save it with torch.export instead."""
    text = f"save a state dict plus the module's class and use {ref('module', 'PKG.MOD:FACTORY')}"
    return text if kind == "export" else f"{text}, or save it with torch.export (.pt2)"


def _reason(exc: BaseException) -> str:
    """The first line of a conversion's error (PyTorch's C++ frames left out), and what
    lstmviz knows of its cause; at most 200 characters."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    text = text if len(text) <= 200 else text[:199] + "…"
    if "prim::Loop" in text:  # a Python loop in the scripted code, e.g. over an nn.LSTMCell
        text += ": a loop in the scripted code, such as an nn.LSTMCell stepped over time"
    return text


def _followed(program: Program, where: str, kind: str | None) -> Program:
    """`program`, or ModelError when its graph has no recurrent op (an nn.LSTMCell stepped in a
    loop is plain arithmetic there, which lstmviz cannot tell from the rest)."""
    if not program.recurrent:
        raise ModelError(f"{where}: its graph has no nn.LSTM, nn.GRU, nn.RNN or cell op (a "
                         "traced or scripted nn.LSTMCell loop becomes plain arithmetic there); "
                         f"{way_out(kind)}")  # fmt: skip
    return program


def _names(graph: fx.GraphModule, scripted) -> dict[int, str]:
    """{id of the graph's tensor: the name of the TorchScript module that owns the same
    weight_ih_l0} (the converter keeps a script module's weights without their names)."""
    found = {}
    owners = [(n.removesuffix("weight_ih_l0").rstrip("."), p) for n, p in
              scripted.named_parameters() if n.endswith("weight_ih_l0")]  # fmt: skip
    for _, tensor in [*graph.named_parameters(), *graph.named_buffers(),
                      *((k, v) for k, v in vars(graph).items() if torch.is_tensor(v))]:  # fmt: skip
        for name, weight in owners:
            if tensor.shape == weight.shape and torch.equal(tensor, weight):
                found[id(tensor)] = name or "rnn"
    return found


def _tuple(x) -> tuple:
    if x is None:
        raise ConfigError("inputs", "a TorchScript model needs data: give "
                          f"{ref('inputs', 'X.npy')}")  # fmt: skip
    return tuple(x) if isinstance(x, tuple | list) else (x,)


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _refused(where: str):
    """A failure of PyTorch's reading or running as one ModelError line."""
    try:
        yield
    except (ModelError, ConfigError):
        raise
    except Exception as exc:  # noqa: BLE001 - PyTorch raises many kinds: one line says it
        text = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise ModelError(f"{where}: cannot run it ({type(exc).__name__}: {text})") from None


def program_loss(name: str | None, has_targets: bool):
    """The loss of a run by name: a PyTorch one (LOSSES), "mean", or a Keras name it has."""
    name = PYTORCH_KERAS_NAMES.get(name or "mean_h", name or "mean")
    if name == "mean" and has_targets:
        raise ConfigError("loss", f"give {ref('loss')} for the targets: {', '.join(LOSSES)}")
    if name != "mean" and name not in LOSSES:
        raise ConfigError("loss", f"{name!r} is not a loss lstmviz has for PyTorch models; "
                          f"give one of {', '.join(['mean', *LOSSES])}")  # fmt: skip
    return name


def program_data(config: RunConfig) -> tuple[torch.Tensor | None, np.ndarray | None, str]:
    """(x as a tensor — floats as PyTorch's default float32, an .npz often holds float64 —, y,
    what the data is) from `config.inputs` (and `targets`); (None, None, "") without inputs."""
    if not config.inputs:
        if config.targets:
            raise ConfigError("targets", f"give the inputs too ({ref('inputs', 'X.npy')})")
        return None, None, ""
    x, y, source = load_data(config.inputs, config.targets)
    return torch.as_tensor(x.astype(np.float32) if x.dtype.kind == "f" else x), y, source


def run_program(
    config: RunConfig, cancelled: Callable[[], bool] = bool, keep: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Model mode's runner for a TorchScript or .pt2 file (`config.model`)."""
    path = config.model
    arguments, y, source = program_data(config)
    loss = program_loss(config.loss, y is not None)
    program, example = load_program(path, arguments)
    if arguments is None:
        if example is None:
            raise ConfigError("inputs", f"{path}: holds no example inputs; give {ref('inputs')}")
        arguments = example if len(example) > 1 else example[0]
        source = "the program's example inputs"
    tracer = Tracer(program, loss, y is not None)
    yield TraceUpdate(0, 1, f"{program_kind(path)} {path}: {len(program.recurrent)} recurrent "
                      f"modules, loss {loss}")  # fmt: skip
    if cancelled():
        return
    where = f"{path}: {program_kind(path)}"
    yield from traced(tracer, config, (arguments, y, source), loss, where,
                      f"{path} ({program_kind(path)})")  # fmt: skip


def traced(tracer: Tracer, config: RunConfig, data: tuple, loss: str, where: str,
           described: str) -> Iterator[TraceUpdate | GradientTrace]:  # fmt: skip
    """A run's last two items: the TraceUpdate with the norms, then the GradientTrace of
    `tracer` on `data` = (arguments, y, what they are), its `model_source` `described`, its
    config `config` with the sizes it ran. PyTorch failing: one ModelError line on `where`."""
    arguments, y, source = data
    with _quiet(), _refused(where):
        trace = tracer.trace(arguments, y, source)
    arrays = trace.arrays
    arrays["model_source"] = np.array(described)
    first = trace.config
    config = replace(config, mode="model", steps=first.steps, batch=first.batch,
                     input_dim=first.input_dim, hidden=first.hidden, loss=loss)  # fmt: skip
    rows = {k: arrays[k] for k in ("norm_h_total_by_layer", "norm_h_direct_by_layer",
                                   "norm_c_total_by_layer")}  # fmt: skip
    yield TraceUpdate(1, 1, "done", rows)
    yield GradientTrace("model", config, arrays)
