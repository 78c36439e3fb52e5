"""The package layering the design relies on (docs/how-to/add-a-family.md): engine -> core <- families:
``supernets`` imports only ``nas.core`` from the engine, the engine never imports ``supernets`` (the
registry in ``nas.core.families`` loads the families' entry points), ``nas.core`` imports nothing else
of the project, nothing outside ``supernets/`` names a family, and no project import hides inside a
function to dodge a cycle."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path):
    """(module imported, inside a function?) for every project import of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside |= {id(n) for n in ast.walk(node) if n is not node}
    for node in ast.walk(tree):
        names = (
            [node.module]
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
            else [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        for name in names:
            if name.split(".")[0] in ("nas", "supernets"):
                yield name, id(node) in inside


def test_supernets_import_only_the_core_and_the_core_imports_nothing_else():
    for path in (ROOT / "supernets").glob("*.py"):
        bad = [m for m, _ in _imports(path) if m.startswith("nas") and not m.startswith("nas.core")]
        assert not bad, f"{path.name} imports {bad}"
    for path in (ROOT / "nas" / "core").glob("*.py"):
        bad = [m for m, _ in _imports(path) if not m.startswith("nas.core")]
        assert not bad, f"nas/core/{path.name} imports {bad}"


def test_the_engine_reaches_families_through_the_core_registry_only():
    # engine -> core <- families: nas.core.families loads the families declared as entry points
    for path in (ROOT / "nas").rglob("*.py"):
        bad = [m for m, _ in _imports(path) if m.split(".")[0] == "supernets"]
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_the_built_in_families_are_declared_as_entry_points_and_load_lazily():
    code = (
        "import sys; from nas.core.families import family_names, get_family; names = family_names(); "
        "assert 'torch' not in sys.modules and not any(m.startswith('supernets.') for m in sys.modules); "
        "print(','.join(names)); print(type(get_family('swiftformer')).__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["efficientformer,efficientformerv2,swiftformer", "supernets.swiftformer"]


def test_no_project_import_inside_a_function_outside_the_cli():
    # The CLI imports the library when a subcommand runs, so `nas --help` stays light; nothing else may.
    for path in [*(ROOT / "nas").rglob("*.py"), *(ROOT / "supernets").glob("*.py")]:
        if "cli" in path.relative_to(ROOT).parts:
            continue
        hidden = [m for m, inside in _imports(path) if inside]
        assert not hidden, f"{path.relative_to(ROOT)} imports {hidden} inside a function"


def _family_modules() -> dict[str, set[str]]:
    """Each registered family's module (``supernets.<name>``) -> the classes it defines."""
    import importlib.util

    import supernets

    modules = {type(supernets.get_family(name)).__module__ for name in supernets.family_names()}
    return {
        module: {
            node.name
            for node in ast.parse(Path(importlib.util.find_spec(module).origin).read_text(encoding="utf-8")).body
            if isinstance(node, ast.ClassDef)
        }
        for module in modules
    }


def test_no_family_is_named_outside_supernets():
    import supernets

    families = set(supernets.family_names())
    modules = _family_modules()
    assert len(modules) == len(families) and all(modules.values())  # the guard below has something to guard
    classes = set().union(*modules.values())
    for path in (ROOT / "nas").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and str(n.value) in families]
        assert not strings, f"{path.relative_to(ROOT)} compares against family names {strings}"
        # the engine reaches a family through the registry only: never its module, never its classes
        imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        imported += [
            name
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module
            for name in (n.module, *(f"{n.module}.{a.name}" for a in n.names))
        ]
        imported = [m for m in imported if any(m == f or m.startswith(f + ".") for f in modules)]
        assert not imported, f"{path.relative_to(ROOT)} imports the family modules {imported}"
        named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        named |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        named |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not named & classes, f"{path.relative_to(ROOT)} names family classes {sorted(named & classes)}"


def test_importing_supernets_first_or_the_engine_first_both_work():
    procs = [  # three fresh interpreters, started together
        subprocess.Popen(
            [sys.executable, "-c", f"import {first}; import supernets; print(','.join(supernets.family_names()))"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for first in ("supernets", "nas.latency.table", "nas.core.arch")
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
        assert out.strip() == "efficientformer,efficientformerv2,swiftformer"


def _module_graph() -> dict[str, set[str]]:
    """Project module -> project modules it imports at run time (``if TYPE_CHECKING:`` left out)."""
    modules = {}
    for path in [*(ROOT / "nas").rglob("*.py"), *(ROOT / "supernets").glob("*.py")]:
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped |= {id(n) for n in ast.walk(node)}
        deps = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [resolve(f"{node.module}.{a.name}") for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [resolve(a.name) for a in node.names]
            else:
                continue
            deps |= {t for t in targets if t and t != name}
        graph[name] = deps
    return graph


def test_no_import_cycles_between_project_modules():
    graph = _module_graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(dep) :] + [module, dep]))
            if dep not in state:
                visit(dep, path + [module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
