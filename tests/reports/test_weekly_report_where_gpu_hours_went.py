"""The weekly report shows where every GPU-hour went (docs/accounting.md, "Conservation"): per
pool, each physical GPU-hour of capacity in one state, drawn as a stacked bar and given as a
table and a CSV whose states add up to the capacity and equal the ledger's."""

import csv
from decimal import Decimal
from pathlib import Path

from gpuledger.report.conservation import COLUMNS, CSV
from gpuledger.report.weekly import write_weekly_report
from models.runner import read_snapshot
from tests.reports.conftest import SIM_WEEKS


def test_the_week_shows_each_pools_capacity_in_its_states(sim_db: Path, tmp_path: Path):
    week = SIM_WEEKS[0]
    with read_snapshot(sim_db) as con:
        report = write_weekly_report(con, week, tmp_path)
        ledger = dict(con.execute(
            "SELECT coalesce(pool, 'unknown'), sum(capacity_gpu_seconds) / 3600 "
            "FROM gpu_conservation_hourly WHERE day >= ? AND day < ? GROUP BY ALL",
            [report.week.monday, report.week.end]).fetchall())
    assert CSV in report.files
    with (tmp_path / week / CSV).open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["pool"] for r in rows] == sorted(ledger)
    for row in rows:
        states = sum(Decimal(row[c]) for c in COLUMNS[2:])
        assert abs(states - Decimal(row["capacity_gpu_hours"])) < Decimal("0.00001")
        assert abs(Decimal(row["capacity_gpu_hours"]) - Decimal(str(ledger[row["pool"]]))) \
            < Decimal("0.00001")
    assert sum(Decimal(r["charged_slurm_gpu_hours"]) for r in rows) > 0
    assert sum(Decimal(r["charged_kubernetes_gpu_hours"]) for r in rows) > 0
    page = (tmp_path / week / "summary.html").read_text(encoding="utf-8")
    assert "<h2>Where every GPU-hour went</h2>" in page
    assert "<title>Where every GPU-hour went, by pool</title>" in page
    assert 'id="where-gpu-hours-went"' in page
