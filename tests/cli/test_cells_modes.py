"""The one-LSTM modes stay LSTM: a GRU or SimpleRNN file given to them gets one line on stderr
that names model mode, exit 2, nothing written."""

from __future__ import annotations

import numpy as np
import pytest

from lstmviz.cli import main


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import keras

    folder = tmp_path_factory.mktemp("cells_modes")
    model = keras.Sequential([keras.Input((5, 2)), keras.layers.GRU(3, name="gru")])
    model.save(folder / "gru.keras")
    rnn = {"weight_ih_l0": np.ones((3, 2), np.float32),
           "weight_hh_l0": np.ones((3, 3), np.float32),
           "bias_ih_l0": np.zeros(3, np.float32),
           "bias_hh_l0": np.zeros(3, np.float32)}  # fmt: skip
    np.savez(folder / "rnn.npz", **rnn)
    return folder


@pytest.mark.parametrize(("mode", "name", "extra"), [
    ("taped", "gru.keras", []),
    ("multipass", "rnn.npz", ["--passes", "2", "--steps", "4"]),
    ("batchwise", "gru.keras", ["--generator", "files", "--batches", "1"]),
])  # fmt: skip
def test_a_gru_or_rnn_file_in_a_one_lstm_mode_names_model_mode(files, capsys, mode, name, extra):
    out = files / f"{mode}.npz"
    code = main(["run", "--mode", mode, "--weights", str(files / name), *extra, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert len(err.splitlines()) == 1 and "--mode model" in err and name in err, err
