"""LSTM weights in Keras's layout (`lstm_weights`), their seeded initialisation, and file
loaders: one LSTM layer (`loaders`), or a whole model as a chain of layers
(`model_files.load_model`, `model_spec.ModelSpec`). Rooms: `formats/` (the file formats, read
without Keras) and `live/` (live Keras objects)."""

from lstmviz.weights.lstm_weights import LSTMWeights, WeightsError, random_weights

__all__ = ["LSTMWeights", "WeightsError", "random_weights"]
