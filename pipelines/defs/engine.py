"""The ``engine`` resource: where gpu_usage_hourly and incidents run their heavy models.

The site's ``[gpuledger.engine]`` (docs/spark.md) decides it when the code location loads:
``kind = "duckdb"`` (the default) gives :class:`EngineResource`, the ledger's own DuckDB
connection, and pyspark is never imported; ``kind = "spark"`` gives
``pipelines.engine_spark.SparkEngineResource``, dagster-pyspark's ``PySparkResource`` configured
from the site (kept outside ``defs/`` so that loading the definitions never imports pyspark on a
DuckDB site).
"""

import dagster as dg

from gpuledger.site import Site
from models.engines import DUCKDB_ENGINE, Engine


class EngineResource(dg.ConfigurableResource):
    """The DuckDB engine: every step on the ledger's connection."""

    # the site's [gpuledger.engine] kind, shown with the resource (a resource with no field at
    # all makes Dagster read pydantic's deprecated __fields__)
    kind: str = "duckdb"

    def engine(self) -> Engine:
        return DUCKDB_ENGINE


def engine_resource(site: Site) -> EngineResource:
    """The engine resource of ``site``."""
    if site.engine.kind == "duckdb":
        return EngineResource()
    try:
        from pipelines.engine_spark import spark_engine_resource
    except ImportError as exc:
        from models.engines.spark_session import SparkUnavailableError
        msg = (f"{site.path}: [gpuledger.engine.kind]: expected pyspark and dagster-pyspark for "
               f"kind = \"spark\" (pip install 'gpuledger[spark]'), found {exc.name} missing")
        raise SparkUnavailableError(msg) from None
    return spark_engine_resource(site)
