from datetime import datetime, time, timedelta

import dagster as dg

from models import load_sql
from models.incidents import scrape_tolerance
from pipelines.defs.check_results import offending_rows_result, query_rows
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource

# What the capacity check needs of the detectors' incidents table.


@dg.asset_check(
    pool=LEDGER_POOL,
    asset="allocations",
    partitions_def=daily_partitions,
    description="GPU-hours charged to 'unattributed' for the day, with the raw keys behind them.",
)
def unattributed_share(
    context: dg.AssetCheckExecutionContext, ledger: LedgerResource
) -> dg.AssetCheckResult:
    day = context.partition_time_window.start.date()
    with ledger.ledger() as con:
        total = con.execute("SELECT coalesce(sum(gpu_seconds), 0) FROM allocations "
                            "WHERE day = ?", [day]).fetchone()[0]
        rows, columns = query_rows(
            con, "SELECT domain, slurm_user, slurm_account, k8s_namespace, k8s_service_account, "
            "person, team, cost_centre, sum(gpu_seconds)::BIGINT AS gpu_seconds "
            "FROM allocations WHERE day = $day AND 'unattributed' IN (person, team, cost_centre) "
            "GROUP BY ALL ORDER BY gpu_seconds DESC", {"day": day})
    unattributed = sum(r[-1] for r in rows)
    share = unattributed / total if total else 0.0
    return offending_rows_result(rows, columns, severity=dg.AssetCheckSeverity.WARN, metadata={
        "unattributed_gpu_hours": round(unattributed / 3600, 3),
        "share": round(share, 4),
        "offending_rows": len(rows),
    })


@dg.asset_check(
    pool=LEDGER_POOL,
    asset="allocations",
    partitions_def=daily_partitions,
    description="No node holds more GPUs than it has (both schedulers together); intervals "
    "that do are double-scheduled GPUs and are returned.",
)
def allocations_within_node_capacity(
    context: dg.AssetCheckExecutionContext, ledger: LedgerResource
) -> dg.AssetCheckResult:
    day = context.partition_time_window.start.date()
    with ledger.ledger() as con:
        # Kubernetes interval ends are known to one scrape interval: shorter overlaps are noise
        start = datetime.combine(day, time())
        tolerance = scrape_tolerance(con, start, start + timedelta(days=1))
        rows, columns = query_rows(con, load_sql("node_overcommit"),
                                   {"day": day, "min_seconds": int(tolerance)})
    excess = sum(r[5] * (r[2] - r[1]).total_seconds() for r in rows)
    return offending_rows_result(rows, columns, severity=dg.AssetCheckSeverity.WARN, metadata={
        "intervals": len(rows),
        "tolerance_seconds": int(tolerance),
        "excess_gpu_hours": round(excess / 3600, 3),
    })


def _day_params(context: dg.AssetCheckExecutionContext) -> dict:
    day = context.partition_time_window.start.date()
    return {"first_day": day, "end_day": day + timedelta(days=1)}


def _day_rows(context: dg.AssetCheckExecutionContext, ledger: LedgerResource,
              model: str) -> tuple[list[tuple], list[str]]:
    """The rows the check model ``model`` finds wrong on the partition's day."""
    with ledger.ledger() as con:
        return query_rows(con, load_sql(model), _day_params(context))


@dg.asset_check(
    pool=LEDGER_POOL,
    asset="gpu_usage_hourly",
    partitions_def=daily_partitions,
    blocking=True,
    description="Per hour, allocated GPU-seconds summed over identities (gpu_usage_hourly) equal "
    "the sum over nodes (node_usage_hourly) and the allocations clipped to the hour; the hours "
    "that disagree are returned.",
)
def hourly_allocated_totals_agree(
    context: dg.AssetCheckExecutionContext, ledger: LedgerResource
) -> dg.AssetCheckResult:
    rows, columns = _day_rows(context, ledger, "gpu_usage_hourly_check_totals")
    return offending_rows_result(rows, columns, metadata={"offending_hours": len(rows)})


@dg.asset_check(
    pool=LEDGER_POOL,
    asset="gpu_usage_hourly",
    partitions_def=daily_partitions,
    description="Every hourly row has 0 <= busy <= measured <= allocated and busy + idle = "
    "measured; the rows that do not are returned.",
)
def hourly_busy_within_measured_within_allocated(
    context: dg.AssetCheckExecutionContext, ledger: LedgerResource
) -> dg.AssetCheckResult:
    rows, columns = _day_rows(context, ledger, "gpu_usage_hourly_check_measured")
    return offending_rows_result(rows, columns)


@dg.asset_check(
    pool=LEDGER_POOL,
    asset="gpu_usage_hourly",
    partitions_def=daily_partitions,
    description="No node-hour has more GPU-seconds allocated (both schedulers) than the node "
    "has, beyond one scrape interval of Kubernetes edge slack, unless a double_scheduled "
    "incident covers it; the offending node-hours are returned.",
)
def hourly_node_capacity_not_exceeded(
    context: dg.AssetCheckExecutionContext, ledger: LedgerResource
) -> dg.AssetCheckResult:
    params = _day_params(context)
    with ledger.ledger() as con:
        tolerance = scrape_tolerance(
            con, datetime.combine(params["first_day"], time()),
            datetime.combine(params["end_day"], time()))
        rows, columns = query_rows(con, load_sql("node_usage_hourly_check_capacity"),
                                   {**params, "tolerance_s": int(tolerance)})
    excess = sum(r[columns.index("excess_gpu_seconds")] for r in rows)
    return offending_rows_result(rows, columns, severity=dg.AssetCheckSeverity.WARN, metadata={
        "offending_node_hours": len(rows),
        "excess_gpu_hours": round(excess / 3600, 3),
        "tolerance_seconds": int(tolerance),
    })


@dg.asset_check(
    pool=LEDGER_POOL,
    asset="kueue_quota",
    partitions_def=daily_partitions,
    description="Kueue admits no more than nominal quota plus borrowing limit: queue-hours whose "
    "usage GPU-hours exceed it (by more than a thousandth of a GPU-hour) are returned; they mean "
    "gauges of two Kueue replicas summed, or a stale quota gauge.",
)
def kueue_usage_within_borrowing_limit(
    context: dg.AssetCheckExecutionContext, ledger: LedgerResource
) -> dg.AssetCheckResult:
    day = context.partition_time_window.start.date()
    with ledger.ledger() as con:
        rows, columns = query_rows(
            con, "SELECT cluster, hour_start, cluster_queue, flavor, resource, "
            "usage_gpu_hours, nominal_gpu_hours, borrowing_limit_gpus, covered_seconds "
            "FROM kueue_quota_hourly WHERE day = $day AND scope = 'queue' AND known "
            "AND borrowing_limit_gpus IS NOT NULL AND usage_gpu_hours > nominal_gpu_hours "
            "+ borrowing_limit_gpus * covered_seconds / 3600 + 0.001 "
            "ORDER BY cluster, hour_start, cluster_queue", {"day": day})
    return offending_rows_result(rows, columns, severity=dg.AssetCheckSeverity.WARN,
                                 metadata={"queue_hours": len(rows)})
