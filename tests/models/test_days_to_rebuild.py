"""Late data for days already built (issue #28): a load records the built days whose inputs it
changed (``days_to_rebuild``), and the next build rebuilds them with whatever days it was asked
for, and the days beside them; a run that only ran on marks only the days it ran on into."""

from datetime import date
from pathlib import Path

import pytest

from gpuledger.cli import main
from models.runner import read_snapshot

HEADER = ("JobID|JobIDRaw|JobName|User|UID|Account|Partition|QOS|State|ExitCode|"
          "DerivedExitCode|Submit|Eligible|Start|End|Elapsed|ElapsedRaw|TimelimitRaw|"
          "AllocCPUS|AllocNodes|NodeList|AllocTRES|ReqTRES|Cluster|Reservation|Reason|"
          "Flags|WCKey|AdminComment")
TRES = "billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=16000M,node=1"


def _line(job: str, start: str, end: str | None, elapsed: int) -> str:
    state = "COMPLETED" if end else "RUNNING"
    return "|".join([
        job, job, f"train-{job}", "alice", "20001", "physics", "gpu", "normal", state, "0:0",
        "0:0", start, start, start, end or "Unknown",
        f"{elapsed // 3600:02d}:{elapsed // 60 % 60:02d}:00", str(elapsed), "6000", "8", "1",
        "a100-01", TRES, TRES, "lab", "", "None", "SchedMain", "", ""])


def _import(db: Path, tmp_path: Path, name: str, lines: list[str], as_of: str) -> None:
    dump = tmp_path / name
    dump.write_text("\n".join([HEADER, *lines]) + "\n", encoding="utf-8")
    assert main(["--db", str(db), "import-sacct", str(dump), "--delimiter", "|",
                 "--as-of", as_of]) == 0


def _build(db: Path, *days: str) -> None:
    assert main(["--db", str(db), "build", *(["--start", days[0], "--end", days[1]]
                                             if days else [])]) == 0


def _query(db: Path, sql: str) -> list[tuple]:
    with read_snapshot(db) as con:
        return con.execute(sql).fetchall()


def test_a_run_corrected_late_is_rebuilt_by_the_next_build_of_any_day(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    db = tmp_path / "ledger.duckdb"
    first = [_line("101", "2026-02-02T10:00:00", "2026-02-02T12:00:00", 7200),
             _line("102", "2026-02-05T10:00:00", "2026-02-05T11:00:00", 3600)]
    _import(db, tmp_path, "first.txt", first, "2026-02-06T00:00:00")
    _build(db)
    assert _query(db, "SELECT day FROM built_days ORDER BY day") == [
        (date(2026, 2, d),) for d in (2, 3, 4, 5)]
    # slurmdbd is corrected: job 101 ran two hours longer. The next pull brings it.
    fixed = [_line("101", "2026-02-02T10:00:00", "2026-02-02T14:00:00", 14400), first[1]]
    _import(db, tmp_path, "fixed.txt", fixed, "2026-02-06T00:00:00")
    with read_snapshot(db) as con:  # the import published its marks
        assert con.execute("SELECT day, reason FROM days_to_rebuild").fetchall() == [
            (date(2026, 2, 2), "sacct: a run of the day changed or arrived after the day was "
                               "built")]
    capsys.readouterr()
    _build(db, "2026-02-05", "2026-02-06")  # the daily build of another day
    assert "building 4 day(s) 2026-02-02 .. 2026-02-05" in capsys.readouterr().err
    assert _query(db, "SELECT sum(gpu_seconds) FROM allocations WHERE job_id = '101'") == [
        (2 * 4 * 3600,)]
    assert _query(db, "SELECT count(*) FROM days_to_rebuild") == [(0,)]


def test_a_run_that_only_ran_on_marks_only_the_days_it_ran_into(tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    _import(db, tmp_path, "a.txt", [_line("201", "2026-02-02T06:00:00", None, 0),
                                    _line("202", "2026-02-04T06:00:00", "2026-02-04T07:00:00",
                                          3600)], "2026-02-03T12:00:00")
    _build(db, "2026-02-02", "2026-02-05")
    # pulled again the next days: still running, nothing else changed
    _import(db, tmp_path, "b.txt", [_line("201", "2026-02-02T06:00:00", None, 0)],
            "2026-02-04T12:00:00")
    assert _query(db, "SELECT day FROM days_to_rebuild ORDER BY day") == [
        (date(2026, 2, 3),), (date(2026, 2, 4),)]
    # then it ends: its state changed, every day it ran on is charged to a finished run
    _import(db, tmp_path, "c.txt", [_line("201", "2026-02-02T06:00:00",
                                          "2026-02-04T09:00:00", 183600)],
            "2026-02-05T00:00:00")
    assert _query(db, "SELECT DISTINCT day FROM days_to_rebuild ORDER BY day") == [
        (date(2026, 2, 2),), (date(2026, 2, 3),), (date(2026, 2, 4),)]
    _build(db, "2026-02-04", "2026-02-05")
    assert _query(db, "SELECT day, sum(gpu_seconds) FROM allocations WHERE job_id = '201' "
                      "GROUP BY day ORDER BY day") == [
        (date(2026, 2, 2), 2 * 18 * 3600), (date(2026, 2, 3), 2 * 24 * 3600),
        (date(2026, 2, 4), 2 * 9 * 3600)]
    assert _query(db, "SELECT DISTINCT outcome FROM allocations WHERE job_id = '201'") == [
        ("completed",)]


def test_a_kubernetes_window_read_again_marks_its_built_day(tmp_path: Path):
    from tests.alerts.helpers_world import write_world

    site = write_world(tmp_path / "world")
    db = tmp_path / "world" / "ledger.duckdb"
    assert main(["--config", str(site), "load"]) == 0
    assert main(["--config", str(site), "build"]) == 0
    assert _query(db, "SELECT count(*) FROM days_to_rebuild") == [(0,)]
    # the day's metrics read again (a re-run partition, a backfill that repaired a scrape gap)
    assert main(["--config", str(site), "ingest", "kubernetes", "--openmetrics",
                 str(tmp_path / "world" / "metrics.om"), "--start", "2026-01-12",
                 "--end", "2026-01-13", "--cluster", "hybrid"]) == 0
    assert _query(db, "SELECT day, reason FROM days_to_rebuild") == [
        (date(2026, 1, 12), "kubernetes: a window of the day read again after the day was "
                            "built")]
    assert main(["--config", str(site), "build"]) == 0
    assert _query(db, "SELECT count(*) FROM days_to_rebuild") == [(0,)]
