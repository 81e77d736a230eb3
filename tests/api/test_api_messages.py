"""Messages the Python API raises speak of keyword arguments, not command-line flags."""

import numpy as np
import pytest

from lstmviz.core.config import in_python_terms
from lstmviz.core.errors import ConfigError, InputError, ref


@pytest.mark.parametrize(
    ("message", "cli", "python"),
    [
        (ConfigError("steps", "0 is out of range [1, 10]"), "--steps: 0 is out of range [1, 10]",
         "steps: 0 is out of range [1, 10]"),  # fmt: skip
        (InputError(f"reduce {ref('steps')}, {ref('batch')} or {ref('hidden')}"),
         "reduce --steps, --batch or --hidden", "reduce steps=, batch= or hidden="),
        (InputError(f"cannot be split into {ref('passes', 3)} equal passes"),
         "cannot be split into --passes 3 equal passes",
         "cannot be split into passes=3 equal passes"),  # fmt: skip
        (ConfigError("layer", f"only applies together with {ref('weights', 'FILE')}"),
         "--layer: only applies together with --weights FILE",
         "layer: only applies together with weights=FILE"),  # fmt: skip
        (ConfigError("layer", f"only applies to {ref('mode', 'taped, multipass, batchwise')}"),
         "--layer: only applies to --mode taped, multipass, batchwise",
         "layer: only applies to mode='taped', 'multipass', 'batchwise'"),  # fmt: skip
        (InputError(f"{ref('mode', 'model')} needs {ref('model', 'FILE')}"),
         "--mode model needs --model FILE", "mode='model' needs model=FILE"),
        (InputError(f"weights files need {ref('generator', 'files')}"),
         "weights files need --generator files", "weights files need generator='files'"),
        (InputError(f"give {ref('loss')} with a Keras loss name"),
         "give --loss with a Keras loss name", "give loss= with a Keras loss name"),
        (InputError(f"only with {ref('time_major')}"), "only with --time-major",
         "only with time_major=True"),
        (ConfigError("time_major", f"only applies together with {ref('inputs', 'FILE')}"),
         "--time-major: only applies together with --inputs FILE",
         "time_major: only applies together with inputs=FILE"),  # fmt: skip
        (ConfigError("memory", f"reduce {ref('steps')}"), "memory: reduce --steps",
         "memory: reduce steps="),  # a subject, not a field: as it is
    ],
)
def test_each_front_end_names_the_fields_its_own_way(message, cli, python):
    """An error names its fields once; the command line words them as flags ("--mode model"
    with its choice, a switch alone), the Python API as keyword arguments (a choice quoted, a
    switch set to True)."""
    translated = in_python_terms(message)
    assert str(message) == cli and str(translated) == python
    assert type(translated) is type(message)


@pytest.mark.parametrize("name", ["random_state", "time_major", "connectivity"])
def test_every_switch_of_run_config_becomes_true(name):
    """Each of RunConfig's bool fields, named without a value, is that keyword set to True
    (the fields listed here independently of the module's own reading)."""
    from dataclasses import fields

    from lstmviz.core.config import RunConfig

    assert {f.name for f in fields(RunConfig) if f.type == "bool"} == {
        "random_state", "time_major", "connectivity"}  # fmt: skip
    assert str(in_python_terms(InputError(f"only with {ref(name)} here"))) == (
        f"only with {name}=True here")  # fmt: skip


@pytest.mark.parametrize(("name", "word"), [("mode", "model"), ("generator", "files"),
                                            ("task", "copy")])  # fmt: skip
def test_every_choice_flag_takes_its_word(name, word):
    message = InputError(f"{ref(name, word)} needs more")
    assert str(message) == f"--{name} {word} needs more"
    assert str(in_python_terms(message)) == f"{name}={word!r} needs more"


def test_the_flag_of_a_config_error_becomes_its_keyword():
    translated = in_python_terms(ConfigError("time_major", f"only with {ref('inputs', 'FILE')}"))
    assert translated.flag == "time_major" and translated.field == "time_major"
    assert str(translated) == "time_major: only with inputs=FILE"


def test_an_error_keeps_its_fields_across_processes():
    """The computing process pickles errors to the window: their fields stay marked."""
    import pickle

    sent = pickle.loads(pickle.dumps(ConfigError("layer", f"needs {ref('weights', 'FILE')}")))
    assert str(sent) == "--layer: needs --weights FILE" and sent.field == "layer"
    assert str(in_python_terms(sent)) == "layer: needs weights=FILE"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"steps": 0}, r"^steps: 0 is out of range \[1, 10000000\]$"),
        ({"layer": "x"}, r"^layer: only applies together with weights=FILE$"),
        ({"mode": "model"}, r"^model: mode='model' needs model=FILE$"),
        ({"mode": "batchwise", "weights": "a.npz"},
         r"^weights: in batchwise mode weights files need generator='files'$"),  # fmt: skip
    ],
)
def test_run_names_the_run_configs_fields_not_flags(params, message):
    """lstmviz.run(RunConfig(...)) is the Python API: its refusals name RunConfig's fields
    (they had named the command line's flags, "--steps: …")."""
    import lstmviz

    with pytest.raises(lstmviz.ConfigError, match=message) as caught:
        lstmviz.run(lstmviz.RunConfig(**params))
    assert "--" not in str(caught.value)


def test_run_names_fields_in_the_errors_of_its_files(tmp_path):
    import lstmviz

    np.save(tmp_path / "x.npy", np.zeros((2, 5, 3), np.float32))
    config = lstmviz.RunConfig(mode="multipass", passes=3, inputs=str(tmp_path / "x.npy"))
    with pytest.raises(lstmviz.InputError, match=r"cannot be split into passes=3 equal passes"):
        lstmviz.run(config)


def test_the_command_lines_runner_keeps_its_flags():
    """The CLI and the app drive `runner.run` itself: its messages keep naming the flags."""
    import lstmviz
    from lstmviz.engine.runner import run

    with pytest.raises(lstmviz.ConfigError, match=r"^--steps: 0 is out of range"):
        run(lstmviz.RunConfig(steps=0))
