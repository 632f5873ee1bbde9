"""A gang's size and its waiting members read from kube-state-metrics alone, in both scrape shapes
(honor_labels true and false): kube_job_spec_parallelism / _completions (KSM's job_test.go Want
lines) and GPU pods Pending without a node with their owner (pod_test.go's kube_pod_owner and
phase lines), connectors/kubernetes/ksm_gangs.py."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.ksm_gangs import job_specs, pending_gpu_pods
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import (
    EXPOSITIONS,
    KSM_POD_V2_20,
    Line,
    lines,
    one,
    phase_lines,
    pick,
    series,
)

HOUR = timedelta(hours=1)
STEP = timedelta(seconds=30)
JOBS = lines(EXPOSITIONS / "kube-state-metrics-job_test.prom")
PODS = lines(KSM_POD_V2_20)
PARALLELISM = one(JOBS, "kube_job_spec_parallelism", job_name="RunningJob1")
COMPLETIONS = one(JOBS, "kube_job_spec_completions", job_name="RunningJob1")
# upstream pod1 (uid1) requests one nvidia.com/gpu in pod1_con1, node="" (not bound)
REQUEST = one(PODS, "kube_pod_container_resource_requests", container="pod1_con1",
              resource="nvidia_com_gpu")
PHASE = pick(PODS, "kube_pod_status_phase", uid="uid1")
# upstream's owner line of pod2 (a ReplicaSet) made the Job's: the same line, owner changed
OWNER = one(PODS, "kube_pod_owner", pod="pod2").but(
    namespace="ns1", pod="pod1", uid="uid1", owner_kind="Job", owner_name="RunningJob1")
LABELS = one(PODS, "kube_pod_labels", uid="uid1").but(
    label_batch_kubernetes_io_job_name="RunningJob1")
SHAPES = pytest.mark.parametrize("honor", [True, False], ids=["honor_labels", "no_honor_labels"])


def grid(step: float = 30) -> list[float]:
    return [10 + step * i for i in range(int(3600 // step))]


def source(tmp_path: Path, lines_at, honor: bool) -> OpenMetricsFileSource:
    found = series(lines_at, grid(), honor=honor)
    return OpenMetricsFileSource(om_file(tmp_path / "ksm.om", found))


def t(seconds: float):
    return T0 + timedelta(seconds=seconds)


@SHAPES
def test_job_sizes_are_read_per_value_seen(tmp_path: Path, honor: bool):
    # RunningJob1 asks for 4 pods at once; at 1800 s Kueue shrinks it to 3 (partial admission)
    def lines_at(now: float) -> list[Line]:
        size = 4.0 if now < 1800 else 3.0
        return [PARALLELISM.but(value=size), COMPLETIONS.but(value=4.0),
                *pick(JOBS, "kube_job_spec_parallelism", job_name="SuccessfulJob1")]

    out = job_specs(source(tmp_path, lines_at, honor), T0, T0 + HOUR, scrape_interval=STEP)
    assert out.rows() == [
        ("ns1", "RunningJob1", 4, 4, t(10), t(1810)),
        ("ns1", "RunningJob1", 3, 4, t(1810), T0 + HOUR),
        # upstream SuccessfulJob1's parallelism alone: no completions line read here
        ("ns1", "SuccessfulJob1", 1, None, t(10), T0 + HOUR),
    ]


def test_a_job_size_that_is_no_count_is_rejected(tmp_path: Path):
    def lines_at(now: float) -> list[Line]:
        return [PARALLELISM.but(value=2.5 if now < 100 else 2.0)]

    rejects: list[pl.DataFrame] = []
    out = job_specs(source(tmp_path, lines_at, True), T0, T0 + HOUR, scrape_interval=STEP,
                    rejects=rejects)
    assert out.select("parallelism", "first_seen").rows() == [(2, t(100))]
    assert pl.concat(rejects)["reason"].to_list() == [
        "expected a whole Job parallelism, found a fraction"] * 3  # at 10, 40 and 70 s


@SHAPES
def test_a_gpu_pod_pending_without_a_node_is_a_waiting_member(tmp_path: Path, honor: bool):
    # pod1 Pending with no node until 900 s, bound at 900 (still Pending: image pull), Running
    # from 1200 s; only the unbound Pending scrapes make it a missing member
    def lines_at(now: float) -> list[Line]:
        node = "" if now < 900 else "node1"
        phase = "Pending" if now < 1200 else "Running"
        return [REQUEST.but(node=node), *phase_lines(PHASE, phase), OWNER, LABELS]

    out = pending_gpu_pods(source(tmp_path, lines_at, honor), T0, T0 + HOUR,
                           scrape_interval=STEP)
    assert out.select("uid", "namespace", "pod", "gpus", "owner_kind", "owner_name",
                      "first_seen", "last_seen", "samples").rows() == [
        ("uid1", "ns1", "pod1", 1, "Job", "RunningJob1", t(10), t(910), 30)]  # 880 + 30 s
    assert '"batch_kubernetes_io_job_name": "RunningJob1"' in out["labels"][0]


@SHAPES
def test_a_pending_pod_without_gpus_is_no_gang_member(tmp_path: Path, honor: bool):
    # upstream pod2 (uid2) is Pending and requests no GPU
    found = pick(PODS, "kube_pod_status_phase", uid="uid2")
    out = pending_gpu_pods(source(tmp_path, lambda now: found, honor), T0, T0 + HOUR,
                           scrape_interval=STEP)
    assert out.height == 0
