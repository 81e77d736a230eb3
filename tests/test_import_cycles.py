"""lstmviz's imports, read from the sources with `ast` (nothing is imported): no module takes
part in an import cycle, counting imports inside functions too, and only the window and the CLI
import the window's package; and (in a fresh interpreter) reading a model file imports neither
TensorFlow nor Keras."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lstmviz"


def module_names() -> dict[str, Path]:
    """lstmviz.* module name -> source file (a package is its __init__.py)."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def import_statements(path: Path, package: str) -> list[tuple[str, list[str]]]:
    """Every import in `path`'s source, anywhere (inside functions too), as (module, names):
    `import a.b` → ("a.b", []); `from a import b, c` → ("a", ["b", "c"]), relative forms
    resolved against `package`; importlib.import_module("…") with a literal name → (name, [])."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, [alias.name for alias in node.names]))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.args[0].value, []))
    return found


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The lstmviz modules `name` imports anywhere in its source: `import a.b`, `from a import
    b` (a.b when it is a module, else a), relative forms resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for base, names in import_statements(path, package):
        found |= {f"{base}.{n}" if f"{base}.{n}" in modules else base for n in names} or {base}
    return {target for target in found if target in modules and target != name}


def import_graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imported(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, …, a], or None (depth-first search, colouring the modules)."""
    state: dict[str, str] = {}  # "open" while on the search path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_module_takes_part_in_an_import_cycle():
    graph = import_graph()
    assert "lstmviz.engine.native" in graph["lstmviz.engine.cell"]  # `from … import native`
    assert "lstmviz.engine.problem" in graph["lstmviz.engine.runner"]  # inside a function
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_and_names_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_relative_imports_are_resolved(tmp_path, monkeypatch):
    source = tmp_path / "lstmviz" / "engine" / "x.py"
    source.parent.mkdir(parents=True)
    source.write_text("def f():\n    from . import native\n    from ..trace import step_norm\n")
    modules = {"lstmviz.engine.native": source, "lstmviz.trace": source, "lstmviz.engine.x": source}
    assert imported("lstmviz.engine.x", source, modules) == {
        "lstmviz.engine.native",
        "lstmviz.trace",
    }


def test_every_name_the_package_offers_resolves_and_the_errors_are_one_family():
    """`lstmviz.X` for each name in `lstmviz.__all__` (the README's API, the error classes
    its "When things go wrong" names) is found where the lazy table says."""
    import lstmviz

    for name in lstmviz.__all__:
        assert getattr(lstmviz, name) is not None, name
    for name in ("ConfigError", "InputError", "WeightsError", "ModelError", "TraceError"):
        assert issubclass(getattr(lstmviz, name), lstmviz.LstmvizError)


# ---- the window's package: who may import it ------------------------------------------------

# The only modules that may import the window package: the window itself, the CLI that launches
# it, and the benchmark of the window's own responsiveness (it times MainWindow redraws).
MAY_IMPORT_GUI = ("lstmviz/gui/", "lstmviz/cli.py", "lstmviz/__main__.py", "bench/bench_gui.py")


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Every module `path` imports (absolute names; relative imports resolved; `from a import b`
    counts as a and a.b; importlib.import_module("…") with a literal name too)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = set()
    for base, names in import_statements(path, package):
        found |= {base, *(f"{base}.{n}" for n in names)}
    return found


def imports_gui(path: Path, root: Path = ROOT) -> bool:
    modules = imported_modules(path, root)
    return any(m == "lstmviz.gui" or m.startswith("lstmviz.gui.") for m in modules)


def test_only_the_window_and_the_cli_import_lstmviz_gui():
    sources = sorted([*ROOT.glob("lstmviz/**/*.py"), *ROOT.glob("bench/*.py"), ROOT / "main.py"])
    importers = {p.relative_to(ROOT).as_posix() for p in sources if imports_gui(p)}
    allowed = {p for p in importers if p.startswith(MAY_IMPORT_GUI)}
    assert importers - allowed == set()
    # the check sees real imports: the CLI launches the window, the window imports its parts
    assert {"lstmviz/cli.py", "lstmviz/gui/main_window.py"} <= importers
    assert any(p.relative_to(ROOT).as_posix().startswith("lstmviz/render/") for p in sources)


def test_import_checker_resolves_relative_and_dynamic_imports(tmp_path):
    package = tmp_path / "lstmviz" / "render"
    package.mkdir(parents=True)
    cases = {
        "a.py": "from ..gui import main_window\n",
        "b.py": "from lstmviz import gui\n",
        "c.py": "import importlib\nimportlib.import_module('lstmviz.gui.app')\n",
        "d.py": "import lstmviz.gui.worker as w\n",
        "e.py": "from lstmviz import guide\nfrom . import panel\n",
    }
    for name, text in cases.items():
        (package / name).write_text(text)
    found = {name: imports_gui(package / name, tmp_path) for name in cases}
    assert found == {"a.py": True, "b.py": True, "c.py": True, "d.py": True, "e.py": False}


def test_reading_models_imports_neither_tensorflow_nor_keras():
    import subprocess
    import sys

    code = (
        "import sys, lstmviz.weights.model_files, lstmviz.weights.keras_rebuild; "
        "print(sorted(m for m in ('tensorflow', 'keras', 'tf_keras') if m in sys.modules))"
    )
    # this checkout's lstmviz, via the cwd
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stderr
