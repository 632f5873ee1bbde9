"""A ledger of the committed sample world, built once per test session for the page tests."""

from pathlib import Path

import pytest

from gpuledger.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"


@pytest.fixture(scope="session")
def sample_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The writer's ledger file; the pages read its published snapshot."""
    db = tmp_path_factory.mktemp("sample_ledger") / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(SAMPLE)]) == 0
    assert main(["--db", str(db), "build"]) == 0
    return db
