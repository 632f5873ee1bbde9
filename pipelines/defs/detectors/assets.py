import dagster as dg

from models.build import finish_build, open_build_days
from models.incidents import (
    DEFAULT_GANG_GRACE_SECONDS,
    build_incidents,
    idle_rules_with,
)
from pipelines.defs.engine import EngineResource
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LEDGER_POOL, LedgerResource, SiteResource


class DetectorConfig(dg.Config):
    """Thresholds of the detectors (docs/detectors.md). The idle rules are the site file's
    [gpuledger.idle] policies; idle_threshold/idle_min_minutes, when set, replace their zero
    rule everywhere for this run (as `gpuledger build --idle-threshold`)."""

    idle_threshold: float | None = None
    idle_min_minutes: float | None = None
    gang_grace_seconds: float = DEFAULT_GANG_GRACE_SECONDS


@dg.asset(
    partitions_def=daily_partitions,
    group_name="detectors",
    pool=LEDGER_POOL,
    kinds={"duckdb", "sql"},
    deps=["allocations", "gpu_utilization", "kueue_workloads", "k8s_pod_groups", "slurm_jobs",
          "rate_card", "open_invoice_lines"],
    description="Incidents that started on one UTC day: double-scheduled GPUs (GPU- and "
    "node-level evidence), partial gangs and idle allocations, with owners, wasted GPU-hours, "
    "cost and evidence rows; and the slurm-bridge pairs of the day (one workload, no conflict).",
)
def incidents(
    context: dg.AssetExecutionContext, config: DetectorConfig, ledger: LedgerResource,
    site: SiteResource, engine: EngineResource,
) -> dg.MaterializeResult:
    day = context.partition_time_window.start.date()
    rules = idle_rules_with(site.load().idle, config.idle_threshold, config.idle_min_minutes)
    runs_on = engine.engine()  # [gpuledger.engine]: DuckDB or Spark (docs/spark.md)
    with ledger.ledger() as con:
        first, last = open_build_days(con, day)  # the day and the neighbours it rebuilds
        built = build_incidents(
            con, first, last, idle_rules=rules, gang_grace_seconds=config.gang_grace_seconds,
            engine=runs_on,
        )
        # the days' last table: their ledger, usage, invoice lines and incidents agree again
        finish_build(con, first, last)
        wasted = dict(con.execute(
            "SELECT kind, sum(gpu_seconds) FROM incidents WHERE day = ? GROUP BY kind",
            [day]).fetchall())
    return dg.MaterializeResult(
        metadata={
            "incidents": built.incidents,
            "days_built": f"{first} .. {last}",
            "engine": runs_on.name,
            **built.by_kind,
            **{f"{kind}_gpu_hours": round(float(s) / 3600, 3) for kind, s in wasted.items()},
            "bridge_pairs": built.bridge_pairs,
            "scrape_tolerance_seconds": built.tolerance_seconds,
        }
    )
