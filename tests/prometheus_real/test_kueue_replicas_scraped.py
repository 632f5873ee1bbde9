"""Two Kueue replicas as two scrape targets of a real Prometheus, with honor_labels false (what
Kueue's own ServiceMonitor gives) and true, read through the normal path: counters are counted
once, not once per replica, and a leader failover between the targets loses and doubles nothing.

The bodies are the exposition fixtures (pkg/metrics/metrics.go at v0.10.0 and v0.17.0,
tests/fixtures/expositions) with the counters moving over the harness's seconds: one admission
every 2 s in each counter child.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest

from connectors.kubernetes.kueue_metrics import read_kueue_metrics
from gpuledger.ingest.kubernetes import run as k8s_ingest
from models.runner import connect
from tests.connectors.kubernetes.kueue_scrapes import body, text
from tests.prometheus_real.scrape import kueue_controller

pytestmark = pytest.mark.prometheus

FAILOVER_S = 8.0  # replica A stops leading here (restarts as a follower), B is elected
ADMITTED = "kueue_admitted_workloads_total"


def replica(name: str, job: str, instance: str, pod: str, render) -> object:
    return kueue_controller(lambda s: text(render(s)), job=job, path=f"/metrics/{name}",
                            instance=instance, pod=pod)


def per_series_increase(frame: pl.DataFrame, *, born: bool) -> float:
    """last - first of each series (or last, for a series born after its job was scraped)."""
    key = [c for c in frame.columns if c not in ("ts", "value")]
    ends = frame.sort("ts").group_by(key).agg(pl.col("value").first().alias("first"),
                                               pl.col("value").last().alias("last"))
    return float((ends["last"] - (0 if born else ends["first"])).sum())


def test_pre_016_replicas_exposing_the_same_counters_count_once(prometheus_scrape, tmp_path):
    # Kueue before 0.16 has no replica_role and every replica may emit (kueue#6772)
    def render(s):
        return body("kueue-v0.10.0-leader.prom", admitted=int(s // 2))

    targets = [replica("a", "kueue-a", "10.244.1.9:8443", "kueue-controller-manager-a", render),
               replica("b", "kueue-b", "10.244.2.7:8443", "kueue-controller-manager-b", render)]
    with prometheus_scrape(targets) as h:
        h.wait_for_samples(12)
        start, end = h.freeze()  # the ingest reads whole UTC days: no scrape after `end`
        for setup in ("nohonor", "honor"):
            src = h.source(setup)
            raw = src.raw_samples(ADMITTED, start, end)
            assert raw["instance"].n_unique() == 2  # both replicas really were stored
            one = per_series_increase(raw.filter(pl.col("instance") == "10.244.1.9:8443"),
                                      born=False)
            both = per_series_increase(raw, born=False)
            assert one > 0
            assert both > one
            with connect(tmp_path / f"{setup}.duckdb") as con:
                load = k8s_ingest.ingest_kubernetes_window(con, src, start, end,
                                                           cluster="lab")
                stored = con.execute(
                    "SELECT sum(increase) FROM kueue_counters WHERE metric = ? AND "
                    "cluster_queue = 'cluster-queue'", [ADMITTED]).fetchone()[0]
                pending = con.execute(
                    "SELECT max(max) FROM kueue_pending WHERE status = 'active'").fetchone()[0]
            # replica A's series (the lower instance: both up since before the read), once
            assert stored == one, setup
            assert pending == 3.0, setup  # 3 active in each replica's gauge, not 6
            assert any("2 Kueue replicas exported it" in w for w in load.warnings)


def test_leader_failover_between_two_targets(prometheus_scrape):
    def old_leader(s):  # v0.17 leader, then restarted as a follower (no counters any more)
        if s < FAILOVER_S:
            return body("kueue-v0.17.0-leader.prom", admitted=int(s // 2))
        return body("kueue-v0.17.0-follower.prom", admitted=None)

    def new_leader(s):  # a follower with gauges only until elected; its counters start at 1
        if s < FAILOVER_S:
            return body("kueue-v0.17.0-follower.prom", admitted=None)
        return body("kueue-v0.17.0-leader.prom", admitted=1 + int((s - FAILOVER_S) // 2))

    targets = [replica("a", "kueue-a", "10.244.1.9:8443", "kueue-controller-manager-a",
                       old_leader),
               replica("b", "kueue-b", "10.244.2.7:8443", "kueue-controller-manager-b",
                       new_leader)]
    with prometheus_scrape(targets) as h:
        h.wait_for_samples(int(FAILOVER_S) + 10)
        start, end = h.freeze()  # the ingest reads whole UTC days: no scrape after `end`
        for setup in ("nohonor", "honor"):
            src = h.source(setup)
            raw = src.raw_samples(ADMITTED, start, end)
            a = raw.filter(pl.col("instance") == "10.244.1.9:8443")
            b = raw.filter(pl.col("instance") == "10.244.2.7:8443")
            assert a.height
            assert b.height
            expected = per_series_increase(a, born=False) + per_series_increase(b, born=True)
            m = read_kueue_metrics(src, start, end, window=end - start,
                                   lookback=timedelta(seconds=1))
            got = m.counters.filter(pl.col("metric") == ADMITTED)
            assert got["increase"].to_list() == [expected], setup
            assert got["resets"].to_list() == [0], setup
            role = "exported_replica_role" if "exported_replica_role" in raw.columns \
                else "replica_role"
            assert set(raw[role]) == {"leader"}


def test_only_local_queue_metrics_clash_with_the_target(prometheus_scrape):
    # pkg/metrics/metrics.go: the LocalQueue metrics' `namespace` is a target label too; the
    # ClusterQueue metrics the ledger reads carry none of the target's labels
    render = lambda s: body("kueue-v0.17.0-leader.prom", admitted=int(s // 2))  # noqa: E731
    with prometheus_scrape([replica("lq", "kueue-lq", "10.244.1.9:8443",
                                    "kueue-controller-manager-a", render)]) as h:
        start, end = h.wait_for_samples(3)
        nohonor = h.source("nohonor")
        lq = nohonor.raw_samples("kueue_local_queue_pending_workloads", start, end)
        assert set(lq["exported_namespace"]) == {"default"}
        assert set(lq["namespace"]) == {"kueue-system"}
        cq = nohonor.raw_samples('{__name__=~"kueue_(pending_workloads|admitted_workloads_total|'
                                 'cluster_queue_resource_usage)"}', start, end)
        assert not [c for c in cq.columns if c.startswith("exported_")]
        honor = h.source("honor").raw_samples("kueue_local_queue_pending_workloads", start, end)
        assert set(honor["namespace"]) == {"default"}
