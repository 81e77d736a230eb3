"""LSTM weights in Keras's layout, their seeded initialisation, and file loaders: one LSTM layer
(`loaders`), or a whole model as a chain of layers (`model_files.load_model`, `model.ModelSpec`)."""

from lstmviz.weights.core import LSTMWeights, WeightsError, random_weights

__all__ = ["LSTMWeights", "WeightsError", "random_weights"]
