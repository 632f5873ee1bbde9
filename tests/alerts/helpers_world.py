"""A small hybrid world with planted idle GPUs, written in the formats the connectors read.

Shapes: the OpenMetrics text is the one of tests/fixtures/openmetrics/make_fixture.py
(dcgm-exporter's ``DCGM_FI_DEV_GPU_UTIL`` with ``gpu``/``UUID``/``device``/``modelName``/
``Hostname``, ``namespace``/``pod``/``container`` while a pod holds the GPU and ``hpc_job``
while a Slurm job does, from dcgm-exporter's Kubernetes and ``--hpc-job-mapping-dir`` mappers;
kube-state-metrics' ``kube_pod_info``, ``kube_pod_status_phase``,
``kube_pod_container_resource_requests`` and ``kube_node_status_capacity``), the sacct dump is
``sacct --parsable2`` with the field list of tests/fixtures/real_slurm/
sacct-running-P-europe-berlin.txt (Slurm 22.05, ``End=Unknown`` while running).

Times (UTC): the world starts at ``T0``; scrapes every 30 s. ``IDLE_FROM = T0 + 30 min``.

* hpc-01 (Slurm, 4 x a100): job 5001 (alice, GPUs 0+1) busy, then 0 % from IDLE_FROM: PLANTED;
  job 5002 (bob, GPU 2) busy throughout; job 5003 (carol, GPU 3) idle only from
  IDLE_FROM + 11 min (50 min at the +61 check).
* hpc-02 (Slurm, 4 x a100): job 5004 (alice, GPU 0) 0 % from IDLE_FROM but no samples in
  [IDLE_FROM + 50, IDLE_FROM + 55) min (a gap); job 5005 (dave, GPU 1) has no samples at all;
  job 5006 (alice, GPU 2) 0 % from T0 and ended at T0 + 80 min (COMPLETED).
* k8s-01 (Kubernetes, 2 x a100): pod research/train-0 (GPU 0) busy, then 0 % from IDLE_FROM:
  PLANTED; pod research/serve-0 (GPU 1) busy throughout.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from models.runner import connect

T0 = datetime(2026, 1, 12, 8, 0, 0)
IDLE_FROM = T0 + timedelta(minutes=30)
END = T0 + timedelta(hours=4)
STEP = 30
EPOCH = datetime(1970, 1, 1)


def at(minutes_after_idle: float) -> datetime:
    return IDLE_FROM + timedelta(minutes=minutes_after_idle)


def _s(t: datetime) -> int:
    return int((t - EPOCH).total_seconds())


def uuid_of(node: str, index: int) -> str:
    return f"GPU-{sum(map(ord, node)):08d}-0000-4000-8000-{index:012d}"


@dataclass(frozen=True)
class Holder:
    labels: dict
    node: str
    gpus: tuple[int, ...]
    start: datetime
    end: datetime
    idle_from: datetime | None  # 0 % from then on; busy before
    gap: tuple[datetime, datetime] | None = None
    unmeasured: bool = False  # dcgm-exporter reports nothing for its GPUs


def holders() -> list[Holder]:
    job = lambda j: {"hpc_job": j}  # noqa: E731
    pod = lambda p: {"namespace": "research", "pod": p, "container": "main"}  # noqa: E731
    return [
        Holder(job("5001"), "hpc-01", (0, 1), T0, END, IDLE_FROM),
        Holder(job("5002"), "hpc-01", (2,), T0, END, None),
        Holder(job("5003"), "hpc-01", (3,), T0, END, at(11)),
        Holder(job("5004"), "hpc-02", (0,), T0, END, IDLE_FROM, (at(50), at(55))),
        Holder(job("5005"), "hpc-02", (1,), T0, END, IDLE_FROM, unmeasured=True),
        Holder(job("5006"), "hpc-02", (2,), T0, T0 + timedelta(minutes=80), T0),
        Holder(pod("train-0"), "k8s-01", (0,), T0, END, IDLE_FROM),
        Holder(pod("serve-0"), "k8s-01", (1,), T0, END, None),
    ]


NODES = {"hpc-01": 4, "hpc-02": 4, "k8s-01": 2}


def _labels(d: dict) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in d.items()) + "}"


def openmetrics(data_end: datetime = END) -> str:
    lines = ["# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
             "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    hs = holders()
    for node, count in NODES.items():
        target = {"job": "dcgm-exporter", "instance": f"{node}:9400"}
        for i in range(count):
            base = {"gpu": str(i), "UUID": uuid_of(node, i), "device": f"nvidia{i}",
                    "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": node}
            t = T0
            while t < data_end:
                h = next((h for h in hs if h.node == node and i in h.gpus
                          and h.start <= t < h.end), None)
                if h is not None and h.unmeasured:
                    t += timedelta(seconds=STEP)
                    continue
                if h is not None and h.gap and h.gap[0] <= t < h.gap[1]:
                    t += timedelta(seconds=STEP)
                    continue
                value = 0 if h is None or (h.idle_from is not None and t >= h.idle_from) else 87
                labels = {**base, **(h.labels if h else {}), **target}
                lines.append(f"DCGM_FI_DEV_GPU_UTIL{_labels(labels)} {value} {_s(t)}")
                t += timedelta(seconds=STEP)
    ksm = {"job": "kube-state-metrics", "instance": "10.0.0.5:8080"}
    lines += ["# HELP kube_node_status_capacity The capacity for different resources of a node.",
              "# TYPE kube_node_status_capacity gauge"]
    times = []
    t = T0 + timedelta(seconds=10)
    while t < data_end:
        times.append(t)
        t += timedelta(seconds=STEP)
    for ts in times:
        lines.append("kube_node_status_capacity" + _labels(
            {"node": "k8s-01", "resource": "nvidia_com_gpu", "unit": "integer", **ksm})
            + f" 2 {_s(ts)}")
    pods = [h for h in hs if "pod" in h.labels]
    for name, kind in (("kube_pod_info", "Information about pod."),
                       ("kube_pod_status_phase", "The pods current phase."),
                       ("kube_pod_container_resource_requests", "Requested resources.")):
        lines += [f"# HELP {name} {kind}", f"# TYPE {name} gauge"]
        for p in pods:
            name_ = p.labels["pod"]
            base = {"namespace": "research", "pod": name_, "uid": f"uid-{name_}"}
            for ts in times:
                if name == "kube_pod_info":
                    labels = {**base, "node": p.node, "created_by_kind": "Job",
                              "created_by_name": p.labels["pod"][:-2], **ksm}
                    lines.append(f"{name}{_labels(labels)} 1 {_s(ts)}")
                elif name == "kube_pod_status_phase":
                    for ph in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
                        lines.append(f"{name}{_labels({**base, 'phase': ph, **ksm})} "
                                     f"{1 if ph == 'Running' else 0} {_s(ts)}")
                else:
                    labels = {**base, "container": "main", "node": p.node,
                              "resource": "nvidia_com_gpu", "unit": "integer", **ksm}
                    lines.append(f"{name}{_labels(labels)} 1 {_s(ts)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


SACCT_HEADER = ("JobID|JobIDRaw|JobName|User|UID|Account|Partition|QOS|State|ExitCode|"
                "DerivedExitCode|Submit|Eligible|Start|End|Elapsed|ElapsedRaw|TimelimitRaw|"
                "AllocCPUS|AllocNodes|NodeList|AllocTRES|ReqTRES|Cluster|Reservation|Reason|"
                "Flags|WCKey|AdminComment")
USERS = {"5001": ("alice", 20001, "physics"), "5002": ("bob", 20002, "physics"),
         "5003": ("carol", 20003, "physics"), "5004": ("alice", 20001, "physics"),
         "5005": ("dave", 20004, "physics"), "5006": ("alice", 20001, "physics")}


def sacct_dump() -> str:
    rows = [SACCT_HEADER]
    for h in holders():
        if "hpc_job" not in h.labels:
            continue
        j = h.labels["hpc_job"]
        user, uid, account = USERS[j]
        ended = h.end < END
        end = h.end.strftime("%Y-%m-%dT%H:%M:%S") if ended else "Unknown"
        elapsed = int(((h.end if ended else END) - h.start).total_seconds())
        n = len(h.gpus)
        tres = f"billing={4 * n},cpu={4 * n},gres/gpu:a100={n},gres/gpu={n},mem=16000M,node=1"
        start = h.start.strftime("%Y-%m-%dT%H:%M:%S")
        state = "COMPLETED" if ended else "RUNNING"
        rows.append("|".join([
            j, j, f"train-{j}", user, str(uid), account, "gpu", "normal", state, "0:0", "0:0",
            start, start, start, end, f"{elapsed // 3600:02d}:{elapsed // 60 % 60:02d}:00",
            str(elapsed), "600", str(4 * n), "1", h.node, tres, tres, "hybrid", "", "None",
            "SchedMain", "", ""]))
    return "\n".join(rows) + "\n"


def write_world(folder: Path, *, alerts: str = "", data_end: datetime = END) -> Path:
    """The world's files and site file in ``folder``; returns the site file. ``alerts``:
    extra lines of the ``[gpuledger.alerts]`` table."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.om").write_text(openmetrics(data_end))
    (folder / "sacct.txt").write_text(sacct_dump())
    (folder / "contacts.csv").write_text(
        "kind,name,email\nperson,alice,alice@example.org\nteam,ml,ml-team@example.org\n")
    site = folder / "gpuledger.toml"
    site.write_text(f"""\
[gpuledger]
first_day = "2026-01-05"
db = "ledger.duckdb"

[gpuledger.clusters.hybrid.slurm]
mode = "dump"
dump = "sacct.txt"

[gpuledger.clusters.hybrid.prometheus]
openmetrics = "metrics.om"

[gpuledger.alerts]
enabled = true
contacts = "contacts.csv"
admins = ["ops@example.org"]
dashboard_url = "https://gpuledger.example.org"
{alerts}
""")
    with connect(folder / "ledger.duckdb") as con:
        seed_ledger(con)
    return site


def seed_ledger(con: duckdb.DuckDBPyConnection) -> None:
    """Identity, rate card and node models as the reference imports store them."""
    con.execute("INSERT INTO identity_map VALUES "
                "('slurm_user', 'alice', 'alice', 'physics', 'cc-phys', NULL, NULL), "
                "('slurm_user', 'bob', 'bob', 'physics', 'cc-phys', NULL, NULL), "
                "('k8s_namespace', 'research', 'erin', 'ml', 'cc-ml', NULL, NULL)")
    con.execute("INSERT INTO rate_card VALUES ('a100', 'slurm', '', NULL, NULL, 2.50, 'EUR'), "
                "('a100', 'kubernetes', '', NULL, NULL, 3.00, 'EUR')")
    for node, count in NODES.items():
        for i in range(count):
            con.execute("INSERT INTO nodes (cluster, node, pool, gpu_model, gpu_count, gpu_index,"
                        " gpu_uuid) VALUES ('hybrid', ?, ?, 'a100', ?, ?, ?)",
                        [node, "kubernetes" if node.startswith("k8s") else "slurm", count, i,
                         uuid_of(node, i)])
