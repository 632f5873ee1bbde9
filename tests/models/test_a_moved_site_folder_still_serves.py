"""A site folder moved whole keeps serving (issue #28 item 5; docs/site-file.md says it can be
moved): lake locations are relative to the ledger, so after ``mv site site2`` every table reads
through every reader entry point (``read_snapshot``, ``gpuledger sql``, the dashboards' query
layer, the Hive layout Spark and Trino read, the ``duckdb`` CLI), before any publish at the new
place and after one."""

import csv
import io
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models.lake import LAKE_TABLES, lake_root
from models.lake_serving import LAKE_VARIABLE
from models.runner import read_snapshot, snapshot_path
from tests.helpers import TINY_WORLD
from tests.models.lake_helpers import lake_differences

DUCKDB_CLI = Path(sys.executable).with_name("duckdb")


def _tables(db: Path) -> list[str]:
    with read_snapshot(db) as con:
        return [r[0] for r in con.execute(
            "SELECT DISTINCT table_name FROM information_schema.tables WHERE table_catalog = "
            "current_database() AND table_schema = 'main' ORDER BY ALL").fetchall()]


def _counting(tables: list[str]) -> str:
    """One query: every table's row count and a checksum of its rows."""
    return " UNION ALL ".join(
        f"SELECT '{t}' AS t, count(*) AS n, coalesce(sum(hash(x)), 0)::VARCHAR AS h "
        f'FROM "{t}" AS x' for t in tables) + " ORDER BY t"


def _snapshot_reader(db: Path, sql: str) -> list[tuple]:
    with read_snapshot(db) as con:
        return [tuple(str(v) for v in r) for r in con.execute(sql).fetchall()]


def _sql_command(db: Path, sql: str, capsys) -> list[tuple]:
    capsys.readouterr()
    assert main(["--db", str(db), "sql", sql]) == 0, capsys.readouterr().err
    return [tuple(r) for r in list(csv.reader(io.StringIO(capsys.readouterr().out)))[1:]]


def _dashboards(db: Path, sql: str, monkeypatch) -> list[tuple]:
    import streamlit as st

    from dashboards import data

    monkeypatch.setenv("GPULEDGER_DB", str(db))
    st.cache_data.clear()
    return [tuple(str(v) for v in r) for r in data.query(sql).rows()]


def _unconfined(db: Path, sql: str, lake: Path | None = None) -> list[tuple]:
    """The ``duckdb`` CLI's way: the snapshot opened as it is (its views read the files)."""
    with duckdb.connect(str(snapshot_path(db)), read_only=True) as con:
        if lake is not None:
            con.execute(f"SET VARIABLE {LAKE_VARIABLE} = ?", [str(lake)])
        return [tuple(str(v) for v in r) for r in con.execute(sql).fetchall()]


@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], list[tuple]]:
    """A tiny world's site folder, built and published, then moved whole: (ledger at the new
    place, its tables, what every table held before the move)."""
    base = tmp_path_factory.mktemp("sites")
    db = base / "site" / "data" / "gpuledger.duckdb"
    assert main(["--db", str(db), "load-world", str(TINY_WORLD)]) == 0
    assert main(["--db", str(db), "build"]) == 0
    tables = _tables(db)
    assert {t.name for t in LAKE_TABLES} <= set(tables)
    held = _snapshot_reader(db, _counting(tables))
    lake_rows = {t: int(n) for t, n, _ in held if t in {x.name for x in LAKE_TABLES}}
    assert lake_rows["gpu_usage_hourly"] > 0, lake_rows  # the lake serves rows
    (base / "site").rename(base / "site2")
    assert not db.exists()
    return base / "site2" / "data" / "gpuledger.duckdb", tables, held


def test_every_reader_reads_every_table_after_the_move(moved, capsys, monkeypatch):
    db, tables, held = moved
    sql = _counting(tables)
    assert _snapshot_reader(db, "SELECT count(*) FROM allocations")[0][0] != "0"
    assert _snapshot_reader(db, sql) == held  # read_snapshot: reports, FOCUS export, alerts
    assert _sql_command(db, sql, capsys) == held  # gpuledger sql
    assert _dashboards(db, sql, monkeypatch) == held  # the dashboards' query layer
    # the small tables are stored in the snapshot, the lake tables' views take the lake's folder
    small = _counting([t for t in tables if t not in {x.name for x in LAKE_TABLES}])
    assert _unconfined(db, small) == [r for r in held if r[0] in small]
    assert _unconfined(db, sql, lake_root(db)) == held
    # the Hive layout (what Spark, Trino and pyarrow read) and the snapshot equal the ledger
    for table, found in lake_differences(db).items():
        assert (found["snapshot"], found["duckdb_hive"], found["pyarrow_hive"]) == (0, 0, 0), table


def test_the_duckdb_cli_reads_the_moved_lake(moved):
    db, _, held = moved
    if not DUCKDB_CLI.is_file():
        pytest.skip(f"no duckdb CLI at {DUCKDB_CLI} (scripts/bootstrap-venv.sh installs it)")
    lake = str(lake_root(db)).replace("'", "''")
    done = subprocess.run(
        [str(DUCKDB_CLI), "-readonly", "-csv", "-noheader", str(snapshot_path(db)),
         "-c", f"SET VARIABLE {LAKE_VARIABLE} = '{lake}'",
         "-c", "SELECT count(*) FROM gpu_usage_hourly"],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [n for t, n, _ in held if t == "gpu_usage_hourly"]


def test_a_publish_at_the_new_place_serves_every_reader_as_before(moved, capsys):
    db, tables, held = moved
    assert main(["--db", str(db), "build"]) == 0
    # lake_partitions: its files and locations are new; built_days: when the days were built
    new = ("lake_partitions", "built_days")
    same = [t for t in tables if t not in new]
    sql, expected = _counting(same), [r for r in held if r[0] not in new]
    assert _snapshot_reader(db, sql) == expected
    assert _unconfined(db, sql) == expected  # the views name the new place now
    with duckdb.connect(str(snapshot_path(db)), read_only=True) as con:
        locations = con.execute("SELECT DISTINCT location FROM lake_partitions").fetchall()
    assert all(loc.startswith(str(lake_root(db).resolve())) for (loc,) in locations)
