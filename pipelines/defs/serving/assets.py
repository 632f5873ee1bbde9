import dagster as dg

from pipelines.defs.resources import LEDGER_POOL, LedgerResource


@dg.asset(
    pool=LEDGER_POOL,
    group_name="serving",
    kinds={"duckdb"},
    deps=["gpu_inventory", "identity_map", "slurm_accounts", "rate_card",
          "kueue_workload_snapshot", "slurm_jobs", "sreport_gpu", "allocations", "chargeback",
          "k8s_pod_allocations", "gpu_utilization", "kueue_metrics", "kueue_workloads",
          "gpu_usage_hourly", "incidents", "weekly_report"],
    description="Read-only copy of the ledger that dashboards and operators query; swapped in "
    "atomically so readers never meet the writer's lock.",
)
def published_ledger(ledger: LedgerResource) -> dg.MaterializeResult:
    with ledger.ledger() as con:
        path = ledger.publish(con)
    return dg.MaterializeResult(metadata={"snapshot": str(path)})
