"""The Dagster ``engine`` resource follows the site's ``[gpuledger.engine]``: the DuckDB engine by
default; on a Spark site dagster-pyspark's PySparkResource with the site's settings, whose session
runs on the real standalone cluster, and the assets gpu_usage_hourly and incidents build on it
the same rows as on DuckDB."""

from pathlib import Path

import dagster as dg
import duckdb
import pytest

from pipelines.defs.engine import EngineResource
from pipelines.defs.resources import LedgerResource
from tests.helpers import SAMPLE_SITE, load_definitions
from tests.pipelines.test_detector_assets import _ledger  # a double scheduling, an idle pod
from tests.spark_cluster import SparkCluster

DAY = "2026-01-05"


def _spark_site(tmp_path: Path, master: str) -> Path:
    """The sample site (the assets here read only the ledger) with a Spark engine."""
    path = tmp_path / "gpuledger.toml"
    path.write_text(SAMPLE_SITE.read_text("utf-8") + f"""
[gpuledger.engine]
kind = "spark"
master = "{master}"
scratch = "{tmp_path / 'scratch'}"
driver_memory = "1g"
executor_memory = "1g"
shuffle_partitions = 4
""", encoding="utf-8")
    return path


def test_the_sample_site_runs_on_duckdb():
    engine = load_definitions(SAMPLE_SITE).resources["engine"]
    assert type(engine).__name__ == EngineResource.__name__
    assert engine.engine().name == "duckdb"


@pytest.mark.spark
def test_a_spark_site_gets_pyspark_resource_configured_from_the_site(
        spark_master: str, tmp_path: Path):
    from dagster_pyspark import PySparkResource
    engine = load_definitions(_spark_site(tmp_path, spark_master)).resources["engine"]
    assert isinstance(engine, PySparkResource)
    conf = engine.spark_config
    assert conf["spark.master"] == spark_master
    assert (conf["spark.driver.memory"], conf["spark.executor.memory"]) == ("1g", "1g")
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.local.dir"] == str(tmp_path / "scratch" / "spark-local")
    assert engine.scratch == str(tmp_path / "scratch")


@pytest.mark.spark
def test_the_resource_yields_a_session_on_the_cluster_and_stops_it(
        spark_cluster: SparkCluster, tmp_path: Path):
    seen: dict[str, object] = {}

    @dg.asset
    def probe(engine: EngineResource) -> dg.MaterializeResult:
        session = engine.spark_session  # type: ignore[attr-defined]
        sc = session.sparkContext
        [(n,)] = session.sql("SELECT count(*) FROM range(1000) GROUP BY id % 1").collect()
        seen.update(master=sc.master, app=sc.applicationId, rows=n,
                    active=[a["id"] for a in spark_cluster.json()["activeapps"]],
                    engine=engine.engine().name)  # type: ignore[attr-defined]
        return dg.MaterializeResult()

    resources = load_definitions(_spark_site(tmp_path, spark_cluster.url)).resources
    assert dg.materialize([probe], resources={"engine": resources["engine"]}).success
    assert (seen["master"], seen["rows"], seen["engine"]) == (spark_cluster.url, 1000, "spark")
    assert seen["app"] in seen["active"]  # an application of the standalone master
    # the step's end stopped the session: the master has it among the completed applications
    assert seen["app"] in [a["id"] for a in spark_cluster.json()["completedapps"]]


def _built(db: Path, site: Path) -> tuple[dict, dict[str, list[tuple]]]:
    defs = load_definitions(site)
    result = dg.materialize(
        [*defs.assets],
        resources={**defs.resources, "ledger": LedgerResource(database=str(db))},
        selection=dg.AssetSelection.assets("gpu_usage_hourly", "incidents"),
        partition_key=DAY,
    )
    assert result.success
    meta = {e.asset_key.to_user_string(): e.event_specific_data.materialization.metadata
            for e in result.get_asset_materialization_events()}
    with duckdb.connect(str(db), read_only=True) as con:
        tables = {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                  for t in ("gpu_usage_hourly", "allocation_usage_hourly", "node_usage_hourly",
                            "incidents")}
    return meta, tables


@pytest.mark.spark
@pytest.mark.slow
def test_the_assets_build_the_same_rows_on_spark_as_on_duckdb(spark_master: str,
                                                               tmp_path: Path):
    (tmp_path / "duckdb").mkdir()
    (tmp_path / "spark").mkdir()
    _ledger(tmp_path / "duckdb" / "l.duckdb")
    _ledger(tmp_path / "spark" / "l.duckdb")
    meta_duckdb, on_duckdb = _built(tmp_path / "duckdb" / "l.duckdb", SAMPLE_SITE)
    meta_spark, on_spark = _built(tmp_path / "spark" / "l.duckdb",
                                  _spark_site(tmp_path / "spark", spark_master))
    assert {k: m["engine"].value for k, m in meta_duckdb.items()} == {
        "gpu_usage_hourly": "duckdb", "incidents": "duckdb"}
    assert {k: m["engine"].value for k, m in meta_spark.items()} == {
        "gpu_usage_hourly": "spark", "incidents": "spark"}
    assert on_duckdb["gpu_usage_hourly"]  # the day has usage ...
    assert len(on_duckdb["incidents"]) == 2  # ... and its double scheduling and idle pod
    assert on_spark == on_duckdb


def test_a_spark_site_without_pyspark_says_what_to_install(tmp_path: Path, monkeypatch):
    import sys

    from gpuledger.site import load_site
    from models.engines.spark_session import SparkUnavailableError
    from pipelines.defs.engine import engine_resource
    site = load_site(_spark_site(tmp_path, "spark://127.0.0.1:7077"))
    monkeypatch.delitem(sys.modules, "pipelines.engine_spark", raising=False)
    monkeypatch.setitem(sys.modules, "dagster_pyspark", None)  # as if not installed
    with pytest.raises(SparkUnavailableError, match=r"\[gpuledger.engine.kind\]: expected pyspark "
                       r"and dagster-pyspark .*pip install 'gpuledger\[spark\]'.*, found "
                       r"dagster_pyspark missing"):
        engine_resource(site)
