"""`gpuledger sql` reads the published snapshot and nothing else (issue #13, item 1)."""

from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models.runner import connect, publish_snapshot, read_snapshot, snapshot_path


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        con.execute("INSERT INTO rate_card (gpu_model, domain, qos, rate_per_gpu_hour, currency) "
                    "VALUES ('a100', 'slurm', 'normal', 2.5, 'EUR')")
        publish_snapshot(con, db)
    return db


def sql(db: Path, query: str, capsys) -> tuple[int, str, str]:
    code = main(["--db", str(db), "sql", query])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_plain_query_answers_csv(ledger: Path, capsys):
    code, out, _ = sql(ledger, "SELECT gpu_model, currency FROM rate_card", capsys)
    assert code == 0
    assert out == "gpu_model,currency\na100,EUR\n"


@pytest.mark.parametrize("query", [
    "COPY (SELECT 1) TO '{snapshot}'",
    "COPY (SELECT 1) TO '{ledger}'",
    "COPY rate_card TO '{tmp}/out.csv'",
    "EXPORT DATABASE '{tmp}/export'",
    "SELECT * FROM read_text('/etc/shadow')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM glob('/etc/*')",
    "ATTACH '{ledger}' AS live",
    "ATTACH '{tmp}/new.duckdb' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "SET threads = 1",
    "PRAGMA threads = 1",
    "INSERT INTO rate_card (gpu_model) VALUES ('x')",
    "DELETE FROM rate_card",
    "DROP TABLE rate_card",
    "CREATE TABLE t AS SELECT 1",
    # aborted the process (rc 134) before it was refused up front (issue #28)
    "CALL enable_logging(storage='file', storage_path='{tmp}/log')",
    "CALL enable_logging()",
    "SELECT 1; SET threads = 1",
])
def test_every_escape_is_refused_and_changes_nothing(ledger: Path, query: str, capsys):
    snapshot = snapshot_path(ledger)
    before = (snapshot.read_bytes(), ledger.read_bytes())
    query = query.format(snapshot=snapshot, ledger=ledger, tmp=ledger.parent)
    code, out, err = sql(ledger, query, capsys)
    assert code == 1, (query, out)
    assert err.startswith("gpuledger sql: error: expected a read-only query")
    assert err.count("\n") == 1, err  # one line, whatever DuckDB's message looked like
    assert "Traceback" not in err
    assert (snapshot.read_bytes(), ledger.read_bytes()) == before
    assert sorted(p.name for p in ledger.parent.iterdir()) == [
        "ledger.duckdb", "ledger.lake", "ledger.serving.duckdb"]  # the lake: docs/storage.md


def test_the_snapshot_still_answers_after_a_refused_escape(ledger: Path, capsys):
    sql(ledger, f"COPY (SELECT 1) TO '{snapshot_path(ledger)}'", capsys)
    code, out, _ = sql(ledger, "SELECT count(*) AS n FROM rate_card", capsys)
    assert (code, out) == (0, "n\n1\n")


def test_readers_of_the_library_are_confined_too(ledger: Path):
    with read_snapshot(ledger) as con, pytest.raises(duckdb.PermissionException):
        con.execute("SELECT * FROM read_text('/etc/hostname')")
