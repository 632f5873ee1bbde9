"""The weekly close asset (pipelines/defs/chargeback) freezes an ended week once, and leaves a
closed week frozen when it runs again after late data."""

from datetime import date, datetime, time
from pathlib import Path

import dagster as dg
import duckdb

from models.runner import connect
from pipelines.defs.chargeback.assets import chargeback
from pipelines.defs.resources import LedgerResource
from tests.helpers import INVOICE_DIFFERS_FROM_LEDGER


def _alloc(con, day: date, seconds: int) -> None:
    start = datetime.combine(day, time(8))
    con.execute("DELETE FROM allocations WHERE source_key = 'j1'")
    con.execute(
        "INSERT INTO allocations (day, domain, cluster, source_key, node, gpu_model, gpus, "
        "start_ts, end_ts, gpu_seconds, person, team, cost_centre) VALUES (?, 'slurm', 'c', "
        "'j1', 'n1', 'a100', 1, ?, ? + to_seconds(?), ?, 'ann', 't1', 'CC-1')",
        [day, start, start, seconds, seconds])


def _close(db: Path) -> dict:
    result = dg.materialize([chargeback], resources={"ledger": LedgerResource(database=str(db))},
                            partition_key="2026-01-05")
    assert result.success
    [event] = result.asset_materializations_for_node("chargeback")
    return {k: v.value for k, v in event.metadata.items()}


def test_the_weekly_close_freezes_once_and_late_data_becomes_an_adjustment(tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.00, 'EUR')")
        _alloc(con, date(2026, 1, 6), 3600)
    first = _close(db)
    assert (first["closed"], first["closed_by_this_run"], first["week_amount"]) == (True, True, 2.0)
    with connect(db) as con:
        _alloc(con, date(2026, 1, 6), 5400)  # late data, then the Monday asset runs again
    again = _close(db)
    assert (again["closed"], again["closed_by_this_run"], again["week_amount"]) == (
        True, False, 2.0)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT period, original_period, gpu_seconds, amount::DOUBLE "
                           "FROM invoice_adjustments").fetchall() == [
            ("2026-W03", "2026-W02", 1800, 1.0)]
        assert con.execute("SELECT count(*), any_value(closed_by) FROM closed_periods"
                           ).fetchone() == (1, "dagster weekly close")
        assert con.execute(INVOICE_DIFFERS_FROM_LEDGER).fetchall() == []
