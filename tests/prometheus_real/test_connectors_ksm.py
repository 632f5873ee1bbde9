"""Pod GPU allocations and node capacity read from the real Prometheus, checked against truth.

Truth: ``small-cluster.allocations.csv`` (GPU holder intervals). KSM scrapes at :10/:40 and the
interval convention is [first Running sample, last Running sample + 30 s), so each interval end
may be off by less than one scrape interval; the GPU-seconds by less than one interval per end.
"""

from __future__ import annotations

import csv
from datetime import datetime, timedelta

import pytest

from connectors.kubernetes.ksm import node_gpu_capacity, pod_gpu_allocations
from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource
from tests.helpers import FIXTURES

pytestmark = pytest.mark.prometheus

START, END = datetime(2025, 1, 6, 8), datetime(2025, 1, 6, 12)
SCRAPE = 30.0


@pytest.fixture(scope="module")
def source(real_prometheus, small_cluster_om):
    server = real_prometheus(small_cluster_om)
    return PrometheusHttpSource(PrometheusConfig(server.url, chunk=timedelta(hours=1)))


def iso(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


def truth() -> dict[str, tuple[datetime, datetime, int]]:
    out: dict[str, tuple[datetime, datetime, int]] = {}
    with (FIXTURES / "openmetrics" / "small-cluster.allocations.csv").open() as fh:
        for r in csv.DictReader(fh):
            if r["domain"] != "kubernetes":
                continue
            prev = out.get(r["key"])
            out[r["key"]] = (iso(r["start"]), iso(r["end"]), (prev[2] if prev else 0) + 1)
    return out


def test_per_pod_gpu_seconds_match_truth_within_one_scrape_per_end(source):
    notes: list[str] = []
    out = pod_gpu_allocations(source, START, END, notes=notes)
    want = truth()
    assert sorted(f"{r['namespace']}/{r['pod']}" for r in out.iter_rows(named=True)) \
        == sorted(want)
    for row in out.iter_rows(named=True):
        start, end, gpus = want[f"{row['namespace']}/{row['pod']}"]
        assert row["gpus"] == gpus
        assert row["node"] == "gpu-k8s-01"
        assert row["scrape_interval_s"] == SCRAPE
        assert 0 <= (row["start_ts"] - start).total_seconds() < SCRAPE
        assert 0 <= (row["end_ts"] - end).total_seconds() < SCRAPE or row["end_ts"] == END
        true_seconds = gpus * (end - start).total_seconds()
        assert abs(row["gpu_seconds"] - true_seconds) <= gpus * 2 * SCRAPE
    # the pending scrape with node="" and the 10 min of Succeeded before deletion are not held
    llm = out.filter(out["pod"].str.starts_with("llm-pretrain")).row(0, named=True)
    assert llm["start_ts"] == datetime(2025, 1, 6, 8, 6, 10)
    assert llm["end_ts"] == datetime(2025, 1, 6, 10, 30, 10)
    assert llm["samples"] == 288
    assert any("kube_pod_labels" in n for n in notes)  # not in the fixture: reported


def test_daily_style_partitions_add_up(source):
    whole = pod_gpu_allocations(source, START, END)
    parts = [pod_gpu_allocations(source, a, a + timedelta(hours=1))
             for a in (START + timedelta(hours=h) for h in range(4))]
    assert sum(p["gpu_seconds"].sum() for p in parts) == whole["gpu_seconds"].sum()


def test_real_equals_twin(source, small_cluster_om):
    twin = OpenMetricsFileSource(small_cluster_om)
    assert pod_gpu_allocations(source, START, END).equals(pod_gpu_allocations(twin, START, END))
    assert node_gpu_capacity(source, START, END).equals(node_gpu_capacity(twin, START, END))


def test_node_capacity(source):
    out = node_gpu_capacity(source, START, END)
    assert out.select("node", "capacity_gpus", "start_ts", "end_ts").rows() == [
        ("gpu-k8s-01", 2, datetime(2025, 1, 6, 8, 0, 10), END)]
