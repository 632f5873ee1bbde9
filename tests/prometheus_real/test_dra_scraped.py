"""DRA pods through a real Prometheus: kube-state-metrics v2.20's kube_pod_resourceclaim_info and
dcgm-exporter's dra_* labels (upstream shapes: tests/connectors/kubernetes/dra_world.py), scraped
with honor_labels and with dcgm-exporter's chart default (honorLabels false: the pod's labels
become exported_*), read with the ResourceClaims of dra-driver-nvidia-gpu's demo specs
(tests/fixtures/kubernetes/dra). Both setups must give the same DRA pods, and the readings keep
the claim that dcgm-exporter named.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta

import polars as pl
import pytest

from connectors.kubernetes.dra_claims import DraNames, read_claim_file
from gpuledger.ingest.kubernetes.dra import DraInput
from gpuledger.ingest.kubernetes.window_read import read_kubernetes_window
from tests.connectors.kubernetes.dra_world import CLAIMS, PODS, World
from tests.connectors.kubernetes.fakes import T0
from tests.connectors.kubernetes.ksm_expositions import text
from tests.prometheus_real.scrape import dcgm_exporter, kube_state_metrics

pytestmark = pytest.mark.prometheus

SETUPS = {"honor": True, "nohonor": {"kube-state-metrics": True}}  # dcgm: honorLabels false
WORLD = World(pods=tuple(replace(p, start=5, end=10**6) for p in PODS))  # all running
NAMES = DraNames(device_classes=("gpu.nvidia.com", "mig.nvidia.com",
                                 "mig-1g-12gb.gpu.nvidia.com"))


def _ksm(_elapsed: float) -> str:
    return text(WORLD.ksm_at(600), ts_ms=int(time.time() * 1000))


def _dcgm(_elapsed: float) -> str:
    return text(WORLD.dcgm_at(600), ts_ms=int(time.time() * 1000))


def test_dra_pods_and_claim_labels_in_both_scrape_shapes(prometheus_scrape):
    claims = read_claim_file(CLAIMS, T0)
    got = {}
    with prometheus_scrape([kube_state_metrics(_ksm), dcgm_exporter(_dcgm)], interval_s=1.0,
                           setups=SETUPS) as harness:
        start, end = harness.wait_for_samples(6, common=True)
        for setup in SETUPS:
            read = read_kubernetes_window(harness.source(setup), start, end,
                                          scrape_interval=timedelta(seconds=1),
                                          dra=DraInput(NAMES, claims, claims),
                                          gpus_per_group=None)
            pods = read.pods.filter(pl.col("gpu_resource").str.starts_with("dra/"))
            util = read.utilization
            assert isinstance(util, pl.DataFrame)
            got[setup] = (
                sorted(set(pods.select("namespace", "pod", "gpu_resource", "gpus", "sharing",
                                       "slice_profile").rows())),
                sorted(set(util.filter(pl.col("dra_claim_name").is_not_null()).select(
                    "namespace", "pod", "dra_claim_name", "dra_device_name").rows())),
            )
    assert got["honor"][0] == [
        ("extended-resource-gpu-full", "gpu-full-pod", "dra/gpu.nvidia.com", 1, None, None),
        ("extended-resource-mig-1g12gb", "mig-1g12gb-pod",
         "dra/mig-1g-12gb.gpu.nvidia.com/1g.12gb", 1, "mig", "1g.12gb"),
        ("gpu-test-mps", "test-pod", "dra/gpu.nvidia.com", 1, None, None),
        ("gpu-test1", "pod1", "dra/gpu.nvidia.com", 1, None, None),
        ("gpu-test1", "pod2", "dra/gpu.nvidia.com", 1, None, None),
        ("gpu-test3", "pod1", "dra/gpu.nvidia.com/shared", 1, "time_slicing", None),
        ("gpu-test3", "pod2", "dra/gpu.nvidia.com/shared", 1, "time_slicing", None),
    ]
    assert ("gpu-test3", "pod2", "single-gpu", "gpu-2") in got["honor"][1]
    assert len(got["honor"][1]) == len(PODS)
    assert got["nohonor"] == got["honor"]
