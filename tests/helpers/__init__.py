"""Helpers the tests share (a test file imports from here, never from another test file:
tests/test_suite_guards.py checks it): `references/` (the independent computations: NumPy,
Keras, PyTorch; the modes' in `references.mode_references`), `models/` (models and data made
as their users make them), `processes/` (the app, the CLI, ranks and workers run in processes
of their own), and here traces (`trace_fixtures`, `graph_trace`, `kept_traces`), recordings
written without TensorFlow (`recordings`), the window's fakes and checks, and small tools."""
