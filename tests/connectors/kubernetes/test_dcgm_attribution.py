"""Samples without pod labels: attributed only where one pod holds every GPU of the node.

Exporter shapes from dcgm-exporter #363 (no pod labels, one A5000 on k8s-gpu1), gpu-operator
#472 (stored series with job/instance/node, no pod labels), #512 (MIG) and #250 (an HPC node);
pod intervals and node capacity as kube-state-metrics gives them (k8s_pod_allocations /
k8s_node_capacity frames), built here.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.dcgm import gpu_utilization
from connectors.kubernetes.dcgm_attribution import FIX, SOLE_POD
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.records import (
    NODE_GPU_CAPACITY_SCHEMA,
    POD_GPU_ALLOCATION_SCHEMA,
    conform,
)
from tests.connectors.kubernetes.dcgm_fixtures import exposition, over_time, relabel
from tests.connectors.kubernetes.fakes import T0, om_file

HOUR = timedelta(hours=1)
NO_LABELS = "dcgm-exporter-issue-363-no-pod-labels.prom"


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def pods(*rows: tuple) -> pl.DataFrame:
    """(namespace, pod, uid, node, gpus, start s, end s) rows as k8s_pod_allocations pieces."""
    frame = pl.DataFrame(
        [(ns, p, uid, node, gpus, t(a), t(b)) for ns, p, uid, node, gpus, a, b in rows],
        schema={"namespace": pl.String, "pod": pl.String, "uid": pl.String, "node": pl.String,
                "gpus": pl.Int64, "start_ts": pl.Datetime("us"), "end_ts": pl.Datetime("us")},
        orient="row")
    return conform(frame, POD_GPU_ALLOCATION_SCHEMA)


def capacity(node: str, gpus: int, a: float = -3600, b: float = 7200) -> pl.DataFrame:
    frame = pl.DataFrame({"node": [node], "start_ts": [t(a)], "end_ts": [t(b)],
                          "capacity_gpus": [gpus]})
    return conform(frame, NODE_GPU_CAPACITY_SCHEMA)


def util(tmp_path: Path, lines, *, last: float = 1770, value=None, **kwargs):
    source = OpenMetricsFileSource(om_file(tmp_path / "dcgm.om",
                                           over_time(lines, 0, last, value=value)))
    return gpu_utilization(source, T0, T0 + HOUR, **kwargs)


def second_gpu(lines, uuid: str, index: int):
    """The same exporter's next GPU (same node, model, driver; its own index and UUID)."""
    return relabel(lines, UUID=uuid, gpu=str(index), device=f"nvidia{index}")


def test_the_only_pod_holding_the_node_gets_the_unlabelled_samples(tmp_path: Path):
    lines = [x for x in exposition(NO_LABELS) if x[0] == "DCGM_FI_DEV_GPU_UTIL"]
    held = pods(("team-a", "notebook-0", "uid-nb", "k8s-gpu1", 1, 600, 1200))
    out, warnings = util(tmp_path, lines, pods=held, capacity=capacity("k8s-gpu1", 1))
    by_minute = {r["bucket_start"]: (r["pod"], r["pod_uid"], r["namespace"], r["attribution"])
                 for r in out.iter_rows(named=True)}
    assert by_minute[t(540)] == (None, None, None, None)  # before the pod: idle, no holder
    assert by_minute[t(600)] == ("notebook-0", "uid-nb", "team-a", SOLE_POD)
    assert by_minute[t(1140)] == ("notebook-0", "uid-nb", "team-a", SOLE_POD)
    assert by_minute[t(1200)] == (None, None, None, None)  # [start, end): the end is free
    assert out.filter(pl.col("attribution") == SOLE_POD)["samples"].sum() == 20
    assert out["container"].drop_nulls().len() == 0
    warning, = [w for w in warnings if "pod labels" in w]
    assert "dcgm-exporter of node/Hostname 'k8s-gpu1' carries no pod labels" in warning
    assert "10 GPU-minute(s) attributed" in warning
    assert FIX in warning
    for fix in ("--kubernetes", "DCGM_EXPORTER_KUBERNETES=true", "/var/lib/kubelet/pod-resources"):
        assert fix in FIX


def test_the_warning_names_job_instance_and_node_of_a_stored_series(tmp_path: Path):
    # gpu-operator#472: the series as Prometheus stored it, with the scrape's job/instance/node
    lines = exposition("gpu-operator-issue-472-no-pod-labels-stored.prom")
    node = "aks-gpunp-66230965-vmss000000"
    out, warnings = util(tmp_path, lines, pods=pods(("ml", "train-0", "u-1", node, 1, 0, 1800)),
                         capacity=capacity(node, 1))
    assert out["node"].unique().to_list() == [node]  # the relabelled node beats Hostname
    assert out["attribution"].unique().to_list() == [SOLE_POD]
    assert any("dcgm-exporter job='gpu-metrics' instance='10.244.1.9:9400' "
               f"node/Hostname='{node}' carries no pod labels" in w for w in warnings)


def test_two_pods_on_the_node_stay_unattributed_and_are_counted(tmp_path: Path):
    a = [x for x in exposition(NO_LABELS) if x[0] == "DCGM_FI_DEV_GPU_UTIL"]
    lines = a + second_gpu(a, "GPU-7ad09335-aadb-19c3-e3a9", 1)
    held = pods(("team-a", "p-0", "u-0", "k8s-gpu1", 1, 0, 1800),
                ("team-b", "p-1", "u-1", "k8s-gpu1", 1, 600, 1800))
    out, warnings = util(tmp_path, lines, pods=held, capacity=capacity("k8s-gpu1", 2))
    assert out["attribution"].drop_nulls().len() == 0
    warning, = [w for w in warnings if "pod labels" in w]
    # 0-10 min: one pod holds one of the two GPUs; 10-30 min: two pods. 2 GPUs x 30 min.
    assert ("0 GPU-minute(s) attributed to the only pod holding every GPU of the node"
            in warning)
    assert ("60 GPU-minute(s) could not be attributed (20 with part of the node, "
            "40 with several pods)" in warning)


def test_mig_instances_are_not_given_to_a_pod_of_whole_gpus(tmp_path: Path):
    # dcgm-exporter#512's three MIG instances without their pod labels, on a node whose
    # nvidia.com/gpu capacity counts one (mixed strategy): 3 devices > 1 GPU
    lines = relabel(exposition("dcgm-exporter-issue-512-mig-h100.prom"), namespace=None,
                    pod=None, container=None)
    node = "gsrh100-074"
    out, warnings = util(tmp_path, lines, pods=pods(("ml", "w-0", "u-1", node, 1, 0, 1800)),
                         capacity=capacity(node, 1))
    assert out["attribution"].drop_nulls().len() == 0
    assert any("90 GPU-minute(s) could not be attributed (90 with more devices than GPUs (MIG))"
               in w for w in warnings)


def test_a_slurm_job_on_the_node_makes_it_ambiguous(tmp_path: Path):
    # dcgm-exporter with the HPC job mapping on an HPC node (#250's V100): GPU 0 runs Slurm job
    # 48211 while Kubernetes claims the whole node for one pod (double scheduling)
    a = exposition("dcgm-exporter-issue-250-v100-node.prom")
    lines = relabel(a, hpc_job="48211") + second_gpu(a, "GPU-8d5053b3-9280-7d1a-751b-4fd2fdd547c5",
                                                     1)
    out, warnings = util(tmp_path, lines, last=570,
                         pods=pods(("ml", "w-0", "u-1", "r6i3n0", 2, 0, 600)),
                         capacity=capacity("r6i3n0", 2))
    assert out.filter(pl.col("hpc_job") == "48211")["attribution"].unique().to_list() == [
        "exporter_labels"]
    assert out.filter(pl.col("hpc_job").is_null())["attribution"].unique().to_list() == [None]
    assert any("10 with a Slurm job on the node" in w for w in warnings)


def test_an_exporter_with_pod_labels_that_misses_some_scrapes(tmp_path: Path):
    # the mapping lags at the pod's start: the first two scrapes carry no pod labels
    a = [x for x in exposition(NO_LABELS) if x[0] == "DCGM_FI_DEV_GPU_UTIL"]
    labelled = relabel(a, namespace="team-a", pod="notebook-0", container="main")
    series = over_time(a, 0, 30, value=50.0) + over_time(labelled, 60, 570, value=50.0)
    source = OpenMetricsFileSource(om_file(tmp_path / "lag.om", series))
    out, warnings = gpu_utilization(
        source, T0, T0 + HOUR, pods=pods(("team-a", "notebook-0", "uid-nb", "k8s-gpu1", 1, 0,
                                          600)), capacity=capacity("k8s-gpu1", 1))
    assert out.select("bucket_start", "container", "attribution").rows() == [
        (t(0), None, SOLE_POD)] + [(t(60 * m), "main", "exporter_labels") for m in range(1, 10)]
    assert any("shows pod labels for some GPUs but not for every GPU a pod held" in w
               and "1 GPU-minute(s) attributed" in w for w in warnings)


def test_capacity_unknown_is_never_a_sole_pod(tmp_path: Path):
    lines = [x for x in exposition(NO_LABELS) if x[0] == "DCGM_FI_DEV_GPU_UTIL"]
    out, warnings = util(tmp_path, lines, last=570,
                         pods=pods(("team-a", "nb", "u", "k8s-gpu1", 1, 0, 600)),
                         capacity=capacity("other-node", 1))
    assert out["attribution"].drop_nulls().len() == 0
    assert any("10 with capacity unknown" in w for w in warnings)


@pytest.mark.parametrize("pods_frame", [None, pods()])
def test_without_pods_nothing_is_attributed_and_nothing_warned(tmp_path: Path, pods_frame):
    lines = [x for x in exposition(NO_LABELS) if x[0] == "DCGM_FI_DEV_GPU_UTIL"]
    out, warnings = util(tmp_path, lines, pods=pods_frame, capacity=capacity("k8s-gpu1", 1))
    assert out["attribution"].drop_nulls().len() == 0
    assert not [w for w in warnings if "pod labels" in w]
