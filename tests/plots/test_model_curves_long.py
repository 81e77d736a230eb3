"""The model panels' curves of a long trace are painted with about two points a pixel (each
pixel column's least and greatest value: a one-step spike still shows), their data kept whole
for the readout. Arrays made here (no TensorFlow)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from lstmviz.core.config import RunConfig  # noqa: E402

STEPS, WIDTH = 20000, 600


def long_arrays() -> dict:
    rng = np.random.default_rng(0)
    names = ["bi/forward", "bi/backward", "top"]
    norms = rng.uniform(0.1, 1.0, (3, STEPS)).astype(np.float32)
    norms[:, 12345] = 50.0  # one step's spike
    gates = rng.uniform(0.2, 0.8, (4, STEPS)).astype(np.float32)
    gates[1, 777] = 0.999
    arrays = {"layer_names": np.array(names), "loss": np.float32(0.5)}
    for key in ("norm_h_total", "norm_h_direct", "norm_c_total"):
        arrays[f"{key}_by_layer"] = norms
    for k in range(3):
        arrays[f"layer{k}_gates_mean"] = gates
        arrays[f"layer{k}_gates_saturated"] = gates / 10
    return arrays


def test_long_model_curves_are_painted_with_about_two_points_a_pixel(qtbot):
    from lstmviz.plots.panels.model_curves import GatesPanel, LayerNormPanel

    arrays, config = long_arrays(), RunConfig(mode="model", steps=STEPS)
    norm, gates = LayerNormPanel(), GatesPanel()
    for panel in (norm, gates):
        qtbot.addWidget(panel)
        panel.resize(WIDTH, 300)
        panel.show()
        qtbot.waitExposed(panel)
    norm.set_options(log=False, normalise=False)
    norm.draw(arrays, config)
    gates.draw(arrays, config)
    for curve, spike in ((norm.curves[0], 50.0), (gates.means[1], 0.999)):
        shown = curve.curve.yData  # what is painted
        assert len(shown) <= 4 * WIDTH
        assert float(np.nanmax(shown)) == pytest.approx(spike)
        assert len(curve.yData) == STEPS  # the data (the readout's) stay whole
    assert "0.999" in gates.readout_at(777, 0.5)
