"""Time-sliced and MPS pods hold replicas, not GPUs (docs/shared-gpus.md).

Shapes: tests/fixtures/kubernetes/sharing (README: the GPU Operator's time-slicing and MPS
"Verifying" outputs, renameByDefault false and true).
"""

import polars as pl

from connectors.gpu_sharing import SharingNames
from tests.connectors.kubernetes.sharing_shapes import (
    END,
    MPS_RENAMED,
    RUN,
    TIME_SLICING,
    allocations,
    held,
    node_lines,
    pod_life,
    pod_lines,
    shape,
)


def test_a_time_sliced_pod_holds_its_replicas(tmp_path):
    out = allocations(tmp_path, shape(TIME_SLICING))
    # GFD's default mig.strategy=single on the T4 does not make it MIG: no -MIG- product
    assert held(out) == [("nvidia_com_gpu", "time_slicing", None, 2, RUN, END)]


def test_the_mps_sharing_strategy_label_makes_replicas_mps(tmp_path):
    nodes = [ln.but(label_nvidia_com_gpu_sharing_strategy="mps")
             if ln.name == "kube_node_labels" else ln for ln in node_lines(TIME_SLICING)]
    out = allocations(tmp_path, pod_life(lambda _t: nodes, pod_lines(TIME_SLICING)))
    assert held(out) == [("nvidia_com_gpu", "mps", None, 2, RUN, END)]


def test_a_renamed_shared_resource_is_read_and_is_mps_on_an_mps_node(tmp_path):
    out = allocations(tmp_path, shape(MPS_RENAMED))
    assert held(out) == [("nvidia_com_gpu_shared", "mps", None, 1, RUN, END)]


def test_one_replica_per_gpu_is_a_whole_gpu(tmp_path):
    nodes = [ln.but(label_nvidia_com_gpu_replicas="1",
                    label_nvidia_com_gpu_product="Tesla-T4",
                    label_nvidia_com_gpu_sharing_strategy="none")
             if ln.name == "kube_node_labels" else ln.but(value=4.0)
             for ln in node_lines(TIME_SLICING)]
    out = allocations(tmp_path, pod_life(lambda _t: nodes, pod_lines(TIME_SLICING)))
    assert held(out) == [("nvidia_com_gpu", None, None, 2, RUN, END)]


def test_a_site_named_resource_is_read_only_when_the_site_names_it(tmp_path):
    renamed = [ln.but(resource="nvidia_com_gpu_ts") for ln in pod_lines(TIME_SLICING)]
    nodes = node_lines(TIME_SLICING)
    life = pod_life(lambda _t: nodes, renamed)
    notes: list[str] = []
    assert allocations(tmp_path / "a", life, notes=notes).height == 0
    assert any("no pod holds GPUs" in n for n in notes)
    named = allocations(tmp_path / "b", life,
                        names=SharingNames(time_slicing_resources=("nvidia_com_gpu_ts",)))
    assert held(named) == [("nvidia_com_gpu_ts", "time_slicing", None, 2, RUN, END)]
    always_mps = allocations(tmp_path / "c", life,
                             names=SharingNames(mps_resources=("nvidia_com_gpu_ts",)))
    assert held(always_mps) == [("nvidia_com_gpu_ts", "mps", None, 2, RUN, END)]


def test_a_replica_count_label_that_is_not_a_number_is_a_reject(tmp_path):
    nodes = [ln.but(label_nvidia_com_gpu_replicas="four") if ln.name == "kube_node_labels"
             else ln for ln in node_lines(TIME_SLICING)]
    rejects: list[pl.DataFrame] = []
    out = allocations(tmp_path, pod_life(lambda _t: nodes, pod_lines(TIME_SLICING)),
                      rejects=rejects)
    reasons = set(pl.concat(rejects)["reason"].to_list())
    assert reasons == {"expected a whole number in label_nvidia_com_gpu_replicas, found text"}
    # the replicas unknown, the sharing-strategy label still says time-slicing
    assert held(out) == [("nvidia_com_gpu", "time_slicing", None, 2, RUN, END)]
