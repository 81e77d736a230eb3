"""Errors for bad input. Each message names the problem and the flag, field or file.

The CLI turns any LstmvizError into one line on stderr and exit code 2; the GUI into a dialog;
the Python API words them in keyword arguments (`in_python_terms`).
"""

import re
from collections.abc import Sequence


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


# A flag and what follows it: ":" (the flag names the error), a number or a metavar (FILE), a
# lowercase word (a choice's value, or the sentence going on), or nothing; not inside a word (a
# file name with "--" in it).
_FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9-]*)(:|=| (?:-?\d[\w.]*|[A-Z][A-Z0-9_.]*)\b"
                   r"| [a-z][a-z0-9_]*(?![\w-]))?")  # fmt: skip


def in_python_terms(exc: LstmvizError, renames: Sequence[tuple[str, str]] = ()) -> LstmvizError:
    """`exc` (its class and attributes) with its message in a Python caller's words: first each
    (command line, Python) pair of `renames`, then every flag left as its keyword argument:
    "--train-steps: 0 is out of range" -> "train_steps: …", "--steps 5" -> "steps=5",
    "give --loss" -> "give loss=", "--inputs FILE" -> "inputs=FILE", "--mode model" ->
    "mode='model'", "with --time-major" -> "with time_major=True"."""
    from lstmviz.config import SWITCHES, WORD_CHOICES  # config imports this module

    def keyword(m: re.Match) -> str:
        name, after = m[1].replace("-", "_"), (m[2] or "")
        if after == ":":
            return name + ":"
        value, rest = after.strip(" ="), ""
        if after.startswith(" ") and value[:1].isalpha() and value.islower():
            if name in WORD_CHOICES:
                return f"{name}={value!r}"
            value, rest = "", after  # the sentence goes on
        if name in SWITCHES and not value:
            return f"{name}=True{rest}"
        return f"{name}={value}{rest}"

    text = str(exc)
    for cli, python in renames:
        text = text.replace(cli, python)
    translated = Exception.__new__(type(exc))
    Exception.__init__(translated, _FLAG.sub(keyword, text))
    translated.__dict__.update(exc.__dict__)
    if isinstance(getattr(exc, "flag", None), str):
        translated.flag = _FLAG.sub(lambda m: m[1].replace("-", "_") + (m[2] or ""), exc.flag)
    return translated
