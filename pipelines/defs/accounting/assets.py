import dagster as dg

from models.build import build_allocations
from pipelines.defs.partitions import daily_partitions
from pipelines.defs.resources import LedgerResource


@dg.asset(
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
        rows = build_allocations(con, day, day)
        by_domain = con.execute(
            "SELECT domain, sum(gpu_seconds)::BIGINT FROM allocations WHERE day = ? "
            "GROUP BY domain ORDER BY domain", [day]).fetchall()
        unattributed = con.execute(
            "SELECT coalesce(sum(gpu_seconds), 0)::BIGINT FROM allocations "
            "WHERE day = ? AND person = 'unattributed'", [day]).fetchone()[0]
    return dg.MaterializeResult(
        metadata={
            "rows": rows,
            **{f"gpu_hours_{d}": round(s / 3600, 3) for d, s in by_domain},
            "unattributed_gpu_hours": round(unattributed / 3600, 3),
        }
    )
