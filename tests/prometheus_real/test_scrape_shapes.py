"""What a real Prometheus stores when it scrapes exporters with and without ``honor_labels``.

kube-state-metrics' own expected exposition (from its internal/store/pod_test.go; copied to
tests/fixtures/expositions/kube-state-metrics-pod_test.prom) is served by the scrape harness and
scraped by two Prometheus 2.42 servers, one with ``honor_labels: true`` and one with ``false`` (the
ServiceMonitor default), with the target labels a ServiceMonitor gives the exporter's pod. Read
back through
``PrometheusHttpSource.raw_samples``:

* honor_labels false: the workload's namespace/pod/container are in ``exported_*``, the plain
  labels name kube-state-metrics' own pod; honor_labels true: the workload's values stay in the
  plain labels, and target labels the series lacks (``container`` on kube_pod_info) are added;
* a series' own ``job``/``instance`` (and ``node``, where a relabeling puts the exporter's node on
  the target) become ``exported_*`` without honor and win with it; an empty ``node=""`` blocks
  the target's ``node`` with honor and not without;
* a body given as a callable of time is re-rendered on every scrape (a pod goes Pending ->
  Running -> Succeeded), and the window ``wait_for_samples`` returns reads the same later;
* both servers scrape each target at the same instants, so on a ``common=True`` window they
  hold the same scrapes of the same bodies;
* ``freeze()`` stops scraping while the servers keep answering: reads past the window see
  nothing new;
* a body that raises fails ``wait_for_samples`` at once, with the traceback, and leaving the
  harness stops both servers and the exporter.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta

import polars as pl
import pytest
import requests

from tests.prometheus_real.scrape import (
    EXPOSITIONS,
    ScrapeHarnessError,
    ScrapeTimeout,
    Target,
    dcgm_exporter,
    exposition,
    kube_pod_status_phase,
    kube_state_metrics,
)

pytestmark = pytest.mark.prometheus

KSM_POD = EXPOSITIONS / "kube-state-metrics-pod_test.prom"
KSM = kube_state_metrics(KSM_POD.read_text(encoding="utf-8"))
EXPORTER = {  # the target labels of KSM's own pod (kube_state_metrics() defaults)
    "namespace": "monitoring", "pod": "kube-state-metrics-6d5f8b9c4-x2x7k",
    "container": "kube-state-metrics", "service": "kube-state-metrics", "endpoint": "http",
    "instance": "10.244.0.17:8080", "job": "kube-state-metrics",
}

# Synthetic (not upstream): a series exposing the labels Prometheus sets itself, and an empty one.
PROBE = dcgm_exporter(
    exposition(['label_probe{namespace="ns-a",pod="pod-a",container="main",job="exposed-job",'
                'instance="exposed:1",node=""} 1',
                'node_probe{pod="pod-b",node="gpu-k8s-07"} 1']),
    job="label-probe", path="/metrics/probe", node="gpu-k8s-01",  # a site relabeling node in
)


class Lifecycle:
    """A pod Pending for 2.5 s after its first scrape, Running for 3 s, then Succeeded."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.lock = threading.Lock()

    def __call__(self, t: float) -> str:
        with self.lock:
            if self.first is None:
                self.first = t
            since = t - self.first
        phase = "Pending" if since < 2.5 else "Running" if since < 5.5 else "Succeeded"
        return kube_pod_status_phase("team-llm", "train-0", "uid-train-0", phase)


SHARD = kube_state_metrics(Lifecycle(), job="kube-state-metrics-shard-1",
                           path="/metrics/shard-1", pod="kube-state-metrics-1")


@pytest.fixture(scope="module")
def scraped(prometheus_scrape):
    with prometheus_scrape([KSM, PROBE, SHARD], interval_s=1.0) as harness:
        window = harness.wait_for_samples(10)
        yield harness, window


def label_sets(frame: pl.DataFrame) -> list[dict[str, str]]:
    """The distinct label sets of a raw-sample frame (null labels left out), sorted."""
    rows = frame.drop("ts", "value").unique().iter_rows(named=True)
    sets = [{k: v for k, v in row.items() if v is not None} for row in rows]
    return sorted(sets, key=lambda s: sorted(s.items()))


def test_without_honor_labels_the_workload_moves_to_exported_labels(scraped):
    harness, (start, end) = scraped
    src = harness.source("nohonor")
    info = label_sets(src.raw_samples('kube_pod_info{exported_pod="pod1"}', start, end))
    assert info == [{
        "__name__": "kube_pod_info", **EXPORTER,
        "exported_namespace": "ns1", "exported_pod": "pod1",
        "host_ip": "1.1.1.1", "host_network": "true", "node": "node1", "pod_ip": "1.2.3.4",
        "priority_class": "system-node-critical", "uid": "abc-123-xxx",
    }]  # created_by_kind="" / created_by_name="" dropped as empty
    gpus = src.raw_samples('kube_pod_container_resource_requests{resource="nvidia_com_gpu"}',
                           start, end)
    (gpu,) = label_sets(gpus)
    assert {k: gpu[k] for k in ("namespace", "pod", "container")} == {
        k: EXPORTER[k] for k in ("namespace", "pod", "container")}
    assert {k: gpu.get(k) for k in ("exported_namespace", "exported_pod", "exported_container",
                                    "node")} == {
        "exported_namespace": "ns1", "exported_pod": "pod1", "exported_container": "pod1_con1",
        "node": None}  # node="" upstream: dropped
    assert gpus["value"].to_list() == [1.0] * gpus.height
    phases = src.raw_samples('kube_pod_status_phase{exported_namespace="ns2",phase="Pending"}',
                             start, end)
    assert set(phases["exported_pod"]) == {"pod2"}
    assert set(phases["pod"]) == {EXPORTER["pod"]}
    assert phases["value"].to_list() == [1.0] * phases.height


def test_with_honor_labels_the_workload_stays_in_plain_labels(scraped):
    harness, (start, end) = scraped
    src = harness.source("honor")
    frame = src.raw_samples('{__name__=~"kube_pod_.+",job="kube-state-metrics"}', start, end)
    assert not [c for c in frame.columns if c.startswith("exported_")]
    assert set(frame["namespace"]) == {"ns1", "ns2"}
    assert set(frame["pod"]) == {"pod1", "pod2"}
    info = label_sets(src.raw_samples('kube_pod_info{pod="pod2"}', start, end))
    assert info == [{
        "__name__": "kube_pod_info", **EXPORTER,  # container, service, ... come from the target
        "namespace": "ns2", "pod": "pod2",
        "created_by_kind": "ReplicaSet", "created_by_name": "rs-name", "host_ip": "1.1.1.1",
        "host_network": "false", "node": "node2", "pod_ip": "2.3.4.5", "uid": "abc-456-xxx",
    }]
    gpus = label_sets(src.raw_samples(
        'kube_pod_init_container_resource_requests{resource="nvidia_com_gpu"}', start, end))
    assert [(g["namespace"], g["pod"], g["container"]) for g in gpus] == [
        ("ns1", "pod1", "pod1_initcon1")]


def test_job_and_instance_of_the_series_are_exported_or_win(scraped):
    harness, (start, end) = scraped
    target = PROBE.labels()
    (nohonor,) = label_sets(harness.source("nohonor").raw_samples("label_probe", start, end))
    assert nohonor == {
        "__name__": "label_probe", **target, "job": "label-probe",
        "exported_namespace": "ns-a", "exported_pod": "pod-a", "exported_container": "main",
        "exported_job": "exposed-job", "exported_instance": "exposed:1",
    }  # node="" is no clash: the target's node is set, no exported_node
    (honor,) = label_sets(harness.source("honor").raw_samples("label_probe", start, end))
    assert honor == {
        "__name__": "label_probe", **{k: v for k, v in target.items() if k != "node"},
        "namespace": "ns-a", "pod": "pod-a", "container": "main",
        "job": "exposed-job", "instance": "exposed:1",
    }  # the series "has" node (empty), so the target's node is not added, and "" is dropped
    nodes = {setup: label_sets(harness.source(setup).raw_samples("node_probe", start, end))[0]
             for setup in ("honor", "nohonor")}
    assert (nodes["honor"]["node"], nodes["honor"].get("exported_node")) == ("gpu-k8s-07", None)
    assert (nodes["nohonor"]["node"], nodes["nohonor"]["exported_node"]) == (
        "gpu-k8s-01", "gpu-k8s-07")  # a relabeled-in node moves a KSM-style node to exported_node


def test_a_body_callable_is_rendered_on_every_scrape(scraped):
    harness, (start, end) = scraped
    for setup in ("honor", "nohonor"):
        frame = harness.source(setup).raw_samples(
            'kube_pod_status_phase{uid="uid-train-0"}', start, end)
        current = frame.filter(pl.col("value") == 1).sort("ts")["phase"].to_list()
        runs = [p for i, p in enumerate(current) if i == 0 or current[i - 1] != p]
        assert runs == ["Pending", "Running", "Succeeded"], (setup, current)
        scrapes = frame["ts"].unique().len()
        assert frame.height == 5 * scrapes  # five phase series per scrape, one of them 1
    served = {(s.setup, s.path) for s in harness.served}
    assert {("honor", SHARD.path), ("nohonor", SHARD.path)} <= served


def test_the_waited_window_holds_n_scrapes_and_reads_the_same_later(scraped):
    harness, (start, end) = scraped
    src = harness.source("nohonor")
    first = src.raw_samples('{__name__=~"kube_pod_info|up"}', start, end)
    for setup in ("honor", "nohonor"):
        for job, times in harness.scrapes(setup).items():
            assert len([t for t in times if start <= t < end]) >= 10, (setup, job)
    harness.wait_for_samples(12)  # more scrapes land after `end`, none inside the window
    again = harness.source("nohonor").raw_samples('{__name__=~"kube_pod_info|up"}', start, end)
    assert again.equals(first)
    assert first["ts"].min() >= start
    assert first["ts"].max() < end


def test_servers_scrape_in_step_and_agree_on_a_common_window(scraped):
    harness, _ = scraped
    start, end = harness.wait_for_samples(10, common=True)
    frames = {setup: harness.source(setup).raw_samples(
        'kube_pod_status_phase{uid="uid-train-0"}', start, end).filter(pl.col("value") == 1)
        .sort("ts") for setup in ("honor", "nohonor")}
    honor, nohonor = frames["honor"], frames["nohonor"]
    assert honor.height >= 10
    assert honor["phase"].to_list() == nohonor["phase"].to_list()  # the same body at each tick
    skew = (honor["ts"] - nohonor["ts"]).abs().max()
    assert skew < timedelta(milliseconds=100), skew  # both servers scrape at the same phase
    for setup in ("honor", "nohonor"):
        counts = {job: len([t for t in times if start <= t < end])
                  for job, times in harness.scrapes(setup).items()}
        assert set(counts.values()) == {honor.height}, (setup, counts)


def test_freeze_stops_scraping_and_the_servers_keep_answering(prometheus_scrape):
    counter = Target(job="counter", path="/counter", body=lambda t: f"c_total {int(t * 10)}\n",
                     namespace="ns", pod="p", container="c", service="s")
    with prometheus_scrape([counter], interval_s=0.5, setups={"only": False}) as harness:
        harness.wait_for_samples(3)
        start, end = harness.freeze()
        served = len(harness.served)
        src = harness.source("only")
        frozen = src.raw_samples("c_total", start, end)
        assert frozen.height == len(harness.scrapes("only")["counter"]) >= 3
        time.sleep(1.5)  # three intervals
        assert len(harness.served) == served  # nothing scraped since
        assert src.raw_samples("c_total", start, end + timedelta(hours=1)).equals(frozen)
        with pytest.raises(ScrapeHarnessError, match="frozen"):
            harness.wait_for_samples(1)


def test_a_failing_body_fails_the_wait_and_leaving_stops_everything(prometheus_scrape):
    def broken(t: float) -> str:
        msg = f"no exposition at {t:.1f} s"
        raise RuntimeError(msg)

    target = Target(job="broken", path="/broken", body=broken, namespace="ns", pod="p",
                    container="c", service="s")
    with prometheus_scrape([target], interval_s=0.5, setups={"only": False}) as harness:
        url, pid, exporter = harness.url("only"), harness.pid("only"), harness.exporter_url
        with pytest.raises(ScrapeTimeout, match=r"(?s)body of /broken raised.*no exposition"):
            harness.wait_for_samples(1, timeout_s=30)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped: the pid is gone
    for base in (url, exporter):
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{base}/-/ready", timeout=2)
