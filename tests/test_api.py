"""The package top level: cheap to import, lazy names resolve."""

import subprocess
import sys


def test_import_is_cheap_and_names_resolve():
    code = (
        "import sys, lstmviz\n"
        "assert 'tensorflow' not in sys.modules and 'PySide6' not in sys.modules\n"
        "lstmviz.LSTMWeights, lstmviz.GradientTrace, lstmviz.RunConfig\n"
        "assert 'tensorflow' not in sys.modules\n"
        "assert callable(lstmviz.taped_gradients)\n"
        "assert 'tensorflow' in sys.modules and 'PySide6' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_unknown_name_is_an_attribute_error():
    import lstmviz

    try:
        lstmviz.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_tensorflow_import_is_quiet_but_loses_nothing_other_threads_write():
    code = (
        "import os, sys, threading, time\n"
        "def other():\n"
        "    time.sleep(0.2)\n"
        "    os.write(2, b'written meanwhile\\n')\n"
        "threading.Thread(target=other).start()\n"
        "from lstmviz.engine.tfload import tf\n"
        "tf.constant(1.0) + 1.0\n"
        "print('after', file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines == ["written meanwhile", "after"], lines
