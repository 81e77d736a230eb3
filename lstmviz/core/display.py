"""Whether a window can open here, found out before Qt starts (no Qt, no TensorFlow).

On X11/Wayland systems Qt aborts the whole process (a core dump, exit 134, after lines of
plugin errors) when its platform plugin finds no display: DISPLAY unset, or naming an X server
that is not there (`DISPLAY=:99` with nothing on :99). `problem()` says why in one line instead.

An X display `[host]:n[.screen]` is reached as libxcb reaches it: for a local display (no host,
or `unix`) the abstract socket `@/tmp/.X11-unix/Xn` (Linux), the socket file
`/tmp/.X11-unix/Xn`, then TCP on localhost; for `host:n`, TCP port 6000 + n on that host. A
Wayland display is the socket `WAYLAND_DISPLAY` names (relative to `XDG_RUNTIME_DIR`). Only
connecting is tried: a server that refuses the client later (X authority) is Qt's to report.

Qt aborts the same way when its X11 plugin cannot load because a system library it needs is
missing (Debian and Ubuntu lack `libxcb-cursor0` by default): `window_problem()` also loads
the plugin, as Qt would, and names the library and its package.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import socket
import sys
from pathlib import Path

X_TCP_PORT = 6000
TIMEOUT = 2.0  # seconds for one connection attempt (a remote host that never answers)
ADVICE = "run it under xvfb-run -a, or with QT_QPA_PLATFORM=offscreen and --screenshot"


def _server(platform: str) -> str | None:
    """The display server a Qt platform plugin needs ("x11", "wayland"), or None: offscreen,
    vnc, minimal, eglfs, … need none and are the user's choice."""
    if platform == "xcb":
        return "x11"
    return "wayland" if platform.startswith("wayland") else None  # wayland-egl, -brcm too


def _connects(family: int, address) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(TIMEOUT)
        try:
            sock.connect(address)
        except OSError:
            return False
    return True


def x_display_problem(display: str) -> str | None:
    """Why the X server `display` (DISPLAY's value) cannot be reached, or None when it can
    (or when the value is of a form this check does not know: Qt then decides)."""
    host, colon, number = display.rpartition(":")
    number = number.partition(".")[0]
    if not colon or not number.isdigit() or host.endswith(":") or "/" in host:
        return None  # DECnet `host::n`, a socket's path, `protocol/host`: Qt decides
    n = int(number)
    if host.startswith("[") and host.endswith("]"):  # [::1]:0
        host = host[1:-1]
    if host in ("", "unix"):
        path = f"/tmp/.X11-unix/X{n}"
        if sys.platform.startswith("linux") and _connects(socket.AF_UNIX, "\0" + path):
            return None
        if os.path.exists(path) and _connects(socket.AF_UNIX, path):
            return None
        if host == "" and _tcp(("localhost", X_TCP_PORT + n)):
            return None
        return f"nothing answers on {path}"
    if _tcp((host, X_TCP_PORT + n)):
        return None
    return f"nothing answers on {host}, TCP port {X_TCP_PORT + n}"


def _tcp(address: tuple[str, int]) -> bool:
    try:
        infos = socket.getaddrinfo(*address, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    return any(_connects(family, sockaddr) for family, _, _, _, sockaddr in infos)


def wayland_display_problem(name: str, runtime: str = "") -> str | None:
    """Why the Wayland display `name` (WAYLAND_DISPLAY's value; a socket name in the folder
    `runtime`, XDG_RUNTIME_DIR, unless absolute) cannot be reached, or None."""
    path = name if os.path.isabs(name) else os.path.join(runtime, name)
    if not os.path.isabs(path):
        return None  # no XDG_RUNTIME_DIR: Qt's to report
    if os.path.exists(path) and _connects(socket.AF_UNIX, path):
        return None
    return f"nothing answers on {path}"


def problem(environ: dict[str, str] | None = None) -> str | None:
    """One line saying why no window can open here (what DISPLAY / WAYLAND_DISPLAY name is not
    there, or neither is set), or None when one can, or when this is not an X11/Wayland
    system, or QT_QPA_PLATFORM asks for a platform that needs no display server."""
    if not sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return None
    env = os.environ if environ is None else environ
    asked = [p.partition(":")[0].strip() for p in env.get("QT_QPA_PLATFORM", "").split(";")]
    asked = [p for p in asked if p]
    kinds = {_server(p) for p in asked}
    if None in kinds:
        return None
    kinds = kinds or {"x11", "wayland"}
    found = {"x11": env.get("DISPLAY", ""), "wayland": env.get("WAYLAND_DISPLAY", "")}
    given = {kind: value for kind, value in found.items() if value and kind in kinds}
    if not given:
        unset = ("neither DISPLAY nor WAYLAND_DISPLAY is" if len(kinds) > 1 else
                 f"{'DISPLAY' if 'x11' in kinds else 'WAYLAND_DISPLAY'} is not")  # fmt: skip
        return f"no display to open a window on ({unset} set); {ADVICE}"
    reasons = []
    for kind, value in given.items():  # DISPLAY first
        if kind == "x11":
            why = x_display_problem(value)
        else:
            why = wayland_display_problem(value, env.get("XDG_RUNTIME_DIR", ""))
        if why is None:
            return None
        variable = "DISPLAY" if kind == "x11" else "WAYLAND_DISPLAY"
        reasons.append(f"{variable}={value} is not there ({why})")
    return f"cannot open a window: {'; '.join(reasons)}; {ADVICE}"


def debian_package(soname: str) -> str:
    """The Debian/Ubuntu package of a library by its soname: `libxcb-cursor.so.0` →
    `libxcb-cursor0`, `libxkbcommon-x11.so.0` → `libxkbcommon-x11-0` (a dash after a digit)."""
    base, _, version = soname.partition(".so")
    version = version.lstrip(".").partition(".")[0]
    return base + ("-" if base[-1:].isdigit() and version else "") + version


def library_problem(path: Path) -> str | None:
    """Why the shared library at `path` cannot be loaded, as the end of "… needs …": the
    library it needs that is missing and its package, or the loader's message; None when it
    loads."""
    try:
        ctypes.CDLL(str(path), mode=os.RTLD_LAZY | os.RTLD_LOCAL)
    except OSError as exc:
        found = re.search(r"([\w.+-]+\.so[\w.]*): cannot open shared object file", str(exc))
        if found is None or found.group(1) == path.name:
            return f"{path.name}, which cannot be loaded ({str(exc).strip()})"
        soname = found.group(1)
        return (f"the system library {soname}, which is not installed (Debian/Ubuntu: apt "
                f"install {debian_package(soname)}; docs/troubleshooting.md lists every "
                f"library Qt needs)")  # fmt: skip
    return None


def xcb_plugin() -> Path | None:
    """Qt's X11 platform plugin in the installed PySide6 (found without importing it), or None."""
    spec = importlib.util.find_spec("PySide6")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        plugin = Path(folder) / "Qt" / "plugins" / "platforms" / "libqxcb.so"
        if plugin.exists():
            return plugin
    return None


def window_problem(environ: dict[str, str] | None = None) -> str | None:
    """`problem()`, and when Qt would open the window on X11 (DISPLAY answers, no Wayland
    display, QT_QPA_PLATFORM unset or xcb), why its X11 plugin cannot load, or None."""
    if why := problem(environ):
        return why
    env = os.environ if environ is None else environ
    platform = env.get("QT_QPA_PLATFORM", "").partition(":")[0].strip()
    if not sys.platform.startswith("linux") or platform not in ("", "xcb"):
        return None
    if not env.get("DISPLAY") or (not platform and env.get("WAYLAND_DISPLAY")):
        return None
    plugin = xcb_plugin()
    why = library_problem(plugin) if plugin else None
    return (f"cannot open a window: Qt's X11 plugin needs {why}; or run with "
            f"QT_QPA_PLATFORM=offscreen and --screenshot") if why else None  # fmt: skip
