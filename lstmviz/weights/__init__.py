"""LSTM weights in Keras's layout, their seeded initialisation, and file loaders (`loaders`)."""

from lstmviz.weights.core import LSTMWeights, WeightsError, random_weights

__all__ = ["LSTMWeights", "WeightsError", "random_weights"]
