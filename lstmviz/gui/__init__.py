"""Qt views. No TensorFlow here: engines run in the computing process that the worker thread
owns (worker.py, engine/process/computing.py).

Importing `lstmviz.plots` first pins None/True/False against PySide6 6.12's reference-counting
bug (`lstmviz.plots.pin_singletons`) before any Qt call of the window.
"""

import lstmviz.plots  # noqa: F401
