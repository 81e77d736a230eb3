"""The files lstmviz reads and writes: what a file is (`files`), paths that name a file from any
folder (`absolute_paths`), atomic writes, inputs, a model's data, and the two results kept in
files: the trace (`.npz`, `trace`) and the training run's recording (`.lvz`, the room
`recording/`: format, rows, writer, reader). No TensorFlow, no Qt."""
