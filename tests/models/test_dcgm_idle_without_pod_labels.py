"""An exporter without pod labels: the idle pod that holds its node alone is still found, and
its invoice line splits busy and idle from the attributed utilization.

dcgm-exporter as in issue #363 (no kubelet pod-resources mapping: no namespace/pod/container
labels; one RTX A5000 on k8s-gpu1, 21 GiB in use at 0 % -- a pod holding the GPU without
computing), kube-state-metrics showing the pod Running on that node. Through the normal path:
``ingest_kubernetes_window`` on the OpenMetrics twin, then ``gpuledger build``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.cli import main
from gpuledger.ingest.kubernetes.run import ingest_kubernetes_window
from models.runner import connect
from tests.connectors.kubernetes.dcgm_fixtures import (
    Pod,
    exposition,
    kube_state_metrics,
    over_time,
    relabel,
)
from tests.connectors.kubernetes.fakes import om_file

DAY = datetime(2025, 1, 6)  # fakes.T0 is 08:00 of that day
UTIL = [x for x in exposition("dcgm-exporter-issue-363-no-pod-labels.prom")
        if x[0] == "DCGM_FI_DEV_GPU_UTIL"]
NOTEBOOK = Pod("team-a", "notebook-0", "uid-nb", "k8s-gpu1", 1, start=0, end=2 * 3600 - 30)


def idle_then_busy(metric: str, labels: dict, t: float) -> float:
    """0 % until 09:30 (as in #363), then 50 % until 10:00, idle again after the pod."""
    return 50.0 if 5400 <= t < 7200 else 0.0


def ingest_and_build(tmp_path: Path, series) -> Path:
    source = OpenMetricsFileSource(om_file(tmp_path / "cluster.om", series))
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        ingest_kubernetes_window(con, source, DAY, DAY + timedelta(days=1), cluster="c")
    assert main(["--db", str(db), "build"]) == 0
    return db


@pytest.fixture
def sole_pod_db(tmp_path: Path) -> Path:
    series = (kube_state_metrics({"k8s-gpu1": 1}, [NOTEBOOK], -600, 3 * 3600)
              + over_time(UTIL, -600, 3 * 3600, value=idle_then_busy))
    return ingest_and_build(tmp_path, series)


def test_the_idle_pod_is_found_by_the_idle_detector(sole_pod_db: Path):
    with duckdb.connect(str(sole_pod_db), read_only=True) as con:
        incidents = con.execute(
            "SELECT detail, node, gpus, start_ts, end_ts, gpu_uuids, evidence "
            "FROM incidents WHERE kind = 'idle_allocation'").fetchall()
    (detail, node, gpus, start, end, uuids, evidence), = incidents
    assert (node, gpus, uuids) == ("k8s-gpu1", 1, ["GPU-7ad09335-aadb-19c3-e3a8"])
    assert detail.startswith("pod team-a/notebook-0: 1 of its 1 GPU(s) on k8s-gpu1 below 5.0% "
                             "busy for 90.0 min")
    assert (start, end) == (DAY + timedelta(hours=8), DAY + timedelta(hours=9, minutes=30))
    assert "pod=notebook-0" in evidence


def test_the_invoice_line_splits_busy_and_idle_from_the_attributed_readings(sole_pod_db: Path):
    with duckdb.connect(str(sole_pod_db), read_only=True) as con:
        line = con.execute(
            "SELECT gpu_seconds, measured_gpu_hours, busy_gpu_hours, idle_gpu_hours "
            "FROM chargeback_periods WHERE period_kind = 'day' AND domain = 'kubernetes'"
        ).fetchall()
        attributed = con.execute(
            "SELECT attribution, pod_uid, count(*), sum(samples) FROM gpu_utilization "
            "WHERE pod IS NOT NULL GROUP BY ALL").fetchall()
    # 08:00-10:00 held: 2 GPU-hours, all measured; 30 min at 50 % busy
    assert line == [(7200, Decimal("2.000000"), Decimal("0.250000"), Decimal("1.750000"))]
    assert attributed == [("sole_pod_on_node", "uid-nb", 120, 240)]


def test_two_pods_on_the_node_are_not_guessed(tmp_path: Path):
    other = relabel(UTIL, UUID="GPU-7ad09335-aadb-19c3-e3a9", gpu="1", device="nvidia1")
    pods = [NOTEBOOK, Pod("team-b", "notebook-1", "uid-nb1", "k8s-gpu1", 1, start=0,
                          end=2 * 3600 - 30)]
    series = (kube_state_metrics({"k8s-gpu1": 2}, pods, -600, 3 * 3600)
              + over_time(UTIL + other, -600, 3 * 3600, value=0.0))
    db = ingest_and_build(tmp_path, series)
    with duckdb.connect(str(db), read_only=True) as con:
        idle = con.execute("SELECT count(*) FROM incidents WHERE kind = 'idle_allocation'"
                           ).fetchone()[0]
        lines = con.execute(
            "SELECT sum(gpu_seconds), sum(measured_gpu_hours) FROM chargeback_periods "
            "WHERE period_kind = 'day'").fetchone()
        warning, = con.execute("SELECT message FROM k8s_ingest_warnings "
                               "WHERE message LIKE '%carries no pod labels%'").fetchone()
    assert idle == 0
    assert lines == (14400, Decimal("0E-6"))  # charged; nothing measured for them
    assert "0 GPU-minute(s) attributed" in warning
    assert "240 GPU-minute(s) could not be attributed (240 with several pods)" in warning
    assert "DCGM_EXPORTER_KUBERNETES=true" in warning
