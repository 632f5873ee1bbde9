"""DRA pods through the Kubernetes ingest and the ledger build (gpuledger/ingest/kubernetes/dra.py,
connectors/kubernetes/dra_pods.py; docs/kubernetes.md "DRA"): charged by the same rules as
device-plugin pods, a shared claim's pods holding its GPU once, dcgm-exporter's claim labels kept
on the readings, the claims stored, and the busy-GPU warning of item 3.

The world is tests/connectors/kubernetes/dra_world.py (upstream shapes, sources named there).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.dra_claims import DraNames, read_claim_file
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.kubernetes import run as k8s_ingest
from gpuledger.ingest.kubernetes.dra import DraInput, DraSetup
from models import load_sql
from models.build import build_allocations, build_gpu_usage_hourly
from models.runner import connect
from tests.connectors.kubernetes.dra_world import CLAIMS, DCGM_GPU, PODS, World, dcgm_line
from tests.connectors.kubernetes.fakes import T0, om_file

TWO_HOURS = timedelta(hours=2)
DAY = T0.date()
NAMES = DraNames(device_classes=("gpu.nvidia.com", "mig.nvidia.com",
                                 "mig-1g-12gb.gpu.nvidia.com"))


def _inventory(con) -> None:
    rows = [("node-a", "h100", 4), ("node-b", "h100", 1), ("kind-dra-1-worker", "gh200", 2)]
    for node, model, n in rows:
        con.executemany("INSERT INTO nodes (cluster, node, gpu_model, gpu_count, gpu_index, "
                        "gpu_uuid) VALUES ('c', ?, ?, ?, ?, ?)",
                        [(node, model, n, i, f"GPU-{node}-{i}") for i in range(n)])


def _ingest(tmp_path: Path, world: World, dra: DraInput | None):
    src = OpenMetricsFileSource(om_file(tmp_path / "dra.om", world.series()))
    ledger = tmp_path / "ledger.duckdb"
    with connect(ledger) as con:
        _inventory(con)
        load = k8s_ingest.ingest_kubernetes_window(con, src, T0, T0 + TWO_HOURS, cluster="c",
                                                   scrape_interval=timedelta(seconds=30),
                                                   dra=dra)
    return ledger, load


@pytest.fixture
def claims():
    return read_claim_file(CLAIMS, T0)


def test_dra_pods_are_charged_and_conserved(tmp_path: Path, claims):
    ledger, load = _ingest(tmp_path, World(), DraInput(NAMES, claims, claims))
    assert load.pods == len(PODS)
    with connect(ledger) as con:
        stored = con.execute("SELECT count(*) FROM k8s_resource_claim_devices").fetchone()[0]
        assert stored == claims.devices.height
        readings = con.execute(
            "SELECT DISTINCT namespace, pod, dra_claim_name, dra_pool_name, dra_device_name "
            "FROM gpu_utilization WHERE namespace = 'gpu-test3' ORDER BY pod").fetchall()
        assert readings == [("gpu-test3", "pod1", "single-gpu", "node-a", "gpu-2"),
                            ("gpu-test3", "pod2", "single-gpu", "node-a", "gpu-2")]
        build_allocations(con, DAY, DAY)
        build_gpu_usage_hourly(con, DAY, DAY)
        charged = dict(con.execute(
            "SELECT k8s_namespace || '/' || name, physical_gpu_seconds FROM allocations "
            "WHERE domain = 'kubernetes'").fetchall())
        evidence = con.execute("SELECT evidence FROM allocations WHERE name = 'gpu-full-pod'"
                               ).fetchone()[0]
        breaks = con.execute(load_sql("gpu_conservation_hourly_check"),
                             {"first_day": DAY, "end_day": DAY + timedelta(days=1),
                              "tolerance_s": 0}).fetchall()
    seconds = {k: float(v) for k, v in charged.items()}
    assert seconds == {
        "gpu-test1/pod1": 3590.0, "gpu-test1/pod2": 1790.0,
        # one GPU, pod1 alone for [5, 3605), then both until 7195: 3600 + 1795 and 1795
        "gpu-test3/pod1": 5395.0, "gpu-test3/pod2": 1795.0,
        "extended-resource-gpu-full/gpu-full-pod": 1790.0,
        # a 1g instance of a 7-slice GPU: 3590 / 7
        "extended-resource-mig-1g12gb/mig-1g12gb-pod": 512.857,
        "gpu-test-mps/test-pod": 3590.0,
    }
    assert "DRA extended-resource-gpu-full/gpu-full-pod-extended-resources-x7k9m " \
           "(gpu.nvidia.com: node-a/gpu-3)" in evidence
    assert breaks == []


def test_claims_stored_earlier_serve_a_later_ingest(tmp_path: Path, claims):
    ledger, _ = _ingest(tmp_path, World(), DraInput(NAMES, claims, claims))
    setup = DraSetup(NAMES)  # this run read no claims: the ledger's are used
    with connect(ledger) as con:
        dra = setup.window_input(con, "c", T0)
    assert dra.claims.devices.height == claims.devices.height
    assert sorted(dra.claims.pods["pod_uid"].unique().to_list()) == sorted(
        claims.pods["pod_uid"].unique().to_list())


def _warnings(load) -> list[str]:
    return [w for w in load.warnings if "busy that no pod" in w]


def test_busy_gpus_no_pod_holds_are_warned_with_their_likely_cause(tmp_path: Path):
    # dcgm-exporter names DRA pods kube-state-metrics does not know (it has no claim lines, no
    # API claims read) and a third node's exporter has no pod mapping at all
    world = World(ksm_claims=False, pods=tuple(p for p in PODS if p.namespace == "gpu-test1"))
    world.extra_dcgm = [dcgm_line(DCGM_GPU, {
        "UUID": "GPU-node-c-0", "hostname": "node-c", "namespace": None, "pod": None,
        "container": None, **{k: None for k in DCGM_GPU[1] if k.startswith("dra_")}}, 0.9)]
    src = OpenMetricsFileSource(om_file(tmp_path / "w.om", world.series()))
    read = k8s_ingest.read_kubernetes_window(src, T0, T0 + TWO_HOURS,
                                             scrape_interval=timedelta(seconds=30))
    # the pods are charged from dcgm-exporter's claim labels alone
    assert sorted(read.pods["pod"].to_list()) == ["pod1", "pod2"]
    busy = [w for _, w in read.warnings if "busy that no pod" in w]
    assert len(busy) == 1
    assert busy[0].startswith("dcgm-exporter: GPUs busy that no pod or Slurm job holds on node "
                              "node-c: 1 GPU(s) (e.g. ['GPU-node-c-0']), 2.00 GPU-hours")
    assert "likely cause: exporter without pod mapping" in busy[0]
    # kube-state-metrics sees no GPU request at all, but pods hold GPUs and GPUs are busy
    ksm = [w for c, w in read.warnings if c == "ksm" and "no samples in" in w]
    assert ksm
    assert not any("no pod holds GPUs there" in w for w in ksm)


def test_readings_naming_claims_of_unknown_pods_point_at_dra(tmp_path: Path):
    world = World(ksm_claims=False, pods=tuple(p for p in PODS if p.namespace == "gpu-test1"))
    text = om_file(tmp_path / "w.om", world.series()).read_text(encoding="utf-8")
    # the pods' kube-state-metrics series are gone (another cluster's, or not scraped)
    kept = "".join(line + "\n" for line in text.splitlines() if not line.startswith("kube_"))
    (tmp_path / "w.om").write_text(kept, encoding="utf-8")
    read = k8s_ingest.read_kubernetes_window(OpenMetricsFileSource(tmp_path / "w.om"), T0,
                                             T0 + TWO_HOURS,
                                             scrape_interval=timedelta(seconds=30))
    busy = [w for _, w in read.warnings if "busy that no pod" in w]
    assert len(busy) == 1
    assert "node node-a: 2 GPU(s)" in busy[0]
    assert "likely cause: DRA claims not read" in busy[0]


def test_no_busy_gpu_and_no_pod_keeps_the_no_pod_note(tmp_path: Path):
    world = World(pods=())
    world.extra_dcgm = [dcgm_line(DCGM_GPU, {
        "UUID": "GPU-node-c-0", "hostname": "node-c", "namespace": None, "pod": None,
        "container": None, **{k: None for k in DCGM_GPU[1] if k.startswith("dra_")}}, 0.0)]
    src = OpenMetricsFileSource(om_file(tmp_path / "w.om", world.series()))
    read = k8s_ingest.read_kubernetes_window(src, T0, T0 + TWO_HOURS,
                                             scrape_interval=timedelta(seconds=30))
    assert any("no pod holds GPUs there" in w for c, w in read.warnings if c == "ksm")
    assert not [w for _, w in read.warnings if "busy that no pod" in w]


def test_an_extended_resource_kube_state_metrics_shows_is_charged_once(tmp_path: Path, claims):
    # gpu-full.yaml: limits nvidia.com/gpu: 1 mapped to the gpu.nvidia.com DeviceClass; the
    # request is in kube-state-metrics and the scheduler's claim holds gpu-3
    world = World(ksm_requests=("gpu-full-pod",))
    src = OpenMetricsFileSource(om_file(tmp_path / "x.om", world.series()))
    read = k8s_ingest.read_kubernetes_window(src, T0, T0 + TWO_HOURS,
                                             scrape_interval=timedelta(seconds=30),
                                             dra=DraInput(NAMES, claims, claims))
    rows = read.pods.filter(pl.col("pod") == "gpu-full-pod")
    assert rows.select("gpu_resource", "gpus").rows() == [("nvidia_com_gpu", 1)]
    assert any(w.startswith("DRA: 1 pod(s) request GPUs through an extended resource")
               for _, w in read.warnings)
