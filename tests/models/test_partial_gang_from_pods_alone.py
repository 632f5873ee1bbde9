"""Partial gangs found from pods alone (issue #15 item 2): the gang is its Job's pods, its size the
Job's kube_job_spec_parallelism (= completions), the missing members the GPU pods Pending without
a node (k8s_pending_pods); no Kueue Workload object is needed (docs/detectors.md)."""

from datetime import date, datetime, timedelta

import duckdb
import pytest

from models.incidents import build_incidents
from models.runner import ensure_schema

DAY = date(2026, 1, 5)


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


def _job(con, job: str, parallelism: int, completions: int | None) -> None:
    con.execute("INSERT INTO k8s_job_specs VALUES ('c', 'ns', ?, ?, ?, ?, ?)",
                [job, parallelism, completions, _at(9), _at(14)])


def _pod(con, job: str, i: int, start: datetime, end: datetime, gpus: int = 2) -> None:
    """A Running GPU pod of the Job (its ledger row and its KSM owner and labels)."""
    uid = f"{job}-{i}"
    con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
                "gpu_model, gpus, start_ts, end_ts, gpu_seconds, k8s_namespace, person) "
                "VALUES (?, 'kubernetes', 'c', ?, ?, ?, 'n1', 'a100', ?, ?, ?, ?, 'ns', 'al')",
                [start.date(), uid, job, f"{uid}-x", gpus, start, end,
                 gpus * int((end - start).total_seconds())])
    con.execute("INSERT INTO k8s_pod_allocations (cluster, uid, namespace, pod, node, gpus, "
                "start_ts, end_ts, owner_kind, owner_name, labels) "
                "VALUES ('c', ?, 'ns', ?, 'n1', ?, ?, ?, 'Job', ?, ?)",
                [uid, f"{uid}-x", gpus, start, end, job,
                 f'{{"batch_kubernetes_io_job_name": "{job}"}}'])


def _waiting(con, job: str, i: int, since: datetime, until: datetime) -> None:
    """A GPU pod of the Job Pending without a node (owner known only through its label)."""
    con.execute("INSERT INTO k8s_pending_pods VALUES ('c', ?, 'ns', ?, 2, NULL, NULL, ?, ?, ?, 1)",
                [f"{job}-{i}", f"{job}-{i}-x", f'{{"batch_kubernetes_io_job_name": "{job}"}}',
                 since, until])


def _gangs(con) -> list[tuple]:
    build_incidents(con, DAY, DAY)
    return con.sql("SELECT k8s_workload, start_ts, end_ts, gpu_seconds, evidence FROM incidents "
                   "WHERE kind = 'partial_gang' ORDER BY k8s_workload").fetchall()


def test_a_gang_is_found_with_no_workload_objects_at_all(con):
    # 3 of 4 pods run from 10:00; the 4th waits without a node until 10:20, then runs
    _job(con, "train", 4, 4)
    for i in range(3):
        _pod(con, "train", i, _at(10), _at(12))
    _waiting(con, "train", 3, _at(10), _at(10, 20))
    _pod(con, "train", 3, _at(10, 20), _at(12))
    assert con.sql("SELECT count(*) FROM kueue_workloads").fetchone()[0] == 0
    [(workload, start, end, gpu_seconds, evidence)] = _gangs(con)
    assert (workload, start, end, gpu_seconds) == ("ns/train", _at(10), _at(10, 20),
                                                   3 * 2 * 20 * 60)
    assert evidence.startswith("k8s_job_specs{cluster=c,namespace=ns,job_name=train}; "
                               "k8s_pending_pods{cluster=c,uid=train-3} waiting since")


def test_a_gang_whose_pods_start_within_the_grace_is_no_incident(con):
    # the pods start 0-190 s apart (the last waits Pending until then): normal start-up
    _job(con, "quick", 4, 4)
    for i, offset in enumerate((0, 40, 120, 190)):
        start = _at(10) + timedelta(seconds=offset)
        _waiting(con, "quick", i, _at(10), start)
        _pod(con, "quick", i, start, _at(12))
    # control: the same gang with its last pod 10 minutes late
    _job(con, "slow", 4, 4)
    for i, offset in enumerate((0, 40, 120, 600)):
        start = _at(10) + timedelta(seconds=offset)
        _waiting(con, "slow", i, _at(10), start)
        _pod(con, "slow", i, start, _at(12))
    assert [g[0] for g in _gangs(con)] == ["ns/slow"]


def test_partial_admission_with_min_count_is_no_incident(con):
    # Kueue admitted 3 of 4 pods (minCount 3) and set the Job's parallelism to 3: all 3 ran
    _job(con, "shrunk", 3, 4)
    for i in range(3):
        _pod(con, "shrunk", i, _at(10), _at(12))
    # control: admitted in full, 3 of 4 running while the 4th waits for 2 hours
    _job(con, "stuck", 4, 4)
    for i in range(3):
        _pod(con, "stuck", i, _at(10), _at(12))
    _waiting(con, "stuck", 3, _at(10), _at(12))
    assert [(g[0], g[3]) for g in _gangs(con)] == [("ns/stuck", 3 * 2 * 2 * 3600)]


def test_without_a_waiting_member_or_a_workload_pods_alone_are_no_gang_incident(con):
    # a Job of 4 of which 3 ran and none was ever seen Pending: nothing says a member waited
    # (a work queue, or the fourth pod never created), so no finding
    _job(con, "queue", 4, 4)
    for i in range(3):
        _pod(con, "queue", i, _at(10), _at(12))
    assert _gangs(con) == []


def test_a_workload_still_gives_the_size_and_kueue_clock_when_known(con):
    # the Workload (from the history: deleted since) names 4 pods; no Job spec was scraped
    con.execute("INSERT INTO kueue_workloads (uid, namespace, name, pod_sets, pods_wanted, "
                "admitted_at, pods_ready_at) VALUES ('wl-1', 'ns', 'job-gone-1a2b3', 1, 4, ?, ?)",
                [_at(10), _at(10, 20)])
    for i in range(3):
        _pod(con, "job-gone-1a2b3", i, _at(10), _at(12))
    _pod(con, "job-gone-1a2b3", 3, _at(10, 20), _at(12))
    [(workload, _start, end, gpu_seconds, evidence)] = _gangs(con)
    assert (workload, end, gpu_seconds) == ("ns/job-gone-1a2b3", _at(10, 20), 3 * 2 * 20 * 60)
    assert evidence.startswith("kueue_workloads{uid=wl-1}")
