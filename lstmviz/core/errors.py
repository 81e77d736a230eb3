"""Errors for bad input. Each message names the problem and the field, argument or file.

An error carries the field it is about (`field`: a RunConfig field such as "steps", or an
export or plot argument such as "panels") and names the other fields it mentions with `ref`;
each front end writes those names its own way, with one naming function of its own:
the command line `cli_term` ("--steps", "--weights FILE": what `str(exc)` shows), the Python
API `config.keyword` ("steps=", "weights=FILE", through `LstmvizError.worded`), the window
`gui.widgets.params.dock_term` (the dock's labels). The CLI turns any LstmvizError into one line on
stderr and exit code 2; the GUI into a dialog; the Python API raises it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# A field named in a message: "\x1f" name, "\x1e" and its value when it is mentioned in a
# sentence ("" for none), "\x1f". A name alone (no "\x1e") is the field a message is about.
_REF = re.compile("\x1f([A-Za-z_][A-Za-z0-9_]*)(?:\x1e([^\x1f]*))?\x1f")

# Names an error may be about that are no field of any front end: written as they are.
SUBJECTS = frozenset({"memory", "config", "gui"})
# Fields whose flag is not their name with "--"
_FLAGS = {"panels": "--panel", "size": "--width/--height"}

# How a front end names field `name`: `value` None for the field a message is about (its
# first word), else what the sentence gives it ("" for nothing: "give --loss").
Term = Callable[[str, "str | None"], str]


def ref(name: str, value: object = "") -> str:
    """Field `name` mentioned inside a message, with the `value` it is given ("FILE", 3,
    "model"; "" for none): each front end writes it its own way (`cli_term` for the command
    line: "--weights FILE")."""
    return f"\x1f{name}\x1e{value}\x1f"


def is_field(name: str) -> bool:
    """Whether `name` is a field a front end names its own way (not a subject such as
    "memory", nor a name already written for one front end: "--out", "FILE")."""
    return name.isidentifier() and name.islower() and name not in SUBJECTS


def cli_term(name: str, value: str | None = None) -> str:
    """The command line's words for field `name`: "--train-steps", "--weights FILE",
    "--mode model"."""
    if not is_field(name):
        return name
    flag = _FLAGS.get(name, "--" + name.replace("_", "-"))
    return f"{flag} {value}" if value else flag


def render(text: str, term: Term) -> str:
    """`text` with every field it names (`ref`, or the field it is about) written by `term`."""
    return _REF.sub(lambda m: term(m[1], m[2]) if is_field(m[1]) else m[1], text)


class LstmvizError(ValueError):
    """Base class: bad input the user can fix. `field`: the RunConfig field or the argument it
    is about (None: a file, an array); `str()` words it for the command line, `worded(term)`
    for another front end. `marked` is the message with its fields marked (`ref`), as a
    message that carries this one on, or another process, takes it; `template` the same
    without the field it is about."""

    def __init__(self, message: str = "", field: str | None = None):
        self.field = field
        self.template = str(message)  # the message without the field it is about
        named = f"\x1f{field}\x1f" if field and is_field(field) else field
        self.marked = f"{named}: {message}" if field else self.template
        super().__init__(render(self.marked, cli_term))

    def __reduce__(self):  # pickled (the computing process sends them): keeps the fields
        copy = dict(self.__dict__)
        return _rebuilt, (type(self), self.args, copy)

    def worded(self, term: Term) -> LstmvizError:
        """This error (its class and attributes) with its message and `flag` in `term`'s
        words."""
        return _rebuilt(type(self), (render(self.marked, term),),
                        self.__dict__ | ({"flag": term(self.field, None)} if self.field else {}))


def _rebuilt(cls: type, args: tuple, attributes: dict) -> LstmvizError:
    exc = Exception.__new__(cls)
    Exception.__init__(exc, *args)
    exc.__dict__.update(attributes)
    return exc


class ConfigError(LstmvizError):
    """A parameter is out of range or unknown. `field` names it (a RunConfig field, an
    argument, or a subject such as "memory"); `flag` is its name as the message words it."""

    def __init__(self, field: str, message: str):
        super().__init__(message, field)
        self.flag = cli_term(field)


class InputError(LstmvizError):
    """Arrays given to an engine have the wrong shape, dtype or values."""


class WeightsError(LstmvizError):
    """Weights are inconsistent or unreadable."""


class ModelError(WeightsError):
    """A model file (or keras.Model) is not a chain of layers lstmviz can run."""


class GraphModel(ModelError):
    """A model that is not one chain of layers (several inputs or outputs, branches, states
    handed between layers, a subclassed model): lstmviz's own reader refuses it, and model mode
    runs it through Keras (`engine.keras_graph`)."""


class TraceError(LstmvizError):
    """A trace file cannot be read."""


class ExportError(LstmvizError):
    """An export cannot be written (bad path, size or content). Names the path or flag."""


class ExportCancelled(ExportError):
    """The `progress` callback of `export` asked to stop; nothing was written."""
