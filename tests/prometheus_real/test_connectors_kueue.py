"""Kueue metrics read from the real Prometheus: the controller restart's counter reset.

At 10:00-10:02 the Kueue controller restarts: ``kueue_admitted_workloads_total`` for cq-training
goes 42 -> (absent for 30 min) -> 1; a reset-unaware last - first would say -40.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest

from connectors.kubernetes.kueue_metrics import read_kueue_metrics
from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource

pytestmark = pytest.mark.prometheus

START, END = datetime(2025, 1, 6, 8), datetime(2025, 1, 6, 12)


@pytest.fixture(scope="module")
def source(real_prometheus, small_cluster_om):
    server = real_prometheus(small_cluster_om)
    return PrometheusHttpSource(PrometheusConfig(server.url, chunk=timedelta(hours=1)))


def admitted(counters: pl.DataFrame) -> dict[tuple[datetime, str], tuple[float, int]]:
    rows = counters.filter(pl.col("metric") == "kueue_admitted_workloads_total")
    return {(r["window_start"], r["cluster_queue"]): (r["increase"], r["resets"])
            for r in rows.iter_rows(named=True)}


def test_counter_reset_is_handled(source):
    m = read_kueue_metrics(source, START, END, window=timedelta(hours=1))
    got = admitted(m.counters)
    h = [START + timedelta(hours=i) for i in range(4)]
    assert got == {
        (h[0], "cq-training"): (1.0, 0), (h[0], "cq-inference"): (0.0, 0),
        (h[1], "cq-training"): (0.0, 0), (h[1], "cq-inference"): (0.0, 0),
        (h[2], "cq-training"): (1.0, 1), (h[2], "cq-inference"): (1.0, 1),
        (h[3], "cq-training"): (0.0, 0), (h[3], "cq-inference"): (0.0, 0),
    }


def test_windows_starting_after_the_restart_count_the_reborn_series(source):
    # from 10:15 with a 10-minute look-back: neither the old values nor the restart are seen;
    # the series reappear while the controller is being scraped, so they count from zero
    m = read_kueue_metrics(source, datetime(2025, 1, 6, 10, 15), END,
                           window=timedelta(hours=2), lookback=timedelta(minutes=10))
    assert {k[1]: v[0] for k, v in admitted(m.counters).items()} == {
        "cq-training": 1.0, "cq-inference": 1.0}


def test_admission_wait_histogram(source):
    m = read_kueue_metrics(source, START, END, window=timedelta(hours=4))
    summary = {r["cluster_queue"]: (r["count"], r["sum_seconds"], r["mean_seconds"])
               for r in m.wait_summary.iter_rows(named=True)}
    assert summary == {"cq-training": (2.0, 3690.0, 1845.0), "cq-inference": (1.0, 2.0, 2.0)}
    training = m.wait_buckets.filter(pl.col("cluster_queue") == "cq-training")
    per_bucket = {r["le"]: r["bucket_count"] for r in training.iter_rows(named=True)
                  if r["bucket_count"]}
    assert per_bucket == {80.0: 1.0, 5120.0: 1.0}  # 60 s and 3630 s


def test_pending_workloads(source):
    m = read_kueue_metrics(source, START, END, window=timedelta(hours=4))
    seconds = {(r["cluster_queue"], r["status"]): r["workload_seconds"]
               for r in m.pending.iter_rows(named=True)}
    assert seconds[("cq-training", "active")] == 60 + 30 + 30
    # inadmissible 09:30:30 .. 10:30:00, minus the 2 min the controller was not scraped
    assert seconds[("cq-training", "inadmissible")] == 3570 - 120
    assert seconds[("cq-inference", "active")] == 0


def test_real_equals_twin(source, small_cluster_om):
    twin = OpenMetricsFileSource(small_cluster_om)
    real = read_kueue_metrics(source, START, END)
    fake = read_kueue_metrics(twin, START, END)
    for name in ("counters", "pending", "wait_buckets", "wait_summary", "queue_resources"):
        assert getattr(real, name).equals(getattr(fake, name)), name
    assert real.warnings == fake.warnings
