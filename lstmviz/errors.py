"""Errors for bad input. Each message names the problem and the flag, field or file.

The CLI turns any LstmvizError into one line on stderr and exit code 2; the GUI into a dialog;
the Python API words them in keyword arguments (`config.in_python_terms`).
"""

from __future__ import annotations


class LstmvizError(ValueError):
    """Base class: bad input the user can fix."""


class ConfigError(LstmvizError):
    """A parameter is out of range or unknown. `flag` names the CLI flag (or GUI field)."""

    def __init__(self, flag: str, message: str):
        super().__init__(f"{flag}: {message}")
        self.flag = flag


class InputError(LstmvizError):
    """Arrays given to an engine have the wrong shape, dtype or values."""


class WeightsError(LstmvizError):
    """Weights are inconsistent or unreadable."""


class ModelError(WeightsError):
    """A model file (or keras.Model) is not a chain of layers lstmviz can run."""


class TraceError(LstmvizError):
    """A trace file cannot be read."""
