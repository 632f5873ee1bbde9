"""The Spark engine as a Dagster resource (``kind = "spark"``; docs/spark.md).

:class:`SparkEngineResource` is dagster-pyspark's ``PySparkResource`` (its ``spark_config`` is
``models.engines.spark_session.spark_conf`` of the site's settings: the master URL goes in as
``spark.master``, which ``PySparkResource`` passes to ``SparkSession.builder`` like every other
key) and the project's ``EngineResource``: the session is opened when a step that needs the
engine starts, and stopped when it ends. Outside ``pipelines/defs`` on purpose: this module
imports pyspark.
"""

from pathlib import Path

from dagster import InitResourceContext
from dagster_pyspark import PySparkResource

from gpuledger.site import Site
from gpuledger.site.engine import spark_settings
from models.engines import Engine
from models.engines.spark_session import (
    SparkUnavailableError,
    java_problem,
    master_unreachable,
    spark_conf,
)
from pipelines.defs.engine import EngineResource


class SparkEngineResource(PySparkResource, EngineResource):
    """A Spark session on the site's master, and the ``SparkEngine`` that runs steps on it."""

    scratch: str

    def setup_for_execution(self, context: InitResourceContext) -> None:
        # the reasons a session cannot open, said plainly before pyspark's own errors
        problem = java_problem() or master_unreachable(self.spark_config["spark.master"])
        if problem:
            msg = f"engine = \"spark\": {problem}"
            raise SparkUnavailableError(msg)
        (Path(self.scratch) / "spark-local").mkdir(parents=True, exist_ok=True)
        super().setup_for_execution(context)

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self.spark_session is not None:
            self.spark_session.stop()

    def engine(self) -> Engine:
        from models.engines.spark import SparkEngine
        return SparkEngine(self.spark_session, Path(self.scratch))


def spark_engine_resource(site: Site) -> SparkEngineResource:
    settings = spark_settings(site)
    return SparkEngineResource(kind="spark", spark_config=spark_conf(settings),
                               scratch=str(settings.scratch))
