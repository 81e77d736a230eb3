"""lstmviz's imports, read from the sources with `ast` (nothing is imported): no module takes
part in an import cycle, counting imports inside functions too; each folder imports only from
its own floor or below (FLOORS, as docs/architecture.md draws them), nothing below plots/
imports Qt and nothing outside engine/, torch/ and the Keras callback imports TensorFlow; only
the window and the CLI import the window's package; and (in a fresh interpreter) reading a
model file imports neither TensorFlow nor Keras."""

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


def import_statements(path: Path, package: str) -> list[tuple[str, list[str], bool]]:
    """Every import in `path`'s source, anywhere (inside functions too), as (module, names,
    lazy): `import a.b` → ("a.b", []); `from a import b, c` → ("a", ["b", "c"]), relative forms
    resolved against `package`; importlib.import_module("…") with a literal name → (name, []);
    `lazy` when the import sits in a function's body (it runs when the function is called)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    in_functions = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for inner in ast.walk(node)
        if inner is not node
    }
    found = []
    for node in ast.walk(tree):
        lazy = id(node) in in_functions
        if isinstance(node, ast.Import):
            found += [(alias.name, [], lazy) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, [alias.name for alias in node.names], lazy))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.args[0].value, [], lazy))
    return found


def imported(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The lstmviz modules `name` imports anywhere in its source: `import a.b`, `from a import
    b` (a.b when it is a module, else a), relative forms resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for base, names, _ in import_statements(path, package):
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
    # `from lstmviz.engine.native import kernels`
    assert "lstmviz.engine.native.kernels" in graph["lstmviz.engine.cells.lstm"]
    assert "lstmviz.engine.problem.seeded" in graph["lstmviz.engine.runner"]  # inside a function
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_cycle_finder_finds_and_names_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_relative_imports_are_resolved(tmp_path, monkeypatch):
    source = tmp_path / "lstmviz" / "engine" / "x.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "def f():\n    from .native import kernels\n    from ..io.trace import step_norm\n"
    )
    modules = {"lstmviz.engine.native.kernels": source, "lstmviz.io.trace": source,
               "lstmviz.engine.x": source}
    assert imported("lstmviz.engine.x", source, modules) == {
        "lstmviz.engine.native.kernels",
        "lstmviz.io.trace",
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
MAY_IMPORT_GUI = ("lstmviz/gui/", "lstmviz/cli/", "lstmviz/__main__.py", "bench/bench_gui.py")


def imported_modules(path: Path, root: Path = ROOT) -> set[str]:
    """Every module `path` imports (absolute names; relative imports resolved; `from a import b`
    counts as a and a.b; importlib.import_module("…") with a literal name too)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = set()
    for base, names, _ in import_statements(path, package):
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
    assert {"lstmviz/cli/gui.py", "lstmviz/gui/main_window.py"} <= importers
    assert any(p.relative_to(ROOT).as_posix().startswith("lstmviz/plots/") for p in sources)


def test_import_checker_resolves_relative_and_dynamic_imports(tmp_path):
    package = tmp_path / "lstmviz" / "plots"
    package.mkdir(parents=True)
    cases = {
        "a.py": "from ..gui import main_window\n",
        "b.py": "from lstmviz import gui\n",
        "c.py": "import importlib\nimportlib.import_module('lstmviz.gui.app')\n",
        "d.py": "import lstmviz.gui.threads.worker as w\n",
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
        "import sys, lstmviz.weights.model_files, lstmviz.weights.live.keras_rebuild; "
        "print(sorted(m for m in ('tensorflow', 'keras', 'tf_keras') if m in sys.modules))"
    )
    # this checkout's lstmviz, via the cwd
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stderr


# ---- the floors: each folder imports only from its own floor or below ----------------------

# lstmviz's folders (and its top-level modules) by floor, bottom up, as docs/architecture.md
# draws them. `lstmviz/__init__.py` is a lazy table that imports nothing when imported, so every
# floor may import it (for `__version__`); `__main__` runs the command line.
FLOORS = {
    "__init__": 1,
    "core": 1,  # errors, the run's parameters, the modes' registry, the schema, the view options
    "io": 2,  # files, inputs, the trace and the recording
    "weights": 2,  # weight and model files → one LSTM or a ModelSpec
    "engine": 3,  # TensorFlow: the modes' computations
    "torch": 3,  # PyTorch modules and programs
    "keras": 3,  # the Keras fit callback (lstmviz.keras), on top of engine/model
    "lightning": 3,  # the Lightning callback (lstmviz.lightning), on top of torch/
    "tensorboard": 3,  # lstmviz.tensorboard: records as TensorBoard scalars and images
    "analysis": 3,  # NumPy reductions: what the panels, the summary and a diagnosis show
    "plots": 4,  # pyqtgraph: the panels and the offscreen figure, export
    "notebook": 5,  # lstmviz.plot and what Jupyter shows
    "gui": 5,  # the window
    "cli": 6,  # the command line
    "__main__": 6,
}
QT = ("PySide6", "pyqtgraph", "shiboken6")
TENSORFLOW = ("tensorflow", "keras", "tf_keras")
MAY_IMPORT_TENSORFLOW = ("engine", "torch", "keras")

# Imports that reach up a floor, each inside a function (it runs only when called) and listed
# here with why it does: importer → imported module.
UPWARD = {
    ("lstmviz.io.trace", "lstmviz.analysis.diagnosis"): "trace.diagnosis, computed when asked",
    ("lstmviz.io.trace", "lstmviz.notebook.html"): "a trace's _repr_html_, shown by Jupyter",
    ("lstmviz.io.recording.reader", "lstmviz.analysis.diagnosis"):
        "recording.diagnosis, when asked",
    ("lstmviz.io.recording.reader", "lstmviz.notebook.html"):
        "a recording's _repr_html_ in Jupyter",
    ("lstmviz.analysis.compare", "lstmviz.plots.export.compare_figure"):
        "Comparison.plot() draws it",
    ("lstmviz.plots.export.compare_figure", "lstmviz.notebook"):
        "Comparison.plot()'s inline figure",
}
# Modules outside engine/ that import Keras inside a function, and why: reading a model the
# user hands over (Keras is imported already) or rebuilding a file's layer for model mode.
LAZY_KERAS = {
    "lstmviz.weights.live.keras_live": "a live keras.Model's weights, as save_weights walks them",
    "lstmviz.weights.live.keras_rebuild": "a file's layer rebuilt as a keras.Model (model mode)",
    "lstmviz.weights.model_files": "load_model(a keras.Model object): its config and weights",
}


def floor_of(module: str) -> int | None:
    """The floor of an lstmviz module name (None when its folder has no floor yet)."""
    parts = module.split(".")
    return FLOORS.get(parts[1] if len(parts) > 1 else "__init__")


def floor_problems(root: Path = ROOT) -> tuple[list[str], set[tuple[str, str]]]:
    """What breaks the floors under root/lstmviz, one line each, and the UPWARD imports seen.

    A module in a folder without a floor; an import of a module on a higher floor (anywhere,
    unless it is in UPWARD and inside a function); Qt imported below plots/; TensorFlow, Keras
    or tf_keras imported outside engine/, torch/ and lstmviz.keras (Keras inside a function of
    a LAZY_KERAS module aside)."""
    problems, upward = [], set()
    for path in sorted((root / "lstmviz").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        relative = path.relative_to(root).as_posix()
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        floor = floor_of(name)
        if floor is None:
            problems.append(f"{relative}: its folder has no floor in FLOORS")
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        folder = parts[1] if len(parts) > 1 else "__init__"
        for base, names, lazy in import_statements(path, package):
            top = base.split(".")[0]
            if top in QT and floor < FLOORS["plots"]:
                problems.append(f"{relative}: imports {base} below plots/")
            if top in TENSORFLOW and folder not in MAY_IMPORT_TENSORFLOW and not (
                lazy and top == "keras" and name in LAZY_KERAS
            ):
                problems.append(f"{relative}: imports {base} outside engine/, torch/, keras.py")
            if top != "lstmviz":
                continue
            targets = [base] if base != "lstmviz" else [
                f"lstmviz.{n}" if n in FLOORS else "lstmviz" for n in names
            ]
            for target in targets:
                above = floor_of(target)
                if above is None or above <= floor:
                    continue
                if lazy and (name, target) in UPWARD:
                    upward.add((name, target))
                else:
                    problems.append(f"{relative}: imports {target} (floor {above}) from floor "
                                    f"{floor}" + ("" if lazy else " when imported"))
    return problems, upward


def test_every_module_imports_only_from_its_floor_or_below():
    problems, upward = floor_problems()
    assert problems == []
    assert upward == set(UPWARD), "UPWARD lists an import that is gone"


def test_the_floor_check_sees_qt_and_tensorflow_where_they_are():
    """The check reads real imports: plots/ imports pyqtgraph and engine/ TensorFlow (so the
    two rules above are not met by reading nothing); and every folder of lstmviz has a floor."""
    for folder, module in (("plots", "pyqtgraph"), ("engine", "tensorflow")):
        tops = {
            base.split(".")[0]
            for path in ROOT.glob(f"lstmviz/{folder}/*.py")
            for base, _, _ in import_statements(path, "")
        }
        assert module in tops, folder
    folders = {p.name for p in (ROOT / "lstmviz").iterdir() if (p / "__init__.py").exists()}
    assert folders <= set(FLOORS)


def test_the_floor_check_fails_on_a_module_that_breaks_a_floor(tmp_path):
    cases = {
        "core/qt.py": "import pyqtgraph as pg\n",
        "io/up.py": "from lstmviz.plots import figure\n",
        "io/relative_up.py": "from ..gui import worker\n",
        "io/trace.py": "def f():\n    from lstmviz.notebook.html import trace_html\n",
        "io/recording.py": "from lstmviz.notebook.html import recording_html\n",
        "analysis/tf.py": "def f():\n    import tensorflow as tf\n",
        "weights/live/keras_live.py": "import keras\n",  # LAZY_KERAS: inside a function only
        "weights/live/keras_rebuild.py": "def f():\n    import keras\n",
        "gui/keras_here.py": "from keras import ops\n",
        "plots/fine.py": "import pyqtgraph\nfrom lstmviz.core import errors\nfrom ..io import x\n",
        "engine/fine.py": "import tensorflow as tf\nfrom lstmviz import __version__, weights\n",
        "newfloor/x.py": "",
    }
    for name, text in cases.items():
        (tmp_path / "lstmviz" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "lstmviz" / name).write_text(text)
    problems, upward = floor_problems(tmp_path)
    assert {line.split(":")[0].removeprefix("lstmviz/") for line in problems} == {
        "core/qt.py", "io/up.py", "io/relative_up.py", "io/recording.py", "analysis/tf.py",
        "gui/keras_here.py", "newfloor/x.py", "weights/live/keras_live.py",
    }
    assert upward == {("lstmviz.io.trace", "lstmviz.notebook.html")}


# ---- the rooms: the subfolders' rules ---------------------------------------------------------

# Rooms whose modules import neither TensorFlow (Keras) nor Qt when imported, with all they
# import: the window's process imports the computing process's modules; a run's problem, its
# tasks and weight sources are read before TensorFlow loads (the CLI's and the dock's checks).
NO_TENSORFLOW_AT_IMPORT = ("engine/process", "engine/problem")
MAX_SOURCES = 12  # .py, .cc and .h files in one folder
# Folders that still hold more (issue 48: to be split into rooms), and how many at most.
NOT_YET_SPLIT: dict[str, int] = {}
README_BYTES = 25_000


def test_the_process_and_problem_rooms_import_no_tensorflow_when_imported():
    import subprocess
    import sys

    names, found = [], []
    for room in NO_TENSORFLOW_AT_IMPORT:
        for path in sorted((PACKAGE / room).glob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            names.append(name.removesuffix(".__init__"))
            package = name.removesuffix(".__init__") if path.name == "__init__.py" else (
                name.rpartition(".")[0])  # fmt: skip
            found += [f"{name}: {base}" for base, _, lazy in import_statements(path, package)
                      if not lazy and base.split(".")[0] in (*TENSORFLOW, *QT)]  # fmt: skip
    assert found == []
    assert len(names) >= 6, names  # the check reads the rooms' modules
    heavy = (*TENSORFLOW, *QT)
    code = f"import sys, {', '.join(names)}; "
    code += f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout.strip() == "[]", (run.stdout, run.stderr)


def source_counts(root: Path = ROOT) -> dict[str, int]:
    """Each folder of root/lstmviz (itself included) → how many .py, .cc and .h files it holds."""
    folders = [root / "lstmviz", *(p for p in (root / "lstmviz").rglob("*") if p.is_dir())]
    counts = {
        folder.relative_to(root).as_posix(): sum(
            1 for p in folder.iterdir() if p.is_file() and p.suffix in (".py", ".cc", ".h")
        )
        for folder in folders
    }
    return {folder: n for folder, n in counts.items() if n}


def test_no_folder_holds_more_than_12_source_files():
    counts = source_counts()
    assert counts["lstmviz/engine/native/src"] >= 5  # the count sees the kernels' sources
    over = {folder: n for folder, n in counts.items() if n > MAX_SOURCES}
    assert {f: n for f, n in over.items() if n > NOT_YET_SPLIT.get(f, MAX_SOURCES)} == {}
    assert set(NOT_YET_SPLIT) <= set(over), "a folder was split: drop it from NOT_YET_SPLIT"


def test_the_readme_stays_short():
    assert (ROOT / "README.md").stat().st_size <= README_BYTES
