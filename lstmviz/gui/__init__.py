"""The window: Qt views. No TensorFlow here: engines run in the computing process that the
worker thread owns (`threads/worker.py`, `engine/process/computing.py`).

Here the window itself (`main_window`), its menus, the app's start (`app`) and `qt_types`;
rooms: `state/` (what is shown, the run), `parts/` (the parts the window owns), `widgets/`,
`dialogs/`, `threads/` (each package's docstring says what it holds).

Importing `lstmviz.plots` first pins None/True/False against PySide6 6.12's reference-counting
bug (`lstmviz.plots.pin_singletons`) before any Qt call of the window.
"""

import lstmviz.plots  # noqa: F401
