"""``gpuledger backup`` / ``restore`` (issue #28 item 4, gpuledger/export/backup.py): the ledger,
its
lake and the report history as one verifiable set, taken under the writer lock (a running
writer is waited for), checked before it is put back, the set it replaces kept aside."""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.export.backup import BackupError, backup, verify
from models.runner import read_snapshot
from tests.helpers import TINY_WORLD

WEEK = "2026-W49"  # the tiny world's day, 2026-11-30, is in it (ended 2026-12-07)


def _state(db: Path) -> tuple:
    with read_snapshot(db) as con:
        return (con.execute("SELECT count(*), sum(physical_gpu_seconds) FROM allocations")
                .fetchone(),
                con.execute("SELECT period, revision, checksum FROM closed_periods "
                            "ORDER BY ALL").fetchall())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny world built, its week closed and reported: (ledger, reports folder)."""
    base = tmp_path_factory.mktemp("backup")
    db = base / "site" / "data" / "gpuledger.duckdb"
    reports = base / "site" / "reports"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GPULEDGER_REPORTS", str(reports))
        assert main(["--db", str(db), "load-world", str(TINY_WORLD)]) == 0
        assert main(["--db", str(db), "build"]) == 0
        assert main(["--db", str(db), "close-week", WEEK, "--by", "finance"]) == 0
        assert main(["--db", str(db), "report", "weekly", "--week", WEEK]) == 0
    assert any(reports.rglob("*.csv"))
    return db, reports


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_restore_gives_back_the_ledger_its_closed_weeks_and_reports(site, tmp_path: Path,
                                                                       monkeypatch, capsys):
    db, reports = site
    monkeypatch.setenv("GPULEDGER_REPORTS", str(reports))
    before = _state(db)
    assert main(["--db", str(db), "backup", str(tmp_path / "b1")]) == 0
    assert "closed week revision(s)" in capsys.readouterr().err
    checked = verify(tmp_path / "b1")
    assert checked.ok, checked.problems
    assert [c[0] for c in checked.manifest["closed_periods"]] == [WEEK]
    # afterwards the week is re-closed and a report file is lost
    assert main(["--db", str(db), "close-week", WEEK, "--reclose", "--reason", "test"]) == 0
    lost = sorted(reports.rglob("*.csv"))[0]
    lost.unlink()
    assert _state(db) != before
    assert main(["--db", str(db), "restore", str(tmp_path / "b1")]) == 0
    assert "moved aside" in capsys.readouterr().err
    assert _state(db) == before  # the closed week as it was, the readers' snapshot republished
    assert lost.is_file()
    kept = sorted(db.parent.glob(f"{db.name}.pre-restore-*"))
    assert len(kept) == 1  # the replaced ledger is kept, not deleted


def test_a_damaged_backup_is_refused_and_changes_nothing(site, tmp_path: Path, monkeypatch,
                                                         capsys):
    db, reports = site
    monkeypatch.setenv("GPULEDGER_REPORTS", str(reports))
    backup(db, reports, tmp_path / "b2")
    damaged = tmp_path / "b2" / "ledger.duckdb"
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))
    live = _sha(db)
    aside = sorted(db.parent.glob(f"{db.name}.pre-restore-*"))
    assert main(["--db", str(db), "restore", "--check", str(tmp_path / "b2")]) == 1
    assert "ledger.duckdb: expected sha256" in capsys.readouterr().err
    assert main(["--db", str(db), "restore", str(tmp_path / "b2")]) == 1
    err = capsys.readouterr().err
    assert "expected a whole backup, found 1 problem(s)" in err
    assert _sha(db) == live
    assert sorted(db.parent.glob(f"{db.name}.pre-restore-*")) == aside  # nothing moved aside
    # a file added to the folder is no part of the backup either
    extra = backup(db, reports, tmp_path / "b4")
    (tmp_path / "b4" / "stray.txt").write_text("x")
    assert "stray.txt: expected no file the manifest does not list" in " ".join(
        verify(tmp_path / "b4").problems)
    assert extra["files"]
    damaged.unlink()  # corrupt on purpose: not a ledger for the session's conservation sweep


def test_a_running_writer_is_waited_for(site, tmp_path: Path):
    db, reports = site
    holder = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
         "print('held', flush=True); time.sleep(3)", str(db)],
        stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(BackupError, match=r"expected the ledger's writer lock within 0.5 s"):
            backup(db, reports, tmp_path / "too-soon", wait_s=0.5)
        assert not (tmp_path / "too-soon").exists()
        manifest = backup(db, reports, tmp_path / "waited", wait_s=30)
    finally:
        holder.wait(timeout=30)
        holder.stdout.close()
    assert manifest["seconds"] >= 1  # it waited for the writer to let go
    assert verify(tmp_path / "waited").ok
