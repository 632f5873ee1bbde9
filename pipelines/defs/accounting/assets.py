import dagster as dg

from models.build import (
    begin_build,
    build_allocations,
    build_chargeback,
    build_gpu_usage_hourly,
    days_to_build,
    open_build_days,
)
from models.kueue_quota import build_kueue_quota
from pipelines.defs.engine import EngineResource
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource


@dg.asset(
    pool=LEDGER_POOL,
    partitions_def=daily_partitions,
    group_name="accounting",
    kinds={"duckdb", "sql"},
    deps=["slurm_jobs", "identity_map", "slurm_accounts", "gpu_inventory",
          "k8s_pod_allocations", "kueue_workloads"],
    description="The ledger for one UTC day: every charged allocation interval per node, cut at "
    "midnight, with its resolved person, team and cost centre.",
)
def allocations(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    day = context.partition_time_window.start.date()
    with ledger.ledger() as con:
        # the day and its neighbours built before it: they read this day's data (the day's
        # other assets rebuild the same days: open_build_days)
        first, last = days_to_build(con, day, day)
        # until the days' incidents are rebuilt, their tables may disagree: no publish
        begin_build(con, first, last)
        rows = build_allocations(con, first, last)
        by_domain = con.execute(
            "SELECT domain, sum(gpu_seconds)::BIGINT FROM allocations WHERE day = ? "
            "GROUP BY domain ORDER BY domain", [day]).fetchall()
        unattributed = con.execute(
            "SELECT coalesce(sum(gpu_seconds), 0)::BIGINT FROM allocations "
            "WHERE day = ? AND person = 'unattributed'", [day]).fetchone()[0]
    return dg.MaterializeResult(
        metadata={
            "rows": rows,
            "days_built": f"{first} .. {last}",
            **{f"gpu_hours_{d}": round(s / 3600, 3) for d, s in by_domain},
            "unattributed_gpu_hours": round(unattributed / 3600, 3),
        }
    )


@dg.asset(
    pool=LEDGER_POOL,
    partitions_def=daily_partitions,
    group_name="accounting",
    kinds={"duckdb", "sql"},
    deps=["allocations", "gpu_utilization", "slurm_jobs", "gpu_inventory"],
    description="GPU usage per UTC hour for one day: allocated GPU-seconds (exact, clipped at "
    "hour boundaries) with their dcgm-measured busy and idle parts per identity and node "
    "(gpu_usage_hourly), per allocation (allocation_usage_hourly), and node capacity, "
    "allocated and unallocated GPU-seconds (node_usage_hourly); with their daily rollups "
    "(gpu_usage_daily, node_usage_daily) that the dashboards read for long ranges.",
)
def gpu_usage_hourly(
    context: dg.AssetExecutionContext, ledger: LedgerResource, engine: EngineResource
) -> dg.MaterializeResult:
    day = context.partition_time_window.start.date()
    runs_on = engine.engine()  # [gpuledger.engine]: DuckDB or Spark (docs/spark.md)
    with ledger.ledger() as con:
        first, last = open_build_days(con, day)
        rows = build_gpu_usage_hourly(con, first, last, engine=runs_on)
        allocated, measured, busy = con.execute(
            "SELECT coalesce(sum(allocated_gpu_seconds), 0)::BIGINT, "
            "coalesce(sum(measured_gpu_seconds), 0)::DOUBLE, "
            "coalesce(sum(busy_gpu_seconds), 0)::DOUBLE FROM gpu_usage_hourly WHERE day = ?", [day]
        ).fetchone()
        capacity, unallocated, node_rows = con.execute(
            "SELECT coalesce(sum(capacity_gpu_seconds), 0)::BIGINT, "
            "coalesce(sum(unallocated_gpu_seconds), 0)::BIGINT, count(*) "
            "FROM node_usage_hourly WHERE day = ?", [day]
        ).fetchone()
    return dg.MaterializeResult(
        metadata={
            "rows": rows,
            "engine": runs_on.name,
            "node_hour_rows": node_rows,
            "allocated_gpu_hours": round(allocated / 3600, 3),
            "measured_gpu_hours": round(measured / 3600, 3),
            "busy_gpu_hours": round(busy / 3600, 3),
            "idle_gpu_hours": round((measured - busy) / 3600, 3),
            "measured_share": round(measured / allocated, 4) if allocated else 0.0,
            "capacity_gpu_hours": round(capacity / 3600, 3),
            "unallocated_gpu_hours": round(unallocated / 3600, 3),
        }
    )


@dg.asset(
    pool=LEDGER_POOL,
    partitions_def=daily_partitions,
    group_name="accounting",
    kinds={"duckdb", "sql"},
    # data_quality_days: the lines' provisional mark reads it (view invoice_lines)
    deps=["allocations", "gpu_usage_hourly", "rate_card", "data_quality_days"],
    description="The invoice lines the day touches, rebuilt with its ledger: the day's, its ISO "
    "week's and its month's lines (chargeback_periods), so a published snapshot's invoice hours "
    "always equal its ledger hours, also for the week still open. The Monday close rebuilds "
    "the week again (asset chargeback).",
)
def open_invoice_lines(
    context: dg.AssetExecutionContext, ledger: LedgerResource
) -> dg.MaterializeResult:
    day = context.partition_time_window.start.date()
    with ledger.ledger() as con:
        first, last = open_build_days(con, day)
        # run: named on adjustment lines when late data changed a closed week
        lines = build_chargeback(con, first, last, run=context.run.run_id)
    return dg.MaterializeResult(metadata={"lines": lines})


@dg.asset(
    pool=LEDGER_POOL,
    partitions_def=daily_partitions,
    group_name="accounting",
    kinds={"duckdb", "sql"},
    deps=["kueue_metrics"],
    description="Kueue quota history for one UTC day (kueue_quota_hourly) and its ISO week "
    "(kueue_quota_weekly): per ClusterQueue and cohort, nominal quota, usage, reservation, "
    "borrowed and lent GPU-hours, share of quota used, seconds with pending workloads "
    "(docs/kubernetes.md \"Kueue quota history\").",
)
def kueue_quota(context: dg.AssetExecutionContext, ledger: LedgerResource) -> dg.MaterializeResult:
    day = context.partition_time_window.start.date()
    with ledger.ledger() as con:
        rows = build_kueue_quota(con, day, day)
        usage, nominal, unknown = con.execute(
            "SELECT coalesce(sum(usage_gpu_hours), 0), coalesce(sum(nominal_gpu_hours), 0), "
            "count(*) FILTER (WHERE NOT known) FROM kueue_quota_hourly "
            "WHERE day = ? AND scope = 'queue'", [day]).fetchone()
    return dg.MaterializeResult(metadata={
        "rows": rows,
        "usage_gpu_hours": round(float(usage), 3),
        "nominal_gpu_hours": round(float(nominal), 3),
        "quota_used_share": round(float(usage) / float(nominal), 4) if nominal else None,
        "unknown_queue_hours": int(unknown),
    })
