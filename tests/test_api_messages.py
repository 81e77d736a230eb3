"""Messages the Python API raises speak of keyword arguments, not command-line flags."""

import numpy as np
import pytest

from lstmviz.config import in_python_terms
from lstmviz.errors import ConfigError, InputError


@pytest.mark.parametrize(
    ("cli", "python"),
    [
        ("--steps: 0 is out of range [1, 10]", "steps: 0 is out of range [1, 10]"),
        ("reduce --steps, --batch or --hidden", "reduce steps=, batch= or hidden="),
        ("cannot be split into --passes 3 equal passes", "cannot be split into passes=3 equal "
         "passes"),  # fmt: skip
        ("--layer: only applies together with --weights FILE",
         "layer: only applies together with weights=FILE"),  # fmt: skip
        ("--layer: only applies to --mode taped, multipass, batchwise",
         "layer: only applies to mode='taped', multipass, batchwise"),  # fmt: skip
        ("--mode model needs --model FILE", "mode='model' needs model=FILE"),
        ("weights files need --generator files", "weights files need generator='files'"),
        ("give --loss with a Keras loss name", "give loss= with a Keras loss name"),
        ("only with --time-major", "only with time_major=True"),
        ("give --time-major and --steps 1e3", "give time_major=True and steps=1e3"),
        ("--time-major: only applies together with --inputs FILE",
         "time_major: only applies together with inputs=FILE"),  # fmt: skip
    ],
)
def test_flags_become_keywords_with_their_values(cli, python):
    """A flag followed by one of its choices ("--mode model") is that keyword's value: it had
    become "mode= model"; a switch without a value is its keyword set to True."""
    translated = in_python_terms(InputError(cli))
    assert str(translated) == python
    assert type(translated) is InputError


@pytest.mark.parametrize("name", ["random_state", "time_major", "connectivity"])
def test_every_switch_of_run_config_becomes_true(name):
    """Each of RunConfig's bool fields, named as a flag without a value, is that keyword set to
    True (the fields listed here independently of the module's own reading)."""
    from dataclasses import fields

    from lstmviz.config import RunConfig

    assert {f.name for f in fields(RunConfig) if f.type == "bool"} == {
        "random_state", "time_major", "connectivity"}  # fmt: skip
    flag = "--" + name.replace("_", "-")
    assert str(in_python_terms(InputError(f"only with {flag} here"))) == (
        f"only with {name}=True here")  # fmt: skip


@pytest.mark.parametrize(("name", "word"), [("mode", "model"), ("generator", "files"),
                                            ("task", "copy")])  # fmt: skip
def test_every_choice_flag_takes_its_word(name, word):
    assert str(in_python_terms(InputError(f"--{name} {word} needs more"))) == (
        f"{name}={word!r} needs more")  # fmt: skip


def test_the_flag_of_a_config_error_becomes_its_keyword():
    translated = in_python_terms(ConfigError("--time-major", "only with --inputs FILE"))
    assert translated.flag == "time_major"
    assert str(translated) == "time_major: only with inputs=FILE"


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
