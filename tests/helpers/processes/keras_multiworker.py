"""One worker of a two-worker `MultiWorkerMirroredStrategy` fit recorded by lstmviz's Keras
callback, for tests/callbacks/test_keras_multiworker.py, as on two machines: each worker runs in a
folder of its own (its current folder), where the callback's `run.lvz` goes.

    python keras_multiworker.py INDEX PORTS FLAVOURS RESULTS

INDEX: this worker's index (0 is the chief); PORTS: the workers' loopback ports, as JSON;
FLAVOURS: "keras" (Keras 3), "tf_keras" (Keras 2) or "keras,tf_keras": a fit with each, in
that order, under one strategy (one start-up of TensorFlow and of the cluster for both; Keras
3's fit fails before any step, and its callback is made before tf_keras is imported); RESULTS:
a folder outside the workers' own, where this worker writes `worker{INDEX}-{FLAVOUR}.json` —
the files in its folder after that fit, or the error fit raised and the warnings it gave —
and the chief also `expected.npz`: `model_gradients` at the final weights on the callback's
data, after the fit that raised nothing.

A tiny model (LSTM 4 → LSTM 3 → softmax over 2) on 32 samples, batch 8 (global: each worker
computes 4 of each batch), one epoch: 4 steps, records at 2 and 4.
"""

import json
import os
import sys
import warnings

INDEX, PORTS, RESULTS = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[4]
FLAVOURS = sys.argv[3].split(",")
assert FLAVOURS in (["keras"], ["tf_keras"], ["keras", "tf_keras"]), FLAVOURS
os.environ["TF_CONFIG"] = json.dumps({
    "cluster": {"worker": [f"localhost:{port}" for port in PORTS]},
    "task": {"type": "worker", "index": INDEX},
})  # fmt: skip
if FLAVOURS == ["tf_keras"]:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

# the strategy before anything else of TensorFlow runs (it sets up the cluster's devices)
strategy = tf.distribute.MultiWorkerMirroredStrategy()

from lstmviz.engine.modes.model import model_gradients  # noqa: E402
from lstmviz.keras import GradientFlowCallback  # noqa: E402


def fit(flavour: str) -> None:
    if flavour == "tf_keras":
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
        import tf_keras as keras
    else:
        assert "tf_keras" not in sys.modules  # the callback's warning looks for it
        import keras
    L = keras.layers
    keras.utils.set_random_seed(3)
    with strategy.scope():
        model = keras.Sequential([keras.Input((6, 3)), L.LSTM(4, return_sequences=True),
                                  L.LSTM(3), L.Dense(2, activation="softmax")])  # fmt: skip
        model.compile(loss="sparse_categorical_crossentropy",
                      optimizer=keras.optimizers.Adam(0.01))  # fmt: skip
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 6, 3)).astype("float32")
    y = rng.integers(0, 2, 32).astype("int32")
    data = (x[:10], y[:10])
    result = {"index": INDEX, "flavour": flavour}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback = GradientFlowCallback(data, "run.lvz", every=2)
        try:
            model.fit(x, y, batch_size=8, epochs=1, callbacks=[callback], verbose=0)
        except Exception as exc:  # Keras 3 under this strategy (keras-team/keras#20585)
            result["error"] = f"{type(exc).__name__}: {str(exc).strip()}"
    result["warnings"] = [str(w.message) for w in caught
                          if str(w.message).startswith("GradientFlowCallback")]  # fmt: skip
    result["files"] = sorted(os.listdir("."))
    if INDEX == 0 and "error" not in result:
        expected = model_gradients(model, *data)
        np.savez(os.path.join(RESULTS, "expected.npz"),
                 **{k: v for k, v in expected.arrays.items() if v.dtype.kind in "fiub"})
    with open(os.path.join(RESULTS, f"worker{INDEX}-{flavour}.json"), "w",
              encoding="utf-8") as out:  # fmt: skip
        json.dump(result, out)


if __name__ == "__main__":
    for flavour in FLAVOURS:
        fit(flavour)
    sys.stdout.flush()
    os._exit(0)  # the strategy's collective threads can hang the interpreter's teardown
