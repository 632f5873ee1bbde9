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
