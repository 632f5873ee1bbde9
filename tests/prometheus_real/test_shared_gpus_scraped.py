"""Shared GPUs through a real Prometheus, scraped with and without honor_labels.

The scrape harness (scrape.py) serves the MIG single-strategy and time-slicing shapes of
tests/fixtures/kubernetes/sharing (sources in its README) with pod1 Running on both nodes, and
two Prometheus servers scrape them every second (``honor_labels`` true and false: ``node``
becomes ``exported_node`` on the second). Read back through ``PrometheusHttpSource``, both must
give the pods' resources, sharing modes and profiles and the nodes' slices the OpenMetrics-file
tests give.
"""

from __future__ import annotations

import time

import pytest

from connectors.kubernetes.ksm import pod_gpu_allocations
from connectors.kubernetes.ksm_slices import ksm_node_slices
from tests.connectors.kubernetes.ksm_expositions import phase_lines, text
from tests.connectors.kubernetes.sharing_shapes import (
    MIG_SINGLE,
    PHASE,
    TIME_SLICING,
    node_lines,
    pod_lines,
)
from tests.prometheus_real.scrape import kube_state_metrics

pytestmark = pytest.mark.prometheus


def _body(_elapsed: float) -> str:
    out = [*node_lines(MIG_SINGLE), *node_lines(TIME_SLICING)]
    for path, pod, uid in ((MIG_SINGLE, "pod-mig", "uid-mig"), (TIME_SLICING, "pod-ts", "uid-ts")):
        out += [ln.but(pod=pod, uid=uid) for ln in pod_lines(path)]
        out += [ln.but(pod=pod, uid=uid) for ln in phase_lines(PHASE, "Running")]
    return text(out, ts_ms=int(time.time() * 1000))


def test_both_scrape_shapes_give_the_sharing_of_pods_and_nodes(prometheus_scrape):
    with prometheus_scrape([kube_state_metrics(_body)], interval_s=1.0) as harness:
        start, end = harness.wait_for_samples(6, common=True)
        got = {}
        for setup in ("honor", "nohonor"):
            src = harness.source(setup)
            pods = pod_gpu_allocations(src, start, end)
            nodes = ksm_node_slices(src, end)
            got[setup] = (
                pods.select("pod", "node", "gpu_resource", "sharing", "slice_profile", "gpus")
                .sort("pod").rows(),
                nodes.select("node", "sharing", "slice_profile", "units", "physical_gpus",
                             "units_per_gpu").sort("node").rows())
    assert got["honor"] == (
        [("pod-mig", "gpu-mig-2", "nvidia_com_gpu", "mig", "1g.5gb", 1),
         ("pod-ts", "gpu-ts-1", "nvidia_com_gpu", "time_slicing", None, 2)],
        [("gpu-mig-2", "mig", "1g.5gb", 56, 8, 1),
         ("gpu-ts-1", "time_slicing", None, 16, 4, 4)])
    assert got["nohonor"] == got["honor"]
