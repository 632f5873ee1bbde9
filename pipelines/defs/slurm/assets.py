import dagster as dg

from gpuledger import service
from pipelines.defs.resources import LedgerResource, WorldFilesResource


@dg.asset(group_name="slurm", kinds={"duckdb", "text"},
          description="The sacct dump's lines as read, kept as evidence for every parsed run.")
def sacct_dump_lines(ledger: LedgerResource, world: WorldFilesResource) -> dg.MaterializeResult:
    path = world.path("sacct", "sacct-unitsep-epoch.txt")
    with ledger.ledger() as con:
        result = service.import_sacct_lines(con, path)
    return dg.MaterializeResult(metadata={"rows": result.rows, "source_file": str(path)})
