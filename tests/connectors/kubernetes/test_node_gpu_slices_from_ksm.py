"""Shared GPUs per node from kube-state-metrics (connectors/kubernetes/ksm_slices.py) and the
physical GPU count of a single-strategy MIG node in the inventory (ksm_nodes.py).

Shapes: tests/fixtures/kubernetes/sharing (README names every source).
"""

from datetime import timedelta

import pytest

from connectors.gpu_sharing import DEFAULT_NAMES
from connectors.kubernetes.ksm_nodes import ksm_node_inventory
from connectors.kubernetes.ksm_slices import ksm_node_slices
from tests.connectors.kubernetes.fakes import T0
from tests.connectors.kubernetes.sharing_shapes import (
    MIG_MIXED,
    MIG_SINGLE,
    MPS_RENAMED,
    TIME_SLICING,
    node_lines,
    source,
)

AT = T0 + timedelta(minutes=20)
COLS = ("node", "sharing", "slice_profile", "units", "physical_gpus", "units_per_gpu",
        "gpu_slices", "mig_config")


def slices(tmp_path, path, *, honor=True, names=DEFAULT_NAMES):
    nodes = node_lines(path)
    src = source(tmp_path, lambda _t: nodes, honor=honor)
    return ksm_node_slices(src, AT, names=names).select(COLS).rows()


@pytest.mark.parametrize("honor", [True, False])
def test_mixed_strategy_capacity_per_profile(tmp_path, honor):
    assert slices(tmp_path, MIG_MIXED, honor=honor) == [
        ("gpu-mig-1", "mig", "1g.12gb", 2, 1, 1, 7, "all-balanced"),
        ("gpu-mig-1", "mig", "2g.24gb", 1, 1, 2, 7, "all-balanced"),
        ("gpu-mig-1", "mig", "3g.47gb", 1, 1, 3, 7, "all-balanced"),
    ]


def test_single_strategy_counts_instances_and_derives_the_gpus(tmp_path):
    # gfd_labels.md: 8 GPUs x 7 instances = 56, gpu.count overridden to 56
    assert slices(tmp_path, MIG_SINGLE) == [
        ("gpu-mig-2", "mig", "1g.5gb", 56, 8, 1, 7, "all-1g.5gb")]


def test_time_slicing_replicas_of_the_physical_gpus(tmp_path):
    assert slices(tmp_path, TIME_SLICING) == [
        ("gpu-ts-1", "time_slicing", None, 16, 4, 4, None, None)]


def test_renamed_mps_replicas(tmp_path):
    assert slices(tmp_path, MPS_RENAMED) == [
        ("gpu-mps-1", "mps", None, 16, 4, 4, None, None)]


def test_a_whole_gpu_node_has_no_slice_rows(tmp_path):
    nodes = [ln.but(value=4.0) for ln in node_lines(TIME_SLICING)
             if ln.name == "kube_node_status_capacity"]
    src = source(tmp_path, lambda _t: nodes)
    assert ksm_node_slices(src, AT).height == 0


def test_the_inventory_counts_physical_gpus_of_a_single_strategy_node(tmp_path):
    nodes = node_lines(MIG_SINGLE)
    src = source(tmp_path, lambda _t: nodes)
    inv = ksm_node_inventory(src, AT, lookback=timedelta(hours=1))
    assert inv.select("node", "gpu_model", "gpu_count", "capacity_gpus", "mig").rows() == [
        ("gpu-mig-2", "a100", 8, 56, True)]


@pytest.mark.parametrize(("path", "node", "model"), [(MIG_MIXED, "gpu-mig-1", "h100"),
                                                     (MPS_RENAMED, "gpu-mps-1", "t4")])
def test_gpus_handed_out_under_other_names_stay_in_the_inventory(tmp_path, path, node, model):
    nodes = node_lines(path)  # nvidia_com_gpu capacity 0, GFD's gpu.count the physical GPUs
    src = source(tmp_path, lambda _t: nodes)
    inv = ksm_node_inventory(src, AT, lookback=timedelta(hours=1))
    count = 1 if path == MIG_MIXED else 4
    assert inv.select("node", "gpu_model", "gpu_count", "capacity_gpus").rows() == [
        (node, model, count, 0)]
