"""Dagster Kubernetes assets on a simulated world through the fixture twin: one day partition
with the planted exporter outage, Kueue restart and DCGM label drift; checks and re-runs."""

import json
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from gpuledger.site import load_site
from pipelines.defs.kubernetes import checks
from pipelines.defs.kubernetes.resources import KubernetesSourceResource
from simulator import SimConfig, simulate
from simulator.config import NodeCounts
from tests.helpers import materialize_world

DAY = "2026-01-06"  # the simulated world's second day: outage, Kueue restart, label drift
START, END = datetime(2026, 1, 6), datetime(2026, 1, 7)
K8S_ASSETS = ("k8s_pod_allocations", "gpu_utilization", "kueue_metrics")
TABLES = ("k8s_pod_allocations", "k8s_pod_allocation_pieces", "k8s_node_capacity",
          "gpu_utilization", "gpu_busy_daily", "kueue_counters", "kueue_pending",
          "kueue_workloads", "k8s_ingest_warnings")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("k8s-assets-world")
    simulate(SimConfig(seed=21, days=2, nodes=NodeCounts(hpc=1, k8s=2, shared=1),
                       step_seconds=60), out)
    return out


def _run(db: Path, world: Path, selection: tuple[str, ...],
         partition: str | None = None) -> dg.ExecuteInProcessResult:
    """The world's site file (<world>/gpuledger.toml) against a temp ledger."""
    return materialize_world(db, world, dg.AssetSelection.assets(*selection), partition)


def _dump(db: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


def test_day_partition_loads_checks_and_reruns_identically(world: Path, tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    assert _run(db, world, ("gpu_inventory", "kueue_workloads")).success
    first = _run(db, world, K8S_ASSETS, DAY)
    assert first.success
    meta = {
        m.asset_key.to_user_string(): m.metadata
        for e in first.get_asset_materialization_events()
        for m in [e.event_specific_data.materialization]
    }
    assert set(meta) == set(K8S_ASSETS)
    assert meta["k8s_pod_allocations"]["pods"].value > 10
    assert meta["k8s_pod_allocations"]["clusters"].value == "gpulab"
    per_cluster = meta["k8s_pod_allocations"]["per_cluster"].value
    assert per_cluster["gpulab"]["pods"] == meta["k8s_pod_allocations"]["pods"].value
    assert per_cluster["gpulab"]["scrape_interval_s"] == 60.0
    assert meta["gpu_utilization"]["gpu_minute_rows"].value > 0
    assert meta["kueue_metrics"]["rows"].value > 0

    evaluations = {e.check_name: e for e in first.get_asset_check_evaluations()}
    passed = {name: e.passed for name, e in evaluations.items()}
    assert passed == {
        "no_overlapping_pod_intervals": True,
        "no_node_over_gpu_capacity": True,
        "ksm_samples_cover_the_window": True,
        "ksm_metrics_present": False,  # kube_node_status_allocatable is not simulated
        "dcgm_samples_cover_the_window": False,  # the planted exporter outage
        "dcgm_metrics_present": False,  # the label drift to exported_* is reported
        "kueue_samples_cover_the_window": False,  # the planted controller restart
        "kueue_metrics_present": False,  # quota-reserved / preempted counters not simulated
    }
    outage = json.loads((world / "world.json").read_text())["irregularities"][
        "exporter_outages"][0]
    coverage = evaluations["dcgm_samples_cover_the_window"]
    assert coverage.severity == dg.AssetCheckSeverity.WARN
    sample = coverage.metadata["sample"].value
    rows = [line for line in sample.splitlines()[1:] if line]
    assert rows
    assert all(line.startswith(outage["node"] + " |") for line in rows)
    assert all(" | 83700.0 | 86400" in line for line in rows)  # 45 minutes without samples
    restart = evaluations["kueue_samples_cover_the_window"].metadata["sample"].value
    assert "2026-01-06 14:00:00 | 2026-01-06 15:00:00 | 58 | 60" in restart
    drift = evaluations["dcgm_metrics_present"].metadata["sample"].value
    assert "carries exported_namespace/exported_pod/exported_container" in drift

    before = _dump(db)
    assert _run(db, world, K8S_ASSETS, DAY).success
    assert _dump(db) == before


def test_allocations_of_the_day_include_kubernetes(world: Path, tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    assert _run(db, world, ("gpu_inventory", "identity_map", "slurm_accounts",
                            "kueue_workloads")).success
    assert _run(db, world, (*K8S_ASSETS, "slurm_jobs", "slurm_steps", "allocations"),
                DAY).success
    with duckdb.connect(str(db), read_only=True) as con:
        domains = dict(con.execute("SELECT domain, sum(gpu_seconds) FROM allocations "
                                   "WHERE day = ? GROUP BY domain", [START.date()]).fetchall())
        queues = con.execute("SELECT count(*) FILTER (WHERE kueue_cluster_queue IS NOT NULL) "
                             "FROM allocations WHERE domain = 'kubernetes'").fetchone()[0]
    assert domains["kubernetes"] > 0
    assert domains["slurm"] > 0
    assert queues > 0


def _ledger_with_world(tmp_path: Path, world: Path) -> duckdb.DuckDBPyConnection:
    db = tmp_path / "ledger.duckdb"
    assert _run(db, world, ("gpu_inventory",)).success
    assert _run(db, world, K8S_ASSETS, DAY).success
    return duckdb.connect(str(db))


def test_checks_return_the_offending_rows(world: Path, tmp_path: Path):
    con = _ledger_with_world(tmp_path, world)
    try:
        pod = con.execute("SELECT * FROM k8s_pod_allocations ORDER BY gpu_seconds DESC LIMIT 1"
                          ).pl()
        uid, node = pod["uid"][0], pod["node"][0]
        start = pod["start_ts"][0]
        # a second interval of the same pod overlapping the first, and a pod holding 64 GPUs
        clash = pod.with_columns(
            start_ts=pod["start_ts"] + timedelta(minutes=1),
            end_ts=pod["start_ts"] + timedelta(minutes=2),
        )
        huge = pod.with_columns(uid=pod["uid"] + "-huge", pod=pod["pod"] + "-huge",
                                gpus=pod["gpus"] * 0 + 64)
        for frame in (clash, huge):
            con.register("_row", frame.to_arrow())
            con.execute("INSERT INTO k8s_pod_allocations SELECT * FROM _row")
            con.unregister("_row")
        overlap = checks.no_overlapping_pod_intervals(con, "gpulab", START, END)
        assert overlap.passed is False
        assert overlap.metadata["offending_rows"].value == 1
        assert uid in overlap.metadata["sample"].value
        capacity = checks.no_node_over_gpu_capacity(con, "gpulab", START, END)
        assert capacity.passed is False
        assert capacity.metadata["offending_rows"].value >= 1
        assert f"{node} | {max(start, START)}" in capacity.metadata["sample"].value
        assert "-huge x64" in capacity.metadata["sample"].value
    finally:
        con.close()


def test_source_follows_the_site_file(world: Path, tmp_path: Path):
    twin = KubernetesSourceResource(site_file=str(world / "gpuledger.toml"))
    (cluster,) = twin.clusters()
    assert cluster.name == "gpulab"
    assert twin.describe(cluster) == str(world / "prometheus" / "metrics.om")
    token = tmp_path / "token"
    token.write_text("secret\n")
    token.chmod(0o600)  # a secret file (connectors/secrets.py)
    site = tmp_path / "gpuledger.toml"
    site.write_text(f"""
[gpuledger]
first_day = "2026-01-05"
[gpuledger.clusters.prod.prometheus]
url = "https://thanos.example:9090/"
selector = 'cluster="prod"'
bearer_token_file = "{token}"
headers = {{ "X-Scope-OrgID" = "gpu" }}
timeout_s = 30
""", encoding="utf-8")
    real = KubernetesSourceResource(site_file=str(site))
    (cluster,) = real.clusters()
    assert cluster == load_site(site).cluster("prod")
    source = real.source(cluster)
    assert source.config.url == "https://thanos.example:9090"
    assert source.config.selector == 'cluster="prod"'
    assert source.config.bearer_token_file == token
    assert source.config.headers == {"X-Scope-OrgID": "gpu"}
    assert source.config.timeout_s == 30
    assert source.client.headers["Authorization"] == "Bearer secret"
