"""sample_data/ is exactly what the command in its README writes (regenerate it when the
simulator changes)."""

import hashlib
import json
import shlex
from pathlib import Path

import pytest

from simulator.cli_args import main

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_sample_data_matches_its_command(tmp_path: Path):
    world = SAMPLE / "world.json"
    if not world.is_file():
        pytest.skip("sample_data/ has not been generated")
    command = json.loads(world.read_text(encoding="utf-8"))["command"]
    readme = (SAMPLE / "README.md").read_text(encoding="utf-8")
    documented = next(line for line in readme.splitlines()
                      if line.startswith("python -m simulator "))
    args = shlex.split(documented)[3:]
    out = args.index("--out")
    assert args[out + 1] == "sample_data"
    args[out + 1] = str(tmp_path / "sample_data")
    assert main([*args, "--quiet"]) == 0
    assert json.loads((tmp_path / "sample_data" / "world.json").read_text(
        encoding="utf-8"))["command"] == command
    ours = {str(p.relative_to(SAMPLE)) for p in SAMPLE.rglob("*") if p.is_file()} - {"README.md"}
    fresh = {str(p.relative_to(tmp_path / "sample_data"))
             for p in (tmp_path / "sample_data").rglob("*") if p.is_file()}
    assert ours == fresh
    for name in sorted(ours):
        assert _digest(SAMPLE / name) == _digest(tmp_path / "sample_data" / name), (
            f"sample_data/{name} is stale: rerun the command in sample_data/README.md")
