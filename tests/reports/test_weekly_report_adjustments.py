"""The weekly report of a closed week shows its frozen lines; the next open week's report shows
the adjustments late data caused, in their own section and CSV (models/closing.py)."""

import csv
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path

import duckdb

from gpuledger.report.weekly import write_weekly_report
from models.build import build_chargeback
from models.close_week import close_week
from models.runner import ensure_schema


def _alloc(con, day: date, key: str, seconds: int) -> None:
    start = datetime.combine(day, time(8))
    con.execute("DELETE FROM allocations WHERE source_key = ?", [key])
    con.execute(
        "INSERT INTO allocations (day, domain, cluster, source_key, node, gpu_model, gpus, "
        "start_ts, end_ts, gpu_seconds, person, team, cost_centre) VALUES (?, 'slurm', 'c', ?, "
        "'n1', 'a100', 1, ?, ? + to_seconds(?), ?, 'ann', 't1', 'CC-1')",
        [day, key, start, start, seconds, seconds])


def test_closed_week_and_its_adjustments_in_the_reports(tmp_path: Path):
    con = duckdb.connect()
    ensure_schema(con)
    con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.00, 'EUR')")
    _alloc(con, date(2026, 1, 6), "j1", 3600)
    _alloc(con, date(2026, 1, 13), "j2", 1800)
    build_chargeback(con, date(2026, 1, 5), date(2026, 1, 18))
    close_week(con, "2026-W02", closed_by="finance", run_id="close-1", now=datetime(2026, 2, 1))
    _alloc(con, date(2026, 1, 6), "j1", 5400)  # sacct now says j1 ran 30 minutes longer
    build_chargeback(con, date(2026, 1, 6), date(2026, 1, 6), run="rerun-7")

    closed = write_weekly_report(con, "2026-W02", tmp_path)
    assert closed.closed
    assert closed.adjustments == 0
    assert closed.gpu_seconds == 3600  # as issued, not the ledger's 5,400
    summary = (closed.folder / "summary.html").read_text(encoding="utf-8")
    assert 'id="closed"' in summary
    assert "by finance" in summary
    assert 'id="no-adjustments"' in summary

    carrying = write_weekly_report(con, "2026-W03", tmp_path)
    assert (carrying.closed, carrying.adjustments, carrying.gpu_seconds) == (False, 1, 1800)
    with (carrying.folder / "adjustments.csv").open(encoding="utf-8") as fh:
        [row] = list(csv.DictReader(fh))
    assert (row["period"], row["original_period"], row["cost_centre"], row["gpu_seconds"]) == (
        "2026-W03", "2026-W02", "CC-1", "1800")
    assert Decimal(row["amount"]) == Decimal("1.00")
    assert (row["reason"], row["run_id"]) == ("late data for closed week 2026-W02", "rerun-7")
    summary = (carrying.folder / "summary.html").read_text(encoding="utf-8")
    assert 'id="adjustments"' in summary
    assert "late data for closed week 2026-W02" in summary
    page = next(carrying.folder.glob("cost-centre-*.html")).read_text(encoding="utf-8")
    assert 'id="adjustments"' in page
    # the invoice lines CSV stays the week's own lines
    with (carrying.folder / "invoice-lines.csv").open(encoding="utf-8") as fh:
        assert [r["gpu_seconds"] for r in csv.DictReader(fh)] == ["1800"]
