"""The summary line's words (window, figure caption): a model run names its model and data
once each, and a training run's trained weights are named by what it trained on."""

from __future__ import annotations

import numpy as np

from lstmviz.analysis.report.summary import plain, summary_text, trained_on
from lstmviz.core.config import RunConfig


def words(text: str) -> list[str]:
    """The plain summary's words, separators and punctuation dropped."""
    said = (w.strip("()·,") for w in plain(text).replace("\u00a0", " ").split())
    return [w for w in said if w]


def test_a_model_runs_summary_says_model_once():
    """The mode's name, then the file's name: not "model · model m.keras"."""
    config = RunConfig(mode="model", model="/data/runs/sentiment_v12.keras", steps=40,
                       batch=64, loss="binary_crossentropy")  # fmt: skip
    arrays = {"loss": np.float32(0.69), "layer_names": np.array(["lstm"]),
              "model_source": np.array("/data/runs/sentiment_v12.keras: Keras 3 model (.keras)"),
              "inputs_source": np.array("/data/runs/d.npz: x [64, 40], y [64, 1]")}  # fmt: skip
    said = words(summary_text("model", arrays, config, 1.0))
    assert said.count("model") == 1 and said[:2] == ["model", "sentiment_v12.keras"]
    assert said.count("data") == 1 and "d.npz" in said


def test_a_recorded_models_summary_says_model_and_data_once():
    """A model and data from a fit's memory (`GradientFlowCallback`) are named as recorded."""
    config = RunConfig(mode="model", steps=7, batch=16, loss="mse")
    arrays = {"loss": np.float32(0.5),
              "model_source": np.array("keras.Model 'sequential' (Keras 3, in memory)"),
              "inputs_source": np.array("GradientFlowCallback data: x [16, 7], y [16, 1]")}
    text = plain(summary_text("model", arrays, config, None))
    said = words(text)
    assert said.count("model") == 1 and "keras.Model 'sequential'" in text
    assert said.count("data") == 1 and "GradientFlowCallback" in said
    assert "x [16, 7], y [16, 1]" in text.replace("\u00a0", " ")


def test_what_a_training_run_trained_on_as_said_and_as_a_file_names_start():
    on_file = RunConfig(mode="train", inputs="/data/walks/walk.2024.npy", task="adding")
    on_task = RunConfig(mode="train", task="sine")
    assert trained_on(on_file) == "walk.2024.npy" and trained_on(on_file, stem=True) == "walk.2024"
    assert trained_on(on_task) == "sine task" and trained_on(on_task, stem=True) == "sine"
