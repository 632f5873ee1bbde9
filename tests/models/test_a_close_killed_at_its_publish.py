"""A close whose publish failed or was killed publishes on retry (issue #28 item 5): the ledger
committed the close, readers, reports and FOCUS still see the week open; ``close-week`` again
publishes it instead of answering "already closed"."""

import csv
import io
import os
import subprocess
import sys
from datetime import date, datetime, time, timedelta
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from models.build import build_chargeback
from models.runner import ensure_schema, publish_snapshot

ROOT = Path(__file__).resolve().parents[2]
MONDAY = date(2026, 1, 5)  # 2026-W02, long ended
WEEK = "2026-W02"

KILLED = """
import os, sys
import models.lake_serving
from gpuledger.cli import main

def die(*args, **kwargs):
    os._exit(9)  # as kill -9 at the serving copy: the close is committed, nothing cleans up

models.lake_serving.copy_serving = die
main(["--db", sys.argv[1], "close-week", sys.argv[2], "--by", "finance"])
"""


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    """A ledger with two jobs in 2026-W02, built and published (the week open)."""
    db = tmp_path / "ledger.duckdb"
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.50, 'EUR')")
        for n, (day, seconds) in enumerate([(MONDAY, 7200), (MONDAY + timedelta(days=2), 3600)]):
            start = datetime.combine(day, time(8))
            con.execute(
                "INSERT INTO allocations (day, domain, cluster, source_key, node, gpu_model, "
                "gpus, start_ts, end_ts, gpu_seconds, qos, person, team, cost_centre, outcome) "
                "VALUES (?, 'slurm', 'c', ?, 'n1', 'a100', 1, ?, ? + to_seconds(?), ?, "
                "'normal', 'ann', 'team', 'CC-1', 'completed')",
                [day, f"j{n}", start, start, seconds, seconds])
        build_chargeback(con, MONDAY, MONDAY + timedelta(days=6))
        publish_snapshot(con, db)
    return db


def _served(db: Path, sql: str, capsys) -> list[list[str]]:
    capsys.readouterr()
    assert main(["--db", str(db), "sql", sql]) == 0
    return list(csv.reader(io.StringIO(capsys.readouterr().out)))[1:]


def _fails(*args, **kwargs):
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("how", ["failed", "killed"])
def test_a_close_whose_publish_did_not_complete_publishes_on_retry(
        ledger: Path, capsys, monkeypatch: pytest.MonkeyPatch, how: str):
    closes = f"SELECT period, revision, closed_by FROM closed_periods WHERE period = '{WEEK}'"
    if how == "failed":
        with monkeypatch.context() as m:
            m.setattr("models.lake_serving.copy_serving", _fails)
            assert main(["--db", str(ledger), "close-week", WEEK, "--by", "finance"]) == 1
        assert "the ledger was updated but not published" in capsys.readouterr().err
    else:
        done = subprocess.run([sys.executable, "-c", KILLED, str(ledger), WEEK], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)},
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 9, done.stderr
    with duckdb.connect(str(ledger), read_only=True) as con:  # the ledger has the close
        assert con.execute(closes).fetchall() == [(WEEK, 1, "finance")]
    assert _served(ledger, closes, capsys) == []  # readers do not
    assert main(["--db", str(ledger), "close-week", WEEK]) == 0  # was: "already closed"
    err = capsys.readouterr().err
    assert f"week {WEEK} closed" in err
    assert "published now" in err
    assert _served(ledger, closes, capsys) == [[WEEK, "1", "finance"]]
    assert _served(ledger, "SELECT count(*) FROM frozen_invoice_lines", capsys) != [["0"]]
    # once served, a close of a closed week is refused as before
    assert main(["--db", str(ledger), "close-week", WEEK]) == 1
    assert f"expected an open week to close, found {WEEK} closed" in capsys.readouterr().err
