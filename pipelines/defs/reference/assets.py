import dagster as dg

from gpuledger import service
from pipelines.defs.resources import LedgerResource, WorldFilesResource

GROUP = "reference"


def _materialized(result: service.LoadResult, path: str) -> dg.MaterializeResult:
    return dg.MaterializeResult(
        metadata={
            "rows": result.rows,
            "rejected": len(result.rejects),
            "source_file": path,
        }
    )


@dg.asset(group_name=GROUP, kinds={"duckdb", "csv"},
          description="GPU inventory: one row per GPU with node, pool, model and UUID.")
def gpu_inventory(
    ledger: LedgerResource, world: WorldFilesResource
) -> dg.MaterializeResult:
    path = world.path("nodes.csv")
    cluster = str(service.read_world(world.path()).get("cluster", "default"))
    with ledger.ledger() as con:
        result = service.import_nodes(con, path, cluster)
    return _materialized(result, str(path))


@dg.asset(group_name=GROUP, kinds={"duckdb", "csv"},
          description="Identity map: raw Slurm and Kubernetes keys to person, team, cost centre.")
def identity_map(ledger: LedgerResource, world: WorldFilesResource) -> dg.MaterializeResult:
    path = world.path("identity_map.csv")
    with ledger.ledger() as con:
        result = service.import_identity_map(con, path)
    return _materialized(result, str(path))


@dg.asset(group_name=GROUP, kinds={"duckdb", "csv"}, description="The Slurm account tree.")
def slurm_accounts(ledger: LedgerResource, world: WorldFilesResource) -> dg.MaterializeResult:
    path = world.path("accounts.csv")
    with ledger.ledger() as con:
        result = service.import_accounts(con, path)
    return _materialized(result, str(path))


@dg.asset(group_name=GROUP, kinds={"duckdb", "csv"},
          description="Effective-dated GPU-hour rates per GPU model, domain and QOS.")
def rate_card(ledger: LedgerResource, world: WorldFilesResource) -> dg.MaterializeResult:
    path = world.path("rate_card.csv")
    with ledger.ledger() as con:
        result = service.import_rate_card(con, path)
    return _materialized(result, str(path))
