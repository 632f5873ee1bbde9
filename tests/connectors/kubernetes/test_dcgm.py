"""GPU busy fractions from dcgm-exporter: metric preference, holder labels, busy seconds."""

from __future__ import annotations

import csv
from datetime import date, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.dcgm import (
    FALLBACK,
    PREFERRED,
    gpu_busy_seconds_daily,
    gpu_utilization,
)
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.records import GPU_BUSY_DAILY_SCHEMA, GPU_UTILIZATION_SCHEMA
from tests.connectors.kubernetes.fakes import T0, Series, at, om_file
from tests.helpers import FIXTURES

HOUR = timedelta(hours=1)
K8S_TARGET = {"job": "gpu-operator/nvidia-dcgm-exporter", "instance": "10.42.1.17:9400"}


def gpu(uuid: str, index: int, node: str = "gpu-1", host_label: str = "Hostname") -> dict:
    return {"UUID": uuid, "gpu": str(index), "device": f"nvidia{index}",
            "modelName": "NVIDIA H100 80GB HBM3", host_label: node}


def pts(first: float, last: float, value: float, step: float = 30) -> list[tuple[float, float]]:
    out, x = [], first
    while x <= last:
        out.append((at(x), value))
        x += step
    return out


def source(tmp_path: Path, series: list[Series]) -> OpenMetricsFileSource:
    return OpenMetricsFileSource(om_file(tmp_path / "dcgm.om", series))


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_preferred_metric_wins_fallback_fills_gpus_without_it(tmp_path: Path):
    a, b = gpu("GPU-a", 0), gpu("GPU-b", 1)
    series = [
        (PREFERRED, a, pts(0, 90, 0.25)),
        (FALLBACK, a, pts(0, 90, 90)),  # ignored: PROF present for these samples
        (FALLBACK, b, pts(0, 90, 40)),  # no DCP on this GPU
    ]
    out, warnings = gpu_utilization(source(tmp_path, series), T0, T0 + HOUR)
    assert out.schema == pl.Schema(GPU_UTILIZATION_SCHEMA)
    got = {(r["gpu_uuid"], r["bucket_start"]): (r["busy_fraction"], r["samples"], r["metric"])
           for r in out.iter_rows(named=True)}
    assert got == {
        ("GPU-a", t(0)): (0.25, 2, PREFERRED),
        ("GPU-a", t(60)): (0.25, 2, PREFERRED),
        ("GPU-b", t(0)): (0.40, 2, FALLBACK),
        ("GPU-b", t(60)): (0.40, 2, FALLBACK),
    }
    assert any("GPU-b" in w and FALLBACK in w for w in warnings)


def test_fallback_fills_only_the_scrapes_where_preferred_is_missing(tmp_path: Path):
    a = gpu("GPU-a", 0)
    series = [(PREFERRED, a, pts(0, 30, 0.5)), (FALLBACK, a, pts(0, 90, 10))]
    out, _ = gpu_utilization(source(tmp_path, series), T0, T0 + HOUR)
    assert out.select("bucket_start", "busy_fraction", "metric").rows() == [
        (t(0), 0.5, PREFERRED), (t(60), 0.1, FALLBACK)]


def test_only_fallback_metric_present(tmp_path: Path):
    out, warnings = gpu_utilization(
        source(tmp_path, [(FALLBACK, gpu("GPU-a", 0), pts(0, 30, 100))]), T0, T0 + HOUR)
    assert out["busy_fraction"].to_list() == [1.0]
    assert any(f"{PREFERRED} absent" in w for w in warnings)


def test_exported_labels_belong_to_the_workload_unprefixed_to_the_exporter(tmp_path: Path):
    exporter = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x7k2p",
                "container": "nvidia-dcgm-exporter", **K8S_TARGET}
    busy = {**gpu("GPU-a", 0), **exporter, "exported_namespace": "team-llm",
            "exported_pod": "train-0", "exported_container": "trainer"}
    idle = {**gpu("GPU-b", 1), **exporter}  # no holder: only the exporter's own labels
    series = [(PREFERRED, busy, pts(0, 30, 0.9)), (PREFERRED, idle, pts(0, 30, 0.0))]
    out, warnings = gpu_utilization(source(tmp_path, series), T0, T0 + HOUR)
    by_gpu = {r["gpu_uuid"]: r for r in out.iter_rows(named=True)}
    assert (by_gpu["GPU-a"]["namespace"], by_gpu["GPU-a"]["pod"],
            by_gpu["GPU-a"]["container"]) == ("team-llm", "train-0", "trainer")
    assert (by_gpu["GPU-b"]["namespace"], by_gpu["GPU-b"]["pod"]) == (None, None)
    assert any("exported_namespace/exported_pod/exported_container" in w for w in warnings)


def test_scrape_config_change_mid_window_keeps_earlier_workload_labels(tmp_path: Path):
    exporter = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x7k2p",
                "container": "nvidia-dcgm-exporter"}
    workload = {"namespace": "team-llm", "pod": "train-0", "container": "trainer"}
    a, b = gpu("GPU-a", 0), gpu("GPU-b", 1)
    series = [
        # honorLabels until 10 min, then the ServiceMonitor renames the workload labels
        (PREFERRED, {**a, **workload, **K8S_TARGET}, pts(0, 570, 0.9)),
        (PREFERRED, {**a, **{f"exported_{k}": v for k, v in workload.items()}, **exporter,
                     **K8S_TARGET}, pts(600, 1170, 0.9)),
        (PREFERRED, {**b, **K8S_TARGET}, pts(0, 570, 0.0)),
        (PREFERRED, {**b, **exporter, **K8S_TARGET}, pts(600, 1170, 0.0)),
    ]
    out, warnings = gpu_utilization(source(tmp_path, series), T0, T0 + HOUR)
    by_gpu = out.group_by("gpu_uuid", "pod").agg(pl.col("samples").sum()).sort("gpu_uuid")
    assert by_gpu.rows() == [("GPU-a", "train-0", 40), ("GPU-b", None, 40)]
    assert any("'nvidia-dcgm-exporter-x7k2p'" in w and "not a holder" in w for w in warnings)


def test_exporter_pod_label_without_exported_labels_is_not_a_holder(tmp_path: Path):
    idle = {**gpu("GPU-a", 0), "namespace": "gpu-operator",
            "pod": "nvidia-dcgm-exporter-x7k2p", "container": "nvidia-dcgm-exporter"}
    out, warnings = gpu_utilization(source(tmp_path, [(PREFERRED, idle, pts(0, 0, 0.0))]),
                                    T0, T0 + HOUR)
    assert out["pod"].to_list() == [None]
    assert any("names the exporter itself" in w for w in warnings)


def test_honor_labels_style_and_old_label_names_and_hostname(tmp_path: Path):
    new = {**gpu("GPU-a", 0, host_label="hostname"), "namespace": "ns", "pod": "p",
           "container": "c", "pod_uid": "uid-1"}
    old = {**gpu("GPU-b", 1), "pod_namespace": "ns-old", "pod_name": "p-old",
           "container_name": "c-old"}
    hpc = {**gpu("GPU-c", 0, node="gpu-hpc-1"), "hpc_job": "48211"}
    series = [(PREFERRED, new, pts(0, 0, 0.5)), (PREFERRED, old, pts(0, 0, 0.5)),
              (PREFERRED, hpc, pts(0, 0, 0.5))]
    out, warnings = gpu_utilization(source(tmp_path, series), T0, T0 + HOUR)
    got = {r["gpu_uuid"]: (r["node"], r["namespace"], r["pod"], r["container"], r["pod_uid"],
                           r["hpc_job"]) for r in out.iter_rows(named=True)}
    assert got == {
        "GPU-a": ("gpu-1", "ns", "p", "c", "uid-1", None),
        "GPU-b": ("gpu-1", "ns-old", "p-old", "c-old", None, None),
        "GPU-c": ("gpu-hpc-1", None, None, None, None, "48211"),
    }
    assert warnings == []


def test_exporter_pod_name_as_hostname_is_mapped_to_its_node(tmp_path: Path):
    series = [
        (PREFERRED, gpu("GPU-a", 0, node="nvidia-dcgm-exporter-abcde"), pts(0, 0, 0.5)),
        (PREFERRED, {**gpu("GPU-b", 0, node="gpu-9"), "node": "gpu-9-relabelled"},
         pts(0, 0, 0.5)),
        ("kube_pod_info", {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-abcde",
                           "uid": "u", "node": "gpu-7"}, pts(0, 30, 1)),
    ]
    out, warnings = gpu_utilization(source(tmp_path, series), T0, T0 + HOUR)
    assert dict(out.select("gpu_uuid", "node").rows()) == {"GPU-a": "gpu-7",
                                                           "GPU-b": "gpu-9-relabelled"}
    assert any("exporter pod name" in w for w in warnings)


def test_unknown_holder_like_labels_are_reported(tmp_path: Path):
    odd = {**gpu("GPU-a", 0), "slurm_job_id": "77", "workload_name": "w", "driver": "550"}
    out, warnings = gpu_utilization(source(tmp_path, [(PREFERRED, odd, pts(0, 0, 0.5))]),
                                    T0, T0 + HOUR)
    assert out.height == 1
    text = "\n".join(warnings)
    assert "'slurm_job_id'" in text
    assert "'workload_name'" in text
    assert "'driver'" not in text


def test_holder_change_inside_a_bucket_gives_two_rows_and_grain(tmp_path: Path):
    g = gpu("GPU-a", 0)
    series = [
        (PREFERRED, {**g, "namespace": "ns", "pod": "p", "container": "c"}, pts(0, 150, 1.0)),
        (PREFERRED, g, pts(180, 290, 0.0)),
    ]
    out, _ = gpu_utilization(source(tmp_path, series), T0, T0 + HOUR,
                             grain=timedelta(minutes=5))
    assert out.select("bucket_start", "pod", "busy_fraction", "samples").rows() == [
        (t(0), "p", 1.0, 6), (t(0), None, 0.0, 4)]


def test_busy_seconds_per_day_gap_aware_and_split_at_midnight(tmp_path: Path):
    g = gpu("GPU-a", 0)
    midnight = 16 * 3600  # T0 is 08:00
    series = [
        (PREFERRED, {**g, "hpc_job": "1"}, pts(midnight - 60, midnight + 30, 0.5, step=30)),
        # the same GPU listed under a second job: same samples, counted once
        (PREFERRED, {**g, "hpc_job": "2"}, pts(midnight - 60, midnight + 30, 0.5, step=30)),
        # after an outage of 10 min
        (PREFERRED, g, pts(midnight + 660, midnight + 690, 1.0, step=30)),
    ]
    out, _ = gpu_busy_seconds_daily(source(tmp_path, series), T0, T0 + 24 * HOUR)
    assert out.schema == pl.Schema(GPU_BUSY_DAILY_SCHEMA)
    got = {r["day"]: (r["busy_seconds"], r["covered_seconds"], r["samples"])
           for r in out.iter_rows(named=True)}
    # day 1: samples at -60, -30 (30 s each) -> 60 s covered, 30 busy
    # day 2: 0, +30 (30 s each) + 660, 690 (30 s each at 1.0) -> 120 covered, 30 + 60 busy
    assert got == {date(2025, 1, 6): (30.0, 60.0, 2), date(2025, 1, 7): (90.0, 120.0, 4)}


def test_busy_seconds_sample_straddling_midnight_is_split(tmp_path: Path):
    g = gpu("GPU-a", 0)
    midnight = 16 * 3600
    out, _ = gpu_busy_seconds_daily(
        source(tmp_path, [(PREFERRED, g, [(at(midnight - 10), 1.0)])]), T0, T0 + 24 * HOUR,
        scrape_interval=timedelta(seconds=30))
    assert out.select("day", "busy_seconds", "samples").rows() == [
        (date(2025, 1, 6), 10.0, 1), (date(2025, 1, 7), 20.0, 0)]


def test_no_dcgm_metrics_at_all(tmp_path: Path):
    out, warnings = gpu_utilization(source(tmp_path, [("other", {}, [(at(0), 1)])]),
                                    T0, T0 + HOUR)
    assert out.height == 0
    assert any("neither" in w for w in warnings)


# --------------------------------------------------------------------------- committed fixture

SMALL = FIXTURES / "openmetrics" / "small-cluster.om.gz"


@pytest.fixture(scope="module")
def fixture_utilization() -> tuple[pl.DataFrame, list[str]]:
    return gpu_utilization(OpenMetricsFileSource(SMALL), T0, T0 + 4 * HOUR)


def test_fixture_sample_counts_per_holder_equal_truth(fixture_utilization):
    out, warnings = fixture_utilization
    assert warnings == []
    counts = (
        out.with_columns(key=pl.coalesce(pl.col("namespace") + "/" + pl.col("pod"),
                                         pl.col("hpc_job")))
        .filter(pl.col("key").is_not_null())
        .group_by("key", "gpu_uuid").agg(pl.col("samples").sum())
    )
    got = {(r["key"], r["gpu_uuid"]): r["samples"] for r in counts.iter_rows(named=True)}
    with (FIXTURES / "openmetrics" / "small-cluster.allocations.csv").open() as fh:
        want = {(r["key"], r["uuid"]): int(r["dcgm_samples"]) for r in csv.DictReader(fh)}
    assert got == want


def test_fixture_exporter_outage_is_missing_data_not_zero(fixture_utilization):
    out, _ = fixture_utilization
    hpc = out.filter(pl.col("node") == "gpu-hpc-01")
    minutes = set(hpc["bucket_start"].to_list())
    outage = {datetime(2025, 1, 6, 10, 50) + timedelta(minutes=m) for m in range(10)}
    assert minutes.isdisjoint(outage)
    assert datetime(2025, 1, 6, 10, 49) in minutes
    assert datetime(2025, 1, 6, 11, 0) in minutes
