"""The simulator is its own top-level package (``python -m simulator``): no production module
imports it, and the ``gpuledger`` command has no ``simulate`` subcommand."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from gpuledger.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = ("gpuledger", "connectors", "models", "pipelines", "dashboards")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_production_module_imports_the_simulator():
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for package in PRODUCTION for path in sorted((ROOT / package).rglob("*.py"))
        for name in _imports(path)
        if name == "simulator" or name.startswith(("simulator.", "gpuledger.simulate"))
    ]
    assert offenders == []
    assert not (ROOT / "gpuledger" / "simulate").exists()


def test_the_product_command_has_no_simulate_subcommand(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["simulate", "--out", "x"])
    assert exc.value.code == 2
    assert "invalid choice: 'simulate'" in capsys.readouterr().err


def test_python_m_simulator_writes_a_world(tmp_path: Path):
    out = tmp_path / "world"
    done = subprocess.run(
        [sys.executable, "-m", "simulator", "--seed", "2", "--days", "1", "--nodes",
         "hpc=1,k8s=1,shared=1", "--step", "600", "--no-metrics", "--quiet", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (out / "world.json").is_file()
    assert (out / "gpuledger.toml").is_file()
