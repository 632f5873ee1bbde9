"""kube-state-metrics samples that cannot be used are kept with their reason, never dropped.

Series shapes from kube-state-metrics v2.20.0's pod_test.go / node_test.go Want blocks; the bad
values (NaN, +Inf, fractions) are what broken recording rules and remote-write paths deliver
(issue #13: NaN requests shortened pods by a scrape each, +Inf capacity crashed the reader).
"""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import polars as pl

from connectors.kubernetes.ksm import node_gpu_capacity, pod_gpu_allocations
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from gpuledger.ingest.kubernetes import run as k8s_ingest
from models.runner import connect
from tests.connectors.kubernetes.fakes import T0, om_file
from tests.connectors.kubernetes.ksm_expositions import (
    KSM_NODE_V2_20,
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
CON1 = one(UPSTREAM, "kube_pod_container_resource_requests", container="pod1_con1",
           resource="nvidia_com_gpu").but(node="node1")
CON2 = CON1.but(container="pod1_con2", value=2.0)
PHASE = pick(UPSTREAM, "kube_pod_status_phase", uid="uid1")
NODE = pick(lines(KSM_NODE_V2_20), "kube_node_status_capacity", resource="nvidia_com_gpu")[0]
SCRAPES = [10 + 30 * i for i in range(60)]  # 10 .. 1780
NAN_AT = (610, 1480)  # mid-run and the last Running scrape


def t(seconds: float):
    return T0 + timedelta(seconds=seconds)


def lines_at(now: float, *, con2_value: float = 2.0, phase_value: float | None = None
             ) -> list[Line]:
    phase = "Pending" if now < 300 else "Running" if now < 1500 else "Succeeded"
    con1 = CON1.but(value=math.nan) if now in NAN_AT else CON1
    phases = phase_lines(PHASE, phase)
    if phase_value is not None and now == 910:
        phases = [ln.but(value=phase_value) if ln.get("phase") == "Running" else ln
                  for ln in phases]
    capacity = NODE.but(node="node1", value=math.inf if now == 1210 else 8.0)
    return [con1, CON2.but(value=con2_value), *phases, capacity]


def source(tmp_path: Path, **kwargs) -> OpenMetricsFileSource:
    found = series(lambda now: lines_at(now, **kwargs), SCRAPES)
    return OpenMetricsFileSource(om_file(tmp_path / "ksm.om", found))


def test_nan_requests_are_rejected_and_do_not_shorten_the_pod(tmp_path: Path):
    rejects: list[pl.DataFrame] = []
    out = pod_gpu_allocations(source(tmp_path), T0, T0 + HOUR, rejects=rejects)
    # Running samples 310 .. 1480: the request is immutable, the NaN scrapes keep 1 + 2 GPUs
    assert out.select("gpus", "start_ts", "end_ts", "samples").rows() == [
        (3, t(310), t(1510), 40)]
    kept = pl.concat(rejects)
    assert kept.select("reason", "ts").rows() == [
        ("expected a finite GPU count, found NaN", t(610)),
        ("expected a finite GPU count, found NaN", t(1480))]
    assert kept["metric"].unique().to_list() == ["kube_pod_container_resource_requests"]
    assert '"container": "pod1_con1"' in kept["series"][0]
    assert math.isnan(kept["value"][0])


def test_fractional_and_negative_gpu_counts_are_rejected(tmp_path: Path):
    for value, reason in ((0.5, "expected a whole GPU count, found a fraction"),
                          (-1.0, "expected a non-negative GPU count, found a negative value")):
        folder = tmp_path / str(value)
        folder.mkdir()
        rejects: list[pl.DataFrame] = []
        out = pod_gpu_allocations(source(folder, con2_value=value), T0, T0 + HOUR,
                                  rejects=rejects)
        assert out["gpus"].to_list() == [1]  # pod1_con2 has no usable sample: adds nothing
        kept = pl.concat(rejects)
        assert kept.filter(pl.col("reason") == reason).height == len(SCRAPES)


def test_a_phase_sample_that_is_not_0_or_1_is_rejected(tmp_path: Path):
    rejects: list[pl.DataFrame] = []
    out = pod_gpu_allocations(source(tmp_path, phase_value=math.nan), T0, T0 + HOUR,
                              rejects=rejects)
    kept = pl.concat(rejects).filter(pl.col("metric") == "kube_pod_status_phase")
    assert kept.select("reason", "ts").rows() == [
        ("expected a phase value of 0 or 1, found NaN", t(910))]
    assert out["samples"].to_list() == [39]  # 910 is not a Running sample; within 2 x 30 s


def test_infinite_node_capacity_is_rejected_not_a_crash(tmp_path: Path):
    rejects: list[pl.DataFrame] = []
    out = node_gpu_capacity(source(tmp_path), T0, T0 + HOUR, rejects=rejects)
    assert out.select("node", "capacity_gpus", "start_ts", "end_ts").rows() == [
        ("node1", 8, t(10), t(1810))]  # one missed scrape does not split it
    kept = pl.concat(rejects)
    assert kept.select("metric", "reason", "ts").rows() == [
        ("kube_node_status_capacity", "expected a finite GPU capacity, found +Inf", t(1210))]


def test_the_ingest_counts_and_stores_them_per_reason(tmp_path: Path):
    with connect(tmp_path / "l.duckdb") as con:
        load = k8s_ingest.ingest_kubernetes_window(con, source(tmp_path), T0, T0 + HOUR,
                                                   cluster="c1")
        stored = con.execute("SELECT component, metric, reason, count(*) FROM k8s_rejects "
                             "GROUP BY ALL ORDER BY ALL").fetchall()
    assert ("ksm", "expected a finite GPU count, found NaN", 2) in load.rejected
    assert ("ksm", "expected a finite GPU capacity, found +Inf", 1) in load.rejected
    assert ("ksm", "kube_pod_container_resource_requests",
            "expected a finite GPU count, found NaN", 2) in stored
    assert ("ksm", "kube_node_status_capacity", "expected a finite GPU capacity, found +Inf",
            1) in stored
    assert "rejected 2 ksm samples: expected a finite GPU count, found NaN" in load.summary()
