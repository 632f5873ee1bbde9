import dagster as dg

from gpuledger import service
from gpuledger.config import load_settings
from pipelines.defs.resources import LedgerResource, WorldFilesResource

RAW = dg.AssetKey("kueue_workload_snapshot")
READ = dg.AssetKey("kueue_workloads")
CHECK = "every_workload_read"


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            RAW, group_name="kubernetes", kinds={"duckdb", "json"},
            description="Kueue Workload objects from a kubectl snapshot, one row per workload "
            "(kueue_workloads_raw). Filled by the same read as kueue_workloads.",
        ),
        dg.AssetSpec(
            READ, group_name="kubernetes", kinds={"duckdb", "json"},
            description="Kueue Workloads from the kubectl snapshot with their conditions read: "
            "queue, ClusterQueue, owner, pod-set counts, GPUs (the gpu_resources setting), "
            "quota reserved / admitted / PodsReady times, evictions (Preempted, "
            "PodsReadyTimeout, ...), requeues, finished.",
        ),
    ],
    check_specs=[dg.AssetCheckSpec(CHECK, asset=READ, description="every Workload item of "
                                   "the snapshot could be read (bad items are in rejects)")],
    can_subset=True,
)
def kueue_workload_tables(
    context: dg.AssetExecutionContext, ledger: LedgerResource, world: WorldFilesResource
):
    """One call of ``service.import_workloads`` (the CLI's path): both tables, one transaction.

    GPU resource names come from the settings (``gpu_resources`` in gpuledger.toml or
    ``GPULEDGER_GPU_RESOURCES``), as for the CLI.
    """
    path = world.path("kueue", "workloads.json")
    gpu_resources = load_settings().gpu_resources
    with ledger.ledger() as con:
        result = service.import_workloads(con, path, gpu_resources=gpu_resources)
        counts = con.execute(
            "SELECT count(*) FILTER (WHERE evicted), count(*) FILTER (WHERE eviction_count > 0), "
            "count(*) FILTER (WHERE preempted), count(*) FILTER (WHERE finished), "
            "count(*) FILTER (WHERE NOT quota_reserved AND NOT finished) FROM kueue_workloads"
        ).fetchone()
    common = {"rows": result.rows, "rejected": len(result.rejects), "source_file": str(path),
              "gpu_resources": ", ".join(gpu_resources)}
    selected = context.selected_asset_keys
    if RAW in selected:
        yield dg.MaterializeResult(asset_key=RAW, metadata=common)
    if READ in selected:
        yield dg.MaterializeResult(asset_key=READ, metadata={
            **common, "evicted_now": counts[0], "evicted_ever": counts[1],
            "preempted": counts[2], "finished": counts[3], "pending": counts[4],
        })
    if any(k.name == CHECK for k in context.selected_asset_check_keys):
        sample = "\n".join(f"- {r.describe()}" for r in result.rejects[:20])
        yield dg.AssetCheckResult(
            asset_key=READ, check_name=CHECK, passed=not result.rejects,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"offending_rows": len(result.rejects),
                      "sample": dg.MetadataValue.md(sample or "none")},
        )
