"""What runs beside the window's thread: `worker` (the thread that owns the computing process,
`lstmviz.engine.process`), `trace_loading` (a big trace read off the window's thread) and
`recording_follow` (a recording followed while `model.fit` writes it).

No TensorFlow: the computing process imports it, never the window's.
"""
