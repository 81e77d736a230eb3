"""Training's messages: saving the weights where they cannot be written, the step that stopped a
run on NaN/Inf, a sequence too short for its task (command line and Python words)."""

import numpy as np
import pytest

from lstmviz.cli import main
from lstmviz.core.config import RunConfig
from lstmviz.core.errors import LstmvizError
from lstmviz.engine.modes.train import run_train, train
from lstmviz.engine.modes.trained_weights import save_trained_weights
from lstmviz.engine.process.computing import _save, describe
from lstmviz.engine.process.messages import PackedTrace, Save, Saved
from lstmviz.io.trace import TraceUpdate


@pytest.fixture(scope="module")
def trace():
    return train(task="adding", train_steps=1, steps=3, batch=2, hidden=2)


def entries(folder):
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("name", ["w.weights.h5", "w.npz"])
def test_a_missing_folder_is_named_in_one_line(tmp_path, trace, name):
    path = tmp_path / "no such folder" / name
    with pytest.raises(LstmvizError) as info:
        save_trained_weights(trace, path)
    message = str(info.value)
    assert message.startswith(f"{path}: cannot write") and "No such file or directory" in message
    assert ".tmp" not in message and "\n" not in message  # not the temporary file's name
    assert entries(tmp_path) == []


@pytest.mark.parametrize("name", ["dir.weights.h5", "dir.npz"])
def test_a_folder_at_the_path_is_left_alone(tmp_path, trace, name):
    (tmp_path / name).mkdir()
    (tmp_path / name / "inside.txt").write_text("kept")
    with pytest.raises(LstmvizError, match="cannot write .*Is a directory") as info:
        save_trained_weights(trace, tmp_path / name)
    assert str(info.value).startswith(str(tmp_path / name))
    assert entries(tmp_path) == [name]  # no temporary file left beside it
    assert entries(tmp_path / name) == ["inside.txt"]


def test_the_apps_save_request_answers_in_one_line(tmp_path, trace):
    """The app's Save trained weights… shows the computing process's answer in a dialog."""
    sent = []
    path = tmp_path / "gone" / "adding-trained.weights.h5"
    packed = PackedTrace(trace.mode, trace.config, dict(trace.arrays))
    _save(sent.append, None, Save(7, packed, str(path)))
    [answer] = sent
    assert isinstance(answer, Saved) and (answer.request_id, answer.path) == (7, "")
    error = answer.error
    assert error == f"{path}: cannot write trained weights (No such file or directory)"
    assert "Traceback" not in describe(LstmvizError(error))


def test_a_non_finite_step_is_numbered_from_1_as_in_the_warning(tmp_path):
    """Training steps count from 1 (loss panel, rows heatmap, CLI warning); the live message
    of the step that stopped training uses the same number."""
    x = np.zeros((4, 3, 1), np.float32)
    y = np.full((4, 1), 3e38, np.float32)  # the squared error overflows to Inf at once
    np.savez(tmp_path / "seq.npz", x=x, y=y)
    config = RunConfig(mode="train", inputs=str(tmp_path / "seq.npz"), batch=2, hidden=2,
                       train_steps=5)  # fmt: skip
    items = list(run_train(config))
    last = [item for item in items if isinstance(item, TraceUpdate)][-1]
    trace = items[-1]
    assert list(trace.nonfinite_loss_steps) == [0] and last.done == 1
    assert last.message == "loss or dL/dh is NaN or Inf at training step 1; training stopped"


@pytest.mark.parametrize(("task", "steps", "least"), [("adding", 1, 2), ("copy", 2, 3)])
def test_a_sequence_too_short_for_its_task_names_the_steps(tmp_path, capsys, task, steps, least):
    out = tmp_path / "t.npz"
    argv = ["run", "--mode", "train", "--task", task, "--steps", str(steps), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"lstmviz: error: --steps: task '{task}' needs at least {least} steps")
    assert entries(tmp_path) == []
    with pytest.raises(LstmvizError) as info:
        train(task=task, steps=steps)
    assert str(info.value).startswith(f"steps: task '{task}' needs at least {least} steps (")


def test_a_run_on_sequences_is_named_for_them_not_for_the_unread_task(tmp_path, qapp):
    """A run on the user's sequences keeps `task` at its default: the figure's summary and
    the default name of its saved weights name the sequences' file instead."""
    from lstmviz.plots.export.figure import Figure

    rng = np.random.default_rng(3)
    path = tmp_path / "walks.npz"
    np.savez(path, x=rng.standard_normal((8, 6, 2)), y=rng.standard_normal((8, 1)))
    on_file = train(inputs=str(path), steps=5, batch=4, hidden=3, train_steps=2, seed=1)
    assert on_file.config.task == "adding"  # the default, unread
    for trained, named, unnamed in ((on_file, "(walks.npz)", "adding task"),
                                    (train(task="sine", train_steps=2, steps=4, batch=2,
                                           hidden=2), "(sine task)", "walks")):  # fmt: skip
        with Figure(trained) as figure:
            line = next(s for s in figure.summary_lines() if s.startswith("training loss"))
        assert line.endswith(named) and unnamed not in line


def test_a_task_too_big_for_memory_is_named_with_the_tasks_input_size():
    """The refusal names the sizes the run would have: the sine task's I=1, not the I field's."""
    config = RunConfig(mode="train", task="sine", steps=10_000_000, batch=512, hidden=2048,
                       input_dim=8)  # fmt: skip
    with pytest.raises(LstmvizError, match=r"T=10000000 B=512 I=1 H=2048"):
        config.check_memory(available=2**30)


def test_seeded_weights_too_big_to_make_are_refused_before_making_them():
    """H=16384 seeds its recurrent kernel through a float64 QR of [4H, H] (three such arrays at
    once, 25.8 GB): refused on a machine with less, not run until the system kills it."""
    config = RunConfig(steps=1, batch=1, input_dim=1, hidden=16384)
    with pytest.raises(LstmvizError, match="memory"):
        config.check_memory(available=22 * 2**30)  # as the machine that ran it out had
    config.check_memory(available=40 * 2**30)  # fits where there is room
