"""One module per mode, each a generator of TraceUpdates ending with a GradientTrace, named in
`lstmviz.core.modes`' registry: `taped`, `multipass`, `batchwise`, `train` (training mode:
the built-in tasks, or with a model `fit`, Keras fitting it) and `model` (a whole model;
`graph_model` for one Keras runs as a graph). `trace_arrays` holds what every mode's trace
shares (the problem's arrays, the norms); `trained_weights` saves what training trained.

TensorFlow; imports the other rooms of engine/, core/, io/, weights/ (torch/ inside functions,
for a PyTorch file).
"""
