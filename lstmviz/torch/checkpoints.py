"""PyTorch checkpoints: a state dict and the user's own module class, run in model mode.

`lstmviz run --mode model --model ckpt.pt --module pkg.mod:factory`: the commonest way PyTorch
models are kept is `torch.save(model.state_dict(), path)` (or a dict holding it, as training
scripts and Lightning write), which holds tensors and no code. lstmviz builds the module by
calling `factory` (a function or the class itself, imported from `pkg.mod` with the working
folder on `sys.path`), fills it with the state dict, and runs it as `model_gradients` runs a
module written in Python (`lstmviz.torch.tracer`).

- The file: read by `torch.load(..., weights_only=True)` (tensors and plain containers only:
  nothing of the file's runs), `.safetensors` by safetensors, `.npz` by NumPy (no pickle).
- The state dict: the file itself when it is a dict of tensors, else the first dict of tensors
  under `CONTAINERS` ("state_dict", "model_state_dict", "model", …). Its keys are matched to the
  module's as they are, else with DDP's `module.` (and torch.compile's `_orig_mod.`) prefixes
  stripped, else with a prefix every key shares stripped (a LightningModule's `model.`).
- The factory's arguments: none, or the entries of the file's hyper-parameters (the first dict
  under `HYPER`: Lightning's "hyper_parameters", "hparams", "config") whose names it takes
  (all of them when it takes `**kwargs`).
- Data as for a program (`lstmviz.torch.programs.program_data`); without `--inputs`, seeded
  random data when the module's first layer with weights says what it takes (an nn.Embedding:
  ids [B, T] in [1, vocabulary); an nn.LSTM/GRU/RNN: floats [B, T, I], or [T, B, I] when it is
  not batch_first), with B and T from `--batch`, `--steps`.

Every problem is one line (ConfigError on `--module`, ModelError on the file) before anything
runs; `run_checkpoint` is model mode's runner for these files.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import pickle
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

from lstmviz.core.config import RunConfig
from lstmviz.core.errors import ConfigError, ModelError, ref
from lstmviz.io import files
from lstmviz.io.trace import GradientTrace, TraceUpdate
from lstmviz.torch.programs import program_data, program_kind, program_loss, traced
from lstmviz.torch.tracer import Tracer

# Where checkpoints keep the state dict, and the module's arguments, in the order looked at.
CONTAINERS = ("state_dict", "model_state_dict", "model", "module", "net", "network")
HYPER = ("hyper_parameters", "hparams", "config", "model_config", "args")
# Wrappers that prefix every key: DistributedDataParallel / DataParallel, torch.compile.
WRAPPERS = ("module.", "_orig_mod.")
_CONTENT = {"hdf5": "an HDF5 file (a Keras .h5?)", "npy": "a single NumPy array (.npy)",
            "text": "a text file", "empty": "empty (0 bytes)"}  # fmt: skip
_SHOWN = 5  # key names a message lists before "… and N more"


class Checkpoint:
    """A checkpoint file read: `state` {key: tensor}, `hyper` (the module's arguments; {} when
    it has none) and where in the file they were (`state_key`, `hyper_key`: "" for the top)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        loaded = _load(self.path)
        self.state, self.state_key = _state_dict(loaded, self.path)
        self.hyper, self.hyper_key = {}, ""
        if isinstance(loaded, Mapping) and self.state_key:
            for key in HYPER:
                if isinstance(loaded.get(key), Mapping):
                    self.hyper = {str(k): v for k, v in loaded[key].items()}
                    self.hyper_key = key
                    break


def _load(path: Path):
    """The object the file holds: torch.load's (weights only), safetensors', or an .npz's
    arrays as tensors. ModelError for a file of another kind, or one with pickled code."""
    if problem := files.missing(path):
        raise ModelError(f"{path}: {problem}")
    found = files.content(path)
    if files.torch_program(path):
        raise ConfigError("module", f"{path}: a {program_kind(path)} program runs as it is, "
                          "without its module's class; drop --module")  # fmt: skip
    if found == "safetensors":
        from safetensors.torch import load_file

        return _read(path, lambda: load_file(str(path)))
    if found == "zip" and files.suffix_of(path, (".npz",)):
        with np.load(path, allow_pickle=False) as arrays:
            return {name: torch.from_numpy(arrays[name]) for name in arrays.files}
    if found not in ("zip", "pickle"):
        what = _CONTENT.get(found, "a file of another kind")
        raise ModelError(f"{path}: not a PyTorch checkpoint (a file torch.save wrote, or "
                         f".safetensors); it is {what}")  # fmt: skip
    return _read(path, lambda: torch.load(path, map_location="cpu", weights_only=True))


def _read(path: Path, read: Callable):
    try:
        return read()
    except pickle.UnpicklingError as exc:  # weights_only met a class: loading it runs code
        named = re.search(r"GLOBAL ([\w.]+)", str(exc))
        what = f" ({named[1]})" if named else ""
        raise ModelError(f"{path}: holds pickled Python objects{what}, which lstmviz does not "
                         "load (unpickling runs code); save the state dict alone: "
                         "torch.save(model.state_dict(), path)") from None  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - torch.load raises many kinds: one line says it
        raise ModelError(f"{path}: not a checkpoint PyTorch reads ({_first_line(exc)})") from None


def _first_line(exc: BaseException) -> str:
    """"Type: the first line of the message", at most 200 characters."""
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    text = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def _is_state(value) -> bool:
    """A state dict: a dict of tensors by name (at least one)."""
    if not isinstance(value, Mapping) or not value:
        return False
    return all(isinstance(k, str) and torch.is_tensor(v) for k, v in value.items())


def _state_dict(loaded, path: Path) -> tuple[dict[str, torch.Tensor], str]:
    """(the state dict in `loaded`, the key it was under: "" for the file itself)."""
    if _is_state(loaded):
        return dict(loaded), ""
    if isinstance(loaded, Mapping):
        for key in CONTAINERS:
            if _is_state(loaded.get(key)):
                return dict(loaded[key]), key
        keys = ", ".join(map(repr, list(loaded)[:8])) + (", …" if len(loaded) > 8 else "")
        raise ModelError(f"{path}: holds no state dict: a dict of {keys or 'nothing'}, without "
                         f"tensors at its top or under {', '.join(map(repr, CONTAINERS[:3]))}, "
                         "…")  # fmt: skip
    raise ModelError(f"{path}: holds a {type(loaded).__name__}, not a state dict")


def import_factory(path: str) -> Callable:
    """The function or class `path` ("pkg.mod:factory", "pkg.mod:Class.build") names, imported
    with the working folder on sys.path. ConfigError on `module` naming what failed."""
    module_name, _, attributes = path.partition(":")
    with _working_folder():
        try:
            found = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and f"{module_name}.".startswith(f"{exc.name}."):  # it, or its package
                raise ConfigError("module", f"{path}: no module {exc.name!r} importable from "
                                  f"{os.getcwd()} (nor installed)") from None  # fmt: skip
            raise ConfigError("module", f"{path}: importing {module_name} failed "
                              f"({_first_line(exc)})") from None  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the user's module raises anything: one line
            raise ConfigError("module", f"{path}: importing {module_name} failed "
                              f"({_first_line(exc)})") from None  # fmt: skip
    for name in attributes.split("."):
        if not hasattr(found, name):
            raise ConfigError("module", f"{path}: {getattr(found, '__name__', module_name)} "
                              f"has no {name!r}")  # fmt: skip
        found = getattr(found, name)
    if not callable(found):
        raise ConfigError("module", f"{path}: is a {type(found).__name__}, not a function or "
                          "class that makes the module")  # fmt: skip
    return found


@contextlib.contextmanager
def _working_folder():
    """The working folder first on sys.path, as `python -m` has it, while the user's module is
    imported and built (its own imports may be lazy)."""
    folder = os.getcwd()
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


def arguments_for(factory: Callable, hyper: dict, where: str) -> dict:
    """The keyword arguments to call `factory` with: the entries of `hyper` it takes (all when
    it takes **kwargs). ModelError when it needs one `hyper` does not hold."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin without a signature: no arguments
        return {}
    parameters = signature.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        taken = dict(hyper)
    else:
        names = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        taken = {k: v for k, v in hyper.items() if k in names}
    needed = [p.name for p in parameters if p.default is p.empty and p.name not in taken
              and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]  # fmt: skip
    if needed:
        held = (f"its hyper-parameters hold {', '.join(sorted(hyper))}" if hyper else
                f"it holds no hyper-parameters ({', '.join(HYPER[:3])})")  # fmt: skip
        raise ModelError(f"{where}: the factory needs {', '.join(needed)}, which the checkpoint "
                         f"does not give ({held}); give them defaults, or a factory that takes "
                         "none")  # fmt: skip
    return taken


def build(factory: Callable, arguments: dict, where: str) -> nn.Module:
    """`factory(**arguments)`, which must be an nn.Module; ModelError in one line if not."""
    with _working_folder():
        try:
            module = factory(**arguments)
        except Exception as exc:  # noqa: BLE001 - the user's code raises anything: one line
            raise ModelError(f"{where}: making the module failed ({_first_line(exc)})") from None
    if not isinstance(module, nn.Module):
        raise ModelError(f"{where}: the factory returned a {type(module).__name__}, not a "
                         "torch.nn.Module")  # fmt: skip
    return module


def _names(keys, limit: int = _SHOWN) -> str:
    keys = sorted(keys)
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return ", ".join(keys[:limit]) + more


def _strip(state: dict, prefix: str) -> dict | None:
    """`state` with `prefix` cut from every key, None when some key lacks it."""
    if not all(key.startswith(prefix) for key in state):
        return None
    return {key[len(prefix):]: value for key, value in state.items()}


def matched(state: dict[str, torch.Tensor], module: nn.Module, where: str) -> dict:
    """`state` with its keys as `module` names them (as they are; DDP's and torch.compile's
    prefixes cut; a prefix all keys share cut), or ModelError naming the keys missing from
    the file and those the module does not have, or the tensors whose shapes differ."""
    wanted = module.state_dict()
    candidates = [state]
    unwrapped = dict(state)
    while (cut := next((p for p in WRAPPERS if _strip(unwrapped, p)), None)) is not None:
        unwrapped = _strip(unwrapped, cut)
        candidates.append(unwrapped)
    for base in list(candidates):
        first = next(iter(base)).split(".")[0] + "."
        if (shared := _strip(base, first)) is not None and shared:
            candidates.append(shared)
    best = max(candidates, key=lambda c: (len(set(c) & set(wanted)), -len(set(c) ^ set(wanted))))
    missing, unexpected = set(wanted) - set(best), set(best) - set(wanted)
    if missing or unexpected:
        parts = [f"missing keys (in the module, not the file): {_names(missing)}" if missing
                 else "", f"unexpected keys (in the file, not the module): {_names(unexpected)}"
                 if unexpected else ""]  # fmt: skip
        raise ModelError(f"{where}: the state dict does not fit the module "
                         f"({'; '.join(p for p in parts if p)})")  # fmt: skip
    differ = [f"{key} {list(best[key].shape)} in the file, {list(value.shape)} in the module"
              for key, value in wanted.items() if best[key].shape != value.shape]  # fmt: skip
    if differ:
        more = f" and {len(differ) - 2} more" if len(differ) > 2 else ""
        raise ModelError(f"{where}: the state dict does not fit the module: "
                         f"{'; '.join(differ[:2])}{more}")  # fmt: skip
    return best


def load_checkpoint(path: str | os.PathLike, factory_path: str) -> tuple[nn.Module, str]:
    """(the module `factory_path` makes, filled with the state dict of the checkpoint at
    `path`, in eval mode; what it is, for the trace's `model_source`)."""
    checkpoint = Checkpoint(path)
    factory = import_factory(factory_path)
    where = f"{path} with {factory_path}"
    arguments = arguments_for(factory, checkpoint.hyper, where)
    module = build(factory, arguments, where)
    state = matched(checkpoint.state, module, where)
    try:
        module.load_state_dict(state, strict=True)
    except Exception as exc:  # noqa: BLE001 - PyTorch's own checks: one line
        raise ModelError(f"{where}: loading the state dict failed ({_first_line(exc)})") from None
    module.eval()
    under = f"['{checkpoint.state_key}']" if checkpoint.state_key else ""
    given = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    hyper = f" from {checkpoint.hyper_key!r}" if arguments else ""
    text = f"{path}{under} (state dict) in {factory_path}({given}){hyper}"
    return module, text


def random_data(module: nn.Module, config: RunConfig) -> tuple[torch.Tensor, str]:
    """(seeded random x for `module`, what it is) from its first layer with weights: ids
    [B, T] for an nn.Embedding, floats for an nn.LSTM/GRU/RNN (its layout). ConfigError asking
    for --inputs when that layer says nothing of its input."""
    first = next((m for m in module.modules() if not list(m.children())
                  and any(True for _ in m.parameters(recurse=False))), None)  # fmt: skip
    generator = torch.Generator().manual_seed(config.seed)
    batch, steps = config.batch, config.steps
    if isinstance(first, nn.Embedding) and first.num_embeddings > 1:
        x = torch.randint(1, first.num_embeddings, (batch, steps), generator=generator)
        return x, f"random data (seed {config.seed}): ids [B={batch}, T={steps}]"
    if isinstance(first, nn.RNNBase):
        shape = (batch, steps) if first.batch_first else (steps, batch)
        dtype = first.weight_ih_l0.dtype
        x = torch.randn((*shape, first.input_size), generator=generator, dtype=dtype)
        order = "B, T" if first.batch_first else "T, B"
        return x, f"random data (seed {config.seed}): x [{order}, I={first.input_size}]"
    name = type(first).__name__ if first is not None else "no layer with weights"
    raise ConfigError("inputs", f"{config.module}: its first layer ({name}) does not say what "
                      f"the module takes; give {ref('inputs', 'X.npy')}")  # fmt: skip


def run_checkpoint(
    config: RunConfig, cancelled: Callable[[], bool] = bool, keep: Callable[[], bool] = bool
) -> Iterator[TraceUpdate | GradientTrace]:
    """Model mode's runner for a state dict (`config.model`) and its module's factory
    (`config.module`): a TraceUpdate when it starts, one when the gradients are in, then the
    GradientTrace. Bad input raises before anything runs; one unit of work."""
    if not config.module:
        raise ConfigError("module", f"{config.model}: a state dict needs its module's class: "
                          f"give {ref('module', 'PKG.MOD:FACTORY')}")  # fmt: skip
    path = config.model
    arguments, y, source = program_data(config)
    loss = program_loss(config.loss, y is not None)
    module, described = load_checkpoint(path, config.module)
    if arguments is None:
        arguments, source = random_data(module, config)
    tracer = Tracer(module, loss, y is not None)
    yield TraceUpdate(0, 1, f"state dict {path} in {config.module}, loss {loss}")
    if cancelled():
        return
    yield from traced(tracer, config, (arguments, y, source), loss, f"{path}: {config.module}",
                      described)  # fmt: skip
