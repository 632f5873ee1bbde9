"""Kueue run with several replicas, per release: the leader's series, one replica per instant,
never the sum of replicas; counter resets right across a leader failover; exported_* labels.

Scrapes are built from the exposition fixtures (pkg/metrics/metrics.go at v0.10.0, v0.15.0,
v0.16.1, v0.17.0; tests/fixtures/expositions) through ``kueue_scrapes`` and read back with the
OpenMetrics twin. Replica A scrapes at :05/:35, replica B at :20/:50, every 30 s.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.kueue_metrics import read_kueue_metrics
from connectors.kubernetes.kueue_replicas import one_replica, series_label
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.records import SAMPLE_REJECT_SCHEMA
from tests.connectors.kubernetes.fakes import T0, T0_S, om_file
from tests.connectors.kubernetes.kueue_scrapes import body, kueue_target, replica_series

HOUR = timedelta(hours=1)
A = kueue_target("10.244.1.9:8443", "kueue-controller-manager-7b9c6d5f4-q8w2n")
B = kueue_target("10.244.2.7:8443", "kueue-controller-manager-7b9c6d5f4-z4k9d")
CQ = "cluster-queue"
CHILDREN = 2  # admitted/quota-reserved children: priority_class high-priority and none


def grid(offset: float, first: float = -3600, last: float = 7200) -> list[float]:
    return [T0_S + s for s in range(int(first + offset), int(last), 30)]


def admitted_every_5_min(t: float, base: int = 100) -> int:
    return base + (int(t - T0_S) // 300)


def source(tmp_path: Path, *replicas, honor: bool = False) -> OpenMetricsFileSource:
    series = []
    for times, render, target in replicas:
        series += replica_series(times, render, target, honor=honor)
    return OpenMetricsFileSource(om_file(tmp_path / "kueue.om", series))


def counters(m, metric: str = "kueue_admitted_workloads_total") -> dict:
    rows = m.counters.filter(pl.col("metric") == metric)
    return {(r["window_start"], r["cluster_queue"], r["reason"]): (r["increase"], r["resets"])
            for r in rows.iter_rows(named=True)}


def pending(m) -> dict:
    return {(r["window_start"], r["status"]): (r["mean"], r["workload_seconds"])
            for r in m.pending.iter_rows(named=True)}


def gpu_usage(m) -> dict:
    rows = m.queue_resources.filter(pl.col("resource") == "nvidia.com/gpu")
    return {r["metric"]: r["mean"] for r in rows.iter_rows(named=True)}


def leader(fixture: str):
    return lambda t: body(fixture, admitted=admitted_every_5_min(t))


def follower(fixture: str):
    return lambda t: body(fixture, admitted=None)  # a follower fixture has gauges only


@pytest.mark.parametrize("honor", [False, True])
def test_v017_leader_and_follower_read_once(tmp_path: Path, honor: bool):
    src = source(tmp_path, (grid(5), leader("kueue-v0.17.0-leader.prom"), A),
                 (grid(20), follower("kueue-v0.17.0-follower.prom"), B), honor=honor)
    m = read_kueue_metrics(src, T0, T0 + 2 * HOUR, window=HOUR)
    # 12 admissions an hour in each of the 2 priority-class children: the leader's, once
    assert counters(m) == {(T0, CQ, None): (12.0 * CHILDREN, 0),
                           (T0 + HOUR, CQ, None): (12.0 * CHILDREN, 0)}
    # both replicas report 3 active / 1 inadmissible: read 3 and 1, not 6 and 2, and the
    # same workload-seconds as the leader alone (the last sample stands up to the read's end)
    alone = read_kueue_metrics(source(tmp_path, (grid(5), leader("kueue-v0.17.0-leader.prom"),
                                                 A), honor=honor), T0, T0 + 2 * HOUR,
                               window=HOUR)
    assert pending(m) == pending(alone) == {
        (T0, "active"): (3.0, 3 * 3600.0), (T0, "inadmissible"): (1.0, 3600.0),
        (T0 + HOUR, "active"): (3.0, 3 * 3595.0), (T0 + HOUR, "inadmissible"): (1.0, 3595.0)}
    for name in ("counters", "wait_buckets", "wait_summary", "queue_resources"):
        assert getattr(m, name).equals(getattr(alone, name)), name
    assert gpu_usage(m) == {"usage": 8.0, "reservation": 8.0, "nominal_quota": 16.0,
                            "borrowing_limit": 4.0, "lending_limit": 8.0}
    assert any("kueue_pending_workloads: 2 Kueue replicas exported it" in w for w in m.warnings)


def test_before_016_every_replica_emitting_counters_is_not_summed(tmp_path: Path):
    # no replica_role before 0.16 (kueue#6772): here both replicas expose the same counters
    src = source(tmp_path, (grid(5), leader("kueue-v0.10.0-leader.prom"), A),
                 (grid(20), leader("kueue-v0.10.0-leader.prom"), B))
    m = read_kueue_metrics(src, T0, T0 + 2 * HOUR, window=HOUR)
    # v0.10 has no priority_class: one child of 12 a hour, from one replica
    assert counters(m) == {(T0, CQ, None): (12.0, 0), (T0 + HOUR, CQ, None): (12.0, 0)}
    assert counters(m, "kueue_evicted_workloads_total") == {
        (T0, CQ, "Preempted"): (12.0, 0), (T0, CQ, "PodsReadyTimeout"): (12.0, 0),
        (T0 + HOUR, CQ, "Preempted"): (12.0, 0), (T0 + HOUR, CQ, "PodsReadyTimeout"): (12.0, 0)}
    assert {r["cluster_queue"]: r["count"] for r in m.wait_summary.iter_rows(named=True)} == {
        CQ: 12.0}
    assert pending(m)[(T0, "active")] == (3.0, 3 * 3600.0)


def test_v015_follower_without_counters(tmp_path: Path):
    src = source(tmp_path, (grid(5), leader("kueue-v0.15.0-leader.prom"), A),
                 (grid(20), follower("kueue-v0.15.0-follower.prom"), B))
    m = read_kueue_metrics(src, T0, T0 + 2 * HOUR, window=HOUR)
    assert counters(m)[(T0, CQ, None)] == (12.0 * CHILDREN, 0)
    assert pending(m)[(T0, "inadmissible")] == (1.0, 3600.0)


def test_v016_leader_labelled_follower_is_still_read(tmp_path: Path):
    # kueue#8713 / #9288: the leader says replica_role="follower" too; a reader filtering
    # replica_role!="follower" reads nothing here
    src = source(tmp_path, (grid(5), leader("kueue-v0.16.1-leader-all-follower.prom"), A),
                 (grid(20), follower("kueue-v0.16.1-follower.prom"), B))
    m = read_kueue_metrics(src, T0, T0 + 2 * HOUR, window=HOUR)
    assert counters(m)[(T0, CQ, None)] == (12.0 * CHILDREN, 0)
    assert pending(m)[(T0, "active")] == (3.0, 3 * 3600.0)
    assert gpu_usage(m)["usage"] == 8.0
    assert any('every series says replica_role="follower"' in w for w in m.warnings)


def test_v016_stale_follower_gauge_beside_the_leader_child(tmp_path: Path):
    # the leader's pending gauge has a fresh "leader" child (3) and the stale "follower" child
    # set before the election (5); quota gauges exist only as "follower" (kueue#9288)
    src = source(tmp_path, (grid(5), leader("kueue-v0.16.1-leader.prom"), A),
                 (grid(20), follower("kueue-v0.16.1-follower.prom"), B))
    m = read_kueue_metrics(src, T0, T0 + 2 * HOUR, window=HOUR)
    assert pending(m)[(T0, "active")] == (3.0, 3 * 3600.0)
    assert gpu_usage(m)["nominal_quota"] == 16.0
    assert counters(m)[(T0 + HOUR, CQ, None)] == (12.0 * CHILDREN, 0)


def test_leader_failover_counts_each_leader_once_with_resets_right(tmp_path: Path):
    fail = T0_S + 3600  # A (leader since long before) is gone from here

    def old_leader(t):
        return None if t >= fail else body("kueue-v0.17.0-leader.prom",
                                           admitted=admitted_every_5_min(t, base=500))

    def new_leader(t):
        if t < fail + 30:  # the lease expires; until then B is a follower without counters
            return body("kueue-v0.17.0-follower.prom", admitted=None)
        # elected: its counters are born at 1 and count its own admissions
        return body("kueue-v0.17.0-leader.prom", admitted=1 + int(t - fail - 30) // 300)

    src = source(tmp_path, (grid(5), old_leader, A), (grid(20), new_leader, B))
    m = read_kueue_metrics(src, T0, T0 + 2 * HOUR, window=HOUR)
    # hour 1: A's 12 per child; hour 2: B's born value 1 plus 11 more per child (its last
    # sample, 7190 s, is 3530 s after the election). No reset: A never came back lower.
    assert counters(m) == {(T0, CQ, None): (12.0 * CHILDREN, 0),
                           (T0 + HOUR, CQ, None): (12.0 * CHILDREN, 0)}
    assert pending(m)[(T0 + HOUR, "active")][0] == 3.0
    # the same A restarting in place (same instance, counters from 0) is a reset of its series
    restart = T0_S + 1800

    def restarted(t):
        n = admitted_every_5_min(t, base=500) if t < restart else 1 + int(t - restart) // 300
        return body("kueue-v0.17.0-leader.prom", admitted=n)

    again = read_kueue_metrics(source(tmp_path, (grid(5), restarted, A),
                                      (grid(20), follower("kueue-v0.17.0-follower.prom"), B)),
                               T0, T0 + HOUR, window=HOUR)
    # 6 before the restart, then 1 + 5 after it, per child; one reset per child
    assert counters(again) == {(T0, CQ, None): (12.0 * CHILDREN, CHILDREN)}


def test_labels_moved_to_exported_are_read_like_honoured_ones(tmp_path: Path):
    # a site whose relabelings put every label Kueue's metrics carry on the target too: with
    # honor_labels false the series' values sit in exported_* and must be read from there
    clash = {**A, "cluster_queue": "x", "status": "x", "reason": "x", "resource": "x",
             "flavor": "x", "cohort": "x", "le": "x", "replica_role": "follower"}
    render = leader("kueue-v0.17.0-leader.prom")
    honoured = read_kueue_metrics(source(tmp_path, (grid(5), render, A), honor=True),
                                  T0, T0 + 2 * HOUR, window=HOUR)
    moved = read_kueue_metrics(source(tmp_path, (grid(5), render, clash), honor=False),
                               T0, T0 + 2 * HOUR, window=HOUR)
    for name in ("counters", "pending", "wait_buckets", "wait_summary", "queue_resources"):
        assert getattr(moved, name).equals(getattr(honoured, name)), name
    assert honoured.counters.height
    assert honoured.wait_buckets.height


def test_unusable_kueue_samples_are_rejects(tmp_path: Path):
    def broken(t):
        samples = body("kueue-v0.17.0-leader.prom", admitted=admitted_every_5_min(t))
        out = []
        for metric, labels, value in samples:
            if metric == "kueue_admitted_workloads_total" and t == T0_S + 605:
                value = float("nan")
            if metric == "kueue_pending_workloads" and t == T0_S + 905:
                value = float("inf")
            if metric.endswith("_bucket") and labels["le"] == "+Inf":
                labels = {**labels, "le": "many"}
            out.append((metric, labels, value))
        return out

    sink: list[pl.DataFrame] = []
    m = read_kueue_metrics(source(tmp_path, (grid(5), broken, A)), T0, T0 + HOUR,
                           window=HOUR, rejects=sink)
    rejects = pl.concat(sink)
    assert rejects.schema == pl.Schema(SAMPLE_REJECT_SCHEMA)
    got = rejects.group_by("metric", "reason").len().sort("metric").rows()
    assert got == [
        ("kueue_admission_wait_time_seconds_bucket",
         "expected a numeric le label on a histogram bucket, found none or text", 2 * 240),
        ("kueue_admitted_workloads_total", "expected a number, found NaN", CHILDREN),
        ("kueue_pending_workloads", "expected a finite number of workloads, found ±Inf", 2),
    ]
    # the NaN sample is skipped, not a reset: the next sample's increase covers it
    assert counters(m) == {(T0, CQ, None): (12.0 * CHILDREN, 0)}


# --------------------------------------------------------------------------- the rule itself


def frame(rows: list[tuple[str, float, str | None, float]]) -> pl.DataFrame:
    """(instance, seconds after T0, replica_role, value) of one series group ``cq``."""
    return pl.DataFrame(
        {"ts": [T0 + timedelta(seconds=s) for _, s, _, _ in rows],
         "value": [v for *_, v in rows],
         "job": ["kueue"] * len(rows), "instance": [i for i, *_ in rows],
         "replica_role": [r for _, _, r, _ in rows], "cq": ["a"] * len(rows)},
        schema_overrides={"replica_role": pl.String})


def kept(df: pl.DataFrame, counter: bool = False) -> list[tuple[str, int]]:
    out = one_replica(df, ["cq"], counter=counter)
    return sorted((i, int((t - T0).total_seconds())) for i, t in out.select("instance", "ts")
                  .iter_rows())


def test_rank_then_serving_longest_then_instance():
    both = [(i, s, None, 1.0) for s in range(0, 300, 30) for i in ("b:1", "a:1")]
    assert {i for i, _ in kept(frame(both))} == {"a:1"}  # a tie: the lower instance
    b_first = [("b:1", s, None, 1.0) for s in range(0, 300, 30)] + \
        [("a:1", s, None, 1.0) for s in range(120, 300, 30)]
    assert {i for i, _ in kept(frame(b_first))} == {"b:1"}  # b has been serving longer
    roles = [("a:1", s, "follower", 1.0) for s in range(0, 300, 30)] + \
        [("b:1", s + 15, "leader", 1.0) for s in range(0, 300, 30)]
    assert {i for i, _ in kept(frame(roles))} == {"b:1"}  # the leader, whatever its name
    shuffled = frame(roles).sample(fraction=1.0, shuffle=True, seed=3)
    assert kept(shuffled) == kept(frame(roles))


def test_a_leader_gone_stops_covering_at_its_last_sample():
    rows = [("a:1", s, "leader", 1.0) for s in range(0, 150, 30)] + \
        [("b:1", s + 15, "follower", 1.0) for s in range(0, 300, 30)]
    # a's last sample is at 120 s: b's samples from 135 s on are read, none before
    assert kept(frame(rows)) == [("a:1", s) for s in range(0, 150, 30)] + \
        [("b:1", s) for s in range(135, 300, 30)]


def test_a_group_only_one_replica_has_is_read_from_it():
    a = frame([("a:1", s, "leader", 1.0) for s in range(0, 120, 30)])
    b = frame([("b:1", s, "follower", 2.0) for s in range(0, 120, 30)]).with_columns(
        cq=pl.lit("only-on-b"))
    out = one_replica(pl.concat([a, b]), ["cq"], counter=False)
    assert out.group_by("cq").agg(pl.col("instance").unique()).sort("cq").rows() == [
        ("a", ["a:1"]), ("only-on-b", ["b:1"])]


def test_within_a_replica_counters_keep_every_role_child_gauges_the_best():
    rows = [("a:1", s, role, v) for s in (0, 30) for role, v in (("follower", 5.0),
                                                                  ("leader", 3.0))]
    gauge = one_replica(frame(rows), ["cq"], counter=False)
    assert gauge["value"].to_list() == [3.0, 3.0]
    counter = one_replica(frame(rows), ["cq"], counter=True)
    assert sorted(counter["value"].to_list()) == [3.0, 3.0, 5.0, 5.0]


def test_series_label_prefers_the_exported_value():
    df = pl.DataFrame({"namespace": ["kueue-system", "kueue-system"],
                       "exported_namespace": ["team-a", None]})
    assert df.select(series_label(df, "namespace"))["namespace"].to_list() == [
        "team-a", "kueue-system"]
    assert df.with_columns(q=series_label(df, "cluster_queue"))["q"].to_list() == [None, None]
