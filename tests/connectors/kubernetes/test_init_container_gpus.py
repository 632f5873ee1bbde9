"""A pod's effective GPU request, as the scheduler computes it, from kube-state-metrics series.

``max(max(init containers), sum(containers) + sum(sidecars))``; sidecars are init containers
with ``restart_policy="Always"`` on ``kube_pod_init_container_info``. Series shapes are
kube-state-metrics v2.20.0's own (pod_test.go Want blocks at lines 175 and 1929).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.ksm import pod_gpu_allocations
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import (
    KSM_POD_V2_20,
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
CON1 = one(UPSTREAM, "kube_pod_container_resource_requests", container="pod1_con1", **GPU)
CON1_LIMIT = one(UPSTREAM, "kube_pod_container_resource_limits", container="pod1_con1", **GPU)
INIT = one(UPSTREAM, "kube_pod_init_container_resource_requests", container="pod1_initcon1",
           **GPU)
INIT_LIMIT = one(UPSTREAM, "kube_pod_init_container_resource_limits",
                 container="pod1_initcon1", **GPU)
# upstream's sidecar info line (pod2/uid2), moved to pod1/uid1 and to the container named
SIDECAR_INFO = one(UPSTREAM, "kube_pod_init_container_info").but(
    namespace="ns1", pod="pod1", uid="uid1")
REGULAR_INFO = SIDECAR_INFO.but(restart_policy="")  # KSM exports "" for no restartPolicy
PHASE = pick(UPSTREAM, "kube_pod_status_phase", uid="uid1")
SCRAPES = [10 + 30 * i for i in range(60)]  # 10 .. 1780


def held(tmp_path: Path, pod_lines: list[Line], notes: list[str] | None = None) -> list[int]:
    """GPUs of pod1's allocation rows: bound to node1 and Running from 300 to 1500."""
    def lines_at(now: float) -> list[Line]:
        phase = "Pending" if now < 300 else "Running" if now < 1500 else "Succeeded"
        out = [ln.but(node="node1") if ln.get("node") is not None else ln for ln in pod_lines]
        return [*out, *phase_lines(PHASE, phase)]
    tmp_path.mkdir(parents=True, exist_ok=True)
    src = OpenMetricsFileSource(om_file(tmp_path / "ksm.om", series(lines_at, SCRAPES)))
    out = pod_gpu_allocations(src, T0, T0 + HOUR, notes=notes)
    assert out.height <= 1
    if out.height:
        assert out.select("start_ts", "end_ts").row(0) == (
            T0 + timedelta(seconds=310), T0 + timedelta(seconds=1510))
    return out["gpus"].to_list()


def test_upstream_pod_with_one_gpu_container_and_one_gpu_init_container(tmp_path: Path):
    assert held(tmp_path, [CON1, CON1_LIMIT, INIT, INIT_LIMIT]) == [1]  # max(1, 1)


def test_a_pod_whose_only_gpu_request_is_an_init_container_holds_it(tmp_path: Path):
    notes: list[str] = []
    assert held(tmp_path, [INIT.but(value=2.0)], notes) == [2]
    assert not any("no pod holds GPUs" in n for n in notes)


def test_init_container_limit_stands_in_for_a_missing_request(tmp_path: Path):
    assert held(tmp_path, [CON1, INIT_LIMIT.but(value=4.0)]) == [4]


@pytest.mark.parametrize(("init", "info", "want"), [
    (1.0, [SIDECAR_INFO.but(container="pod1_initcon1")], 2),  # 1 + 1 sidecar
    (4.0, [SIDECAR_INFO.but(container="pod1_initcon1")], 5),  # sidecars add, whatever size
    (4.0, [REGULAR_INFO.but(container="pod1_initcon1")], 4),  # regular: max(4, 1)
    (4.0, [], 4),  # no info series: counted as a regular init container
], ids=["sidecar_adds", "big_sidecar_adds", "regular_init_max", "no_info_regular"])
def test_sidecars_add_to_the_containers_regular_init_containers_take_the_max(
        tmp_path: Path, init: float, info: list[Line], want: int):
    notes: list[str] = []
    assert held(tmp_path, [CON1, INIT.but(value=init), *info], notes) == [want]
    if not info:
        assert any("kube_pod_init_container_info absent" in n for n in notes)


def test_scheduler_formula_with_sidecar_and_regular_init_containers(tmp_path: Path):
    # containers 1 + 2, sidecar 1, regular init containers 3 and 5: max(5, 1 + 2 + 1) = 5
    con2 = CON1.but(container="pod1_con2", value=2.0)
    side = INIT.but(container="proxy", value=1.0)
    init_a, init_b = INIT.but(container="warm", value=3.0), INIT.but(container="load", value=5.0)
    base = [CON1, con2, side, init_a, SIDECAR_INFO.but(container="proxy")]
    assert held(tmp_path / "a", [*base, init_b]) == [5]
    assert held(tmp_path / "b", base) == [4]  # max(3, 1 + 2 + 1)


def test_zero_gpu_pods_hold_nothing(tmp_path: Path):
    assert held(tmp_path, [CON1.but(value=0.0), INIT.but(value=0.0)]) == []


def test_effective_request_frame_is_per_scrape(tmp_path: Path):
    # the sidecar info appears only from 600 (KSM exports it once the status lists it): the
    # pod is one sidecar-aware allocation -- restartable-ness is a property of the spec
    def lines_at(now: float) -> list[Line]:
        phase = "Pending" if now < 300 else "Running"
        info = [SIDECAR_INFO.but(container="pod1_initcon1")] if now >= 600 else []
        return [ln.but(node="node1") for ln in (CON1, INIT)] + info + phase_lines(PHASE, phase)
    src = OpenMetricsFileSource(om_file(tmp_path / "ksm.om", series(lines_at, SCRAPES)))
    out = pod_gpu_allocations(src, T0, T0 + HOUR)
    assert out.select("gpus", "start_ts").rows() == [(2, T0 + timedelta(seconds=310))]
    assert out.schema["gpus"] == pl.Int64
