import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from models.runner import ensure_schema, publish_snapshot
from pipelines.defs.kubernetes.resources import kubernetes_source_from_environment
from pipelines.defs.slurm.resources import slurm_source_from_environment


class LedgerResource(DuckDBResource):
    """The DuckDB ledger; every connection has the schema in place."""

    @contextmanager
    def ledger(self) -> Iterator[duckdb.DuckDBPyConnection]:
        Path(self.database).parent.mkdir(parents=True, exist_ok=True)
        with self.get_connection() as con:
            ensure_schema(con)
            yield con

    def publish(self, con: duckdb.DuckDBPyConnection) -> Path:
        return publish_snapshot(con, Path(self.database))


class WorldFilesResource(dg.ConfigurableResource):
    """A folder laid out like the simulator's output (``sample_data/`` by default)."""

    root: str

    def path(self, *parts: str) -> Path:
        return Path(self.root).joinpath(*parts)


@dg.definitions
def resources() -> dg.Definitions:
    world_root = os.environ.get("GPULEDGER_SAMPLE_DATA", "sample_data")
    return dg.Definitions(
        resources={
            "ledger": LedgerResource(
                database=os.environ.get("GPULEDGER_DB", "data/gpuledger.duckdb")
            ),
            "world": WorldFilesResource(root=world_root),
            "slurm": slurm_source_from_environment(world_root),
            "kubernetes": kubernetes_source_from_environment(world_root),
        }
    )
