"""Pods holding GPUs through DRA ResourceClaims (connectors/kubernetes/dra_claims.py,
dra_pods.py; docs/kubernetes.md "DRA"), from upstream shapes only (tests/connectors/kubernetes/
dra_world.py names each): kube-state-metrics v2.20's kube_pod_resourceclaim_info, the claims of
dra-driver-nvidia-gpu's demo specs, dcgm-exporter's dra_* labels.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.dcgm_dra import dra_series
from connectors.kubernetes.dra_claims import (
    DraNames,
    is_mig_device,
    mig_profile,
    read_claim_file,
)
from connectors.kubernetes.dra_pods import dra_pod_allocations
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.dra_world import CLAIMS, MIG_UID, World, uid
from tests.connectors.kubernetes.fakes import T0, om_file

SECOND = timedelta(seconds=1)
# the demo's per-profile MIG class (extended-resources/mig-1g-12gb.yaml) added to the defaults
NAMES = DraNames(device_classes=("gpu.nvidia.com", "mig.nvidia.com",
                                 "mig-1g-12gb.gpu.nvidia.com"))


def _read(tmp_path: Path, world: World, *, claims=True, names=NAMES, notes=None):
    src = OpenMetricsFileSource(om_file(tmp_path / "dra.om", world.series()))
    read = read_claim_file(CLAIMS, T0) if claims else None
    out = dra_pod_allocations(src, T0, T0 + timedelta(hours=2), claims=read, names=names,
                              scrape_interval=timedelta(seconds=30), notes=notes,
                              dcgm=dra_series(src, T0, T0 + timedelta(hours=2)))
    return out


def test_the_claims_of_the_demo_specs_are_read_with_their_devices_and_pods():
    read = read_claim_file(CLAIMS, T0)
    assert read.rejects == []
    devices = read.devices.select("namespace", "claim", "pool", "device", "device_class",
                                  "sharing_strategy", "extended").sort("namespace", "claim")
    assert devices.rows() == [
        ("extended-resource-gpu-full", "gpu-full-pod-extended-resources-x7k9m", "node-a",
         "gpu-3", "gpu.nvidia.com", None, True),
        ("extended-resource-mig-1g12gb", "mig-1g12gb-pod-extended-resources-8r9k5",
         "kind-dra-1-worker", "gpu-1-mig-19-4-1", "mig-1g-12gb.gpu.nvidia.com", None, True),
        ("gpu-test-mps", "test-pod-shared-gpu-q8x2z", "node-b", "gpu-0", "gpu.nvidia.com",
         "MPS", False),
        ("gpu-test1", "pod1-gpu-x2k9d", "node-a", "gpu-0", "gpu.nvidia.com", None, False),
        ("gpu-test1", "pod2-gpu-7hq4n", "node-a", "gpu-1", "gpu.nvidia.com", None, False),
        ("gpu-test3", "single-gpu", "node-a", "gpu-2", "gpu.nvidia.com", None, False),
    ]  # the adminAccess claim (gpu-monitoring/monitor-all) allocates nothing
    shared = read.pods.filter(pl.col("claim") == "single-gpu", pl.col("via") == "reservedFor")
    assert sorted(shared["pod_uid"].to_list()) == [uid(3), uid(4)]
    ext = read.pods.filter(pl.col("via") == "extendedResourceClaimStatus")
    assert ext.select("pod", "pod_uid", "claim").rows() == [
        ("gpu-full-pod", uid(5), "gpu-full-pod-extended-resources-x7k9m")]


@pytest.mark.parametrize(("device", "profile"), [
    ("gpu-0", None),
    ("gpu-1-mig-2g47gb-14-0", "2g.47gb"),  # dra-driver-nvidia-gpu device_state.go comment
    ("gpu-2-mig-1g24gb-19-0", "1g.24gb"),  # partitions.go comment
    ("gpu-0-mig-1g10gb-me-20-0", "1g.10gb+me"),  # toRFC1123Compliant of 1g.10gb+me
    ("gpu-1-mig-19-4-1", None),  # before v25.12: no profile in the name
])
def test_mig_device_names(device, profile):
    assert mig_profile(device) == profile
    assert is_mig_device(device) == (device != "gpu-0")


def test_a_bad_claim_is_rejected_alone(tmp_path: Path):
    doc = CLAIMS.read_text(encoding="utf-8").replace('"pool": "node-b"', '"pool": null')
    path = tmp_path / "claims.json"
    path.write_text(doc, encoding="utf-8")
    read = read_claim_file(path, T0)
    assert [(r.line_no, r.field, r.reason) for r in read.rejects] == [
        (5, "items[5].status.allocation.devices.results[0].pool",
         "expected a non-empty string, found null")]
    assert "gpu-test-mps" not in read.devices["namespace"].to_list()
    assert read.devices.height == 5


def _by_pod(rows: pl.DataFrame) -> dict[str, tuple]:
    return {f"{n}/{p}": (r, g, s, sp, st, en) for n, p, r, g, s, sp, st, en in rows.select(
        "namespace", "pod", "gpu_resource", "gpus", "sharing", "slice_profile",
        ((pl.col("start_ts") - T0).dt.total_seconds()),
        ((pl.col("end_ts") - T0).dt.total_seconds())).rows()}


def test_every_dra_pod_holds_its_claims_devices_from_admission_to_completion(tmp_path: Path):
    notes: list[str] = []
    got = _read(tmp_path, World(), notes=notes)
    assert _by_pod(got.pods) == {
        "gpu-test1/pod1": ("dra/gpu.nvidia.com", 1, None, None, 5, 3595),
        "gpu-test1/pod2": ("dra/gpu.nvidia.com", 1, None, None, 5, 1795),
        "gpu-test3/pod1": ("dra/gpu.nvidia.com/shared", 1, "time_slicing", None, 5, 7195),
        "gpu-test3/pod2": ("dra/gpu.nvidia.com/shared", 1, "time_slicing", None, 3605, 7195),
        # found through the claim's reservedFor (no kube_pod_resourceclaim_info)
        "extended-resource-gpu-full/gpu-full-pod": ("dra/gpu.nvidia.com", 1, None, None, 5,
                                                    1795),
        # the profile from dcgm-exporter's dra_mig_profile
        "extended-resource-mig-1g12gb/mig-1g12gb-pod": (
            "dra/mig-1g-12gb.gpu.nvidia.com/1g.12gb", 1, "mig", "1g.12gb", 5, 3595),
        # MPS on a claim of one pod: the pod holds the GPU
        "gpu-test-mps/test-pod": ("dra/gpu.nvidia.com", 1, None, None, 5, 3595),
    }
    row = got.pods.filter(pl.col("pod") == "pod1", pl.col("namespace") == "gpu-test3").row(
        0, named=True)
    assert row["dra_devices"] == ["node-a/gpu-2"]
    assert row["dra_claims"] == "gpu-test3/single-gpu (gpu.nvidia.com: node-a/gpu-2)"
    assert row["start_source"] == "kube_pod_start_time"
    assert row["end_source"] == "kube_pod_completion_time"
    assert got.claim_nodes == {"node-a", "node-b", "kind-dra-1-worker"}
    assert not [n for n in notes if "not charged" in n]


def test_without_claim_objects_dcgm_exporter_names_the_devices(tmp_path: Path):
    got = _read(tmp_path, World(), claims=False)
    rows = _by_pod(got.pods)
    assert rows["gpu-test1/pod1"] == ("dra/gpu.nvidia.com", 1, None, None, 5, 3595)
    # a pod dcgm-exporter names with its claim is found by kube_pod_info
    assert rows["extended-resource-gpu-full/gpu-full-pod"][:2] == ("dra/gpu.nvidia.com", 1)
    # two pods named with one claim share its device
    assert rows["gpu-test3/pod2"][2] == "time_slicing"


def test_claims_read_nowhere_are_reported_not_charged(tmp_path: Path):
    notes: list[str] = []
    got = _read(tmp_path, World(dcgm_dra=False), claims=False, notes=notes)
    assert got.pods.height == 0
    assert any(n.startswith("DRA claims not read: 5 pod(s) name ResourceClaims") for n in notes)


def test_device_classes_and_drivers_are_the_sites(tmp_path: Path):
    got = _read(tmp_path, World(), names=DraNames())  # the demo's MIG class is not listed
    assert MIG_UID not in got.pods["uid"].to_list()
    got = _read(tmp_path, World(), names=DraNames(drivers=("other.example.com",)))
    assert got.pods.height == 0


def test_shared_claims_add_up_to_the_device_once(tmp_path: Path):
    pods = _read(tmp_path, World()).pods.filter(pl.col("namespace") == "gpu-test3")
    held = (pods["end_ts"] - pods["start_ts"]).dt.total_seconds().sum()
    assert held == 7190 + 3590  # units: each pod's own time; the ledger splits (allocation_shares)
    assert pods["end_ts"].max() == T0 + 7195 * SECOND
