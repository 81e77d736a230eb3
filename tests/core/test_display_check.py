"""A DISPLAY naming an X server that is not there (`DISPLAY=:99` with nothing on :99): `lstmviz
gui` and `python main.py` aborted inside Qt (xcb plugin errors, a core dump) instead of one
line and exit 2. The check connects as libxcb would, before Qt starts (`lstmviz.core.display`)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from lstmviz.core import display

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/Wayland only")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def answers(family: int, address) -> bool:
    """Whether something accepts a connection at `address` (written apart from the module)."""
    probe = socket.socket(family, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(address)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def free_display() -> int:
    """A local X display number nothing serves: no abstract or file socket, no TCP port."""
    for n in range(970, 1000):
        path = f"/tmp/.X11-unix/X{n}"
        if not (os.path.exists(path) or answers(socket.AF_UNIX, "\0" + path)
                or answers(socket.AF_INET, ("127.0.0.1", 6000 + n))):  # fmt: skip
            return n
    pytest.skip("no free X display number in 970…999")


def gui_env(tmp_path, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}  # fmt: skip
    return env | {"XDG_CONFIG_HOME": str(tmp_path), "PYTHONPATH": ROOT} | extra


@pytest.mark.parametrize("command", [["-m", "lstmviz", "gui"], [os.path.join(ROOT, "main.py")]])
def test_a_display_nobody_serves_exits_2_before_qt_aborts(tmp_path, command):
    """A process of its own: were the check gone, Qt would abort this one (exit 134)."""
    n = free_display()
    done = subprocess.run([sys.executable, *command], capture_output=True, text=True,
                          env=gui_env(tmp_path, DISPLAY=f":{n}"), cwd=tmp_path,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == (
        f"lstmviz: error: gui: cannot open a window: DISPLAY=:{n} is not there (nothing answers "
        f"on /tmp/.X11-unix/X{n}); run it under xvfb-run -a, or with QT_QPA_PLATFORM=offscreen "
        "and --screenshot\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_qt_asked_for_xcb_without_a_display_exits_2(tmp_path):
    """QT_QPA_PLATFORM=xcb used to pass the check whatever DISPLAY said."""
    done = subprocess.run([sys.executable, "-m", "lstmviz", "gui"], capture_output=True,
                          text=True, env=gui_env(tmp_path, QT_QPA_PLATFORM="xcb"), cwd=tmp_path,
                          timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith("lstmviz: error: gui: no display to open a window on "
                                  "(DISPLAY is not set)")  # fmt: skip
    assert len(done.stderr.splitlines()) == 1


def test_a_served_display_passes(tmp_path):
    """An X server on the abstract socket (as Xvfb listens), on TCP (an ssh -X forward),
    a Wayland socket in XDG_RUNTIME_DIR: each passes; the same names with nobody there don't."""
    n = free_display()
    x_socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    x_socket.bind(f"\0/tmp/.X11-unix/X{n}")
    x_socket.listen()
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    port = tcp.getsockname()[1]
    wayland = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    wayland.bind(str(tmp_path / "wayland-test"))
    wayland.listen()
    runtime = {"XDG_RUNTIME_DIR": str(tmp_path)}
    try:
        assert display.problem({"DISPLAY": f":{n}"}) is None
        assert display.problem({"DISPLAY": f"unix:{n}.0"}) is None
        if port > display.X_TCP_PORT:
            assert display.problem({"DISPLAY": f"127.0.0.1:{port - display.X_TCP_PORT}"}) is None
        assert display.problem({"WAYLAND_DISPLAY": "wayland-test", **runtime}) is None
        dead = {"DISPLAY": f":{n + 1}", "WAYLAND_DISPLAY": "wayland-test", **runtime}
        assert display.problem(dead) is None  # either server will do
        assert display.problem(dead | {"QT_QPA_PLATFORM": "xcb"}).startswith(
            f"cannot open a window: DISPLAY=:{n + 1} is not there"
        )
    finally:
        for sock in (x_socket, tcp, wayland):
            sock.close()
    gone = display.problem({"WAYLAND_DISPLAY": "wayland-test", "DISPLAY": f":{n}", **runtime})
    assert gone == (
        f"cannot open a window: DISPLAY=:{n} is not there (nothing answers on "
        f"/tmp/.X11-unix/X{n}); WAYLAND_DISPLAY=wayland-test is not there (nothing answers on "
        f"{tmp_path / 'wayland-test'}); run it under xvfb-run -a, or with "
        "QT_QPA_PLATFORM=offscreen and --screenshot"
    )


@pytest.mark.parametrize("platform", ["offscreen", "vnc", "minimal", "wayland;offscreen"])
def test_platforms_that_need_no_server_are_the_users_choice(platform):
    assert display.problem({"QT_QPA_PLATFORM": platform, "DISPLAY": ":12345"}) is None
    assert display.problem({"QT_QPA_PLATFORM": platform}) is None


def test_display_values_of_forms_libxcb_knows_otherwise_are_left_to_qt():
    for value in ("/tmp/some/socket:0", "host::0", "garbage", ":x"):
        assert display.x_display_problem(value) is None


def test_a_plot_in_python_under_a_display_nobody_serves_draws_offscreen(tmp_path):
    """Plots need no window: `lstmviz.plot(...).save` (a notebook on a machine whose DISPLAY
    names a server that is gone) draws offscreen instead of letting Qt abort."""
    from lstmviz.core.config import RunConfig
    from lstmviz.engine.runner import run
    from lstmviz.io.trace import GradientTrace

    config = RunConfig(mode="taped", steps=6, batch=2, input_dim=2, hidden=3)
    trace = next(item for item in run(config) if isinstance(item, GradientTrace))
    trace.save(tmp_path / "t.npz")
    code = "import lstmviz; lstmviz.plot(lstmviz.GradientTrace.load('t.npz')).save('t.png')"
    n = free_display()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=gui_env(tmp_path, DISPLAY=f":{n}"), cwd=tmp_path,
                          timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def library_needing_a_ghost(tmp_path: Path) -> tuple[Path, Path]:
    """(needs.so, libghost.so.0): a shared library that needs libghost.so.0 beside it ($ORIGIN),
    both built with the C compiler."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "ghost.c").write_text("int ghost(void) { return 1; }\n")
    (tmp_path / "needs.c").write_text("int ghost(void);\nint needs(void) { return ghost(); }\n")
    ghost, needs = tmp_path / "libghost.so.0", tmp_path / "needs.so"
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libghost.so.0", "-o", str(ghost),
                    str(tmp_path / "ghost.c")], check=True)  # fmt: skip
    (tmp_path / "libghost.so").symlink_to(ghost.name)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(needs), str(tmp_path / "needs.c"),
                    f"-L{tmp_path}", "-lghost", "-Wl,-rpath,$ORIGIN"], check=True)  # fmt: skip
    return needs, ghost


def test_a_missing_system_library_of_the_x11_plugin_is_named_before_qt_aborts(
    tmp_path, monkeypatch, capsys
):
    """Qt's X11 plugin needs system libraries (Debian and Ubuntu lack libxcb-cursor0 and others
    by default): without one, Qt aborts (exit 134). The plugin is loaded first, and the one
    missing named with its package; a platform that needs no X server passes."""
    from lstmviz.cli import main

    needs, ghost = library_needing_a_ghost(tmp_path)
    code = f"from lstmviz.core import display; print(display.library_problem({str(needs)!r}))"
    loads = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=gui_env(tmp_path), timeout=60)  # fmt: skip
    assert loads.stdout == "None\n", loads.stderr  # while libghost.so.0 is there
    ghost.unlink()
    expected = (
        "the system library libghost.so.0, which is not installed (Debian/Ubuntu: apt install "
        "libghost0; docs/troubleshooting.md lists every library Qt needs)"
    )
    assert display.library_problem(needs) == expected
    assert display.debian_package("libxcb-cursor.so.0") == "libxcb-cursor0"
    assert display.debian_package("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"

    monkeypatch.setattr(display, "xcb_plugin", lambda: needs)
    n = free_display()
    x_socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    x_socket.bind(f"\0/tmp/.X11-unix/X{n}")
    x_socket.listen()
    try:
        why = display.window_problem({"DISPLAY": f":{n}"})
        assert why == (f"cannot open a window: Qt's X11 plugin needs {expected}; or run with "
                       "QT_QPA_PLATFORM=offscreen and --screenshot")  # fmt: skip
        assert display.window_problem({"DISPLAY": f":{n}", "QT_QPA_PLATFORM": "offscreen"}) is None
        for name in ("WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("DISPLAY", f":{n}")
        assert main(["gui"]) == 2
    finally:
        x_socket.close()
    assert capsys.readouterr().err == f"lstmviz: error: gui: {why}\n"
