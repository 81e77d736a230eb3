"""The parts the main window owns, each handed what it needs when made: `file_actions` (open,
save, recent files; opening weights in `weights_actions`, mixed in), `recording_actions` (a
recording shown), `run_view` (Run, Stop, the live panels), `diagnosis_view` (the Diagnosis
dock and Compare with…) and `summary` (the summary line and Verify).

Imports `gui.state`, `gui.widgets`, `gui.dialogs`, `gui.threads` and the floors below.
"""
