"""A build is one unit for readers; a failed publish leaves nothing behind (issue #13, item 3)."""

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models import build
from models.runner import snapshot_path
from tests.helpers import INVOICE_DIFFERS_FROM_LEDGER, copy_tiny_world

INVARIANT = INVOICE_DIFFERS_FROM_LEDGER


def cli(*args: str) -> int:
    return main(list(args))


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path]:
    world = copy_tiny_world(tmp_path)
    db = tmp_path / "ledger.duckdb"
    assert cli("--db", str(db), "load-world", str(world)) == 0
    assert cli("--db", str(db), "build") == 0
    return db, world


def snapshot_query(db: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(snapshot_path(db)), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_the_published_snapshot_has_invoice_hours_equal_to_ledger_hours(built):
    db, _ = built
    assert snapshot_query(db, "SELECT count(*) FROM chargeback")[0][0] > 0
    assert snapshot_query(db, INVARIANT) == []


def test_a_build_that_dies_midway_is_never_published(built, monkeypatch, capsys):
    db, world = built
    before = snapshot_path(db).read_bytes()

    def dies(*_args, **_kwargs):
        raise KeyboardInterrupt  # what a kill between two steps looks like to the next reader

    monkeypatch.setattr(build, "build_chargeback", dies)
    with pytest.raises(KeyboardInterrupt):
        cli("--db", str(db), "build")
    monkeypatch.undo()
    capsys.readouterr()
    # any later command that publishes (the example: import-workloads) is refused
    code = cli("--db", str(db), "import-workloads", str(world / "kueue" / "workloads.json"))
    err = capsys.readouterr().err
    assert code == 1
    assert "expected a complete ledger to publish" in err
    assert "run `gpuledger build`" in err
    assert snapshot_path(db).read_bytes() == before
    # the next build repairs it and publishes
    assert cli("--db", str(db), "build") == 0
    assert snapshot_query(db, INVARIANT) == []
    assert snapshot_query(db, "SELECT count(*) FROM builds_unfinished") == [(0,)]


def test_a_failed_publish_removes_its_copy_and_keeps_the_snapshot(built, monkeypatch):
    db, _ = built
    before = snapshot_path(db).read_bytes()

    def full_disk(self, target):
        raise OSError(28, "No space left on device", str(target))

    monkeypatch.setattr(Path, "replace", full_disk)
    assert cli("--db", str(db), "build") == 1
    monkeypatch.undo()
    assert snapshot_path(db).read_bytes() == before
    assert not [p.name for p in db.parent.iterdir() if ".tmp." in p.name]


def test_copies_left_by_killed_publishes_are_removed_at_the_next_publish(built):
    db, _ = built
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = int(dead.stdout)
    stale = db.parent / f".{snapshot_path(db).stem}.{pid}.deadbeef.tmp.duckdb"
    stale.write_bytes(b"half a copy")
    (db.parent / (stale.name + ".wal")).write_bytes(b"wal")
    mine = db.parent / f".{snapshot_path(db).stem}.{os.getpid()}.cafebabe.tmp.duckdb"
    mine.write_bytes(b"a copy in progress in this process")
    assert cli("--db", str(db), "build") == 0
    left = sorted(p.name for p in db.parent.iterdir() if ".tmp." in p.name)
    assert left == [mine.name]


def test_a_second_writer_gets_one_line_naming_the_holder(built, capsys):
    db, world = built
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('ready', flush=True);"
         " time.sleep(60)", str(db)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        code = cli("--db", str(db), "import-workloads", str(world / "kueue" / "workloads.json"))
        err = capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert code == 1
    assert err.count("\n") == 1, err
    assert f"another process holds the ledger {db} for writing (pid {holder.pid})" in err
    assert "Traceback" not in err


def test_a_ledger_path_with_a_quote_works(tmp_path: Path):
    world = copy_tiny_world(tmp_path)
    folder = tmp_path / "it's here"
    db = folder / "ledger.duckdb"
    assert cli("--db", str(db), "load-world", str(world)) == 0
    assert cli("--db", str(db), "build") == 0
    assert snapshot_query(db, INVARIANT) == []
