"""DCGM utilization read from the real Prometheus: sample counts, outage, label drift.

Label drift: a copy of the fixture in which, from 10:00 on, the Kubernetes node's exporter is
scraped the way a kube-prometheus ServiceMonitor without ``honorLabels`` stores it (workload
labels as ``exported_namespace``/``exported_pod``/``exported_container``, the exporter pod's own
``namespace``/``pod``/``container`` on every series), and from 11:00 on the host label is
``hostname`` instead of ``Hostname`` (the dcgm-exporter change of 2026). Attribution must not
change.
"""

from __future__ import annotations

import csv
import gzip
import re
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.dcgm import gpu_busy_seconds_daily, gpu_utilization
from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource
from tests.helpers import FIXTURES

pytestmark = pytest.mark.prometheus

START, END = datetime(2025, 1, 6, 8), datetime(2025, 1, 6, 12)
K8S_INSTANCE = 'instance="10.42.1.17:9400"'
EXPORTER = ('namespace="gpu-operator",pod="nvidia-dcgm-exporter-5xk2q",'
            'container="nvidia-dcgm-exporter"')
EXPORTED_FROM = 1736157600  # 2025-01-06 10:00:00 UTC
HOSTNAME_FROM = 1736161200  # 11:00


def http(url: str) -> PrometheusHttpSource:
    return PrometheusHttpSource(PrometheusConfig(url, chunk=timedelta(hours=1)))


@pytest.fixture(scope="module")
def source(real_prometheus, small_cluster_om):
    return http(real_prometheus(small_cluster_om).url)


def truth_counts() -> dict[tuple[str, str], int]:
    with (FIXTURES / "openmetrics" / "small-cluster.allocations.csv").open() as fh:
        return {(r["key"], r["uuid"]): int(r["dcgm_samples"]) for r in csv.DictReader(fh)}


def holder_counts(out: pl.DataFrame) -> dict[tuple[str, str], int]:
    keyed = out.with_columns(key=pl.coalesce(pl.col("namespace") + "/" + pl.col("pod"),
                                             pl.col("hpc_job")))
    grouped = keyed.filter(pl.col("key").is_not_null()).group_by("key", "gpu_uuid").agg(
        pl.col("samples").sum())
    return {(r["key"], r["gpu_uuid"]): r["samples"] for r in grouped.iter_rows(named=True)}


def test_per_gpu_holder_sample_counts_equal_truth(source):
    out, warnings = gpu_utilization(source, START, END)
    assert warnings == []
    assert holder_counts(out) == truth_counts()
    assert set(out["metric"].unique()) == {"DCGM_FI_PROF_GR_ENGINE_ACTIVE"}


def test_exporter_outage_is_a_gap(source):
    out, _ = gpu_utilization(source, START, END)
    hpc = out.filter(pl.col("node") == "gpu-hpc-01")
    per_minute = hpc.group_by("bucket_start").agg(pl.col("samples").sum())
    minutes = dict(per_minute.iter_rows())
    outage = [datetime(2025, 1, 6, 10, 50) + timedelta(minutes=m) for m in range(10)]
    assert all(m not in minutes for m in outage)
    assert minutes[datetime(2025, 1, 6, 10, 49)] == 4  # 2 GPUs x 2 scrapes
    assert minutes[datetime(2025, 1, 6, 11, 0)] == 4
    daily, _ = gpu_busy_seconds_daily(source, START, END)
    covered = dict(daily.select("gpu_uuid", "covered_seconds").iter_rows())
    assert covered["GPU-c0ffee00-1234-5678-9abc-def012345603"] == 4 * 3600 - 600
    assert covered["GPU-3f5c0a1e-7b2d-4c8e-9a61-0d2e4f6a8b01"] == 4 * 3600


def test_idle_serving_pod_is_attributed_at_zero(source):
    out, _ = gpu_utilization(source, START, END)
    serve = out.filter(pl.col("pod") == "serve-llama-5d1e-0-m8vhd").sort("bucket_start")
    assert serve["busy_fraction"].head(10).to_list() == [0.0] * 10
    assert serve["busy_fraction"][10] > 0


def test_real_equals_twin(source, small_cluster_om):
    twin = OpenMetricsFileSource(small_cluster_om)
    real_u, real_w = gpu_utilization(source, START, END)
    twin_u, twin_w = gpu_utilization(twin, START, END)
    assert real_u.equals(twin_u)
    assert real_w == twin_w
    assert gpu_busy_seconds_daily(source, START, END)[0].equals(
        gpu_busy_seconds_daily(twin, START, END)[0])


def drifted_copy(src: Path, dest: Path) -> Path:
    rename = re.compile(r"(?<=[{,])(namespace|pod|container)=")
    with gzip.open(src, "rt", encoding="utf-8") as fh, gzip.open(dest, "wt",
                                                                 encoding="utf-8") as out:
        for line in fh:
            if line.startswith("DCGM_") and K8S_INSTANCE in line:
                ts = int(line.rsplit(" ", 1)[1])
                if ts >= EXPORTED_FROM:
                    line = rename.sub(r"exported_\1=", line)
                    line = line.replace("{", "{" + EXPORTER + ",", 1)
                if ts >= HOSTNAME_FROM:
                    line = line.replace("Hostname=", "hostname=")
            out.write(line)
    return dest


def test_label_drift_exported_pod_and_hostname(real_prometheus, small_cluster_om, tmp_path):
    path = drifted_copy(small_cluster_om, tmp_path / "small-cluster-exported.om.gz")
    server = real_prometheus(path)
    raw = http(server.url).raw_samples('DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_pod!=""}',
                                       START, END)
    assert {"exported_pod", "pod", "hostname", "Hostname"} <= set(raw.columns)
    out, warnings = gpu_utilization(http(server.url), START, END)
    assert holder_counts(out) == truth_counts()
    assert "nvidia-dcgm-exporter-5xk2q" not in out["pod"].drop_nulls().to_list()
    assert out.filter(pl.col("node").is_null()).height == 0
    assert any("exported_namespace/exported_pod/exported_container" in w for w in warnings)
    original, _ = gpu_utilization(http(real_prometheus(small_cluster_om).url), START, END)
    cols = ["gpu_uuid", "node", "bucket_start", "busy_fraction", "samples", "namespace", "pod",
            "container", "hpc_job"]
    assert out.select(cols).sort(cols, nulls_last=True).equals(
        original.select(cols).sort(cols, nulls_last=True))
