"""The window's computing process: `computing` (the process the window's worker starts: it runs
the engine there) and `messages` (what the worker and the process say to each other).

Neither TensorFlow nor Qt when imported (the window's process imports both modules;
tests/test_import_cycles.py checks it): the process imports TensorFlow once it runs.
"""
