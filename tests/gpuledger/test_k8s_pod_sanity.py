"""A pod asking for more GPUs than its node has is a reject with its reason, never a charge
(issue #13, item 2, Kubernetes side)."""

from datetime import datetime
from pathlib import Path

from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.kubernetes.run import ingest_kubernetes_window
from models.runner import connect

T0 = 1767571200  # 2026-01-05T00:00:00Z


def exposition(path: Path, gpus: int) -> Path:
    lines = []
    for i in range(10):
        ts = T0 + 60 * i
        lines += [
            f'kube_node_status_capacity{{node="n1",resource="nvidia_com_gpu",unit="integer"}} '
            f"8 {ts}",
            f'kube_pod_container_resource_requests{{namespace="ns",pod="p",uid="u1",'
            f'container="c",node="n1",resource="nvidia_com_gpu",unit="integer"}} {gpus} {ts}',
            f'kube_pod_status_phase{{namespace="ns",pod="p",uid="u1",phase="Running"}} 1 {ts}',
        ]
    path.write_text("\n".join(lines) + "\n# EOF\n", encoding="utf-8")
    return path


def ingest(tmp_path: Path, gpus: int):
    source = OpenMetricsFileSource(exposition(tmp_path / f"m{gpus}.om", gpus))
    with connect(tmp_path / f"l{gpus}.duckdb") as con:
        load = ingest_kubernetes_window(con, source, datetime(2026, 1, 5),
                                        datetime(2026, 1, 6), cluster="c")
        pods = con.execute("SELECT gpus FROM k8s_pod_allocations").fetchall()
        rejects = con.execute("SELECT reason, series, value FROM k8s_rejects").fetchall()
    return load, pods, rejects


def test_a_pod_within_its_node_is_charged(tmp_path: Path):
    load, pods, rejects = ingest(tmp_path, 8)
    assert pods == [(8,)]
    assert rejects == []
    assert load.rejected_samples == 0


def test_a_pod_beyond_its_node_is_rejected_and_counted(tmp_path: Path):
    load, pods, rejects = ingest(tmp_path, 99999999999)
    assert pods == []
    assert len(rejects) == 1
    reason, series, value = rejects[0]
    assert reason == ("expected at most the node's GPUs (from kube_node_status_capacity), "
                      "found a pod holding more")
    assert '"node_gpus":8' in series
    assert '"uid":"u1"' in series
    assert value == 99999999999
    assert load.rejected == (("ksm", reason, 1),)
