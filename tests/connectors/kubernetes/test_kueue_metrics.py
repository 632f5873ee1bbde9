"""Kueue counters with resets, pending gauges, admission-wait histogram, ClusterQueue quota."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.kueue_metrics import (
    counter_increases,
    kueue_admission_wait,
    kueue_cluster_queue_resources,
    kueue_pending_workloads,
    kueue_workload_counters,
    read_kueue_metrics,
    reset_aware_increases,
)
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.records import (
    KUEUE_COUNTER_SCHEMA,
    KUEUE_PENDING_SCHEMA,
    KUEUE_QUEUE_RESOURCE_SCHEMA,
    KUEUE_WAIT_BUCKET_SCHEMA,
    KUEUE_WAIT_SUMMARY_SCHEMA,
)
from tests.connectors.kubernetes.fakes import T0, Series, at, om_file
from tests.helpers import FIXTURES

HOUR = timedelta(hours=1)
TARGET = {"job": "kueue", "instance": "10.0.0.9:8443"}
S30 = timedelta(seconds=30)


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def frame(points: list[tuple[float, float]], **labels: str) -> pl.DataFrame:
    return pl.DataFrame({
        "ts": [t(s) for s, _ in points],
        "value": [float(v) for _, v in points],
        "__name__": ["c_total"] * len(points),
        **{k: [v] * len(points) for k, v in labels.items()},
    })


def presence(seconds: list[float], **labels: str) -> pl.DataFrame:
    return pl.DataFrame({"ts": [t(s) for s in seconds], **{k: [v] * len(seconds)
                                                           for k, v in labels.items()}})


def increases(df: pl.DataFrame, **kw) -> list[float]:
    return reset_aware_increases(df, **kw).sort("ts")["increase"].to_list()


def test_monotonic_counter_and_baseline():
    assert increases(frame([(0, 10), (30, 12), (60, 12), (90, 15)])) == [0, 2, 0, 3]


def test_drop_is_a_reset_new_value_counts_since_reset():
    assert increases(frame([(0, 245), (30, 246), (60, 1), (90, 3)])) == [0, 1, 1, 2]


def test_vanished_while_target_scraped_is_a_reset_even_without_a_drop():
    # controller restarted at 60 s; the child came back (incremented 50 times) at 600 s
    df = frame([(0, 40), (30, 42), (600, 50)], **TARGET)
    seen = presence([x * 30 for x in range(25)], **TARGET)
    assert increases(df, presence=seen) == [0, 2, 50]
    assert increases(df) == [0, 2, 8]  # without presence: plain difference


def test_gap_while_target_down_is_not_a_reset():
    df = frame([(0, 40), (30, 42), (600, 50)], **TARGET)
    seen = presence([0, 30, 600], **TARGET)  # nothing answered in between
    assert increases(df, presence=seen) == [0, 2, 8]


def test_presence_of_another_instance_does_not_force_a_reset():
    df = frame([(0, 40), (30, 42), (600, 50)], **TARGET)
    other = presence([x * 30 for x in range(25)], job="kueue", instance="10.0.0.10:8443")
    assert increases(df, presence=other) == [0, 2, 8]


def test_series_born_during_the_read_counts_from_zero():
    df = frame([(300, 1), (330, 2)], **TARGET)
    seen = presence([x * 30 for x in range(12)], **TARGET)
    assert increases(df, presence=seen) == [1, 1]
    # a series already there at the first scrape of its job: unknown history, baseline 0
    df0 = frame([(0, 7), (30, 8)], **TARGET)
    assert increases(df0, presence=seen) == [0, 1]


def test_counter_increases_per_window_and_by_labels_sum_extra_labels():
    a = frame([(0, 1), (1800, 2), (3600, 4), (5400, 5)], cluster_queue="cq", reason="Preempted",
              priority_class="high")
    b = frame([(0, 5), (1800, 6), (3600, 6), (5400, 6)], cluster_queue="cq", reason="Preempted",
              priority_class="low")
    out = counter_increases(pl.concat([a, b]), T0, T0 + 2 * HOUR,
                            by=["cluster_queue", "reason"], window=HOUR)
    assert out.select("window_start", "window_end", "cluster_queue", "increase").rows() == [
        (t(0), t(3600), "cq", 2.0), (t(3600), t(7200), "cq", 3.0)]


def test_samples_before_start_are_baselines_only():
    df = frame([(0, 10), (30, 11), (60, 15)])
    out = counter_increases(df, t(45), t(3600), by=[], window=HOUR)
    assert out["increase"].to_list() == [4.0]
    assert out["window_start"].to_list() == [t(45)]


# --------------------------------------------------------------------------- readers on files


def kueue_series() -> list[Series]:
    grid = [x * 30 + 20 for x in range(240)]  # 2 h at :20/:50
    up = [x for x in grid if not 3600 <= x < 3720]  # restart at 1 h, 2 min gap
    cq = {"cluster_queue": "cq-a", **TARGET}
    out: list[Series] = [
        ("kueue_pending_workloads", {**cq, "status": "active"},
         [(at(x), 2 if x < 1800 else 0) for x in up]),
        ("kueue_pending_workloads", {**cq, "status": "inadmissible"}, [(at(x), 0) for x in up]),
        ("kueue_pending_workloads", {**cq, "status": "active", "replica_role": "follower"},
         [(at(x), 99) for x in up]),
        ("kueue_admitted_workloads_total", cq,
         [(at(x), 100 + (x > 600) + (x > 1200)) for x in up if x < 3600]
         + [(at(x), 1) for x in up if x >= 5000]),
        ("kueue_evicted_workloads_total", {**cq, "reason": "Preempted",
                                           "underlying_cause": ""},
         [(at(x), 3 + (x > 900)) for x in up if x < 3600]),
    ]
    # admission wait histogram with le written "1" (3.x) for one bucket, "1.0" style elsewhere
    buckets = [("1", 0.0), ("2.5", 0.0), ("5.0", 1.0), ("+Inf", 1.0)]
    for le, extra in buckets:
        out.append(("kueue_admission_wait_time_seconds_bucket", {**cq, "le": le},
                    [(at(x), 10 + (extra if x > 600 else 0)) for x in up if x < 3600]))
    out.append(("kueue_admission_wait_time_seconds_count", cq,
                [(at(x), 10 + (x > 600)) for x in up if x < 3600]))
    out.append(("kueue_admission_wait_time_seconds_sum", cq,
                [(at(x), 5 + 4 * (x > 600)) for x in up if x < 3600]))
    for metric, value in (("kueue_cluster_queue_nominal_quota", 16),
                          ("kueue_cluster_queue_resource_usage", 4),
                          ("kueue_cluster_queue_borrowing_limit", 8)):
        for resource in ("nvidia.com/gpu", "cpu"):
            out.append((metric, {"cohort": "all", **cq, "flavor": "h100",
                                 "resource": resource, **TARGET},
                        [(at(x), value) for x in up]))
    return out


@pytest.fixture
def kueue_source(tmp_path: Path) -> OpenMetricsFileSource:
    return OpenMetricsFileSource(om_file(tmp_path / "kueue.om", kueue_series()))


def test_workload_counters(kueue_source):
    warnings: list[str] = []
    out = kueue_workload_counters(kueue_source, T0, T0 + 2 * HOUR, window=HOUR,
                                  warnings=warnings)
    assert out.schema == pl.Schema(KUEUE_COUNTER_SCHEMA)
    got = {(r["metric"], r["window_start"]): (r["increase"], r["resets"], r["reason"])
           for r in out.iter_rows(named=True)}
    assert got == {
        ("kueue_admitted_workloads_total", t(0)): (2.0, 0, None),
        ("kueue_admitted_workloads_total", t(3600)): (1.0, 1, None),  # after the restart
        ("kueue_evicted_workloads_total", t(0)): (1.0, 0, "Preempted"),
    }
    assert any("kueue_preempted_workloads_total" in w for w in warnings)


def test_pending_excludes_followers_and_integrates(kueue_source):
    out = kueue_pending_workloads(kueue_source, T0, T0 + 2 * HOUR, window=HOUR)
    assert out.schema == pl.Schema(KUEUE_PENDING_SCHEMA)
    first = out.filter((pl.col("window_start") == t(0)) & (pl.col("status") == "active"))
    row = first.row(0, named=True)
    assert row["max"] == 2.0
    assert row["last"] == 0.0
    assert row["workload_seconds"] == 2 * 1800.0  # 2 pending from :20 to 30:20, 30 s each


def test_admission_wait_histogram_merges_le_spellings(kueue_source):
    buckets, summary = kueue_admission_wait(kueue_source, T0, T0 + 2 * HOUR, window=HOUR)
    assert buckets.schema == pl.Schema(KUEUE_WAIT_BUCKET_SCHEMA)
    assert summary.schema == pl.Schema(KUEUE_WAIT_SUMMARY_SCHEMA)
    first = buckets.filter(pl.col("window_start") == t(0))
    assert first.select("le", "cumulative_count", "bucket_count").rows() == [
        (1.0, 0.0, 0.0), (2.5, 0.0, 0.0), (5.0, 1.0, 1.0), (float("inf"), 1.0, 0.0)]
    row = summary.filter(pl.col("window_start") == t(0)).row(0, named=True)
    assert (row["count"], row["sum_seconds"], row["mean_seconds"]) == (1.0, 4.0, 4.0)


def test_cluster_queue_resources_gpu_only(kueue_source):
    warnings: list[str] = []
    out = kueue_cluster_queue_resources(kueue_source, T0, T0 + 2 * HOUR, window=2 * HOUR,
                                        warnings=warnings)
    assert out.schema == pl.Schema(KUEUE_QUEUE_RESOURCE_SCHEMA)
    got = {r["metric"]: (r["resource"], r["mean"], r["last"]) for r in out.iter_rows(named=True)}
    assert got == {"usage": ("nvidia.com/gpu", 4.0, 4.0),
                   "nominal_quota": ("nvidia.com/gpu", 16.0, 16.0),
                   "borrowing_limit": ("nvidia.com/gpu", 8.0, 8.0)}
    assert any("lending_limit" in w for w in warnings)


# --------------------------------------------------------------------------- committed fixture


def test_fixture_admissions_and_waits_match_the_scenario():
    src = OpenMetricsFileSource(FIXTURES / "openmetrics" / "small-cluster.om.gz")
    m = read_kueue_metrics(src, T0, T0 + 4 * HOUR, window=4 * HOUR)
    admitted = {r["cluster_queue"]: r["increase"] for r in m.counters.filter(
        pl.col("metric") == "kueue_admitted_workloads_total").iter_rows(named=True)}
    # cq-training: 08:05 and 10:30:30 (after the restart: 42 -> absent -> 1); cq-inference 10:45
    assert admitted == {"cq-training": 2.0, "cq-inference": 1.0}
    waits = {r["cluster_queue"]: (r["count"], r["sum_seconds"])
             for r in m.wait_summary.iter_rows(named=True)}
    assert waits == {"cq-training": (2.0, 3690.0), "cq-inference": (1.0, 2.0)}
