"""MIG pods are read with their profile, in both MIG strategies (docs/shared-gpus.md).

Shapes: tests/fixtures/kubernetes/sharing (README: kube-state-metrics line shapes, GPU Feature
Discovery label names, capacities from kubectl-view-allocations#258 and gfd_labels.md).
"""

import pytest

from tests.connectors.kubernetes.sharing_shapes import (
    END,
    MIG_MIXED,
    MIG_SINGLE,
    RUN,
    allocations,
    held,
    node_lines,
    pod_life,
    pod_lines,
    shape,
)


@pytest.mark.parametrize("honor", [True, False])
def test_a_mixed_strategy_pod_holds_instances_of_its_profile(tmp_path, honor):
    out = allocations(tmp_path, shape(MIG_MIXED), honor=honor)
    assert held(out) == [("nvidia_com_mig_1g_12gb", "mig", "1g.12gb", 1, RUN, END)]
    assert out["node"].to_list() == ["gpu-mig-1"]


@pytest.mark.parametrize("honor", [True, False])
def test_a_single_strategy_pod_is_mig_by_its_node_labels(tmp_path, honor):
    out = allocations(tmp_path, shape(MIG_SINGLE), honor=honor)
    assert held(out) == [("nvidia_com_gpu", "mig", "1g.5gb", 1, RUN, END)]


def test_without_node_labels_nvidia_com_gpu_stays_whole(tmp_path):
    nodes = [ln for ln in node_lines(MIG_SINGLE) if ln.name != "kube_node_labels"]
    out = allocations(tmp_path, pod_life(lambda _t: nodes, pod_lines(MIG_SINGLE)))
    assert held(out) == [("nvidia_com_gpu", None, None, 1, RUN, END)]


def test_a_pod_holding_a_gpu_and_a_mig_instance_has_a_row_for_each(tmp_path):
    mig = pod_lines(MIG_MIXED)
    whole = [ln.but(resource="nvidia_com_gpu", value=2.0) for ln in mig]
    nodes = node_lines(MIG_MIXED)
    out = allocations(tmp_path, pod_life(lambda _t: nodes, [*mig, *whole]))
    assert held(out) == [("nvidia_com_gpu", None, None, 2, RUN, END),
                         ("nvidia_com_mig_1g_12gb", "mig", "1g.12gb", 1, RUN, END)]
    assert out["gpu_seconds"].to_list() == [2.0 * (END - RUN), 1.0 * (END - RUN)]


def test_a_node_relabelled_to_the_single_strategy_starts_a_new_interval(tmp_path):
    """The labels in force at each sample decide: GFD relabels the node at 900 s."""
    nodes = node_lines(MIG_SINGLE)
    bare = [ln for ln in nodes if ln.name != "kube_node_labels"]
    before = [ln.but(label_nvidia_com_mig_strategy=None,
                     label_nvidia_com_gpu_product="NVIDIA-A100-SXM4-40GB")
              if ln.name == "kube_node_labels" else ln for ln in nodes]
    out = allocations(tmp_path, pod_life(lambda t: before if t < 900 else nodes,
                                         pod_lines(MIG_SINGLE)))
    assert bare  # the capacity line is there throughout
    assert held(out) == [("nvidia_com_gpu", None, None, 1, RUN, 910),
                         ("nvidia_com_gpu", "mig", "1g.5gb", 1, 910, END)]


def test_a_time_sliced_mig_instance_is_read_as_mig_with_a_warning(tmp_path):
    """GFD's product for MIG instances shared by time-slicing ends in -SHARED (k8s-device-plugin
    docs/gfd_labels.md); their replicas are not modelled, so the ingest says so."""
    nodes = [ln.but(label_nvidia_com_gpu_product="NVIDIA-A100-SXM4-40GB-MIG-1g.5gb-SHARED")
             if ln.name == "kube_node_labels" else ln for ln in node_lines(MIG_SINGLE)]
    notes: list[str] = []
    out = allocations(tmp_path, pod_life(lambda _t: nodes, pod_lines(MIG_SINGLE)), notes=notes)
    assert held(out) == [("nvidia_com_gpu", "mig", "1g.5gb", 1, RUN, END)]
    assert [n for n in notes if "-SHARED on " in n and "not modelled" in n]
    notes.clear()
    allocations(tmp_path / "plain", shape(MIG_SINGLE), notes=notes)
    assert not [n for n in notes if "-SHARED" in n]
