"""`lstmviz.run(RunConfig(...))` with the numbers a notebook computes: NumPy integers and
booleans run as the Python values they equal, and the trace file's config holds those."""

from __future__ import annotations

import json

import numpy as np
import pytest

import lstmviz
from lstmviz.core.config import RunConfig
from lstmviz.io.trace import GradientTrace


def last(updates):
    *_, trace = updates
    return trace


def test_numpy_integers_and_booleans_run_as_python_ones(tmp_path):
    sizes = dict(steps=6, batch=3, input_dim=2, hidden=4, seed=5)
    plain = last(lstmviz.run(RunConfig(**sizes, random_state=True, connectivity=True)))
    numpy = last(lstmviz.run(RunConfig(**{k: np.int64(v) for k, v in sizes.items()},
                                       random_state=np.bool_(True),
                                       connectivity=np.bool_(True))))  # fmt: skip
    assert numpy.config == plain.config
    for key in ("norm_h_total", "connectivity", "loss"):
        np.testing.assert_array_equal(numpy[key], plain[key])
    numpy.save(tmp_path / "t.npz")
    with np.load(tmp_path / "t.npz") as saved:
        stored = json.loads(str(saved["config_json"]))
    assert type(stored["steps"]) is int and stored["random_state"] is True
    assert GradientTrace.load(tmp_path / "t.npz").config == plain.config


@pytest.mark.parametrize(("field", "value", "message"), [
    ("steps", np.float64(5.0), "steps: must be an integer, got"),
    ("steps", np.bool_(True), "steps: must be an integer, got"),
    ("connectivity", np.int64(1), "connectivity: must be true or false"),
])  # fmt: skip
def test_other_numpy_values_are_refused_as_python_ones_are(field, value, message):
    with pytest.raises(lstmviz.ConfigError, match=message):
        last(lstmviz.run(RunConfig(**{field: value})))
