"""The type checker runs in the suite (CI calls `make test`): mypy with the project's settings
(pyproject.toml ``[tool.mypy]``: strict on the packages checked so far, unused ignores reported)
finds nothing."""

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_type_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(ROOT)  # the settings' `files` are relative to the project
    stdout, stderr, status = api.run([
        "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"),
        "--no-error-summary"])
    assert (status, stdout, stderr) == (0, "", ""), (
        f"expected no type error, found:\n{stdout}{stderr}")
