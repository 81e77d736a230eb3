"""PyTorch modules in lstmviz (the optional extra `lstmviz[torch]`): model mode's gradient flow
of a module under its loss (`model_gradients`) and a recording of it while a training loop runs
(`GradientFlowRecorder`). Importing this package imports PyTorch and TensorFlow; `import
lstmviz` does not import it. docs/pytorch.md.
"""

from __future__ import annotations

import importlib

_API = {
    "model_gradients": "lstmviz.torch.tracer",
    "GradientFlowRecorder": "lstmviz.torch.recorder",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    if name in _API:
        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'lstmviz.torch' has no attribute {name!r}")
