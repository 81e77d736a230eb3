"""What every PyTorch model-mode trace holds beside its directions, for `lstmviz.torch.tracer`
(classic layers) and `model` (modern ones) alike: the outcome arrays, the module's output
tensor, anchors checked in the Python API's terms. Here rather than in `lstmviz.torch` because
this package may not import the rest of it.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from lstmviz.core.config import in_python_terms
from lstmviz.core.errors import ConfigError, LstmvizError

WHERE = "lstmviz.torch"


def checked(check, *args):
    """`check(*args)`, its ConfigError as the Python API names it (`anchors=`)."""
    try:
        return check(*args)
    except ConfigError as exc:
        raise in_python_terms(exc) from None


def outcome_arrays(value: torch.Tensor, per_sample, y_pred: torch.Tensor, y, module: nn.Module,
                   summary: str, source: str) -> dict[str, np.ndarray]:  # fmt: skip
    """What a PyTorch module's model-mode trace holds beside its directions (`tracer` and
    `trace` alike): `loss`, `loss_by_sample` [B] (when the loss gives it), `y_pred`, `y`
    (when given), `model_summary`, `model_source` and `inputs_source` (when named)."""
    arrays = {"loss": np.float32(value.detach().cpu())}
    if per_sample is not None:
        arrays["loss_by_sample"] = _numpy(per_sample).astype(np.float32)
    arrays["y_pred"] = _numpy(y_pred)
    if y is not None:
        arrays["y"] = _numpy(y)
    arrays["model_summary"] = np.array(summary)
    arrays["model_source"] = np.array(f"PyTorch module {type(module).__name__}")
    if source:
        arrays["inputs_source"] = np.array(source)
    return arrays


def first_tensor(output) -> torch.Tensor:
    """The module's output, or the first tensor of the tuple or list it returned."""
    if torch.is_tensor(output):
        return output
    if isinstance(output, tuple | list):
        for item in output:
            if torch.is_tensor(item):
                return item
    raise LstmvizError(f"{WHERE}: the module returned {type(output).__name__}, not a tensor")


def _numpy(value: torch.Tensor) -> np.ndarray:
    return value.detach().cpu().numpy()
