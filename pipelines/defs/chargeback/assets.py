from datetime import timedelta

import dagster as dg

from models.build import build_chargeback
from pipelines.defs.partitions import weekly_partitions
from pipelines.defs.resources import LedgerResource


@dg.asset(
    partitions_def=weekly_partitions,
    group_name="chargeback",
    kinds={"duckdb", "sql"},
    deps=["allocations", "gpu_usage_hourly", "rate_card"],
    description="Invoice lines for one ISO week (Monday to Monday, UTC) and for its days and "
    "months: GPU-hours and amounts per cost centre, team, person, domain and GPU model.",
)
def chargeback(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    window = context.partition_time_window
    first = window.start.date()
    last = window.end.date() - timedelta(days=1)
    with ledger.ledger() as con:
        lines = build_chargeback(con, first, last)
        totals = con.execute(
            "SELECT coalesce(sum(gpu_hours), 0), coalesce(sum(amount), 0), "
            "count(*) FILTER (WHERE amount IS NULL) FROM chargeback_periods "
            "WHERE period_kind = 'week' AND period_start = ?", [first]).fetchone()
    return dg.MaterializeResult(
        metadata={
            "lines": lines,
            "week_gpu_hours": float(totals[0]),
            "week_amount": float(totals[1]),
            "unpriced_lines": totals[2],
        }
    )
