"""PrometheusHttpSource against the real Prometheus 2.42 backfilled from the small fixture.

* The raw-sample frames from the server equal the fixture twin's (OpenMetricsFileSource) for every
  metric family, whatever the window size -- samples on window edges are returned once.
* An absent metric is an empty frame; ``series`` agrees with the twin.
* Killing the server in the middle of a multi-window read raises ``SourceError``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest

from connectors.errors import SourceError
from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource

pytestmark = pytest.mark.prometheus

START, END = datetime(2025, 1, 6, 8), datetime(2025, 1, 6, 12)


@pytest.fixture(scope="module")
def prom(real_prometheus, small_cluster_om):
    return real_prometheus(small_cluster_om)


@pytest.fixture(scope="module")
def twin(small_cluster_om):
    return OpenMetricsFileSource(small_cluster_om)


def http(url: str, chunk: timedelta = timedelta(hours=6), **kw) -> PrometheusHttpSource:
    return PrometheusHttpSource(PrometheusConfig(url, chunk=chunk, **kw))


SELECTORS = [
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    'kube_pod_status_phase{phase="Running"}',
    'kube_pod_container_resource_requests{resource="nvidia_com_gpu"}',
    "kube_pod_info",
    "kube_node_status_capacity",
    'kueue_admitted_workloads_total{replica_role!="follower"}',
    "kueue_admission_wait_time_seconds_bucket",
    'kueue_pending_workloads{status=~"active|inadmissible"}',
]


@pytest.mark.parametrize("selector", SELECTORS)
def test_real_frames_equal_the_fixture_twin(prom, twin, selector):
    real = http(prom.url).raw_samples(selector, START, END)
    fake = twin.raw_samples(selector, START, END)
    assert real.height > 0
    assert real.columns == fake.columns
    assert real.equals(fake)


@pytest.mark.parametrize("chunk_minutes", [30, 60, 47])
def test_window_edges_on_sample_timestamps_are_not_double_counted(prom, twin, chunk_minutes):
    # DCGM scrapes at :00/:30: with 30/60-minute windows every edge carries a sample,
    # which Prometheus 2.x returns from both adjacent range selectors.
    src = http(prom.url, chunk=timedelta(minutes=chunk_minutes))
    real = src.raw_samples("DCGM_FI_DEV_GPU_UTIL", START, END)
    assert real.height == 1880  # 2 nodes x 2 GPUs x 480 scrapes - 2 x 20 (outage)
    key = [c for c in real.columns if c != "value"]
    assert real.select(key).is_unique().all()
    assert real.equals(twin.raw_samples("DCGM_FI_DEV_GPU_UTIL", START, END))


def test_everything_at_once_equals_the_twin(prom, twin, small_cluster):
    real = http(prom.url, chunk=timedelta(hours=1)).raw_samples('{__name__=~".+"}', START, END)
    assert real.height == small_cluster.total_samples
    assert real.sort(real.columns).equals(twin.raw_samples('{__name__=~".+"}', START, END)
                                          .sort(real.columns))


def test_post_and_gzip_give_the_same_frames(prom, twin):
    for src in (http(prom.url, method="POST"), http(prom.url, compress=True)):
        real = src.raw_samples('kube_pod_status_phase{phase="Running"}', START, END)
        assert real.equals(twin.raw_samples('kube_pod_status_phase{phase="Running"}', START, END))


def test_sub_window_is_half_open(prom):
    a = datetime(2025, 1, 6, 9, 0, 0)
    frame = http(prom.url).raw_samples(
        'DCGM_FI_DEV_GPU_UTIL{UUID="GPU-3f5c0a1e-7b2d-4c8e-9a61-0d2e4f6a8b01"}',
        a, a + timedelta(minutes=1))
    assert frame["ts"].to_list() == [a, a + timedelta(seconds=30)]


def test_absent_metric_is_empty(prom):
    frame = http(prom.url).raw_samples("kube_pod_labels", START, END)
    assert frame.height == 0
    assert frame.columns == ["ts", "value", "__name__"]


def test_series_endpoint_equals_twin(prom, twin):
    for match in ("kube_pod_info", "DCGM_FI_DEV_GPU_UTIL"):
        real = http(prom.url).series(match, START, END)
        assert real.equals(twin.series(match, START, END)), match


def test_query_range_for_dashboards_is_chunked(prom):
    src = http(prom.url)
    frame = src.query_range("sum(DCGM_FI_DEV_GPU_UTIL)", START, END - timedelta(seconds=1),
                            timedelta(seconds=1))  # 14,400 steps > 11,000: two requests
    assert frame.height == 14_400
    assert frame["ts"].is_unique().all()


def test_killing_the_server_mid_read_raises_source_error(real_prometheus, small_cluster_om):
    server = real_prometheus(small_cluster_om, fresh=True)
    src = http(server.url, chunk=timedelta(minutes=15), retries=2, backoff_s=0.05,
               timeout_s=5)
    chunks = src.iter_raw_samples("DCGM_FI_DEV_GPU_UTIL", START, END)
    first = next(chunks)
    assert isinstance(first, pl.DataFrame)
    assert first.height > 0
    server.kill()
    with pytest.raises(SourceError) as err:
        for _ in chunks:
            pass
    text = str(err.value)
    assert server.url in text
    assert "DCGM_FI_DEV_GPU_UTIL[900001ms]" in text
    assert "3 attempt" in text
    # the plain call fails the same way
    with pytest.raises(SourceError, match="did not answer"):
        src.raw_samples("kube_pod_info", START, END)
