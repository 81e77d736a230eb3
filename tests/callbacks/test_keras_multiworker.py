"""Keras multi-worker training: two workers under `MultiWorkerMirroredStrategy` on this
machine (TF_CONFIG, loopback ports), each a process in a folder of its own as on two machines
(tests/helpers/processes/keras_multiworker.py). With tf_keras the chief writes the recording and the
other worker writes nothing; the last record is `model_gradients` at the final weights. Keras 3
cannot fit there (keras-team/keras#20585): the error it gives, and the callback's one line
saying so. One run of the two workers fits with Keras 3, then with tf_keras (one start-up of
TensorFlow and of the cluster for both); each test reads its part."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lstmviz import keras as callback_module
from lstmviz.io.recording import load_recording

WORKER = Path(__file__).resolve().parents[1] / "helpers" / "processes" / "keras_multiworker.py"
TIMEOUT = 180


def _free_ports(count: int) -> list[int]:
    """Ports free on the loopback now (held open together, so they differ)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("localhost", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _fit(flavours: str, root: Path) -> tuple[dict[str, list[dict]], list[Path]]:
    """Both workers' results of each fit (by flavour) and their folders after fits with
    `flavours` in turn ("keras,tf_keras")."""
    ports, results = json.dumps(_free_ports(2)), root / "results"
    results.mkdir()
    folders = [root / f"worker{index}" for index in range(2)]
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "TF_USE_LEGACY_KERAS")}
    env["PYTHONPATH"] = os.pathsep.join([str(WORKER.parents[2]), env.get("PYTHONPATH", "")])
    processes = []
    for index, folder in enumerate(folders):
        folder.mkdir()
        command = [sys.executable, str(WORKER), str(index), ports, flavours, str(results)]
        processes.append(subprocess.Popen(command, cwd=folder, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))  # fmt: skip
    outputs = [process.communicate(timeout=TIMEOUT)[0] for process in processes]
    for process, output in zip(processes, outputs, strict=True):
        assert process.returncode == 0, output[-4000:]
    return {flavour: [json.loads((results / f"worker{i}-{flavour}.json").read_text())
                      for i in range(2)] for flavour in flavours.split(",")}, folders  # fmt: skip


@pytest.fixture(scope="module")
def fitted(tmp_path_factory) -> tuple[dict[str, list[dict]], list[Path], Path]:
    """Both workers' results by flavour, their folders and the run's root."""
    root = tmp_path_factory.mktemp("multiworker")
    return (*_fit("keras,tf_keras", root), root)


@pytest.mark.slow
def test_tf_keras_workers_record_on_the_chief_alone(fitted):
    results, folders, root = fitted
    chief, other = results["tf_keras"]
    assert "error" not in chief and "error" not in other, (chief, other)
    assert chief["files"] == ["run.lvz"] and other["files"] == []  # the other writes nothing
    assert chief["warnings"] == other["warnings"] == []
    assert sorted(os.listdir(folders[1])) == []
    rec = load_recording(folders[0] / "run.lvz")
    assert rec.finished and rec.step.tolist() == [2, 4]  # 4 global batches, every 2
    with np.load(root / "results" / "expected.npz") as expected:
        keys = [k for k in expected.files if k != "model_seconds"]
        assert "layer0_grad_h_total" in keys or "norm_h_total_by_layer" in keys
        for key in keys:  # the same computation on the same weights: equal to the bit
            np.testing.assert_array_equal(np.asarray(rec.last[key]), expected[key], err_msg=key)


@pytest.mark.slow
def test_keras_3_cannot_fit_there_and_the_callback_says_so(fitted):
    """Keras 3.15 on TensorFlow 2.21: the fit of a model made in the strategy's scope fails
    before any callback runs (keras-team/keras#20585, without lstmviz too); the callback,
    made under that TF_CONFIG without tf_keras loaded, said so in one line."""
    results = fitted[0]["keras"]
    for result in results:
        error = result.get("error", "")
        assert error.startswith("ValueError: Attempt to convert a value (PerReplica:{"), result
        assert error.endswith("with an unsupported type (<class "
                              "'tensorflow.python.distribute.values.PerReplica'>) to a Tensor.")
        assert result["warnings"] == [callback_module.MULTIWORKER]
        assert result["files"] == []
    assert "Keras 3" in callback_module.MULTIWORKER and "\n" not in callback_module.MULTIWORKER


@pytest.mark.parametrize(("cluster", "says"), [
    ({"worker": ["a:1", "b:2"]}, True),
    ({"chief": ["a:1"], "worker": ["b:2"]}, True),
    ({"worker": ["a:1"]}, False),
    ({"chief": ["a:1"], "worker": ["b:2"], "ps": ["c:3"]}, False),
])  # fmt: skip
def test_the_callback_made_under_a_multi_worker_tf_config_says_it(monkeypatch, cluster, says):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster,
                                                "task": {"type": "worker", "index": 0}}))
    monkeypatch.delitem(sys.modules, "tf_keras", raising=False)
    assert callback_module._keras3_multiworker() is says
    monkeypatch.setitem(sys.modules, "tf_keras", sys)  # tf_keras loaded: its models fit there
    assert callback_module._keras3_multiworker() is False
    monkeypatch.delenv("TF_CONFIG")
    assert callback_module._keras3_multiworker() is False
