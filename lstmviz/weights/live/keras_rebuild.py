"""Rebuild a layer of kind "keras" (one lstmviz does not model) with Keras, its weights loaded.

Imports Keras only when called: `import lstmviz.weights.live.keras_rebuild` stays cheap.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import h5py

from lstmviz.core.errors import ModelError
from lstmviz.weights.formats.keras_config import X, snake_case
from lstmviz.weights.model_spec import LayerSpec


def keras_layer(spec: LayerSpec):
    """The layer as a built `keras.Model` x -> y, called as the file's model called it (e.g.
    self-attention's (x, x)), holding the file's weights. x and y are batch-major:
    [B, *spec.input_shape]. Masks pass through as Keras passes them (`model(x, mask=m)`; the
    output's mask, or none where the layer drops it, on the output as Keras sets it)."""
    with _rebuilding(spec):
        import keras

        inputs, outputs = _symbolic(spec)
        model = keras.Model(inputs, outputs, name=f"lstmviz_{spec.name.replace('/', '_')}")
    load_layer_weights(model, spec)
    return model


def load_layer_weights(model, spec: LayerSpec) -> None:
    """Load `spec`'s weights into `model`, a `keras_layer` of a layer of the same class and
    weight shapes (its variables keep their identity: a compiled function that reads them
    sees the new values)."""
    with _rebuilding(spec), tempfile.TemporaryDirectory(prefix="lstmviz-") as folder:
        path = Path(folder) / "layer.weights.h5"
        with h5py.File(path, "w") as f:
            # Keras's own layout for a functional model of [InputLayer, layer].
            group = f.create_group(f"layers/{snake_case(spec.class_name)}")
            for name, value in spec.weights.items():
                group[name] = value
        model.load_weights(path)


def keras_output_shape(spec: LayerSpec) -> tuple:
    """The layer's output shape without the batch axis (None for any length), as Keras
    computes it from `spec.input_shape`."""
    with _rebuilding(spec):
        return tuple(_symbolic(spec)[1].shape[1:])


def _symbolic(spec: LayerSpec):
    import keras

    if spec.kind != "keras":
        raise ModelError(f"layer {spec.label} is of kind {spec.kind!r}, not 'keras'")
    layer = keras.layers.deserialize(spec.args["serialized"])
    inputs = keras.Input(shape=spec.input_shape)
    return inputs, _call(layer, spec.args.get("call"), inputs)


@contextlib.contextmanager
def _rebuilding(spec: LayerSpec):
    try:
        yield
    except ModelError:
        raise
    except Exception as exc:  # Keras raises many types for configs it cannot rebuild
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        raise ModelError(f"layer {spec.label}: Keras cannot rebuild it ({text})") from None


def _call(layer, call: dict | None, x):
    """`layer` called with the recorded arguments, X replaced by `x` (or just `layer(x)`)."""
    if not call:
        return layer(x)

    def fill(value):
        if value == X:
            return x
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    return layer(*fill(call.get("args", [])), **fill(call.get("kwargs", {})))
