"""Shared-GPU expositions (tests/fixtures/kubernetes/sharing, sources in its README) as series.

Each fixture holds one node's ``kube_node_labels`` and ``kube_node_status_capacity`` and pod1's
request/limit lines (kube-state-metrics pod_test.go's ns1/pod1/uid1). ``pod_life`` scrapes
them every 30 s with pod1 Pending until 300 s, Running until 1500 s, then Succeeded (phase lines
from pod_test.go), node lines throughout; ``allocations`` reads them back through
``OpenMetricsFileSource`` like every other KSM test.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import polars as pl

from connectors.gpu_sharing import DEFAULT_NAMES, SharingNames
from connectors.kubernetes.ksm import pod_gpu_allocations
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import (
    KSM_POD_V2_20,
    Line,
    lines,
    phase_lines,
    pick,
    series,
)
from tests.helpers import FIXTURES

SHARING = FIXTURES / "kubernetes" / "sharing"
MIG_MIXED = SHARING / "ksm-mig-mixed-h100.prom"
MIG_SINGLE = SHARING / "ksm-mig-single-a100.prom"
TIME_SLICING = SHARING / "ksm-time-slicing-t4.prom"
MPS_RENAMED = SHARING / "ksm-mps-renamed-t4.prom"
HOUR = timedelta(hours=1)
SCRAPES = [10 + 30 * i for i in range(60)]  # 10 .. 1780
PHASE = pick(lines(KSM_POD_V2_20), "kube_pod_status_phase", uid="uid1")
RUN, END = 310, 1510  # first Running scrape, last Running scrape + 30 s
POD_METRICS = ("kube_pod_container_resource_requests", "kube_pod_container_resource_limits")


def node_lines(path: Path) -> list[Line]:
    return [ln for ln in lines(path) if ln.name not in POD_METRICS]


def pod_lines(path: Path) -> list[Line]:
    return [ln for ln in lines(path) if ln.name in POD_METRICS]


def pod_life(node: Callable[[float], list[Line]], pod: list[Line]
             ) -> Callable[[float], list[Line]]:
    def lines_at(now: float) -> list[Line]:
        phase = "Pending" if now < 300 else "Running" if now < 1500 else "Succeeded"
        return [*node(now), *pod, *phase_lines(PHASE, phase)]
    return lines_at


def source(tmp_path: Path, lines_at: Callable[[float], list[Line]], *, honor: bool = True
           ) -> OpenMetricsFileSource:
    tmp_path.mkdir(parents=True, exist_ok=True)
    return OpenMetricsFileSource(om_file(tmp_path / "ksm.om",
                                         series(lines_at, SCRAPES, honor=honor)))


def allocations(tmp_path: Path, lines_at: Callable[[float], list[Line]], *, honor: bool = True,
                names: SharingNames = DEFAULT_NAMES, notes: list[str] | None = None,
                rejects: list[pl.DataFrame] | None = None) -> pl.DataFrame:
    src = source(tmp_path, lines_at, honor=honor)
    return pod_gpu_allocations(src, T0, T0 + HOUR, names=names, notes=notes, rejects=rejects)


def shape(path: Path) -> Callable[[float], list[Line]]:
    """The fixture as it is, the pod living as ``pod_life`` says."""
    nodes = node_lines(path)
    return pod_life(lambda _t: nodes, pod_lines(path))


KEY = ("gpu_resource", "sharing", "slice_profile", "gpus")


def held(frame: pl.DataFrame) -> list[tuple]:
    """(gpu_resource, sharing, slice_profile, gpus, start s, end s) per row."""
    return [(*r[:4], int((r[4] - T0).total_seconds()), int((r[5] - T0).total_seconds()))
            for r in frame.select(*KEY, "start_ts", "end_ts").iter_rows()]
