"""Helpers the tests share (a test file imports from here, never from another test file:
tests/test_suite_guards.py checks it): independent references (NumPy, Keras, PyTorch; the
modes' in `mode_references`), model fixtures and traces (`trace_fixtures`, `keras_models`,
`seq2seq`), recordings written without TensorFlow (`recordings`), the command run in a process
(`cli_process`), the window's fakes and checks, and a process running the app."""
