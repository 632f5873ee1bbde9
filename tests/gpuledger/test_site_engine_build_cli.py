"""`gpuledger build` on a site with ``kind = "spark"`` builds a simulated world's hourly usage
and incidents on the real standalone cluster, and the ledger holds the rows the DuckDB engine
builds from the same load."""

import shutil
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from simulator import SimConfig, simulate
from simulator.config import NodeCounts
from tests.spark_cluster import SparkCluster

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TABLES = ("allocations", "gpu_usage_hourly", "allocation_usage_hourly", "node_usage_hourly",
          "gpu_usage_daily", "node_usage_daily", "incidents", "bridge_pairs", "chargeback_periods")


def _tables(db: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


def test_build_on_a_spark_site_equals_build_on_duckdb(spark_cluster: SparkCluster,
                                                      tmp_path: Path, capsys):
    world = tmp_path / "world"
    simulate(SimConfig(seed=5, days=2, nodes=NodeCounts(hpc=2, k8s=2, shared=1)), world)
    site = world / "gpuledger.toml"
    loaded = tmp_path / "loaded.duckdb"
    assert main(["--db", str(loaded), "--config", str(site), "load"]) == 0
    spark_site = world / "gpuledger-spark.toml"  # beside it: the same relative paths
    spark_site.write_text(site.read_text("utf-8") + f"""
[gpuledger.engine]
kind = "spark"
master = "{spark_cluster.url}"
driver_memory = "1g"
executor_memory = "1g"
shuffle_partitions = 4
""", encoding="utf-8")
    built = {}
    for name, config in (("duckdb", site), ("spark", spark_site)):
        db = tmp_path / name / "gpuledger.duckdb"
        db.parent.mkdir()
        shutil.copyfile(loaded, db)
        capsys.readouterr()
        assert main(["--db", str(db), "--config", str(config), "build"]) == 0
        err = capsys.readouterr().err
        assert ("engine: spark" in err) == (name == "spark"), err
        built[name] = _tables(db)
    assert f"engine: spark ({spark_cluster.url})" in err
    assert built["duckdb"]["gpu_usage_hourly"]
    assert built["duckdb"]["incidents"]
    for table in TABLES:
        assert built["spark"][table] == built["duckdb"][table], table
    # the session was stopped at the end of the build; its scratch beside the ledger
    assert not spark_cluster.json()["activeapps"]
    assert (tmp_path / "spark" / "gpuledger.spark").is_dir()
