"""A model Keras runs as a graph (an encoder–decoder of two inputs) in the window: opened by a
drop (as `lstmviz gui MODEL DATA --run` opens its files), its data of named inputs, the run's
trace equal to the API's, the encoder → decoder hand-over in the directions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lstmviz.io import files

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def seq2seq_files(tmp_path_factory):
    """A saved encoder–decoder (tests/helpers/models/seq2seq.py's, with attention) and its data:
    one array per input by name, and y."""
    from tests.helpers.models.seq2seq import seq2seq

    folder = tmp_path_factory.mktemp("graph")
    model, x, y = seq2seq(True)
    model.save(folder / "s2s.keras")
    np.savez(folder / "data.npz", enc=x["enc"], dec=x["dec"], y=y)
    return folder, model, x, y


def test_a_graph_model_and_its_named_inputs_open_and_run(qtbot, window, errors, seq2seq_files):
    import lstmviz

    folder, model, x, y = seq2seq_files
    assert files.kind(folder / "data.npz") == "inputs"
    assert window.open_path(str(folder / "s2s.keras"))  # a drop
    config = window.params.config()
    assert config.mode == "model" and config.model == str(folder / "s2s.keras")
    assert window.open_path(str(folder / "data.npz"))
    assert window.params.config().batch == len(y)
    with qtbot.waitSignal(window.settled, timeout=120_000):
        window.run_button.click()
    assert not errors, errors
    trace = window.trace
    assert list(trace["layer_names"]) == ["encoder", "decoder"]
    assert int(trace["layer1_initial_from"]) == 0
    expected = lstmviz.model_gradients(model, x, y)
    np.testing.assert_allclose(trace["layer0_grad_h_total"], expected["layer0_grad_h_total"],
                               rtol=1e-5, atol=1e-7)  # fmt: skip
