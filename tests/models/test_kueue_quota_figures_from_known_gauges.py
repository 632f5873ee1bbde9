"""kueue_quota_hourly / _weekly from hand-made Kueue gauges with known figures.

The gauges are written as OpenMetrics samples (labels as Kueue's ``pkg/metrics/metrics.go``
declares them: cohort, cluster_queue, flavor, resource; cluster_queue, status), read by the
real connector and stored as the ingest stores them, then modelled. Scenario, 2025-01-06:

* 08:00-09:00, cohort ``research``: ``cq-a`` nominal 4 GPUs, 4 in use for 30 min then 6 for
  30 min (borrows 2 above nominal for 30 min = 1 GPU-hour); ``cq-b`` nominal 4, 1 in use,
  lending limit 2 (3 unused, of which 2 may be lent = 2 GPU-hours lendable, 1 taken by cq-a).
* ``cq-c`` without cohort, nominal 8: 4 in use 08:00-09:00 (50 %), 1 workload pending for the
  first 20 min; no samples 09:00-10:00 (unknown); 8 in use 10:00-11:00 (100 %).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import duckdb
import polars as pl
import pytest

from connectors.kubernetes.kueue_metrics import (
    kueue_cluster_queue_resources,
    kueue_pending_workloads,
)
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from models import schema
from models.kueue_quota import build_kueue_quota
from models.runner import connect, replace_rows
from tests.connectors.kubernetes.fakes import T0, Series, at, om_file

DAY = date(2025, 1, 6)
TARGET = {"job": "kueue", "instance": "10.0.0.9:8443"}
H8 = [x * 30 for x in range(120)]  # 08:00 .. 08:59:30
H10 = [7200 + x * 30 for x in range(120)]  # 10:00 .. 10:59:30
GPU = {"flavor": "h100", "resource": "nvidia.com/gpu", **TARGET}


def gauge(metric: str, labels: dict[str, str], points: list[tuple[int, float]]) -> Series:
    return (f"kueue_cluster_queue_{metric}", {**labels, **GPU},
            [(at(x), v) for x, v in points])


def scenario() -> list[Series]:
    a = {"cohort": "research", "cluster_queue": "cq-a"}
    b = {"cohort": "research", "cluster_queue": "cq-b"}
    c = {"cluster_queue": "cq-c"}  # Kueue's cohort="" is dropped by Prometheus
    return [
        gauge("nominal_quota", a, [(x, 4) for x in H8]),
        gauge("resource_usage", a, [(x, 4 if x < 1800 else 6) for x in H8]),
        gauge("nominal_quota", b, [(x, 4) for x in H8]),
        gauge("resource_usage", b, [(x, 1) for x in H8]),
        gauge("lending_limit", b, [(x, 2) for x in H8]),
        gauge("borrowing_limit", b, [(x, float("inf")) for x in H8]),  # unset
        gauge("nominal_quota", c, [(x, 8) for x in H8 + H10]),
        gauge("resource_usage", c, [(x, 4) for x in H8] + [(x, 8) for x in H10]),
        gauge("resource_reservation", c, [(x, 4) for x in H8] + [(x, 8) for x in H10]),
        ("kueue_pending_workloads", {"cluster_queue": "cq-c", "status": "active", **TARGET},
         [(at(x), 1 if x < 1200 else 0) for x in H8 + H10]),
    ]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("kueue-quota")
    src = OpenMetricsFileSource(om_file(tmp / "kueue.om", scenario()))
    start, end = T0.replace(hour=0), T0.replace(hour=0).replace(day=7)
    resources = kueue_cluster_queue_resources(src, start, end)
    pending = kueue_pending_workloads(src, start, end)
    db = tmp / "ledger.duckdb"
    with connect(db) as con:
        for table, frame in ((schema.KUEUE_QUEUE_RESOURCES, resources),
                             (schema.KUEUE_PENDING, pending)):
            replace_rows(con, table, frame.with_columns(cluster=pl.lit("k8s")))
        build_kueue_quota(con, DAY, DAY)
    return db


def rows(db: Path, sql: str) -> list[dict]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).pl().to_dicts()


def hour(db: Path, h: int, scope: str, name: str) -> dict:
    col = "cluster_queue" if scope == "queue" else "cohort"
    found = rows(db, f"SELECT * FROM kueue_quota_hourly WHERE scope = '{scope}' "
                     f"AND {col} = '{name}' AND hour(hour_start) = {h}")
    assert len(found) == 1
    return found[0]


FIGURES = ("nominal_gpu_hours", "usage_gpu_hours", "borrowed_gpu_hours",
           "lendable_gpu_hours", "lent_gpu_hours", "quota_used_share")


def figures(row: dict) -> tuple:
    return tuple(row[f] for f in FIGURES)


def test_a_queue_at_half_its_quota_for_an_hour_used_50_percent(ledger):
    row = hour(ledger, 8, "queue", "cq-c")
    assert row["known"]
    assert row["covered_seconds"] == 3600.0
    assert figures(row) == (8.0, 4.0, 0.0, 0.0, 0.0, 0.5)  # no cohort: nothing to lend
    assert row["reservation_gpu_hours"] == 4.0
    assert row["pending_active_seconds"] == 1200.0
    assert row["pending_inadmissible_seconds"] == 0.0


def test_borrowing_2_gpus_above_nominal_for_30_minutes_is_1_gpu_hour(ledger):
    row = hour(ledger, 8, "queue", "cq-a")
    assert figures(row) == (4.0, 5.0, 1.0, 0.0, 0.0, 1.25)


def test_lending_limit_caps_lendable_quota_and_lent_is_what_was_borrowed(ledger):
    row = hour(ledger, 8, "queue", "cq-b")
    assert figures(row) == (4.0, 1.0, 0.0, 2.0, 1.0, 0.25)
    assert row["lending_limit_gpus"] == 2.0
    assert row["borrowing_limit_gpus"] is None  # +Inf: unset


def test_cohort_of_two_is_the_sum_of_its_queues(ledger):
    row = hour(ledger, 8, "cohort", "research")
    assert row["known"]
    assert row["cluster_queue"] is None
    assert figures(row) == (8.0, 6.0, 1.0, 2.0, 1.0, 0.75)
    assert row["pending_active_seconds"] is None  # seconds with pending work do not add


def test_a_queue_without_cohort_is_its_own_cohort(ledger):
    assert figures(hour(ledger, 8, "cohort", "cq-c")) == figures(hour(ledger, 8, "queue", "cq-c"))


def test_an_hour_without_samples_is_unknown_never_0_percent(ledger):
    row = hour(ledger, 9, "queue", "cq-c")
    assert row["known"] is False
    assert row["covered_seconds"] == 0.0
    assert all(v is None for v in figures(row))
    assert hour(ledger, 9, "cohort", "research")["quota_used_share"] is None


def test_week_share_counts_known_hours_only(ledger):
    week = rows(ledger, "SELECT * FROM kueue_quota_weekly WHERE scope = 'queue' "
                        "AND cluster_queue = 'cq-c'")
    assert len(week) == 1
    w = week[0]
    assert (w["week"], w["week_start"], w["hours"], w["known_hours"]) == (
        "2025-W02", DAY, 24, 2)
    assert (w["nominal_gpu_hours"], w["usage_gpu_hours"], w["quota_used_share"]) == (
        16.0, 12.0, 0.75)
    assert w["pending_active_seconds"] == 1200.0  # 08:00-08:20 only


def test_rebuilding_a_day_changes_nothing(ledger):
    every = "SELECT * FROM kueue_quota_hourly ORDER BY ALL"
    weekly = "SELECT * FROM kueue_quota_weekly ORDER BY ALL"
    before = rows(ledger, every), rows(ledger, weekly)
    with connect(ledger) as con:
        build_kueue_quota(con, DAY, DAY)
    assert (rows(ledger, every), rows(ledger, weekly)) == before
