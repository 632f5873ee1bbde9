"""A GPU pod's Kueue queues from kube-state-metrics labels, newest Kueue first.

queue_name = the pod's kueue.x-k8s.io/local-queue-name (Kueue >= 0.17), else its
kueue.x-k8s.io/queue-name, else its Job's (kube_job_labels via kube_pod_owner{owner_kind="Job"});
cluster_queue = the pod's kueue.x-k8s.io/cluster-queue-name. Label series from
tests/fixtures/expositions/kueue-queue-labels-kube-state-metrics.prom (sources in its header).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.ksm import pod_gpu_allocations
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.kubernetes.window_read import queue_label_warnings
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import (
    KSM_POD_V2_20,
    KUEUE_LABELS,
    Line,
    lines,
    one,
    phase_lines,
    pick,
    series,
)

HOUR = timedelta(hours=1)
UPSTREAM = lines(KSM_POD_V2_20)
KUEUE = lines(KUEUE_LABELS)
CON1 = one(UPSTREAM, "kube_pod_container_resource_requests", container="pod1_con1",
           resource="nvidia_com_gpu")
PHASE = pick(UPSTREAM, "kube_pod_status_phase", uid="uid1")
NEW, OLD, PLAIN = "sample-job-jd2vm-9hpnr", "sample-job-p8mxr-cld27", "kueue-sleep-x7k2q"
SCRAPES = [10 + 30 * i for i in range(40)]


def pod_lines(name: str, labels: list[Line]) -> list[Line]:
    """GPU request and Running phase of the fixture's pod `name` (upstream shapes)."""
    uid = one(KUEUE, "kube_pod_labels", pod=name).get("uid")
    who = {"namespace": "default", "pod": name, "uid": uid}
    return [CON1.but(node="gpu-1", **who), *(ln.but(**who) for ln in phase_lines(
        PHASE, "Running")), *labels]


def queues(tmp_path: Path, found: list[Line], honor: bool = True) -> dict[str, tuple]:
    src = OpenMetricsFileSource(om_file(tmp_path / "ksm.om",
                                        series(lambda _now: found, SCRAPES, honor=honor)))
    out = pod_gpu_allocations(src, T0, T0 + HOUR)
    return {r["pod"]: (r["queue_name"], r["cluster_queue"])
            for r in out.iter_rows(named=True)}


def fixture_pods() -> list[Line]:
    out: list[Line] = []
    for name in (NEW, OLD, PLAIN):
        out += pod_lines(name, [*pick(KUEUE, "kube_pod_labels", pod=name),
                                *pick(KUEUE, "kube_pod_owner", pod=name)])
    return [*out, *pick(KUEUE, "kube_job_labels")]


@pytest.mark.parametrize("honor", [True, False], ids=["honor_labels", "no_honor_labels"])
def test_queues_of_new_and_old_kueue_and_of_plain_pods(tmp_path: Path, honor: bool):
    assert queues(tmp_path, fixture_pods(), honor) == {
        NEW: ("user-queue", "cluster-queue"),  # Kueue >= 0.17 pod labels
        OLD: ("user-queue", None),  # only the Job says it
        PLAIN: ("user-queue", None),  # pod integration: the pod's own queue-name
    }


def test_newest_label_wins(tmp_path: Path):
    labels = one(KUEUE, "kube_pod_labels", pod=NEW).but(
        label_kueue_x_k8s_io_queue_name="stale-queue")
    job = one(KUEUE, "kube_job_labels", job_name="sample-job-jd2vm").but(
        label_kueue_x_k8s_io_queue_name="job-queue")
    found = [*pod_lines(NEW, [labels, one(KUEUE, "kube_pod_owner", pod=NEW)]), job]
    assert queues(tmp_path, found) == {NEW: ("user-queue", "cluster-queue")}


def test_pod_queue_name_beats_the_jobs(tmp_path: Path):
    labels = one(KUEUE, "kube_pod_labels", pod=OLD).but(
        label_kueue_x_k8s_io_queue_name="pod-queue")
    found = [*pod_lines(OLD, [labels, one(KUEUE, "kube_pod_owner", pod=OLD)]),
             *pick(KUEUE, "kube_job_labels")]
    assert queues(tmp_path, found) == {OLD: ("pod-queue", None)}


def test_a_job_of_another_namespace_is_not_the_pods(tmp_path: Path):
    job = one(KUEUE, "kube_job_labels", job_name="sample-job-p8mxr").but(namespace="other")
    found = [*pod_lines(OLD, [*pick(KUEUE, "kube_pod_labels", pod=OLD),
                              one(KUEUE, "kube_pod_owner", pod=OLD)]), job]
    assert queues(tmp_path, found) == {OLD: (None, None)}


def test_the_kueue_label_keys_are_not_reported_as_unknown_spellings():
    labels = pl.DataFrame({"labels": [
        '{"kueue_x_k8s_io_local_queue_name": "user-queue", '
        '"kueue_x_k8s_io_cluster_queue_name": "cluster-queue"}',
        '{"kueue_x_k8s_io_queue_name": "user-queue"}',
        '{"my_queue": "q"}']})
    assert queue_label_warnings(labels) == [
        "kube_pod_labels: label_my_queue looks like a Kueue queue label but is not "
        "label_kueue_x_k8s_io_queue_name; not used as the pod's LocalQueue"]
