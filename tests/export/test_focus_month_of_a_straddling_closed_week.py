"""A month's FOCUS file takes each day of a closed week that straddles two months from that
week's frozen pieces, in the month the day is in, and carries the corrections of the weeks whose
Monday is in it (docs/focus.md "Months"). A small synthetic ledger; figures computed here."""

import csv
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path

import duckdb

from models.build import build_chargeback
from models.close_week import close_week
from models.runner import ensure_schema
from tests.export.conftest import export

JAN31, FEB01 = date(2026, 1, 31), date(2026, 2, 1)  # Saturday and Sunday of 2026-W05


def _alloc(con, day: date, key: str, seconds: int) -> None:
    start = datetime.combine(day, time(8))
    con.execute("DELETE FROM allocations WHERE source_key = ? AND day = ?", [key, day])
    con.execute(
        "INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
        "gpu_model, gpus, start_ts, end_ts, gpu_seconds, physical_gpu_seconds, qos, person, "
        "team, cost_centre, outcome) VALUES (?, 'slurm', 'c', ?, ?, 'x', 'n1', 'a100', 1, ?, "
        "? + to_seconds(?), ?, ?, 'normal', 'ann', 't', 'CC-1', 'completed')",
        [day, key, key, start, start, seconds, seconds, seconds])


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_straddling_closed_weeks_days_go_to_their_months_as_frozen(tmp_path: Path):
    con = duckdb.connect()
    ensure_schema(con)
    con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.00, 'EUR')")
    _alloc(con, JAN31, "c:1:0", 3600)
    _alloc(con, FEB01, "c:2:0", 7200)
    build_chargeback(con, JAN31, FEB01)
    close_week(con, "2026-W05", now=datetime(2026, 2, 9))
    _alloc(con, FEB01, "c:2:0", 9000)  # late data: 1,800 s more, carried by W06 (Feb 2)
    build_chargeback(con, FEB01, FEB01)
    jan = _rows(export(con, "2026-01", tmp_path / "jan.csv").files[0])
    feb = _rows(export(con, "2026-02", tmp_path / "feb.csv").files[0])
    assert [(r["ResourceId"], r["x_ChargedGpuSeconds"], r["x_Source"]) for r in jan] == [
        ("c:1:0", "3600.000", "frozen")]
    usage = [r for r in feb if r["ChargeClass"] == ""]
    assert [(r["ResourceId"], r["x_ChargedGpuSeconds"], r["x_Source"]) for r in usage] == [
        ("c:2:0", "7200.000", "frozen")]  # as issued with W05, not the ledger's 9,000 s
    [correction] = [r for r in feb if r["ChargeClass"] == "Correction"]
    assert (correction["x_CorrectedPeriod"], Decimal(correction["BilledCost"])) == (
        "2026-W05", Decimal("1.00"))  # 1,800 s at 2.00
    assert correction["ChargePeriodStart"] == "2026-01-26T00:00:00Z"
    assert correction["InvoiceId"] == "gpuledger-2026-W06"  # billed by the open week W06
    assert {r["InvoiceId"] for r in jan + usage} == {"gpuledger-2026-W05-r1"}
