"""A closed week's FOCUS file reproduces what was issued: it is byte for byte the same before and
after late data, the late data appears as FOCUS Correction rows in the next open week (signed,
ChargePeriod = the corrected week) that add up to the adjustment lines, and a month uses the
closed week's frozen rows for its days. A week closed before allocation charges were frozen is
exported at invoice-line grain with a warning."""

import csv
import hashlib
import shutil
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import duckdb

from models.build import build_chargeback
from models.close_week import close_week
from models.closing import changed_closes
from models.runner import ensure_schema
from tests.export.conftest import AFTER, LATE_SECONDS, LateWorld, export


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_closed_weeks_file_is_identical_before_and_after_late_data(late_world: LateWorld):
    assert late_world.week_before.read_bytes() == late_world.week_after.read_bytes()
    with duckdb.connect(str(late_world.db), read_only=True) as con:
        # the ledger did move: the lengthened run is charged 1,001 s more there
        ledger = con.execute(
            "SELECT gpu_seconds FROM allocations WHERE day = ? AND source_key = ? AND node = ?",
            list(late_world.job)).fetchone()[0]
        assert changed_closes(con) == []
    frozen = [r for r in _rows(late_world.week_after) if r["ResourceId"] == late_world.job[1]
              and r["ChargePeriodStart"].startswith(str(late_world.job[0]))]
    assert [r["x_Source"] for r in frozen] == ["frozen"]
    gpus = int(frozen[0]["x_Gpus"])
    assert Decimal(frozen[0]["x_ChargedGpuSeconds"]) == ledger - LATE_SECONDS * gpus


def test_late_data_becomes_correction_rows_that_add_up_to_the_adjustments(
        late_world: LateWorld, tmp_path: Path):
    with duckdb.connect(str(late_world.db), read_only=True) as con:
        adjustments = con.execute(
            "SELECT sum(amount), sum(gpu_seconds), count(*) FROM invoice_adjustments "
            "WHERE period = '2026-W03' AND original_period = '2026-W02'").fetchone()
        path = export(con, "2026-W03", tmp_path / "w03.csv").files[0]
    assert adjustments[2] >= 1
    assert adjustments[0] > 0
    rows = _rows(path)
    corrections = [r for r in rows if r["ChargeClass"] == "Correction"]
    assert len(corrections) == adjustments[2] == len(rows)  # the sample world ends in W02
    for r in corrections:
        assert (r["ChargePeriodStart"], r["ChargePeriodEnd"]) == ("2026-01-05T00:00:00Z",
                                                                 "2026-01-12T00:00:00Z")
        assert (r["BillingPeriodStart"], r["BillingPeriodEnd"]) == ("2026-01-12T00:00:00Z",
                                                                   "2026-01-19T00:00:00Z")
        assert r["x_CorrectedPeriod"] == "2026-W02"
        assert r["ResourceId"] == ""
    assert sum(Decimal(r["BilledCost"]) for r in corrections) == adjustments[0]
    seconds = sum(Decimal(r["PricingQuantity"]) for r in corrections) * 3600
    assert abs(seconds - adjustments[1]) < 1  # the lines' GPU-hours are rounded to 6 places


def test_a_month_reads_the_frozen_rows_of_its_closed_week_and_its_corrections(
        late_world: LateWorld, tmp_path: Path):
    # the sample world's January is its week W02 (it starts on 2026-01-05): a run of one of its
    # days also ran two weeks later, in the open week 2026-W04, so the month has ledger days too
    db = tmp_path / "ledger.duckdb"
    shutil.copy(late_world.db, db)
    with duckdb.connect(str(db)) as con:
        con.execute("INSERT INTO allocations SELECT * REPLACE (day + 14 AS day, "
                    "start_ts + INTERVAL 14 DAY AS start_ts, end_ts + INTERVAL 14 DAY AS end_ts, "
                    "source_key || '-w04' AS source_key) FROM allocations WHERE day = ? "
                    "AND source_key = ? AND node = ?", list(late_world.job))
        build_chargeback(con, date(2026, 1, 20), date(2026, 1, 20), run="w04")
        path = export(con, "2026-01", tmp_path / "m.csv").files[0]
    month = _rows(path)
    usage = [r for r in month if r["ChargeClass"] == ""]
    week = _rows(late_world.week_before)

    def pieces(rows):
        return sorted((r["ResourceId"], r["x_Node"], r["ChargePeriodStart"],
                       r["x_ChargedGpuSeconds"], r["x_Source"]) for r in rows)

    in_w02 = [r for r in usage if "2026-01-05" <= r["ChargePeriodStart"][:10] <= "2026-01-11"]
    assert pieces(in_w02) == pieces(week)  # the closed week's days: its frozen rows
    others = [r for r in usage if r not in in_w02]
    assert {(r["ChargePeriodStart"][:10], r["x_Source"]) for r in others} == {
        ("2026-01-20", "ledger")}
    assert {r["x_CorrectedPeriod"] for r in month if r["ChargeClass"] == "Correction"} \
        == {"2026-W02"}  # carried by W03, whose Monday is in January
    assert all(r["BillingPeriodStart"] == "2026-01-01T00:00:00Z"
               and r["BillingPeriodEnd"] == "2026-02-01T00:00:00Z" for r in month)


def test_a_week_closed_before_charges_were_frozen_is_exported_by_its_lines_with_a_warning(
        sample_db: Path, tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    db.write_bytes(sample_db.read_bytes())
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        close = close_week(con, "2026-W02", now=AFTER)
        con.execute("DELETE FROM frozen_allocation_charges")  # as a close of before this table
        result = export(con, "2026-W02", tmp_path / "w02.csv")
        issued = con.execute("SELECT sum(amount), count(*) FROM chargeback "
                             "WHERE period = '2026-W02'").fetchone()
    assert [w for w in result.rows.warnings if "before allocation-level charges" in w]
    rows = _rows(result.files[0])
    assert len(rows) == issued[1] == close.lines  # the week's lines
    assert {r["ResourceId"] for r in rows} == {""}
    assert {r["x_Source"] for r in rows} == {"frozen_line"}
    assert sum(Decimal(r["BilledCost"]) for r in rows) == issued[0] == close.amount


def _checksum_before_frozen_charges(con, period: str, revision: int) -> str:
    """The close checksum as models/closing.py computed it before allocation charges were
    frozen: the frozen lines (slice_hours only where set) and the carried adjustments."""
    from models.closing import LATER_LINE_COLUMNS
    from models.schema import CHARGEBACK, INVOICE_ADJUSTMENTS

    names = CHARGEBACK.column_names
    digest = hashlib.sha256()
    for row in con.execute(
            f"SELECT {', '.join(names)} FROM frozen_invoice_lines WHERE closed_period = ? "
            "AND revision = ? ORDER BY ALL", [period, revision]).fetchall():
        values = [v for c, v in zip(names, row, strict=True)
                  if not (v is None and c in LATER_LINE_COLUMNS)]
        digest.update(("L|" + "|".join("" if v is None else str(v) for v in values)
                       + "\n").encode())
    adjustment = [c for c in INVOICE_ADJUSTMENTS.column_names if c not in ("run_id", "created_at")]
    for row in con.execute(f"SELECT {', '.join(adjustment)} FROM invoice_adjustments "
                           "WHERE period = ? ORDER BY ALL", [period]).fetchall():
        digest.update(("A|" + "|".join("" if v is None else str(v) for v in row)
                       + "\n").encode())
    return digest.hexdigest()


def test_a_close_without_frozen_charges_keeps_its_checksum(sample_db: Path, tmp_path: Path):
    """A week closed before frozen_allocation_charges existed has none of its rows: its
    checksum stays the one recorded then; a close with them covers them too."""
    from models.closing import week_checksum

    db = tmp_path / "ledger.duckdb"
    db.write_bytes(sample_db.read_bytes())
    with duckdb.connect(str(db)) as con:
        ensure_schema(con)
        close = close_week(con, "2026-W02", now=datetime(2026, 2, 2))
        assert week_checksum(con, "2026-W02", close.revision) == close.checksum
        assert close.checksum != _checksum_before_frozen_charges(con, "2026-W02", 1)
        con.execute("UPDATE frozen_allocation_charges SET charged_ms = charged_ms + 1 "
                    "WHERE rowid = (SELECT min(rowid) FROM frozen_allocation_charges)")
        assert [p for p, _, _ in changed_closes(con)] == ["2026-W02"]  # tampering is seen
        con.execute("DELETE FROM frozen_allocation_charges")
        assert week_checksum(con, "2026-W02", 1) == _checksum_before_frozen_charges(
            con, "2026-W02", 1)
