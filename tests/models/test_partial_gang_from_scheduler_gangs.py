"""Partial gangs sized by the scheduler's own objects (issue 27 item 7): a Workload API pod group
or PodGroup (scheduling.k8s.io, KEP-4671) or a coscheduling PodGroup (scheduling.x-k8s.io)
gives the gang's minCount; the slices of a Kueue elastic job (ElasticJobsViaWorkloadSlices) are
one gang, never partial because a bigger slice replaced the first one. The objects are loaded
through the import path from the fixtures (tests/fixtures/kubernetes/scheduling/README.md,
tests/fixtures/kueue/README.md); the pods are ledger rows as in test_partial_gang_from_pods_alone.
"""

from datetime import date, datetime

import duckdb
import pytest

from gpuledger.ingest.kubernetes.pod_groups import import_pod_groups
from gpuledger.ingest.service import import_workloads
from models.incidents import build_incidents
from models.runner import ensure_schema
from tests.helpers import FIXTURES

DAY = date(2026, 1, 5)
SCHEDULING = FIXTURES / "kubernetes" / "scheduling"


def _at(h: int, m: int = 0, s: int = 0) -> datetime:
    return datetime(2026, 1, 5, h, m, s)


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, gpu_uuid) "
                  "VALUES ('c', 'n1', 'a100', 8, ?, ?)", [(i, f"GPU-{i}") for i in range(8)])
    yield c
    c.close()


def _pod(con, ns: str, job_id: str, uid: str, start: datetime, end: datetime, *,
         owner: tuple[str, str] | None = None, labels: str = "{}", gpus: int = 1) -> None:
    """A Running GPU pod: its ledger row (job_id as stg_kubernetes_allocations names it: the
    Kueue Workload, else the owner) and its KSM owner and labels."""
    con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
                "gpu_model, gpus, start_ts, end_ts, gpu_seconds, k8s_namespace, person) "
                "VALUES (?, 'kubernetes', 'c', ?, ?, ?, 'n1', 'a100', ?, ?, ?, ?, ?, 'al')",
                [start.date(), uid, job_id, f"{uid}-x", gpus, start, end,
                 gpus * int((end - start).total_seconds()), ns])
    kind, name = owner or ("Job", job_id)
    con.execute("INSERT INTO k8s_pod_allocations (cluster, uid, namespace, pod, node, gpus, "
                "start_ts, end_ts, owner_kind, owner_name, labels) "
                "VALUES ('c', ?, ?, ?, 'n1', ?, ?, ?, ?, ?, ?)",
                [uid, ns, f"{uid}-x", gpus, start, end, kind, name, labels])


def _gangs(con) -> list[tuple]:
    build_incidents(con, DAY, DAY)
    return con.sql("SELECT k8s_workload, start_ts, end_ts, gpu_seconds, detail, evidence "
                   "FROM incidents WHERE kind = 'partial_gang' ORDER BY k8s_workload").fetchall()


def test_a_workload_api_pod_group_of_min_count_4_with_3_pods_running_is_a_partial_gang(con):
    import_pod_groups(con, SCHEDULING / "workload-api-v1alpha1-docs.json", cluster="c")
    # also stored without a cluster (import-pod-groups without --cluster): one gang still
    import_pod_groups(con, SCHEDULING / "workload-api-v1alpha1-docs.json")
    # the docs' Workload: Job training-job, pod group workers, gang minCount 4; no Job spec
    # scraped and no pod seen waiting: the Workload API alone says 4 are needed at once
    for i in range(3):
        _pod(con, "some-ns", "training-job", f"tj-{i}", _at(10), _at(12))
    [(workload, start, end, gpu_seconds, detail, evidence)] = _gangs(con)
    assert (workload, start, end, gpu_seconds) == ("some-ns/training-job-workload", _at(10),
                                                   _at(12), 3 * 2 * 3600)
    assert detail.startswith("3 of 4 pods running for 120.0 min until the attempt ended")
    assert evidence.startswith(
        "k8s_pod_groups{cluster=c,uid=c0000000-0000-4000-8000-000000035a01,pod_group=workers} "
        "(Workload API scheduling.k8s.io/v1alpha1 Workload some-ns/training-job-workload pod "
        "group workers: gang minCount 4); ")
    assert "allocations{day=2026-01-05,domain=kubernetes,source_key=tj-0,node=n1}" in evidence


def test_all_4_running_or_the_4th_within_the_grace_is_no_partial_gang(con):
    import_pod_groups(con, SCHEDULING / "workload-api-v1alpha1-docs.json", cluster="c")
    for i in range(4):
        _pod(con, "some-ns", "training-job", f"tj-{i}", _at(10), _at(12))
    assert _gangs(con) == []
    con.execute("DELETE FROM allocations; DELETE FROM k8s_pod_allocations")
    for i in range(3):
        _pod(con, "some-ns", "training-job", f"tj-{i}", _at(10), _at(12))
    _pod(con, "some-ns", "training-job", "tj-3", _at(10, 2), _at(12))  # 120 s: start-up
    assert _gangs(con) == []


def test_basic_policy_and_two_group_workloads_size_no_gang(con):
    # batch-job's pod group is basic (no all-or-nothing); driver-worker's Workload has two pod
    # groups and the ledger cannot tell which pod is in which (spec.workloadRef is not in KSM)
    import_pod_groups(con, SCHEDULING / "workload-api-v1alpha1-docs.json", cluster="c")
    for job in ("batch-job", "driver-worker"):
        for i in range(3):
            _pod(con, "some-ns", job, f"{job}-{i}", _at(10), _at(12))
    assert _gangs(con) == []


def test_a_jobs_runtime_podgroup_sizes_its_gang(con):
    # v1beta1 (KEP-5547 Example 1): the Workload's template and its runtime PodGroup both name
    # Job trainer-4; the PodGroup is the one named
    import_pod_groups(con, SCHEDULING / "workload-api-v1beta1-kep5547.json", cluster="c")
    for i in range(3):
        _pod(con, "training", "trainer-4", f"tr-{i}", _at(10), _at(11))
    _pod(con, "training", "trainer-4", "tr-3", _at(10, 30), _at(11))
    [(workload, start, end, gpu_seconds, _detail, evidence)] = _gangs(con)
    assert (workload, start, end, gpu_seconds) == (
        "training/trainer-4-x7k2p-trainer-q9z4w", _at(10), _at(10, 30), 3 * 30 * 60)
    assert evidence.startswith(
        "k8s_pod_groups{cluster=c,uid=c0000000-0000-4000-8000-000000037a02,pod_group=trainer} "
        "(Workload API scheduling.k8s.io/v1beta1 PodGroup training/trainer-4-x7k2p-trainer-q9z4w"
        " pod group trainer: gang minCount 4)")


def test_a_coscheduling_podgroup_sizes_the_pods_its_label_names(con):
    import_pod_groups(con, SCHEDULING / "coscheduling-podgroup.json", cluster="c")
    label = '{"scheduling_x_k8s_io_pod_group": "pg1"}'
    for i in range(2):  # minMember 3: two of a Deployment's pods run for an hour
        _pod(con, "default", "pause-5d4f", f"pg-{i}", _at(10), _at(11),
             owner=("ReplicaSet", "pause-5d4f"), labels=label)
    [(workload, _start, end, _gs, _detail, evidence)] = _gangs(con)
    assert (workload, end) == ("default/pg1", _at(11))
    assert evidence.startswith("k8s_pod_groups{cluster=c,uid=c0000000-0000-4000-8000-"
                               "00000003c001,pod_group=} (coscheduling scheduling.x-k8s.io/"
                               "v1alpha1 PodGroup default/pg1: gang minCount 3)")


OLD, NEW = "job-sample-elastic-job-7d3a1", "job-sample-elastic-job-2e122"


def test_an_elastic_job_scaled_from_2_to_4_is_no_partial_gang(con):
    # the first slice (2 pods) ran full from 10:00; at 11:00 the Job was scaled to 4, a new
    # slice (4 pods, workload-slice-replacement-for the first) was admitted at 11:00:20 and the
    # first finished (WorkloadSliceReplaced); 2 more pods ran from 11:01. The new slice alone
    # would look like 2 of 4 pods from 10:00: the slices are one gang, judged by the slice in
    # force when it started
    import_workloads(con, FIXTURES / "kueue" / "elastic-job-slices.json")
    for i in range(2):
        _pod(con, "default", OLD, f"el-{i}", _at(10, 0, 5), _at(12))
    for i in (2, 3):
        _pod(con, "default", NEW, f"el-{i}", _at(11, 1), _at(12))
    assert con.sql("SELECT count(*) FROM kueue_workloads WHERE elastic").fetchone() == (2,)
    assert _gangs(con) == []


def test_an_elastic_jobs_first_start_is_still_judged_at_its_own_size(con):
    # the first slice's second pod started 20 minutes late: 1 of 2 pods, a partial start (and
    # Kueue saw it: PodsReady 20 minutes after the admission)
    import_workloads(con, FIXTURES / "kueue" / "elastic-job-slices.json")
    con.execute("UPDATE kueue_workloads SET pods_ready_at = ? WHERE name = ?", [_at(10, 20), OLD])
    _pod(con, "default", OLD, "el-0", _at(10), _at(12))
    _pod(con, "default", OLD, "el-1", _at(10, 20), _at(12))
    for i in (2, 3):
        _pod(con, "default", NEW, f"el-{i}", _at(11, 1), _at(12))
    [(workload, start, end, gpu_seconds, detail, evidence)] = _gangs(con)
    assert (workload, start, end, gpu_seconds) == (f"default/{OLD}", _at(10), _at(10, 20),
                                                   20 * 60)
    assert detail == ("1 of 2 pods running for 20.0 min until all 2 ran; Kueue: PodsReady "
                      "1200 s after admission")
    assert evidence.startswith("kueue_workloads{uid=a0000000-0000-4000-8000-0000000e1a01}")
