"""The dependency rule of docs/contracts.md, checked on every import statement (function-level
ones too): dashboards -> models <- pipelines / gpuledger -> connectors. Connectors know no storage,
no Dagster and no Streamlit; models know neither the application nor the pipelines; nothing
imports the dashboards."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> the top-level names its modules must not import
FORBIDDEN = {
    "connectors": {"gpuledger", "models", "pipelines", "dashboards", "dagster", "streamlit"},
    "models": {"gpuledger", "pipelines", "dashboards", "dagster", "streamlit"},
    "gpuledger": {"pipelines", "dashboards", "streamlit"},
    "pipelines": {"dashboards", "streamlit"},
    "dashboards": {"pipelines", "dagster"},
}


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_import_against_the_layers(package: str):
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in sorted(_imported_roots(path) & FORBIDDEN[package])
    ]
    assert offenders == [], "expected no import against the layer rule, found:\n" + "\n".join(
        offenders)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under ``if TYPE_CHECKING:`` (annotations only: not loaded)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if (isinstance(child, ast.If) and isinstance(child.test, ast.Name)
                    and child.test.id == "TYPE_CHECKING"):
                todo.extend(child.orelse)
                continue
            todo.append(child)
    return out


def _module_graph() -> dict[str, set[str]]:
    """module -> the project modules it loads (function-level imports too; not the imports
    under ``if TYPE_CHECKING:``, which only annotations use)."""
    modules: dict[str, Path] = {}
    for package in FORBIDDEN:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        targets: set[str] = set()
        for node in _runtime_nodes(tree):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
                targets.add(node.module)
        found = set()
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
        graph[name] = found
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[tuple[str, ...]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(tuple(sorted(group)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


# The only import cycle allowed (docs/contracts.md); a new one fails the test.
KNOWN_CYCLES = {
    # the documented Spark guard: pyspark is imported only when engine = "spark"
    ("pipelines.defs.engine", "pipelines.engine_spark"),
}


def test_no_new_import_cycle():
    found = set(_cycles(_module_graph()))
    assert found <= KNOWN_CYCLES, "expected no import cycle beyond the known ones, found:\n" + (
        "\n".join(" <-> ".join(c) for c in sorted(found - KNOWN_CYCLES)))
    assert not any(m.startswith(("models.", "connectors.")) for c in found for m in c)


# Modules still over the size limit; this list only shrinks (issue #29: dashboards/data.py is
# the query layer, whose split must keep one place for the tests to patch `query`).
LONG_MODULES = {"dashboards/data.py"}
MAX_LINES = 500


def test_production_modules_stay_under_500_lines():
    long = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for package in FORBIDDEN for path in (ROOT / package).rglob("*.py")
    }
    over = {name: n for name, n in long.items() if n > MAX_LINES and name not in LONG_MODULES}
    assert over == {}, f"expected modules of at most {MAX_LINES} lines, found {over}"
