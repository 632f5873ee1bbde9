"""kube-state-metrics pods through a real Prometheus, scraped with and without honor_labels.

The scrape harness (scrape.py) serves an exposition made of kube-state-metrics v2.20.0's own
expected lines (tests/fixtures/expositions, via ksm_expositions) for two GPU pods living through
Pending -> Running -> Succeeded, and two Prometheus 2.42 servers scrape it every second, one with
``honor_labels: true`` and one with ``false``; the window is then ingested from each through the
normal path (``ingest_kubernetes_window`` with a ``PrometheusHttpSource``) into its own ledger.
Both ledgers must hold the same pods, GPUs, queues and exact boundaries in
``k8s_pod_allocations``:

* ``sample-job-jd2vm-9hpnr``: two GPU containers (1 + 2), Kueue >= 0.17 queue labels;
* ``sample-job-p8mxr-cld27``: its only GPU request (2) in an init container, its LocalQueue only
  on its Job (older Kueue).

Every sample carries an explicit timestamp (its render time), so the phase a sample shows and
its time agree to the millisecond and the integer-second ``kube_pod_start_time`` /
``kube_pod_completion_time`` fall strictly between the scrapes around each transition.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta

import pytest

from gpuledger.ingest.kubernetes import run as k8s_ingest
from models.runner import connect
from tests.connectors.kubernetes.ksm_expositions import (
    KSM_NODE_V2_20,
    KSM_POD_V2_20,
    KUEUE_LABELS,
    Line,
    lines,
    one,
    phase_lines,
    pick,
    text,
)
from tests.prometheus_real.scrape import kube_state_metrics

pytestmark = pytest.mark.prometheus

UPSTREAM = lines(KSM_POD_V2_20)
KUEUE = lines(KUEUE_LABELS)
GPU = {"resource": "nvidia_com_gpu"}
CON1 = one(UPSTREAM, "kube_pod_container_resource_requests", container="pod1_con1", **GPU)
INIT = one(UPSTREAM, "kube_pod_init_container_resource_requests", container="pod1_initcon1",
           **GPU)
PHASE = pick(UPSTREAM, "kube_pod_status_phase", uid="uid1")
START = one(UPSTREAM, "kube_pod_start_time")
DONE = one(UPSTREAM, "kube_pod_completion_time")
CAPACITY = one(lines(KSM_NODE_V2_20), "kube_node_status_capacity", **GPU).but(
    node="gpu-node-1", value=8.0)
NEW, OLD = "sample-job-jd2vm-9hpnr", "sample-job-p8mxr-cld27"


class Pods:
    """The exposition at wall-clock time `now`: pod NEW Running [r1, e1), OLD [r2, e2); each
    bound 2 s before it runs, admitted by the kubelet (kube_pod_start_time) when it runs. Both
    are Pending (unbound) until `schedule` sets the times -- once both servers scrape."""

    far = 2**40

    def __init__(self) -> None:
        self.r1 = self.e1 = self.r2 = self.e2 = self.far

    def schedule(self, first_run: int) -> None:
        self.r1, self.e1 = first_run, first_run + 5
        self.r2, self.e2 = first_run + 1, first_run + 7

    def _pod(self, name: str, gpu_lines: list[Line], run: int, end: int, now: float
             ) -> list[Line]:
        uid = one(KUEUE, "kube_pod_labels", pod=name).get("uid")
        who = {"namespace": "default", "pod": name, "uid": uid}
        node = "gpu-node-1" if now >= run - 2 else ""
        phase = "Pending" if now < run else "Running" if now < end else "Succeeded"
        out = [ln.but(node=node, **who) for ln in gpu_lines]
        out += [ln.but(**who) for ln in phase_lines(PHASE, phase)]
        out += [*pick(KUEUE, "kube_pod_labels", pod=name), *pick(KUEUE, "kube_pod_owner",
                                                                 pod=name)]
        if now >= run:
            out.append(START.but(value=float(run), **who))
        if now >= end:
            out.append(DONE.but(value=float(end), **who))
        return out

    def __call__(self, _elapsed: float) -> str:
        now = time.time()
        body = [CAPACITY, *pick(KUEUE, "kube_job_labels")]
        body += self._pod(NEW, [CON1, CON1.but(container="pod1_con2", value=2.0)],
                          self.r1, self.e1, now)
        body += self._pod(OLD, [INIT.but(value=2.0)], self.r2, self.e2, now)
        return text(body, ts_ms=int(now * 1000))


def utc(unix_s: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(seconds=unix_s)


@pytest.mark.parametrize("node_label", [None, "ksm-node-3"],
                         ids=["servicemonitor", "servicemonitor_with_node_relabel"])
def test_both_shapes_give_the_same_pods_gpus_queues_and_boundaries(
        prometheus_scrape, tmp_path, node_label):
    pods = Pods()
    target = kube_state_metrics(pods, node=node_label)
    with prometheus_scrape([target], interval_s=1.0) as harness:
        harness.wait_for_samples(1)  # both servers scrape: Pending scrapes before the start
        pods.schedule(math.ceil(time.time()) + 3)
        while time.time() < pods.e2 + 3:  # every pod ended, its completion scraped
            time.sleep(0.5)
        start, end = harness.wait_for_samples(12)
        got = {}
        for setup in ("honor", "nohonor"):
            with connect(tmp_path / f"{setup}.duckdb") as con:
                load = k8s_ingest.ingest_kubernetes_window(
                    con, harness.source(setup), start, end, cluster="scrape")
                got[setup] = con.execute(
                    "SELECT namespace, pod, node, gpus, start_ts, end_ts, start_source, "
                    "end_source, queue_name, cluster_queue FROM k8s_pod_allocations "
                    "ORDER BY pod").fetchall()
                assert load.rejected == (), (setup, load.rejected)
                assert 0.9 < load.scrape_interval_s < 1.1
    exact = ("kube_pod_start_time", "kube_pod_completion_time")
    assert got["honor"] == [
        ("default", NEW, "gpu-node-1", 3, utc(pods.r1), utc(pods.e1), *exact, "user-queue",
         "cluster-queue"),
        ("default", OLD, "gpu-node-1", 2, utc(pods.r2), utc(pods.e2), *exact, "user-queue",
         None),
    ]
    assert got["nohonor"] == got["honor"]
