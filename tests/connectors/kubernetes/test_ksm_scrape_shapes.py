"""kube-state-metrics read in both scrape shapes: with and without Prometheus' honor_labels.

Series from kube-state-metrics v2.20.0's own expected expositions (pod_test.go, node_test.go),
stored as Prometheus stores them for a ServiceMonitor target (ksm_expositions.scraped): without
honor_labels the workload's namespace/pod/container (and node, where the target has a node
label) move to exported_*, and the plain labels name kube-state-metrics' own pod.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.ksm import node_gpu_capacity, pod_gpu_allocations, read_for_uids
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import (
    KSM_NODE_V2_20,
    KSM_POD_V2_20,
    KSM_TARGET,
    Line,
    lines,
    one,
    phase_lines,
    pick,
    series,
)

HOUR = timedelta(hours=1)
UPSTREAM = lines(KSM_POD_V2_20)
GPU = {"resource": "nvidia_com_gpu"}
# pod1 (ns1, uid1): upstream pod1_con1 requests 1 nvidia.com/gpu; pod1_con2 requests none
# upstream, here it gets 2 (the same line, container and value changed) -- two GPU containers
CON1 = one(UPSTREAM, "kube_pod_container_resource_requests", container="pod1_con1", **GPU)
CON2 = CON1.but(value=2.0, container="pod1_con2")
PHASE = pick(UPSTREAM, "kube_pod_status_phase", uid="uid1")
WITH_NODE = {**KSM_TARGET, "node": "ksm-node-7"}  # a ServiceMonitor relabelling the pod's node


def t(seconds: float):
    return T0 + timedelta(seconds=seconds)


def grid(a: float = 0, b: float = 3600, step: float = 30, offset: float = 10) -> list[float]:
    return [x for x in (offset + step * i for i in range(int(b // step) + 1)) if a <= x < b]


def pod_at(running: tuple[float, float] = (300, 1800), bound_at: float = 200,
           extra: tuple[Line, ...] = ()):
    """pod1's exposition at time t: Pending, Running in `running`, then Succeeded; its node
    is empty (as upstream writes it) until `bound_at`, then node1."""
    def lines_at(now: float) -> list[Line]:
        node = "node1" if now >= bound_at else ""
        phase = ("Pending" if now < running[0] else "Running" if now < running[1]
                 else "Succeeded")
        return [CON1.but(node=node), CON2.but(node=node), *phase_lines(PHASE, phase), *extra]
    return lines_at


def source(tmp_path: Path, found) -> OpenMetricsFileSource:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return OpenMetricsFileSource(om_file(tmp_path / "ksm.om", found))


def allocations(tmp_path: Path, honor, target=None, lines_at=None, **kwargs) -> pl.DataFrame:
    found = series(lines_at or pod_at(), grid(), honor=honor, target=target)
    return pod_gpu_allocations(source(tmp_path, found), T0, T0 + HOUR, **kwargs)


def rows(frame: pl.DataFrame) -> list[tuple]:
    return frame.select("namespace", "pod", "uid", "node", "gpus", "start_ts", "end_ts",
                        "samples").rows()


EXPECTED = [("ns1", "pod1", "uid1", "node1", 3, t(310), t(1810), 50)]


@pytest.mark.parametrize("honor", [True, False], ids=["honor_labels", "no_honor_labels"])
def test_two_gpu_containers_hold_their_sum_in_both_shapes(tmp_path: Path, honor: bool):
    out = allocations(tmp_path, honor)
    assert rows(out) == EXPECTED
    assert out["gpu_seconds"].to_list() == [3 * 1500.0]


def test_the_stored_series_really_differ_between_shapes(tmp_path: Path):
    # the fixture is what the reader must see through: no workload in the plain labels
    found = series(pod_at(), grid(), honor=False)
    src = source(tmp_path, found)
    raw = src.raw_samples('kube_pod_container_resource_requests{resource="nvidia_com_gpu"}',
                          T0, T0 + HOUR)
    assert set(raw["pod"]) == {KSM_TARGET["pod"]}
    assert set(raw["container"]) == {"kube-state-metrics"}
    assert set(raw["exported_container"]) == {"pod1_con1", "pod1_con2"}
    assert set(raw["exported_pod"]) == {"pod1"}


def test_a_scrape_config_changed_mid_window_is_read_per_series(tmp_path: Path):
    out = allocations(tmp_path, honor=lambda now: now < 1000)
    assert rows(out) == EXPECTED


@pytest.mark.parametrize("honor", [True, False], ids=["honor_labels", "no_honor_labels"])
def test_a_target_node_label_is_not_taken_for_the_pods_node(tmp_path: Path, honor: bool):
    # Running from 300 but the node label appears only at 400 (KSM lag): without honor_labels
    # the unbound series carry the *target's* node and no exported_node
    rejects: list[pl.DataFrame] = []
    out = allocations(tmp_path, honor, target=WITH_NODE, lines_at=pod_at(bound_at=400),
                      rejects=rejects)
    assert rows(out) == [("ns1", "pod1", "uid1", "node1", 3, t(400), t(1810), 47)]
    lost = pl.concat(rejects)
    # the Running scrapes at 310, 340, 370 without a node, per GPU container
    assert lost["reason"].to_list() == [
        "expected a node on a Running pod's GPU request, found none"] * 6
    assert sorted(set(lost["ts"].to_list())) == [t(310), t(340), t(370)]


def test_per_pod_metrics_are_returned_as_the_workloads(tmp_path: Path):
    extra = (one(UPSTREAM, "kube_pod_service_account"), one(UPSTREAM, "kube_pod_labels"))
    honor = allocations(tmp_path / "a", True, lines_at=pod_at(extra=extra))
    found = series(pod_at(extra=extra), grid(), honor=False)
    src = source(tmp_path / "b", found)
    bare = pod_gpu_allocations(src, T0, T0 + HOUR)
    assert bare.equals(honor)
    assert bare.select("service_account", "labels").row(0) == (
        "service-account-name", '{"app": "example"}')
    phase = read_for_uids(src, "kube_pod_status_phase", ["uid1"], T0, T0 + HOUR,
                          'phase="Running"')
    assert set(phase["namespace"]) == {"ns1"}
    assert set(phase["pod"]) == {"pod1"}
    assert not any(c.startswith("exported_") for c in phase.columns)


@pytest.mark.parametrize("target", [KSM_TARGET, WITH_NODE], ids=["target", "target_with_node"])
def test_node_capacity_reads_exported_node(tmp_path: Path, target):
    node_lines = lines(KSM_NODE_V2_20)
    keep = [*pick(node_lines, "kube_node_status_capacity"),
            *pick(node_lines, "kube_node_status_allocatable"),
            *pick(node_lines, "kube_node_spec_unschedulable")]
    want = None
    for honor in (True, False):
        found = series(lambda _now: keep, grid(0, 600), honor=honor, target=target)
        out = node_gpu_capacity(source(tmp_path, found), T0, T0 + HOUR)
        got = out.select("node", "capacity_gpus", "allocatable_gpus", "unschedulable",
                         "start_ts", "end_ts").rows()
        assert got == [("127.0.0.1", 4, 1, True, t(10), t(610))]
        want = want or got
        assert got == want
