from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from gpuledger.cli import main
from tests.helpers import TINY_WORLD

APP = str(Path(__file__).resolve().parents[2] / "dashboards" / "app.py")


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(TINY_WORLD)]) == 0
    monkeypatch.setenv("GPULEDGER_DB", str(db))
    return db


def test_overview_shows_the_ledgers_numbers(ledger: Path):
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["GPUs"] == "5"
    assert metrics["Nodes"] == "3"
    assert metrics["Kueue workloads"] == "2"
    assert "Last successful load" in at.caption[0].value


def test_overview_without_a_ledger_says_what_to_run(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GPULEDGER_DB", str(tmp_path / "missing.duckdb"))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert "make demo" in at.warning[0].value
