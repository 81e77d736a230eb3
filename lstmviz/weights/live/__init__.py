"""Weights of live Keras objects, with Keras imported inside functions only: `keras_live` (a
live keras.Model's weights) and `keras_rebuild` (a file's layer lstmviz does not model, rebuilt
as a keras.Model for model mode).
"""
