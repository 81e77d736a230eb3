"""Models and data made as their users make them, shared by the tests: Keras and Keras 2 files,
PyTorch modules (seq2seq, modern layers, distributed ones)."""
