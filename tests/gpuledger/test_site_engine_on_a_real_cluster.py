"""A site with ``kind = "spark"`` reaches a real standalone cluster: the fixture's master and
worker are JVMs of pyspark's own launcher on 127.0.0.1, the session's queries run on the
worker's executor (not in the driver), and everything started is gone when stopped."""

import time
from pathlib import Path

import pytest

from gpuledger.site import load_site
from gpuledger.site.engine import open_engine, spark_settings
from models.engines.spark_session import SparkUnavailableError, open_spark
from tests.spark_cluster import SparkCluster, environment_problem, start_cluster

pytestmark = pytest.mark.spark

SITE = """\
[gpuledger]
first_day = "2026-01-05"

[gpuledger.clusters.a.slurm]
mode = "dump"
dump = "sacct.txt"

[gpuledger.engine]
kind = "spark"
master = "{master}"
driver_memory = "1g"
executor_memory = "1g"
shuffle_partitions = 4
"""


def _cmdline(pid: int) -> list[str]:
    """The arguments of a live process; [] when gone (a zombie has no cmdline)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return []
    return raw.decode().split("\0") if raw else []


def _spark_site(tmp_path: Path, master: str):
    path = tmp_path / "gpuledger.toml"
    path.write_text(SITE.format(master=master), encoding="utf-8")
    return load_site(path)


def test_the_fixture_runs_a_standalone_master_and_a_worker(spark_cluster: SparkCluster):
    state = spark_cluster.json()
    assert state["status"] == "ALIVE"
    assert state["url"] == spark_cluster.url
    assert spark_cluster.url.startswith("spark://127.0.0.1:")
    assert state["aliveworkers"] == 1
    [worker] = state["workers"]
    assert (worker["host"], worker["state"], worker["cores"], worker["memory"]) == (
        "127.0.0.1", "ALIVE", 2, 2048)
    master_pid, worker_pid = spark_cluster.pids
    assert "org.apache.spark.deploy.master.Master" in _cmdline(master_pid)
    assert "org.apache.spark.deploy.worker.Worker" in _cmdline(worker_pid)
    assert _cmdline(master_pid)[0].endswith("/java")
    assert spark_cluster.started_in_s < 60


def test_a_spark_site_runs_its_queries_on_the_workers_executor(spark_cluster: SparkCluster,
                                                                tmp_path: Path):
    site = _spark_site(tmp_path, spark_cluster.url)
    session = open_spark(spark_settings(site))
    try:
        sc = session.sparkContext
        app_id = sc.applicationId
        assert sc.master == spark_cluster.url
        # the figure needs every one of the 4 shuffle partitions, computed by the executor
        [(total, groups)] = session.sql(
            "SELECT sum(n), count(*) FROM (SELECT id % 4 AS g, sum(id) AS n FROM range(100000) "
            "GROUP BY g)").collect()
        assert (total, groups) == (sum(range(100000)), 4)
        [app] = [a for a in spark_cluster.json()["activeapps"] if a["id"] == sc.applicationId]
        assert (app["name"], app["state"]) == ("gpuledger", "RUNNING")
        assert app["cores"] == 2  # every core of the worker granted to the session
        executors = [e for e in spark_cluster.worker_json()["executors"]
                     if e["appid"] == sc.applicationId]
        assert len(executors) == 1
        assert executors[0]["memory"] == 1024  # executor_memory = "1g"
        assert session.conf.get("spark.sql.session.timeZone") == "UTC"
        assert session.conf.get("spark.sql.shuffle.partitions") == "4"
        [(zone,)] = session.sql("SELECT current_timezone()").collect()
        assert zone == "UTC"
    finally:
        session.stop()
    deadline = time.monotonic() + 30
    while any(e["appid"] == app_id for e in spark_cluster.worker_json()["executors"]):
        assert time.monotonic() < deadline, "the executor outlived its session"
        time.sleep(0.2)
    assert app_id in [a["id"] for a in spark_cluster.json()["completedapps"]]


def test_open_engine_gives_a_spark_engine_on_the_site_master(spark_cluster: SparkCluster,
                                                              tmp_path: Path):
    site = _spark_site(tmp_path, spark_cluster.url)
    with open_engine(site) as engine:
        assert engine.name == "spark"
        assert engine.session.sparkContext.master == spark_cluster.url  # type: ignore[attr-defined]
        assert engine.scratch == tmp_path / "data" / "gpuledger.spark"  # type: ignore[attr-defined]
        app = engine.session.sparkContext.applicationId  # type: ignore[attr-defined]
    assert app not in [a["id"] for a in spark_cluster.json()["activeapps"]]  # stopped


def test_a_master_that_does_not_answer_is_said_plainly(tmp_path: Path):
    if environment_problem():
        pytest.skip(environment_problem())
    site = _spark_site(tmp_path, "spark://127.0.0.1:9")  # discard: nothing listens
    with pytest.raises(SparkUnavailableError, match=r"expected a Spark master listening at "
                                                    r"spark://127.0.0.1:9, found none \("):
        open_spark(spark_settings(site))


@pytest.mark.slow
def test_stopping_a_cluster_leaves_no_jvm(tmp_path: Path, spark_cluster: SparkCluster):
    # a second, private cluster (spark_cluster: the same machine requirements)
    cluster = start_cluster(tmp_path / "private")
    assert cluster.json()["aliveworkers"] == 1
    cluster.stop()
    assert [p for p in cluster.pids if _cmdline(p)] == []
    assert not (tmp_path / "private" / "master.pid").exists()
    others = [p for p in Path("/proc").iterdir() if p.name.isdigit()
              and str(tmp_path / "private") in " ".join(_cmdline(int(p.name)))]
    assert others == []
