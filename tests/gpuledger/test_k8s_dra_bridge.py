"""slurm-bridge on the DRA path (../shared/reference/real-cluster-shapes.md, "Slinky, DRA and Slurm
GPU type names"): the pod requests the extended resource ``deviceclass.resource.kubernetes.io/
gpu.nvidia.com``, which kube-state-metrics drops, and the scheduler makes a claim named in the
pod's ``status.extendedResourceClaimStatus`` (dra-driver-nvidia-gpu
demo/specs/extended-resources/gpu-full.yaml: the claim, reservedFor and pod status there); the
representative Slurm job runs as ``slurm`` in partition ``slurm-bridge``, shows
``gres/gpu:gpu.nvidia.com=1`` and names the pod in its AdminComment, and ends CANCELLED when the
pod ends. The pod is charged through its claim, the job is not, and bridge_pairs matches them.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from connectors.kubernetes.dra_claims import read_claim_file
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.kubernetes import run as k8s_ingest
from gpuledger.ingest.kubernetes.dra import DraInput
from gpuledger.ingest.slurm import run as slurm_ingest
from models import load_sql
from models.build import build_allocations, build_gpu_usage_hourly
from models.incidents import build_incidents
from models.runner import connect
from tests.connectors.kubernetes.dra_world import CLAIMS, PODS, World, uid
from tests.connectors.kubernetes.fakes import T0, T0_S, om_file

FIELDS = ("JobID", "JobIDRaw", "User", "UID", "Account", "Partition", "QOS", "State",
          "ExitCode", "DerivedExitCode", "Submit", "Eligible", "Start", "End", "Elapsed",
          "ElapsedRaw", "TimelimitRaw", "AllocCPUS", "AllocNodes", "NodeList", "AllocTRES",
          "ReqTRES", "Cluster", "Reservation", "Reason", "Flags", "WCKey", "JobName",
          "AdminComment")
POD = next(p for p in PODS if p.pod == "gpu-full-pod")


def _sacct(path: Path) -> Path:
    start, end = T0_S + int(POD.start), T0_S + int(POD.end)
    tres = "billing=1,cpu=1,gres/gpu:gpu.nvidia.com=1,gres/gpu=1,mem=1G,node=1"
    row = {
        "JobID": "4242", "JobIDRaw": "4242", "User": "slurm", "UID": "64030",
        "Account": "kubernetes", "Partition": "slurm-bridge", "QOS": "normal",
        "State": "CANCELLED by 64030", "ExitCode": "0:15", "DerivedExitCode": "0:0",
        "Submit": str(start - 2), "Eligible": str(start - 2), "Start": str(start),
        "End": str(end), "Elapsed": "00:29:50", "ElapsedRaw": str(end - start),
        "TimelimitRaw": "60", "AllocCPUS": "1", "AllocNodes": "1", "NodeList": POD.node,
        "AllocTRES": tres, "ReqTRES": tres, "Cluster": "c", "Reservation": "",
        "Reason": "None", "Flags": "SchedMain", "WCKey": "", "JobName": "gpu-full-pod",
        "AdminComment": '{"pods":["extended-resource-gpu-full/gpu-full-pod"]}',
    }
    text = "\x1f".join(FIELDS) + "\n" + "\x1f".join(row[f] for f in FIELDS) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_bridge_pod_is_charged_through_its_claim_and_paired(tmp_path: Path):
    src = OpenMetricsFileSource(om_file(tmp_path / "dra.om", World(dcgm_dra=False).series()))
    claims = read_claim_file(CLAIMS, T0)
    with connect(tmp_path / "ledger.duckdb") as con:
        con.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, "
                        "gpu_uuid) VALUES ('c', 'node-a', 'h100', 4, ?, ?)",
                        [(i, f"GPU-a-{i}") for i in range(4)])
        k8s_ingest.ingest_kubernetes_window(con, src, T0, T0 + timedelta(hours=2), cluster="c",
                                            scrape_interval=timedelta(seconds=30),
                                            dra=DraInput(claims=claims, fresh=claims))
        slurm_ingest.import_sacct_file(con, _sacct(tmp_path / "sacct.txt"),
                                       observed_until=T0 + timedelta(hours=3))
        run = con.execute("SELECT alloc_gpus, alloc_gpu_types, bridge_pods FROM slurm_runs"
                          ).fetchone()
        build_allocations(con, T0.date(), T0.date())
        build_gpu_usage_hourly(con, T0.date(), T0.date())
        found = build_incidents(con, T0.date(), T0.date())
        kinds = con.execute("SELECT DISTINCT kind FROM incidents").fetchall()
        breaks = con.execute(load_sql("gpu_conservation_hourly_check"), {
            "first_day": T0.date(), "end_day": T0.date() + timedelta(days=1),
            "tolerance_s": 0}).fetchall()
        slurm = con.execute("SELECT count(*) FROM allocations WHERE domain = 'slurm'"
                            ).fetchone()
        pod = con.execute("SELECT source_key, physical_gpu_seconds FROM allocations "
                          "WHERE name = 'gpu-full-pod'").fetchone()
        pair = con.execute("SELECT slurm_job, pod_uid, matched, pod_gpus, slurm_gpus "
                           "FROM bridge_pairs").fetchall()
    assert run[0] == 1
    assert "gpu.nvidia.com" in str(run[1])
    assert run[2] == ["extended-resource-gpu-full/gpu-full-pod"]
    assert slurm == (0,)  # the representative job is not charged: its pod is
    assert pod[0] == uid(5)
    assert float(pod[1]) == POD.end - POD.start
    assert pair == [("4242", uid(5), True, 1, 1)]
    assert found.bridge_pairs == 1
    assert ("double_scheduled",) not in kinds  # one workload, not two schedulers' claim
    # node-a's pods, the shared claim's two among them, held as the ledger charges them (the
    # other nodes are not in this inventory)
    assert [b for b in breaks if b[1] == "node-a"] == []
