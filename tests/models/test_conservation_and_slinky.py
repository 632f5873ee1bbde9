"""Every GPU-second of capacity accounted once (docs/accounting.md, "Conservation"), and Slurm
inside Kubernetes (Slinky slurm-operator) charged once.

The slurmd pods are shaped as slurm-operator makes them (SlinkyProject/slurm-operator
f2ed3fc5: internal/builder/labels/labels.go WorkerApp "slurmd", api/v1beta1/well_known.go
nodeset.slinky.slurm.net/pod-hostname "used as Slurm node name", internal/controller/nodeset/
utils/utils.go GetSlurmNodeName / GetDaemonSetPodHostname, docs/usage/topology.md
`NodeName=slinky-0 Comment={"namespace":"slurm","podName":"slurm-worker-slinky-0",
"node":"node3"}`): owned by a NodeSet, labelled app.kubernetes.io/name=slurmd, holding every GPU
of the Kubernetes node through the device plugin; the Slurm jobs inside name the Slurm node.
"""

import json
from datetime import date, datetime, timedelta

import duckdb
import pytest

from models import load_sql
from models.build import build_allocations, build_gpu_usage_hourly
from models.incidents import build_incidents
from models.runner import ensure_schema

DAY = date(2026, 1, 5)
HOUR = 3600


def _at(h: int, m: int = 0) -> datetime:
    return datetime(2026, 1, 5, h, m)


@pytest.fixture
def con():
    c = duckdb.connect()
    ensure_schema(c)
    c.execute("INSERT INTO rate_card VALUES ('h100', '', '', NULL, NULL, 4.00, 'EUR')")
    yield c
    c.close()


def _node(con, node: str, gpus: int = 8) -> None:
    con.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, gpu_uuid)"
                    " VALUES ('c', ?, 'h100', ?, ?, ?)",
                    [(node, gpus, i, f"GPU-{node}-{i}") for i in range(gpus)])


def _pod(con, uid: str, gpus: int, start: datetime, end: datetime, *, node: str,
         pod: str | None = None, namespace: str = "ml", owner: tuple[str, str] = ("Job", "j"),
         labels: dict[str, str] | None = None) -> None:
    con.execute("INSERT INTO k8s_pod_allocations (cluster, namespace, pod, uid, node, gpus, "
                "start_ts, end_ts, samples, scrape_interval_s, labels, owner_kind, owner_name, "
                "gpu_resource) VALUES ('c', ?, ?, ?, ?, ?, ?, ?, 1, 60, ?, ?, ?, "
                "'nvidia_com_gpu')",
                [namespace, pod or f"pod-{uid}", uid, node, gpus, start, end,
                 json.dumps(labels) if labels is not None else None, *owner])


def _slurmd(con, uid: str, *, pod: str, node: str, hostname: str | None = None,
            mode: str = "StatefulSet") -> None:
    """A slurm-operator worker pod holding all 8 GPUs of ``node`` for the whole day."""
    labels = {"app_kubernetes_io_name": "slurmd", "app_kubernetes_io_component": "worker",
              "nodeset_slinky_slurm_net_scaling_mode": mode}
    if hostname is not None:
        labels["nodeset_slinky_slurm_net_pod_hostname"] = hostname
    _pod(con, uid, 8, _at(0), datetime(2026, 1, 6), node=node, pod=pod, namespace="slurm",
         owner=("NodeSet", "slurm-worker-slinky"), labels=labels)


def _job(con, job: int, gpus: int, start: datetime, end: datetime, *, node: str) -> None:
    key = f"c:{job}:0"
    con.execute("INSERT INTO slurm_runs (run_key, cluster, job_id, job_id_raw, \"user\", account, "
                "partition, state, start, \"end\", alloc_gpus, nodes, bridge_pods, source_file, "
                "line_no) "
                "VALUES (?, 'c', ?, ?, 'erin', 'physics', 'gpu', 'COMPLETED', ?, ?, ?, [?], [], "
                "'dump', ?)", [key, str(job), job, start, end, gpus, node, job])
    con.execute("INSERT INTO slurm_node_allocations (run_key, cluster, job_id, job_id_raw, "
                "node, gpus, start, \"end\", gpu_model) VALUES (?, 'c', ?, ?, ?, ?, ?, ?, 'h100')",
                [key, str(job), job, node, gpus, start, end])


def _minutes(con, node: str, gpus: range, start: datetime, end: datetime, busy: float, *,
             pod: str | None = None, namespace: str | None = None,
             job: int | None = None) -> None:
    rows, t = [], start
    while t < end:
        rows += [("c", f"GPU-{node}-{g}", node, g, t, busy, namespace, pod,
                  str(job) if job else None) for g in gpus]
        t += timedelta(minutes=1)
    con.executemany("INSERT INTO gpu_utilization (cluster, gpu_uuid, node, gpu_index, "
                    "bucket_start, busy_fraction, samples, namespace, pod, hpc_job) "
                    "VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?)", rows)


def _build(con) -> None:
    build_allocations(con, DAY, DAY)
    build_gpu_usage_hourly(con, DAY, DAY)
    build_incidents(con, DAY, DAY)


def _day(con) -> dict[str, float]:
    """The day's conservation totals in GPU-hours, per state."""
    row = con.execute(
        "SELECT sum(capacity_gpu_seconds), sum(charged_gpu_seconds), "
        "sum(charged_slurm_gpu_seconds), sum(charged_kubernetes_gpu_seconds), "
        "sum(conflict_gpu_seconds), sum(infrastructure_gpu_seconds), "
        "sum(unaccounted_gpu_seconds), sum(idle_gpu_seconds), sum(excess_gpu_seconds), "
        "sum(invoiced_gpu_seconds) FROM gpu_conservation_hourly WHERE day = ?", [DAY]).fetchone()
    names = ("capacity", "charged", "slurm", "kubernetes", "conflict", "infrastructure",
             "unaccounted", "idle", "excess", "invoiced")
    return {n: round(float(v) / HOUR, 6) for n, v in zip(names, row, strict=True)}


def _breaks(con) -> list[tuple]:
    return con.execute(load_sql("gpu_conservation_hourly_check"),
                       {"first_day": DAY, "end_day": DAY + timedelta(days=1),
                        "tolerance_s": 60}).fetchall()


def _charged(con) -> dict[tuple[str, str], float]:
    rows = con.execute("SELECT domain, person, sum(physical_gpu_seconds) FROM allocations "
                       "GROUP BY ALL").fetchall()
    return {(d, p): float(s) / HOUR for d, p, s in rows}


@pytest.mark.parametrize(("mode", "slurm_node", "hostname"), [
    # StatefulSet: the Slurm node is the pod's hostname (slinky-0), the label says so
    ("StatefulSet", "slinky-0", "slinky-0"),
    # StatefulSet with a template hostname and no label: only scontrol's Comment= ties them
    ("StatefulSet", "slinky-0", "comment"),
    # StatefulSet without the label allow-listed in kube-state-metrics: the pod name
    ("StatefulSet", "slurm-worker-slinky-0", None),
    # DaemonSet / hostNetwork: the Kubernetes node's name (cut at its first dot)
    ("DaemonSet", "node3", "node3"),
])
def test_a_slinky_node_is_charged_once_through_the_jobs_inside(con, mode, slurm_node, hostname):
    _node(con, "node3")
    if slurm_node != "node3":
        _node(con, slurm_node)  # scontrol lists the Slurm node too: the same 8 GPUs
    if hostname == "comment":  # docs/usage/topology.md: `scontrol show nodes slinky-0`
        hostname = None
        from connectors.slurm.scontrol_nodes import slinky_node_pods
        from gpuledger.ingest.reference import write_slinky_pods

        write_slinky_pods(con, "c", slinky_node_pods(
            'NodeName=slinky-0 Arch=x86_64 CoresPerSocket=1 Gres=gpu:h100:8 State=IDLE '
            'Comment={"namespace":"slurm","podName":"slurm-worker-slinky-0","node":"node3"} '
            "Topology=topo-switch:s2,topo-block:b2"), _at(0))
    _slurmd(con, "sd0", pod="slurm-worker-slinky-0", node="node3", hostname=hostname, mode=mode)
    _job(con, 101, 4, _at(2), _at(10), node=slurm_node)
    _job(con, 102, 2, _at(8), _at(20), node=slurm_node)
    # slurm-operator's DCGM job mapping: one sample names the slurmd pod and the job
    _minutes(con, "node3", range(4), _at(2), _at(10), 0.9, pod="slurm-worker-slinky-0",
             namespace="slurm", job=101)
    _build(con)
    # the slurmd pod is no customer: only the jobs are charged, on the Kubernetes node
    assert _charged(con) == {("slurm", "unattributed"): 4 * 8 + 2 * 12}
    assert {r[0] for r in con.execute("SELECT DISTINCT node FROM allocations").fetchall()} == {
        "node3"}
    assert con.execute("SELECT count(*) FROM incidents WHERE kind = 'double_scheduled'"
                       ).fetchone()[0] == 0
    # the jobs' busy hours are theirs, not the slurmd pod's
    busy = con.execute("SELECT source_key, sum(busy_gpu_seconds) FROM allocation_usage_hourly "
                       "GROUP BY ALL HAVING sum(busy_gpu_seconds) > 0").fetchall()
    assert dict(busy) == {"c:101:0": pytest.approx(4 * 8 * HOUR * 0.9)}
    day = _day(con)
    # one node of 8 GPUs (the Slurm node name is the same GPUs), the rest is Slurm's capacity
    assert day["capacity"] == 8 * 24
    assert day["charged"] == day["slurm"] == 4 * 8 + 2 * 12
    assert day["infrastructure"] == 8 * 24 - (4 * 8 + 2 * 12)
    assert day["idle"] == day["conflict"] == day["unaccounted"] == day["kubernetes"] == 0
    assert _breaks(con) == []
    # the Utilization page's capacity counts the node's 8 GPUs once too
    assert con.execute("SELECT sum(capacity_gpu_seconds) / 3600, sum(allocated_gpu_seconds) "
                       "/ 3600 FROM node_usage_hourly").fetchone() == (8 * 24, 56)


def test_without_slinky_recognition_the_node_would_be_charged_twice(con):
    # the same shapes, but the pod is not a NodeSet's: it is an ordinary customer pod, and the
    # jobs on its node are double-scheduled GPUs: conservation shows the conflict
    _node(con, "node3")
    _pod(con, "p1", 8, _at(0), datetime(2026, 1, 6), node="node3")
    _job(con, 101, 4, _at(2), _at(10), node="node3")
    _build(con)
    day = _day(con)
    assert day["capacity"] == 8 * 24
    assert day["invoiced"] == 8 * 24 + 4 * 8
    assert day["excess"] == day["conflict"] == 4 * 8
    assert day["charged"] == 8 * 24 - 4 * 8
    assert day["charged"] + day["conflict"] + day["idle"] == day["capacity"]
    # a cross-scheduler overlap is a double_scheduled incident: conservation holds with it
    assert con.execute("SELECT count(*) FROM incidents WHERE kind = 'double_scheduled'"
                       ).fetchone()[0] == 1
    assert _breaks(con) == []


def test_more_holders_than_gpus_in_one_scheduler_are_an_over_capacity_incident(con):
    _node(con, "n1", gpus=2)
    for i in range(5):  # five one-GPU pods at once on a two-GPU node
        _pod(con, f"p{i}", 1, _at(1), _at(2), node="n1")
    _build(con)
    day = _day(con)
    assert day["invoiced"] == 5
    assert (day["excess"], day["conflict"], day["charged"]) == (3, 2, 0)
    assert day["idle"] == 2 * 24 - 2
    [incident] = con.execute(
        "SELECT kind, domain, node, start_ts, end_ts, gpu_seconds, gpus, share, cost, person "
        "FROM incidents WHERE kind = 'over_capacity'").fetchall()
    # the excess is what a credit would refund: 3 GPU-hours at 4.00
    assert incident == ("over_capacity", "kubernetes", "n1", _at(1), _at(2), 3 * HOUR, 3, 2.5,
                        pytest.approx(12), "unattributed")
    assert _breaks(con) == []
    # without the incident the conflict is unexplained: the check names the node-hour
    con.execute("DELETE FROM incidents")
    assert {(r[0], r[1], r[2]) for r in _breaks(con)} == {(_at(1), "n1",
                                                           "unexplained_conflict")}


def test_busy_gpus_that_no_holder_claims_are_unaccounted_use(con):
    _node(con, "n1", gpus=4)
    _pod(con, "p1", 1, _at(1), _at(3), node="n1", pod="train")
    _minutes(con, "n1", range(1), _at(1), _at(3), 0.8, pod="train", namespace="ml")
    # a pod the ledger never charged (a DRA claim, say) keeps GPU 1 busy for an hour
    _minutes(con, "n1", range(1, 2), _at(1), _at(2), 0.7, pod="dra-pod", namespace="ml")
    # work outside both schedulers: GPU 2 busy, no holder labels, for 30 minutes
    _minutes(con, "n1", range(2, 3), _at(5), _at(5, 30), 0.5)
    # GPU 3 sampled idle: not use
    _minutes(con, "n1", range(3, 4), _at(5), _at(6), 0.0)
    _build(con)
    day = _day(con)
    assert day["charged"] == 2
    assert day["unaccounted"] == 1.5
    assert day["idle"] == 4 * 24 - 2 - 1.5
    assert _breaks(con) == []
    hours = dict(con.execute("SELECT hour, unaccounted_gpu_seconds FROM gpu_conservation_hourly "
                             "WHERE unaccounted_gpu_seconds > 0").fetchall())
    assert hours == {_at(1): HOUR, _at(5): HOUR / 2}
    found = con.execute(
        "SELECT start_ts, end_ts, gpu_seconds, gpu_uuids, share, cost, detail FROM incidents "
        "WHERE kind = 'unaccounted_use' ORDER BY start_ts").fetchall()
    assert [f[:5] for f in found] == [
        (_at(1), _at(2), HOUR, ["GPU-n1-1"], pytest.approx(0.7)),
        (_at(5), _at(6), HOUR // 2, ["GPU-n1-2"], pytest.approx(0.5))]
    assert all(f[5] is None for f in found)  # nobody is charged for it
    assert "pod ml/dra-pod" in found[0][6]
    assert "DRA ResourceClaims not read" in found[0][6]
    assert "no holder labels" in found[1][6]


def test_a_charged_node_missing_from_the_inventory_breaks_conservation(con):
    _node(con, "n1", gpus=2)
    _pod(con, "p1", 1, _at(1), _at(2), node="ghost")
    _build(con)
    assert {(r[1], r[2]) for r in _breaks(con)} == {("ghost", "no_inventory")}



def test_fractional_second_ends_are_held_as_the_ledger_counts_them(con):
    # kube_pod_*_time may carry fractions; the ledger counts second boundaries crossed
    _node(con, "n1", gpus=2)
    _pod(con, "p1", 1, _at(1) + timedelta(milliseconds=600), _at(2, 30) + timedelta(
        milliseconds=300), node="n1")
    _build(con)
    [[charged]] = con.execute("SELECT sum(gpu_seconds) FROM allocations").fetchall()
    assert charged == 5400  # 01:00:00.6 .. 02:30:00.3 crosses 5,400 second boundaries
    day = _day(con)
    assert day["invoiced"] == day["charged"] == 1.5
    assert _breaks(con) == []
