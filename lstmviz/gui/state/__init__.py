"""What the window shows and does, apart from Qt's widgets: `shown` (the trace or recording
shown, its file, its ViewOptions) and `run_state` (the run: its phase, outcome and stop).

Imports core/, io/, analysis/ and Qt's core classes (signals); not the window's other rooms.
"""
