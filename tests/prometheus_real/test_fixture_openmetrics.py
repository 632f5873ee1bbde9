"""The committed OpenMetrics fixture: up to date, realistic shape, accepted by promtool."""

from __future__ import annotations

import gzip
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openmetrics"
START, END = 1736150400, 1736164800  # 2025-01-06 08:00 .. 12:00 UTC, half-open
UUIDS = {
    "GPU-3f5c0a1e-7b2d-4c8e-9a61-0d2e4f6a8b01",
    "GPU-8e1b2c3d-4f5a-6b7c-8d9e-0a1b2c3d4e02",
    "GPU-c0ffee00-1234-5678-9abc-def012345603",
    "GPU-d15ea5e0-8765-4321-abcd-ef0123456704",
}


def test_committed_fixture_matches_generator(tmp_path, small_cluster_om):
    out, alloc = tmp_path / "small-cluster.om", tmp_path / "alloc.csv"
    subprocess.run(
        [sys.executable, str(FIXTURES / "make_fixture.py"), "--out", str(out),
         "--allocations", str(alloc)],
        check=True, capture_output=True, stdin=subprocess.DEVNULL,
    )
    with gzip.open(small_cluster_om, "rb") as fh:
        committed = fh.read()
    assert out.read_bytes() == committed, "re-run make_fixture.py and commit its output"
    assert alloc.read_bytes() == (FIXTURES / "small-cluster.allocations.csv").read_bytes()


def test_fixture_shape(small_cluster):
    assert (small_cluster.min_time, small_cluster.max_time) == (START, END - 10)
    util = small_cluster.select("DCGM_FI_DEV_GPU_UTIL")
    engine = small_cluster.select("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    assert {dict(labels)["UUID"] for labels in util} == UUIDS
    assert {dict(labels)["Hostname"] for labels in util} == {"gpu-k8s-01", "gpu-hpc-01"}
    assert set(util) == set(engine)
    for labels, points in util.items():
        d = dict(labels)
        assert {"gpu", "UUID", "device", "modelName", "Hostname"} <= d.keys()
        # a series belongs to a pod, a Slurm job or nobody -- never both
        assert not ("pod" in d and "hpc_job" in d)
        assert ("pod" in d) == ("namespace" in d) == ("container" in d)
        # dcgm-exporter scraped every 30 s at :00/:30
        assert all(ts % 30 == 0 for ts, _ in points)
        assert all(b - a >= 30 for (a, _), (b, _) in itertools.pairwise(points))
    assert {dict(labels).get("pod") for labels in util} == {
        None, "llm-pretrain-7f3a-worker-0-x7k2p", "vit-finetune-2b9c-0-q4wzt",
        "serve-llama-5d1e-0-m8vhd",
    }
    assert {dict(labels).get("hpc_job") for labels in util} == {None, "48211", "48230", "48245"}
    # 4 GPUs x 480 scrapes, minus the 10-minute exporter outage on gpu-hpc-01 (2 GPUs x 20)
    assert sum(len(p) for p in util.values()) == 4 * 480 - 2 * 20

    gpu_requests = small_cluster.select(
        "kube_pod_container_resource_requests", resource="nvidia_com_gpu", unit="integer"
    )
    assert {dict(labels)["pod"] for labels in gpu_requests} == {
        "llm-pretrain-7f3a-worker-0-x7k2p", "vit-finetune-2b9c-0-q4wzt", "serve-llama-5d1e-0-m8vhd",
    }
    # before scheduling the pod has node="" (i.e. no node label in Prometheus)
    assert any("node" not in dict(labels) for labels in gpu_requests)
    assert small_cluster.select("kube_node_status_capacity", resource="nvidia_com_gpu")
    assert small_cluster.select("kube_pod_status_phase", phase="Succeeded")
    assert small_cluster.select("kube_pod_info", node="gpu-k8s-01")

    assert small_cluster.select("kueue_pending_workloads", status="inadmissible")
    buckets = small_cluster.select("kueue_admission_wait_time_seconds_bucket",
                                   cluster_queue="cq-training")
    les = {dict(labels)["le"] for labels in buckets}
    assert les == {"1.0", "2.5", "5.0", "10.0", "20.0", "40.0", "80.0", "160.0", "320.0", "640.0",
                   "1280.0", "2560.0", "5120.0", "10240.0", "+Inf"}
    assert small_cluster.select("kueue_admission_wait_time_seconds_count")
    assert small_cluster.select("kueue_admission_wait_time_seconds_sum")
    counter = small_cluster.select("kueue_admitted_workloads_total", cluster_queue="cq-training")
    (points,) = counter.values()
    values = [v for _, v in points]
    assert any(b < a for a, b in itertools.pairwise(values)), "counter reset expected"


@pytest.mark.prometheus
def test_promtool_accepts_fixture(prometheus_tools, small_cluster_om, small_cluster, tmp_path):
    plain = tmp_path / "in.om"
    with gzip.open(small_cluster_om, "rb") as src:
        plain.write_bytes(src.read())
    tsdb = tmp_path / "tsdb"
    promtool = prometheus_tools["promtool"]
    created = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=168h",
         str(plain), str(tsdb)],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
    )
    assert created.returncode == 0, created.stderr
    listed = subprocess.run(
        [promtool, "tsdb", "list", str(tsdb)], capture_output=True, text=True, check=True,
        stdin=subprocess.DEVNULL,
    )
    rows = [line.split() for line in listed.stdout.splitlines()[1:] if line.strip()]
    # columns: ULID MIN_TIME MAX_TIME DURATION NUM_SAMPLES NUM_CHUNKS NUM_SERIES SIZE
    assert len(rows) == 1, listed.stdout  # 4 h inside one 162 h-aligned block range
    assert int(rows[0][1]) == START * 1000
    assert int(rows[0][2]) == (END - 10) * 1000 + 1  # block maxt is exclusive: last sample + 1 ms
    assert int(rows[0][4]) == small_cluster.total_samples
    assert int(rows[0][6]) == len(small_cluster.series)
