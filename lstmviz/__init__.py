"""lstmviz: see how gradients flow through an LSTM.

The API names resolve lazily, so `import lstmviz` imports neither TensorFlow nor Qt:

    import lstmviz
    w = lstmviz.LSTMWeights(kernel, recurrent_kernel, bias)      # Keras layout
    trace = lstmviz.taped_gradients(x, w, loss="last_mse", target=y)   # x [T, B, I]
    trace.grad_h_total                                            # dL/dh_t, [T, B, H]
    trace                                                         # its keys, by shape
    lstmviz.plot(trace)                                           # the app's panels, inline
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# name -> the module defining it ("module:attribute" where the attribute is named otherwise).
_API = {
    "LSTMWeights": "lstmviz.weights",
    "random_weights": "lstmviz.weights",
    "load_weights": "lstmviz.weights.loaders",
    "read_weights": "lstmviz.weights.loaders",
    "list_lstm_layers": "lstmviz.weights.loaders",
    "load_inputs": "lstmviz.io.inputs",
    "GradientTrace": "lstmviz.io.trace",
    "TraceUpdate": "lstmviz.io.trace",
    "RunConfig": "lstmviz.core.config",
    "taped_gradients": "lstmviz.engine.modes.taped",
    "multipass_gradients": "lstmviz.engine.modes.multipass",
    "batchwise_gradients": "lstmviz.engine.modes.batchwise",
    "Hypernetwork": "lstmviz.engine.problem.weight_sources",
    "lstm_forward": "lstmviz.engine.cells.lstm_backends",
    "connectivity_map": "lstmviz.engine.modes.taped",
    "train": "lstmviz.engine.modes.train",
    "run_train": "lstmviz.engine.modes.train",
    "save_trained_weights": "lstmviz.engine.modes.trained_weights",
    "model_gradients": "lstmviz.engine.modes.model",
    "load_model": "lstmviz.weights.model_files",
    "GradientFlowCallback": "lstmviz.keras",
    "load_recording": "lstmviz.io.recording",
    "Recording": "lstmviz.io.recording",
    "run": "lstmviz.engine.runner:run_in_python_terms",
    "verify_trace": "lstmviz.analysis.verify",
    "diagnose": "lstmviz.analysis.sources",
    "compare": "lstmviz.analysis.sources",
    "plot": "lstmviz.notebook",
    "Figure": "lstmviz.notebook",
    "ViewOptions": "lstmviz.core.view",
    "LstmvizError": "lstmviz.core.errors",
    "ConfigError": "lstmviz.core.errors",
    "InputError": "lstmviz.core.errors",
    "WeightsError": "lstmviz.core.errors",
    "ModelError": "lstmviz.core.errors",
    "TraceError": "lstmviz.core.errors",
    "RecordingError": "lstmviz.io.recording",
    "ExportError": "lstmviz.core.errors",
}

__all__ = sorted(_API)


def __getattr__(name: str):
    if name in _API:
        module, _, attribute = _API[name].partition(":")
        return getattr(importlib.import_module(module), attribute or name)
    raise AttributeError(f"module 'lstmviz' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_API))
