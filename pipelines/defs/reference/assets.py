from collections.abc import Callable
from pathlib import Path

import dagster as dg
import duckdb

from gpuledger import service
from pipelines.defs.resources import LedgerResource, WorldFilesResource

GROUP = "reference"

Loader = Callable[[duckdb.DuckDBPyConnection, Path], service.LoadResult]


def _reference_asset(name: str, file_name: str, load: Loader, description: str):
    """An unpartitioned asset that replaces one reference table with one CSV file."""

    @dg.asset(name=name, group_name=GROUP, kinds={"duckdb", "csv"}, description=description)
    def _asset(ledger: LedgerResource, world: WorldFilesResource) -> dg.MaterializeResult:
        path = world.path(file_name)
        with ledger.ledger() as con:
            result = load(con, path)
        return dg.MaterializeResult(
            metadata={"rows": result.rows, "rejected": len(result.rejects),
                      "source_file": str(path)}
        )

    return _asset


def _load_nodes(con: duckdb.DuckDBPyConnection, path: Path) -> service.LoadResult:
    cluster = str(service.read_world(path.parent).get("cluster", "default"))
    return service.import_nodes(con, path, cluster)


gpu_inventory = _reference_asset(
    "gpu_inventory", "nodes.csv", _load_nodes,
    "GPU inventory: one row per GPU with node, pool, model and UUID.",
)
identity_map = _reference_asset(
    "identity_map", "identity_map.csv", service.import_identity_map,
    "Identity map: raw Slurm and Kubernetes keys to person, team, cost centre.",
)
slurm_accounts = _reference_asset(
    "slurm_accounts", "accounts.csv", service.import_accounts, "The Slurm account tree.",
)
rate_card = _reference_asset(
    "rate_card", "rate_card.csv", service.import_rate_card,
    "Effective-dated GPU-hour rates per GPU model, domain and QOS.",
)
