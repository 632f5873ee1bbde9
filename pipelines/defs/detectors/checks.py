import dagster as dg

from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LedgerResource

SAMPLE_ROWS = 20
COLUMNS = ("incident_id, node, start_ts, end_ts, gpu_seconds, cost, currency, slurm_job, "
           "k8s_workload, person, other_person, evidence_level, detail")


def _table(columns: list[str], rows: list[tuple]) -> dg.MetadataValue:
    body = "\n".join(" | ".join(str(v) for v in row) for row in rows[:SAMPLE_ROWS])
    return dg.MetadataValue.md(f"{' | '.join(columns)}\n{body}" if rows else "none")


def _incidents_of(kind: str, context: dg.AssetCheckExecutionContext,
                  ledger: LedgerResource) -> dg.AssetCheckResult:
    """WARN with the day's incidents of ``kind``, largest first (passes when there are none)."""
    day = context.partition_time_window.start.date()
    with ledger.ledger() as con:
        rel = con.sql(f"SELECT {COLUMNS} FROM incidents WHERE day = $day AND kind = $kind "
                      "ORDER BY gpu_seconds DESC, incident_id",
                      params={"day": day, "kind": kind})
        rows, columns = rel.fetchall(), rel.columns
    seconds = sum(r[4] for r in rows)
    cost = sum(r[5] for r in rows if r[5] is not None)
    return dg.AssetCheckResult(
        passed=not rows,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "incidents": len(rows),
            "gpu_hours": round(seconds / 3600, 3),
            "cost": float(cost),
            "sample": _table(columns, rows),
        },
    )


@dg.asset_check(
    asset="incidents",
    partitions_def=daily_partitions,
    description="GPUs placed by both Slurm and Kubernetes at once, with both owners, the "
    "overlapped GPU-hours and the evidence level (gpu or node).",
)
def no_double_scheduled_gpus(
    context: dg.AssetCheckExecutionContext, ledger: LedgerResource
) -> dg.AssetCheckResult:
    return _incidents_of("double_scheduled", context, ledger)


@dg.asset_check(
    asset="incidents",
    partitions_def=daily_partitions,
    description="Gang workloads that ran with fewer pods than they need while the running ones "
    "held GPUs, with the GPU-hours wasted until all ran or the workload was evicted.",
)
def no_partial_gangs(
    context: dg.AssetCheckExecutionContext, ledger: LedgerResource
) -> dg.AssetCheckResult:
    return _incidents_of("partial_gang", context, ledger)


@dg.asset_check(
    asset="incidents",
    partitions_def=daily_partitions,
    description="Slurm jobs and pods whose GPUs (some or all) stayed below the busy threshold "
    "for the minimum time, with the idle GPU-hours and their cost.",
)
def no_idle_allocations(
    context: dg.AssetCheckExecutionContext, ledger: LedgerResource
) -> dg.AssetCheckResult:
    return _incidents_of("idle_allocation", context, ledger)
