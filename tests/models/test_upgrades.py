"""Upgrades (issue #28 item 3, models/migrations.py): ledgers written by earlier commits of this
repository (tests/fixtures/ledgers, how each was made in its README) open, migrate and build
with this release; their closed weeks stay bit for bit (frozen lines, checksums), the invoice
is the same, and this release's tables fill from their data. ``migrate --check`` changes
nothing; an upgrade killed mid-way leaves the old ledger as it was and usable."""

import gzip
import hashlib
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models import load_sql
from models.closing import changed_closes
from models.migrations import MIGRATIONS_TABLE, SCHEMA_VERSION, applied_version
from tests.helpers import FIXTURES

LEDGERS = FIXTURES / "ledgers"
RELEASES = ("adfb65a", "b6510fe")
WEEK = "2026-W49"


def _ledger(tmp_path: Path, release: str) -> Path:
    db = tmp_path / release / "ledger.duckdb"
    db.parent.mkdir(parents=True)
    with gzip.open(LEDGERS / f"{release}-tiny-world.duckdb.gz", "rb") as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return db


def _frozen(db: Path) -> tuple:
    with duckdb.connect(str(db), read_only=True) as con:
        return (con.execute("SELECT * FROM closed_periods ORDER BY ALL").fetchall(),
                con.execute("SELECT * FROM frozen_invoice_lines ORDER BY ALL").fetchall())


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("release", RELEASES)
def test_an_earlier_releases_ledger_upgrades_with_its_closed_weeks_unchanged(
        release: str, tmp_path: Path, capsys):
    db = _ledger(tmp_path, release)
    before = _frozen(db)
    assert [r[0] for r in before[0]] == [WEEK]
    # --check says what would change and changes nothing
    untouched = _sha(db)
    assert main(["--db", str(db), "migrate", "--check"]) == 0
    out = capsys.readouterr().out
    assert f"schema version 0, this release's {SCHEMA_VERSION}" in out
    assert "create table gpu_conservation_gpu_hourly" in out
    assert "built_days: record as built the 1 day(s) the ledger's allocations hold" in out
    assert _sha(db) == untouched
    assert main(["--db", str(db), "migrate"]) == 0
    assert f"schema version {SCHEMA_VERSION}" in capsys.readouterr().out
    assert not list(db.parent.glob("*.pre-migrate-*"))  # the copy goes once it succeeded
    assert _frozen(db) == before  # bit for bit
    with duckdb.connect(str(db), read_only=True) as con:
        assert applied_version(con) == SCHEMA_VERSION
        assert changed_closes(con) == []
        # the days it built are known as built: a later build of a day beside them rebuilds
        # them (docs/accounting.md "Order of arrival")
        assert con.execute("SELECT day FROM built_days").fetchall() == con.execute(
            "SELECT DISTINCT day FROM allocations").fetchall() != []
    # this release builds on the old data: per-GPU conservation of the old days, the closed
    # week still as it was, and conservation holds
    assert main(["--db", str(db), "build"]) == 0
    assert _frozen(db) == before
    with duckdb.connect(str(db), read_only=True) as con:
        assert changed_closes(con) == []
        assert con.execute("SELECT count(*) FROM gpu_conservation_gpu_hourly").fetchone()[0] > 0
        # the physics (the tiny world's Slurm nodes are not in its nodes file: no_inventory, as
        # on a ledger this release writes from it)
        assert con.execute(
            f"SELECT * FROM ({load_sql('gpu_conservation_hourly_check')}) WHERE problem IN "
            "('states', 'invoice', 'gpu_states', 'gpu_unaccounted')",
            {"first_day": date(2026, 11, 1), "end_day": date(2026, 12, 31),
             "tolerance_s": 600}).fetchall() == []
    # migrating again changes nothing
    assert main(["--db", str(db), "migrate", "--check"]) == 0
    assert "up to date: nothing would change" in capsys.readouterr().out


def test_a_killed_upgrade_leaves_the_old_ledger_usable(tmp_path: Path):
    db = _ledger(tmp_path, "b6510fe")
    before = _frozen(db)
    # the declared-schema migration dies after its first DDL statement, in another process
    script = (
        "import os, sys\n"
        "import duckdb\n"
        "from models import migrations\n"
        "real = migrations.declare\n"
        "def dying(con, tables, views=()):\n"
        "    con.execute(tables[0].ddl())\n"
        "    con.execute('CREATE TABLE half_way (x INTEGER)')\n"
        "    os._exit(9)\n"
        "migrations.declare = dying\n"
        "con = duckdb.connect(sys.argv[1])\n"
        "migrations.migrate(con)\n")
    done = subprocess.run([sys.executable, "-c", script, str(db)], check=False,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 9
    with duckdb.connect(str(db), read_only=True) as con:
        assert applied_version(con) == 0
        names = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    assert "half_way" not in names
    assert MIGRATIONS_TABLE.name not in names
    assert _frozen(db) == before
    kept = list(db.parent.glob("*.pre-migrate-*"))
    assert len(kept) == 1  # the copy made before it began is still there
    assert main(["--db", str(db), "migrate"]) == 0  # and it upgrades when run again
    assert _frozen(db) == before
