"""The native kernels: C++ sources (`src/`: the LSTM's, GRU's and SimpleRNN's forward and BPTT,
the step norms, the gate statistics), their build and load, and the ops' gradients (`kernels`);
`interrupt` stops a running kernel from any thread. `python -m lstmviz.engine.native` builds
them (`make install` runs it).

Importing this package, or `interrupt`, imports no TensorFlow (the window's process stops the
kernels through `interrupt`); `kernels` does.
"""
