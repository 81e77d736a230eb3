"""The first floor: errors, the run's parameters (`config`), the modes' registry, the trace's
keys (`schema`), how a result is drawn (`view`), and small helpers that need neither
TensorFlow nor Qt."""
