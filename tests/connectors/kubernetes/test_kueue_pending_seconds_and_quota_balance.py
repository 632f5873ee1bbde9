"""Seconds with pending workloads, covered seconds, and borrowed / lendable GPU-seconds per scrape.

Series shaped like Kueue's (labels of ``pkg/metrics/metrics.go``: ``cluster_queue``, ``status``;
``cohort``, ``cluster_queue``, ``flavor``, ``resource``), values our scenario.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.kueue_metrics import (
    kueue_cluster_queue_resources,
    kueue_pending_workloads,
)
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.fakes import T0, Series, at, om_file

HOUR = timedelta(hours=1)
TARGET = {"job": "kueue", "instance": "10.0.0.9:8443"}
SCRAPES = [x * 30 for x in range(120)]  # one hour every 30 s
GPU = {"cohort": "research", "flavor": "h100", "resource": "nvidia.com/gpu", **TARGET}


def source(tmp_path: Path, series: list[Series]) -> OpenMetricsFileSource:
    return OpenMetricsFileSource(om_file(tmp_path / "kueue.om", series))


def test_pending_seconds_count_time_with_any_pending_workload_and_skip_gaps(tmp_path):
    # 3 pending for the first 10 min, 0 after; a 5-minute scrape gap at 30..35 min
    up = [x for x in SCRAPES if not 1800 <= x < 2100]
    series: list[Series] = [
        ("kueue_pending_workloads", {"cluster_queue": "cq-a", "status": "active", **TARGET},
         [(at(x), 3 if x < 600 else 0) for x in up]),
        ("kueue_pending_workloads", {"cluster_queue": "cq-a", "status": "inadmissible",
                                     **TARGET}, [(at(x), 1) for x in up]),
    ]
    out = kueue_pending_workloads(source(tmp_path, series), T0, T0 + HOUR, window=HOUR)
    got = {r["status"]: (r["pending_seconds"], r["workload_seconds"], r["covered_seconds"])
           for r in out.iter_rows(named=True)}
    covered = 3600.0 - 300.0  # the gap is not covered
    assert got == {"active": (600.0, 1800.0, covered),
                   "inadmissible": (covered, covered, covered)}


def quota_series(usage: list[tuple[float, float]], nominal: float,
                 lending: float | None) -> list[Series]:
    cq = {"cluster_queue": "cq-a", **GPU}
    out: list[Series] = [
        ("kueue_cluster_queue_resource_usage", cq, usage),
        ("kueue_cluster_queue_nominal_quota", cq, [(t, nominal) for t, _ in usage]),
    ]
    if lending is not None:
        out.append(("kueue_cluster_queue_lending_limit", cq, [(t, lending) for t, _ in usage]))
    return out


def usage_row(tmp_path: Path, series: list[Series]) -> dict:
    out = kueue_cluster_queue_resources(source(tmp_path, series), T0, T0 + HOUR, window=HOUR)
    rows = out.filter(pl.col("metric") == "usage").to_dicts()
    assert len(rows) == 1
    return rows[0]


def test_borrowing_is_usage_above_nominal_per_scrape_not_per_hourly_mean(tmp_path):
    # nominal 4: usage 2 for 30 min (2 unused), then 6 for 30 min (2 borrowed): the mean is 4
    usage = [(at(x), 2 if x < 1800 else 6) for x in SCRAPES]
    row = usage_row(tmp_path, quota_series(usage, 4, None))
    assert row["mean"] == 4.0
    assert row["value_seconds"] == 4 * 3600.0
    assert row["covered_seconds"] == 3600.0
    assert row["above_nominal_seconds"] == 2 * 1800.0
    assert row["lendable_seconds"] == 2 * 1800.0  # no lending limit: all unused quota


@pytest.mark.parametrize(("lending", "lendable"), [(1.0, 1.0), (float("inf"), 3.0),
                                                    (5.0, 3.0)])
def test_lending_limit_caps_lendable_quota_and_inf_means_unset(tmp_path, lending, lendable):
    usage = [(at(x), 1) for x in SCRAPES]  # nominal 4: 3 unused all hour
    row = usage_row(tmp_path, quota_series(usage, 4, lending))
    assert row["lendable_seconds"] == lendable * 3600.0
    assert row["above_nominal_seconds"] == 0.0


def test_quota_balance_only_on_usage_rows(tmp_path):
    usage = [(at(x), 1) for x in SCRAPES]
    out = kueue_cluster_queue_resources(source(tmp_path, quota_series(usage, 4, 2)), T0,
                                        T0 + HOUR, window=HOUR)
    others = out.filter(pl.col("metric") != "usage")
    assert sorted(others["metric"].to_list()) == ["lending_limit", "nominal_quota"]
    assert others["lendable_seconds"].null_count() == others.height
    assert sorted(others["value_seconds"].to_list()) == [2 * 3600.0, 4 * 3600.0]
