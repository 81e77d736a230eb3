"""What `lstmviz.train` checks before it runs, as the command line does: its keywords as a
notebook computes them (NumPy scalars run as the Python numbers they equal), keywords the run
would not read, a run too big for the memory there is; and the loss its trace names."""

from __future__ import annotations

import numpy as np
import pytest

import lstmviz


def test_numpy_integers_and_booleans_run_as_python_ones():
    sizes = dict(task="sine", steps=6, batch=3, hidden=4, seed=5, train_steps=2)
    plain = lstmviz.train(**sizes, connectivity=True)
    numpy = lstmviz.train(**{k: np.int64(v) if isinstance(v, int) else v
                             for k, v in sizes.items()}, connectivity=np.bool_(True))  # fmt: skip
    assert numpy.config == plain.config
    assert isinstance(numpy.config.steps, int) and numpy.config.connectivity is True
    for key in ("loss_by_step", "norm_h_total_by_step", "kernel", "connectivity"):
        np.testing.assert_array_equal(numpy[key], plain[key])


@pytest.mark.parametrize(("params", "message"), [
    (dict(loss="seq_mse"), "loss: training on a task does not read it: the task has its own "
                           "loss (adding: mse); loss= is for training a model (model=FILE)"),
    (dict(input_dim=3), "input_dim: training on a task does not read it: the task fixes I "
                        "(adding: 2), your sequences (inputs=) their own"),
    (dict(passes=4), "passes: training on a task does not read it (it reads batch, "
                     "connectivity, hidden, inputs, save_model, seed, steps, task, train_steps)"),
    (dict(model="m.keras", task="sine"), "task: training a model (model=FILE) does not read it "
                                         "(it reads batch, epochs, every, hidden, inputs, loss, "
                                         "model, record, save_model, seed, steps, targets)"),
])  # fmt: skip
def test_a_keyword_training_does_not_read_is_refused_not_ignored(params, message):
    """A keyword the run would ignore (the command line notes such flags and runs) is refused:
    in a notebook nobody reads a note, and the trace would name a loss it was not trained on."""
    with pytest.raises(lstmviz.ConfigError) as caught:
        lstmviz.train(task=params.pop("task", "adding"), train_steps=1, **params)
    assert str(caught.value) == message
    assert caught.value.flag == message.split(":")[0]


@pytest.mark.parametrize(("task", "loss"), [("adding", "mse"), ("copy", "xent")])
def test_a_training_traces_repr_names_the_loss_it_trained_on(task, loss):
    trace = lstmviz.train(task=task, train_steps=1, steps=6, batch=2, hidden=3)
    assert repr(trace).startswith(f"GradientTrace(mode='train', loss={loss!r}, ")


def test_a_training_run_too_big_for_memory_is_refused_before_it_starts(monkeypatch):
    """As `lstmviz run` and the app refuse it (`RunConfig.check_memory`): in a notebook the
    system would otherwise kill the kernel, and every result in it, mid-run."""
    import lstmviz.core.config
    from lstmviz.engine.modes import train as train_module

    monkeypatch.setattr(lstmviz.core.config, "available_memory", lambda: 2**20)  # 1 MiB

    def refused(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(train_module.TrainingRun, "items", refused)
    with pytest.raises(lstmviz.ConfigError, match=r"^memory: this run needs about .* \(T=400 "
                       r"B=64 I=1 H=32\), more than the 0\.0 GiB it may use"):  # fmt: skip
        lstmviz.train(task="sine", steps=400, batch=64, hidden=32, train_steps=1)
    config = lstmviz.RunConfig(mode="train", task="sine", steps=400, batch=64, hidden=32)
    with pytest.raises(lstmviz.ConfigError, match=r"^memory: .* \(T=400 B=64 I=1 H=32\)"):
        lstmviz.run_train(config)  # the generator docs/modes.md offers
