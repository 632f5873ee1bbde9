"""Partial gangs under Kueue partial admission (podSets[].minCount): a gang running all the pods it
was admitted for is no partial gang (a shape real Kueue data has and the simulator may not)."""

from datetime import date, datetime

import duckdb
import pytest

from models.incidents import build_incidents
from models.runner import ensure_schema

DAY = date(2026, 1, 5)


def _at(h: int, m: int = 0) -> datetime:
    return datetime(2026, 1, 5, h, m)


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, gpu_uuid) "
                  "VALUES ('c', 'n1', 'a100', 8, ?, ?)", [(i, f"GPU-{i}") for i in range(8)])
    yield c
    c.close()


def _workload(con, name: str, *, wanted: int, min_count: int | None, gpus_per_pod: int,
              gpus_admitted: int | None) -> None:
    """A one-pod-set Workload admitted (and PodsReady) at 10:00."""
    con.execute("INSERT INTO kueue_workloads (uid, namespace, name, pod_sets, pods_wanted, "
                "min_count, gpus_per_pod, gpus_admitted, admitted_at, pods_ready_at) "
                "VALUES (?, 'ns', ?, 1, ?, ?, ?, ?, ?, ?)",
                [f"uid-{name}", name, wanted, min_count, gpus_per_pod, gpus_admitted, _at(10),
                 _at(10, 1)])


def _pod(con, uid: str, gpus: int, start: datetime, end: datetime, workload: str) -> None:
    con.execute("INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
                "gpu_model, gpus, start_ts, end_ts, gpu_seconds, k8s_namespace, person) "
                "VALUES (?, 'kubernetes', 'c', ?, ?, ?, 'n1', 'a100', ?, ?, ?, ?, 'ns', 'al')",
                [start.date(), uid, workload, f"pod-{uid}", gpus, start, end,
                 gpus * int((end - start).total_seconds())])


def _gangs(con) -> list[tuple]:
    build_incidents(con, DAY, DAY)
    return con.sql("SELECT k8s_workload, gpu_seconds FROM incidents "
                   "WHERE kind = 'partial_gang' ORDER BY k8s_workload").fetchall()


def test_a_partially_admitted_gang_running_all_its_admitted_pods_is_no_partial_gang(con):
    # Kueue partial admission (podSets[].minCount): 4 pods wanted, quota for 2; Kueue admits
    # podSetAssignments[].count = 2 (resourceUsage 2 x 2 GPUs) and shrinks the Job to 2 pods.
    _workload(con, "shrunk", wanted=4, min_count=2, gpus_per_pod=2, gpus_admitted=4)
    # control: admitted in full (8 GPUs) but only 2 of its 4 pods ever ran, for 2 hours
    _workload(con, "stuck", wanted=4, min_count=None, gpus_per_pod=2, gpus_admitted=8)
    for name in ("shrunk", "stuck"):
        for i in range(2):
            _pod(con, f"{name}-{i}", 2, _at(10, 2), _at(12, 2), name)
    assert _gangs(con) == [("ns/stuck", 2 * 2 * 2 * 3600)]
