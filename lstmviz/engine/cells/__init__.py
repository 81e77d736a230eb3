"""The recurrent cells, time-major and probed: `lstm` (the one LSTM every single-layer mode
runs: its cell, probes and loop over a sequence, on the native kernels or TensorFlow's
while-loops), `any_cell` (GRU, SimpleRNN and LSTMs of any activation, for whole models),
`activations` (every activation by Keras name), `lstm_backends` (`lstm_forward`: the LSTM on
cuDNN or the while-loop) and `cudnn`.

TensorFlow; imports `engine.native`, `engine.quiet_tensorflow`, core/, weights/.
"""
