import dagster as dg

from gpuledger import service
from pipelines.defs.resources import LedgerResource, WorldFilesResource


@dg.asset(group_name="kubernetes", kinds={"duckdb", "json"},
          description="Kueue Workload objects from a kubectl snapshot, one row per workload.")
def kueue_workload_snapshot(
    ledger: LedgerResource, world: WorldFilesResource
) -> dg.MaterializeResult:
    path = world.path("kueue", "workloads.json")
    with ledger.ledger() as con:
        result = service.import_workloads(con, path)
    return dg.MaterializeResult(
        metadata={"rows": result.rows, "rejected": len(result.rejects), "source_file": str(path)}
    )
