"""No module of lstmviz takes part in an import cycle, counting imports inside functions too
(read from the sources with `ast`: nothing is imported)."""

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


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The lstmviz modules `name` imports anywhere in its source: `import a.b`, `from a import
    b` (a.b when it is a module, else a), relative forms resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
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
