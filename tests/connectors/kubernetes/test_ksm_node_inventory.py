"""GPU nodes from kube-state-metrics (connectors/kubernetes/ksm_nodes.py).

Series are built from kube-state-metrics' own node_test.go exposition
(tests/fixtures/expositions/kube-state-metrics-v2.20.0-node_test.prom: node "127.0.0.1",
capacity 4 nvidia_com_gpu) and scraped with honor_labels true and false. kube_node_labels is
not in that test; its GPU Feature Discovery labels are written as KSM names them
(nvidia.com/gpu.product -> label_nvidia_com_gpu_product; GFD README label list).
"""

from datetime import timedelta

import polars as pl
import pytest

from connectors.kubernetes.ksm_nodes import ksm_node_inventory, short_model
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import KSM_NODE_V2_20, Line, lines, one, series

CAPACITY = one(lines(KSM_NODE_V2_20), "kube_node_status_capacity", resource="nvidia_com_gpu")
NODE = CAPACITY.get("node")
AT = T0 + timedelta(minutes=10)
TIMES = [0, 30, 60, 90]


def gfd_labels(**labels: str) -> Line:
    return Line("kube_node_labels", (("node", NODE), *labels.items()), 1.0)


def read(tmp_path, lines_at, *, honor=True):
    path = om_file(tmp_path / "m.om", series(lines_at, TIMES, honor=honor))
    rejects: list[pl.DataFrame] = []
    frame = ksm_node_inventory(OpenMetricsFileSource(path), AT, rejects=rejects)
    return frame, (pl.concat(rejects) if rejects else None)


@pytest.mark.parametrize("honor", [True, False])
def test_capacity_alone_gives_the_count_and_no_model(tmp_path, honor):
    frame, rejects = read(tmp_path, lambda t: [CAPACITY], honor=honor)
    assert rejects is None
    assert frame.select("node", "gpu_model", "gpu_count", "capacity_gpus").rows() == [
        ("127.0.0.1", "", 4, 4)]


def test_gfd_product_gives_the_model_a_rate_card_names(tmp_path):
    frame, _ = read(tmp_path, lambda t: [CAPACITY, gfd_labels(
        label_nvidia_com_gpu_product="NVIDIA-A100-SXM4-80GB", label_nvidia_com_gpu_count="4")])
    row = frame.row(0, named=True)
    assert (row["gpu_model"], row["gpu_product"], row["gpu_count"], row["mig"]) == (
        "a100", "NVIDIA-A100-SXM4-80GB", 4, False)


def test_time_slicing_counts_physical_gpus_not_replicas(tmp_path):
    sliced = CAPACITY.but(value=16.0)
    frame, _ = read(tmp_path, lambda t: [sliced, gfd_labels(
        label_nvidia_com_gpu_product="Tesla-T4", label_nvidia_com_gpu_replicas="4")])
    assert frame.select("gpu_model", "gpu_count", "capacity_gpus", "replicas").rows() == [
        ("t4", 4, 16, 4)]


def test_latest_sample_in_the_window_counts(tmp_path):
    frame, _ = read(tmp_path, lambda t: [CAPACITY.but(value=8.0 if t >= 60 else 4.0)])
    assert frame["gpu_count"].to_list() == [8]


def test_bad_samples_are_rejects_not_inventory(tmp_path):
    def at(t):
        return [CAPACITY.but(value=float("nan")),
                CAPACITY.but(node="gpu-b", value=2.0),
                gfd_labels(label_nvidia_com_gpu_count="four").but(node="gpu-b")]
    frame, rejects = read(tmp_path, at)
    assert frame.select("node", "gpu_count").rows() == [("gpu-b", 2)]
    reasons = sorted(set(rejects["reason"].to_list()))
    assert reasons == ["expected a finite GPU capacity, found NaN",
                       "expected a whole number in label_nvidia_com_gpu_count, found text"]


@pytest.mark.parametrize(("product", "model"), [
    ("NVIDIA-A100-SXM4-80GB", "a100"), ("NVIDIA-H100-80GB-HBM3", "h100"),
    ("Tesla-V100-SXM2-16GB", "v100"), ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "a100"),
    ("NVIDIA-GeForce-RTX-4090", "rtx"), (None, ""),
])
def test_short_model(product, model):
    assert short_model(product) == model
