"""The engine: TensorFlow computations, no Qt. Each mode is a generator of TraceUpdates ending
with a GradientTrace; `runner.run` dispatches to it through `lstmviz.core.modes`.

Rooms (each package's docstring says what it holds and what it may import):

- `native/`: the C++ kernels (`src/`), their build and load (`kernels`), `interrupt`;
- `cells/`: the recurrent cells, time-major and probed (the one LSTM, GRU, SimpleRNN);
- `problem/`: what a run computes on (inputs, losses, tasks, weight sources): no TensorFlow at
  import;
- `autodiff/`: the probed-gradient builder, a whole model's forward, connectivity;
- `modes/`: one module per mode;
- `process/`: the window's computing process and its messages: no TensorFlow, no Qt at import.

Here: `runner` (every mode's one entry point), `stopping` (units of work, cancel and keep),
`device` (what computes here) and `quiet_tensorflow` (TensorFlow imported once, quietly).

Importing this package does not import TensorFlow; the modules that need it do.
"""
