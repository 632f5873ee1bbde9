import dagster as dg

from models import load_sql
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LedgerResource

SAMPLE_ROWS = 20


def _table(columns: list[str], rows: list[tuple]) -> dg.MetadataValue:
    body = "\n".join(" | ".join(str(v) for v in row) for row in rows[:SAMPLE_ROWS])
    return dg.MetadataValue.md(f"{' | '.join(columns)}\n{body}" if rows else "none")


@dg.asset_check(
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
        rel = con.sql(
            "SELECT domain, slurm_user, slurm_account, k8s_namespace, k8s_service_account, "
            "person, team, cost_centre, sum(gpu_seconds)::BIGINT AS gpu_seconds "
            "FROM allocations WHERE day = $day AND 'unattributed' IN (person, team, cost_centre) "
            "GROUP BY ALL ORDER BY gpu_seconds DESC", params={"day": day})
        rows, columns = rel.fetchall(), rel.columns
    unattributed = sum(r[-1] for r in rows)
    share = unattributed / total if total else 0.0
    return dg.AssetCheckResult(
        passed=not rows,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "unattributed_gpu_hours": round(unattributed / 3600, 3),
            "share": round(share, 4),
            "offending_rows": len(rows),
            "sample": _table(columns, rows),
        },
    )


@dg.asset_check(
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
        tolerance = con.execute(
            "SELECT coalesce(max(scrape_interval_s), 0) FROM k8s_pod_allocations "
            "WHERE start_ts < ? + INTERVAL 1 DAY AND end_ts > ?", [day, day]).fetchone()[0]
        rel = con.sql(load_sql("node_overcommit"),
                      params={"day": day, "min_seconds": int(tolerance)})
        rows, columns = rel.fetchall(), rel.columns
    excess = sum(r[5] * (r[2] - r[1]).total_seconds() for r in rows)
    return dg.AssetCheckResult(
        passed=not rows,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "intervals": len(rows),
            "tolerance_seconds": int(tolerance),
            "excess_gpu_hours": round(excess / 3600, 3),
            "sample": _table(columns, rows),
        },
    )
