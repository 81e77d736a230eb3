"""Engines: TensorFlow computations, no Qt. Each mode is a generator of TraceUpdate objects
ending with a GradientTrace (see `lstmviz.engine.runner.run`).

Importing this package does not import TensorFlow; the modules that need it do.
"""
