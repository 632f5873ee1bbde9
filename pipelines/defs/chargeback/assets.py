from datetime import UTC, datetime, timedelta

import dagster as dg

from models.build import build_chargeback
from models.close_week import close_week
from models.closing import current_close
from pipelines.defs.partitions import weekly_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource


@dg.asset(
    partitions_def=weekly_partitions,
    group_name="chargeback",
    pool=LEDGER_POOL,
    kinds={"duckdb", "sql"},
    deps=["allocations", "gpu_usage_hourly", "rate_card"],
    description="The weekly close: the invoice lines of one ISO week (Monday to Monday, UTC), "
    "its days and months, rebuilt from the ledger and, once the week has ended, FROZEN "
    "(closed_periods, frozen_invoice_lines). Late data for a closed week lands as adjustment "
    "lines in the next open week (invoice_adjustments); a closed week is never re-closed here "
    "(`gpuledger close-week --reclose`).",
)
def chargeback(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    window = context.partition_time_window
    first = window.start.date()
    last = window.end.date() - timedelta(days=1)
    week = window.start.strftime("%G-W%V")
    ended = datetime.now(UTC) >= window.end
    with ledger.ledger() as con:
        run_id = context.run.run_id
        lines = build_chargeback(con, first, last, run=run_id)
        close = current_close(con, week)
        has_lines = con.execute("SELECT count(*) FROM chargeback_periods WHERE period = ? "
                                "AND period_kind = 'week'", [week]).fetchone()[0] > 0
        closed_now = ended and close is None and has_lines  # an empty week stays open
        if closed_now:
            close = close_week(con, week, closed_by="dagster weekly close", run_id=run_id)
        # the invoice as issued: the frozen lines once closed
        totals = con.execute(
            "SELECT coalesce(sum(gpu_hours), 0), coalesce(sum(amount), 0), "
            "count(*) FILTER (WHERE amount IS NULL) FROM chargeback WHERE period = ?",
            [week]).fetchone()
        carried, adjusted = con.execute(
            "SELECT count(*), coalesce(sum(amount), 0) FROM invoice_adjustments "
            "WHERE period = ?", [week]).fetchone()
    if close is not None and not closed_now:
        context.log.info(f"{week} was already closed: {close.summary()}; its invoice stays "
                         "frozen, late data goes to the next open week's adjustments")
    return dg.MaterializeResult(
        metadata={
            "lines": lines,
            "week_gpu_hours": float(totals[0]),
            "week_amount": float(totals[1]),
            "unpriced_lines": totals[2],
            "closed": close is not None,
            "closed_by_this_run": closed_now,
            "close": close.summary() if close is not None else "open (the week has not ended)",
            "checksum": close.checksum if close is not None else "",
            "adjustment_lines_carried": carried,
            "adjustments_amount": float(adjusted),
        }
    )
