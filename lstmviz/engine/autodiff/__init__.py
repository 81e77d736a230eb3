"""Gradients: `gradients` (the one probed-gradient builder every mode uses), `forward` (a whole
model's forward pass from its ModelSpec, every recurrent direction probed), `keras_graph` (any
model Keras runs, its recurrent calls on lstmviz's cells), `model_loss` (a model's loss as
Keras computes it), `inference_layers` (BatchNormalization at inference, Flatten) and
`connectivity` (the map ‖∂L_t/∂h_s‖).

TensorFlow; imports `engine.cells`, `engine.native`, `engine.problem`, core/, io/, weights/.
"""
