"""The Kubernetes ingest against a real Prometheus backfilled with a fresh simulated world.

A small 2-day world (60 s scrapes, with the planted exporter outage, Kueue controller restart and
DCGM label drift) is backfilled with promtool; ``gpuledger ingest kubernetes`` reads it over
HTTP. Checked against the simulator's truth: per-pod GPU-seconds (within one scrape interval per
interval end), per-GPU busy seconds (exact except the outage, which shows as a gap), Kueue
counters across the restart, holders across the label drift; the same tables as the fixture twin
gives; and a Prometheus killed in the middle of a day leaves the ledger exactly as before that
day, while a re-run after the restart completes with the uninterrupted result.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from connectors.errors import SourceError
from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource
from gpuledger.cli import main
from gpuledger.ingest import service
from gpuledger.ingest.kubernetes import run as k8s_ingest
from models.runner import connect
from simulator import SimConfig, simulate
from simulator.config import NodeCounts

pytestmark = pytest.mark.prometheus

DAY1, DAY2, DAY3 = datetime(2026, 1, 5), datetime(2026, 1, 6), datetime(2026, 1, 7)
STEP = 60
CLUSTER = "gpulab"
TABLES = ("k8s_pod_allocation_pieces", "k8s_pod_allocations", "k8s_pod_phases", "k8s_pod_gpus",
          "k8s_node_capacity_pieces", "k8s_node_capacity", "gpu_utilization", "gpu_busy_daily",
          "kueue_counters", "kueue_pending", "kueue_admission_wait",
          "kueue_admission_wait_buckets", "kueue_queue_resources", "k8s_ingest_warnings")


def iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("k8s-real-world")
    simulate(SimConfig(seed=9, days=2, nodes=NodeCounts(hpc=2, k8s=3, shared=1),
                       step_seconds=STEP), out)
    return out


@pytest.fixture(scope="module")
def world_info(world: Path) -> dict:
    return json.loads((world / "world.json").read_text())


@pytest.fixture(scope="module")
def om(world: Path) -> Path:
    return world / "prometheus" / "metrics.om"


@pytest.fixture(scope="module")
def ledger(real_prometheus, world: Path, om: Path, tmp_path_factory) -> Path:
    """The world's references loaded, then the CLI ingest over HTTP and a build."""
    server = real_prometheus(om)
    db = tmp_path_factory.mktemp("k8s-real-ledger") / "ledger.duckdb"
    with connect(db) as con:
        service.import_nodes(con, world / "nodes.csv", CLUSTER)
        service.import_identity_map(con, world / "identity_map.csv")
        service.import_accounts(con, world / "accounts.csv")
    argv = ["--db", str(db), "ingest", "kubernetes", "--prometheus-url", server.url,
            "--start", "2026-01-05", "--end", "2026-01-07",
            "--workloads", str(world / "kueue" / "workloads.json")]
    assert main(argv) == 0
    assert main(["--db", str(db), "build", "--start", "2026-01-05", "--end", "2026-01-07"]) == 0
    return db


def query(db: Path, sql: str, params: list | None = None) -> pl.DataFrame:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).pl()


def dump(con: duckdb.DuckDBPyConnection, tables=TABLES) -> dict[str, list[tuple]]:
    return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}


def test_cli_ingest_files_the_data_under_the_inventory_cluster(ledger: Path):
    runs = query(ledger, "SELECT partition_key, rows_loaded FROM ingest_runs "
                         "WHERE source = 'kubernetes' ORDER BY 1")
    assert runs["partition_key"].to_list() == ["gpulab/2026-01-05T00:00:00",
                                               "gpulab/2026-01-06T00:00:00"]
    assert (runs["rows_loaded"] > 0).all()
    intervals = query(ledger, "SELECT DISTINCT scrape_interval_s FROM k8s_pod_allocations")
    assert intervals["scrape_interval_s"].to_list() == [float(STEP)]


def test_per_pod_gpu_seconds_match_truth_within_one_scrape_per_interval_end(
    ledger: Path, world: Path, world_info: dict
):
    w0, w1 = iso(world_info["window"]["start"]), iso(world_info["window"]["end"])
    truth = pl.read_csv(world / "truth" / "allocations.csv", try_parse_dates=True).filter(
        pl.col("domain") == "kubernetes"
    ).with_columns(pl.col("start").clip(w0, w1), pl.col("end").clip(w0, w1)).filter(
        pl.col("end") > pl.col("start")
    ).with_columns(
        truth=pl.col("gpus") * (pl.col("end") - pl.col("start")).dt.total_seconds(),
        ends=2 - (pl.col("end") == w1).cast(pl.Int64),
    ).group_by("source_key").agg(pl.col("truth").sum(), pl.col("gpus").max(),
                                 pl.col("ends").sum())
    ours = query(ledger, "SELECT namespace || '/' || pod AS source_key, "
                         "sum(gpu_seconds) AS ours, count(*) AS rows FROM k8s_pod_allocations "
                         "GROUP BY ALL")
    assert ours.filter(pl.col("rows") > 1).is_empty()  # pods across midnight: one row
    both = truth.join(ours, on="source_key", how="full", coalesce=True).with_columns(
        error=(pl.col("ours").fill_null(0) - pl.col("truth").fill_null(0)).abs())
    assert both.filter(pl.col("truth").is_null()).is_empty()
    over = both.filter(pl.col("error") > pl.col("gpus") * STEP * pl.col("ends"))
    assert over.is_empty(), over
    assert both.filter(pl.col("ours").is_null()).height <= 1  # a pod living < one scrape
    # and the ledger built from them charges every pod
    charged = query(ledger, "SELECT sum(gpu_seconds) FROM allocations "
                            "WHERE domain = 'kubernetes'").item()
    assert abs(charged - both["truth"].sum()) <= STEP * both["gpus"].sum()


def test_gpu_busy_seconds_match_truth_and_the_exporter_outage_is_a_gap(
    ledger: Path, world: Path, world_info: dict
):
    outage = world_info["irregularities"]["exporter_outages"][0]
    o0, o1 = iso(outage["start"]), iso(outage["end"])
    truth = pl.read_csv(world / "truth" / "gpu_busy_seconds.csv", try_parse_dates=True)
    ours = query(ledger, "SELECT b.gpu_uuid, b.day, b.busy_seconds AS ours, b.covered_seconds, "
                         "n.node FROM gpu_busy_daily AS b JOIN nodes AS n USING (gpu_uuid)")
    both = ours.join(truth, on=["gpu_uuid", "day"], how="left").with_columns(
        pl.col("busy_seconds").fill_null(0.0),  # truth omits GPU-days with nothing busy
        in_outage=(pl.col("node") == outage["node"]) & (pl.col("day") == o0.date()),
    )
    assert both.height == 2 * query(ledger, "SELECT count(*) FROM nodes").item()
    normal = both.filter(~pl.col("in_outage"))
    assert (normal["ours"] - normal["busy_seconds"]).abs().max() < 1e-6
    assert (normal["covered_seconds"] == 86400.0).all()
    gap = both.filter(pl.col("in_outage"))
    assert gap.height > 0
    assert (gap["covered_seconds"] == 86400.0 - (o1 - o0).total_seconds()).all()
    # never filled in: less than the truth by whatever was busy during the outage
    assert (gap["ours"] <= gap["busy_seconds"] + 1e-6).all()
    rows = query(ledger, "SELECT count(*) FROM gpu_utilization WHERE node = ? "
                         "AND bucket_start >= ? AND bucket_start < ?",
                 [outage["node"], o0, o1]).item()
    assert rows == 0  # a gap, not zeros


def test_kueue_restart_gives_non_negative_increases(ledger: Path, world_info: dict):
    restart = iso(world_info["irregularities"]["kueue_restart"]["start"])
    counters = query(ledger, "SELECT * FROM kueue_counters")
    assert (counters["increase"] >= 0).all()
    hour = counters.filter(pl.col("window_start") == restart.replace(minute=0))
    assert hour["resets"].sum() >= 1  # the restart is seen as a counter reset
    admitted = counters.filter(pl.col("metric") == "kueue_admitted_workloads_total")[
        "increase"].sum()
    workloads = query(ledger, "SELECT admitted_at, eviction_count FROM kueue_workloads")
    w0 = iso(world_info["window"]["start"])
    last_admissions = workloads.filter(pl.col("admitted_at") >= w0 + timedelta(minutes=1))
    # every admission after the first scrape is counted once, across the restart
    assert last_admissions.height <= admitted
    assert admitted <= last_admissions.height + workloads["eviction_count"].sum()
    pending = query(ledger, "SELECT * FROM kueue_pending WHERE window_start = ?",
                    [restart.replace(minute=0)])
    assert pending["samples"].max() == 3600 // STEP - 2  # two scrapes lost to the restart


def test_dcgm_label_drift_keeps_the_workload_pods_as_holders(ledger: Path, world: Path,
                                                             world_info: dict):
    drift = world_info["irregularities"]["dcgm_label_drift"]
    since = iso(drift["from"])
    holders = query(ledger, "SELECT DISTINCT node, namespace, pod FROM gpu_utilization "
                            "WHERE pod IS NOT NULL AND bucket_start >= ?", [since])
    assert holders.filter(pl.col("pod").str.contains("dcgm-exporter")).is_empty()
    drifted = holders.filter(pl.col("node").is_in(drift["nodes"]))
    assert drifted.height > 0
    pods = query(ledger, "SELECT DISTINCT namespace, pod FROM k8s_pod_allocations "
                         "WHERE end_ts > ?", [since])
    unknown = drifted.filter(pl.col("namespace").is_not_null()).join(
        pods, on=["namespace", "pod"], how="anti")
    assert unknown.is_empty(), unknown  # every holder after the drift is a pod we charge
    warnings = query(ledger, "SELECT message FROM k8s_ingest_warnings WHERE component = 'dcgm' "
                             "AND window_start = ?", [DAY2])["message"].to_list()
    assert any("carries exported_namespace/exported_pod/exported_container" in m
               for m in warnings)
    # the GPUs named for each pod are the ones the truth says it held
    truth = pl.read_csv(world / "truth" / "allocations.csv").filter(
        pl.col("domain") == "kubernetes").select(
        "source_key", pl.col("gpu_uuids").str.split(";").list.sort())
    ours = query(ledger, "SELECT k8s_namespace || '/' || name AS source_key, "
                         "list_sort(flatten(list(gpu_uuids))) AS ours FROM allocations "
                         "WHERE domain = 'kubernetes' AND gpu_uuids IS NOT NULL GROUP BY ALL")
    both = ours.with_columns(pl.col("ours").list.unique().list.sort()).join(
        truth, on="source_key")
    assert both.height > 0
    assert both.filter(pl.col("ours") != pl.col("gpu_uuids")).is_empty()


def test_real_server_gives_exactly_what_the_fixture_twin_gives(ledger: Path, om: Path,
                                                               tmp_path: Path):
    with connect(tmp_path / "twin.duckdb") as con:
        for a, b in ((DAY1, DAY2), (DAY2, DAY3)):
            k8s_ingest.ingest_kubernetes_window(con, OpenMetricsFileSource(om), a, b,
                                                cluster=CLUSTER)
        twin = dump(con)
    with duckdb.connect(str(ledger), read_only=True) as con:
        assert dump(con) == twin


class KillMidway:
    """Passes reads to the real server; at the `at`-th read of a window starting at
    `window_start` it has Prometheus SIGKILLed from another thread, waits for it to be gone,
    then carries on (so that read and everything after it fail)."""

    def __init__(self, inner: PrometheusHttpSource, server, window_start: datetime, at: int):
        self.inner, self.server, self.window_start, self.at = inner, server, window_start, at
        self.reads = 0
        self.go = threading.Event()
        self.gone = threading.Event()
        self.killer = threading.Thread(target=self._kill, daemon=True)
        self.killer.start()

    def _kill(self) -> None:
        self.go.wait(120)
        self.server.kill()
        self.gone.set()

    def raw_samples(self, selector, start, end):
        if end > self.window_start:
            self.reads += 1
            if self.reads == self.at:
                self.go.set()
                assert self.gone.wait(60), "prometheus was not killed"
        return self.inner.raw_samples(selector, start, end)

    def series(self, match, start, end):
        return self.inner.series(match, start, end)


def _http(url: str) -> PrometheusHttpSource:
    return PrometheusHttpSource(PrometheusConfig(url, retries=1, backoff_s=0.05, timeout_s=30))


def test_prometheus_killed_mid_ingest_leaves_the_ledger_as_before_and_a_rerun_completes(
    real_prometheus, ledger: Path, om: Path, tmp_path: Path
):
    # a private copy of the file: its own shared server, which the factory restarts on the
    # same data directory (no new backfill) after the kill
    copy = tmp_path / "kill-me.om"
    try:
        os.link(om, copy)
    except OSError:
        copy.write_bytes(om.read_bytes())
    server = real_prometheus(copy)
    with connect(tmp_path / "l.duckdb") as con:
        k8s_ingest.ingest_kubernetes_window(con, _http(server.url), DAY1, DAY2, cluster=CLUSTER)
        before = dump(con, (*TABLES, "ingest_runs"))

        killing = KillMidway(_http(server.url), server, DAY2, at=6)
        with pytest.raises(SourceError, match="did not answer"):
            k8s_ingest.ingest_kubernetes_window(con, killing, DAY2, DAY3, cluster=CLUSTER)
        killing.killer.join(10)
        assert killing.reads == 6  # it died in the middle of the day's reads
        assert not server.is_running()
        assert dump(con, (*TABLES, "ingest_runs")) == before

        restarted = real_prometheus(copy)
        assert restarted.data_dir == server.data_dir
        assert restarted.pid != server.pid
        k8s_ingest.ingest_kubernetes_window(con, _http(restarted.url), DAY2, DAY3,
                                            cluster=CLUSTER)
        after = dump(con)
    with duckdb.connect(str(ledger), read_only=True) as uninterrupted:
        assert after == dump(uninterrupted)
