from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb
from dagster_duckdb import DuckDBResource

from gpuledger.site import Site
from models.runner import ensure_schema, publish_snapshot
from pipelines.defs.engine import engine_resource
from pipelines.defs.kubernetes.resources import KubernetesSourceResource
from pipelines.defs.slurm.resources import SlurmSourceResource
from pipelines.site import current_site, read_site

# The Dagster concurrency pool of every step that opens the ledger. DuckDB allows one writing
# process: the instance limits this pool to 1 (dagster.yaml `concurrency: pools: default_limit:
# 1`, or `dagster instance concurrency set gpuledger_ledger 1`; docs/site-file.md), so ledger
# steps queue for it instead of failing on the file lock.
LEDGER_POOL = "gpuledger_ledger"


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


class SiteResource(dg.ConfigurableResource):
    """The site file (docs/site-file.md), read again by each step that needs it."""

    path: str

    def load(self) -> Site:
        return read_site(self.path)


@dg.definitions
def resources() -> dg.Definitions:
    site = current_site()
    path = str(site.path)
    return dg.Definitions(
        resources={
            "ledger": LedgerResource(database=str(site.db)),
            "site": SiteResource(path=path),
            "slurm": SlurmSourceResource(site_file=path),
            "kubernetes": KubernetesSourceResource(site_file=path),
            # [gpuledger.engine]: DuckDB, or dagster-pyspark's PySparkResource (docs/spark.md)
            "engine": engine_resource(site),
        }
    )
