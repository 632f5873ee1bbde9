"""dcgm-exporter's other spellings: --use-old-namespace, 1.x names, lower-case hostname and labels.

Every exposition comes from upstream (tests/fixtures/expositions, source in each file's header),
repeated on a 30 s scrape grid and read back through OpenMetricsFileSource.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import polars as pl

from connectors.kubernetes.dcgm import (
    FALLBACK,
    PREFERRED,
    gpu_busy_seconds_daily,
    gpu_utilization,
)
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.dcgm_fixtures import exposition, over_time, relabel
from tests.connectors.kubernetes.fakes import T0, om_file

HOUR = timedelta(hours=1)
OLD_NAMESPACE = "dcgm-exporter-issue-272-use-old-namespace-mig.prom"
ONE_X = "dcgm-exporter-issue-188-1x-names.prom"
HOSTNAME = "dcgm-exporter-pr-655-hostname.prom"
MIG_H100 = "dcgm-exporter-issue-512-mig-h100.prom"


def read(tmp_path: Path, series, name: str = "dcgm.om"):
    source = OpenMetricsFileSource(om_file(tmp_path / name, series))
    return gpu_utilization(source, T0, T0 + HOUR), source


def test_use_old_namespace_names_labels_and_pod_names_from_issue_272(tmp_path: Path):
    (out, warnings), _ = read(tmp_path, over_time(exposition(OLD_NAMESPACE), 0, 90))
    got = {(r["gpu_uuid"], r["gpu_instance"]): (r["gpu_instance_profile"], r["namespace"],
                                                r["pod"], r["container"], r["busy_fraction"],
                                                r["samples"], r["metric"], r["attribution"])
           for r in out.filter(pl.col("bucket_start") == T0).iter_rows(named=True)}
    assert got == {
        ("GPU-ed1353d6-52ba-8793-7230-4d5d3eb68167", "1"):
            ("3g.40gb", None, None, None, 0.0, 2, PREFERRED, None),
        ("GPU-ed1353d6-52ba-8793-7230-4d5d3eb68167", "2"):
            ("4g.40gb", None, None, None, 0.0, 2, PREFERRED, None),
        ("GPU-6043e4b2-feaa-8010-34c7-61d1a01576bb", "1"):
            ("3g.40gb", None, None, None, 0.0, 2, PREFERRED, None),
        ("GPU-af2c63a8-8c8b-21cc-581a-bab6bba89d08", "1"):
            ("4g.40gb", None, None, None, 0.0, 2, PREFERRED, None),
        # the whole GPU held by a pod: pod_namespace/pod_name/container_name are the workload's
        ("GPU-931446e6-0413-2864-5b76-11227dcda4ae", None):
            (None, "ai-1", "d85np-t6mdg", "-grpc-pod", 0.008246, 2, PREFERRED,
             "exporter_labels"),
    }
    assert any("dcgm_fi_prof_gr_engine_active: read as DCGM_FI_PROF_GR_ENGINE_ACTIVE for 4 GPU"
               in w for w in warnings)  # 5 devices of 4 GPUs
    # the exposition has no host label at all: said, not guessed
    assert any("neither Hostname nor hostname" in w for w in warnings)


def test_old_namespace_behind_a_service_monitor_keeps_the_workload_pod_names(tmp_path: Path):
    # honorLabels false: Prometheus adds the exporter pod as namespace/pod/container target
    # labels; pod_name etc. do not clash, so they stay the workload's
    target = {"namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-7xk2p",
              "container": "nvidia-dcgm-exporter", "job": "nvidia-dcgm-exporter",
              "instance": "10.244.3.5:9400"}
    lines = [(m, {**labels, **target}, v) for m, labels, v in exposition(OLD_NAMESPACE)]
    (out, _), _ = read(tmp_path, over_time(lines, 0, 30))
    held = out.filter(pl.col("pod").is_not_null())
    assert held.select("gpu_uuid", "namespace", "pod", "container").unique().rows() == [
        ("GPU-931446e6-0413-2864-5b76-11227dcda4ae", "ai-1", "d85np-t6mdg", "-grpc-pod")]
    assert out.filter(pl.col("pod").is_null()).height == 4  # the MIG instances: no holder


def test_1x_names_of_issue_188_are_gpu_util_percent(tmp_path: Path):
    def value(metric: str, labels: dict, t: float) -> float:
        return 35.0 if metric == "dcgm_gpu_utilization" else 1.0
    (out, warnings), _ = read(tmp_path, over_time(exposition(ONE_X), 0, 90, value=value))
    rows = out.with_columns(pl.col("busy_fraction").round(9))
    assert rows.select("gpu_uuid", "busy_fraction", "samples", "metric", "node").rows() == [
        ("GPU-c1f38265-5e7c-0a81-14a0-240a35ea8160", 0.35, 2, FALLBACK, "dcgm-exporter-6ldbb"),
        ("GPU-c1f38265-5e7c-0a81-14a0-240a35ea8160", 0.35, 2, FALLBACK, "dcgm-exporter-6ldbb"),
    ]
    assert any("dcgm_gpu_utilization: read as DCGM_FI_DEV_GPU_UTIL" in w for w in warnings)
    # Hostname is the exporter's pod name and kube_pod_info does not know it: said so
    assert any("exporter pod name" in w and "not found" in w for w in warnings)


def test_lower_case_hostname_of_pr_655(tmp_path: Path):
    (out, warnings), _ = read(tmp_path, over_time(exposition(HOSTNAME), 0, 30))
    assert out.select("gpu_uuid", "node", "gpu_model", "busy_fraction").rows() == [
        ("GPU-00000000-0000-0000-0000-000000000000", "testhost", "NVIDIA T400 4GB", 0.42)]
    assert warnings == [f"{PREFERRED} absent: every GPU uses {FALLBACK}/100"]


def test_exporter_upgrade_from_hostname_to_hostname_keeps_one_node(tmp_path: Path):
    new = exposition(HOSTNAME)
    old = relabel(new, hostname=None, Hostname="testhost")
    series = over_time(old, 0, 570) + over_time(new, 600, 1170)
    (out, _), _ = read(tmp_path, series)
    assert out["node"].unique().to_list() == ["testhost"]
    assert out["samples"].sum() == 40


def test_two_spellings_at_one_instant_count_once_by_precedence(tmp_path: Path):
    # the same GPU exported by an old (1.x names) and a new exporter during a migration
    old = exposition(ONE_X)
    new = [(FALLBACK, labels, v) for m, labels, v in old if m == "dcgm_gpu_utilization"]
    series = (over_time(old, 0, 570, value=80.0) + over_time(new, 0, 1170, value=40.0))
    (out, warnings), source = read(tmp_path, series)
    assert out.select("busy_fraction").unique().rows() == [(0.4,)]
    assert out["samples"].sum() == 40  # 40 instants, not 60 samples
    assert any("dcgm_gpu_utilization: 20 samples at instants where DCGM_FI_DEV_GPU_UTIL also "
               "has one" in w for w in warnings)
    daily, _ = gpu_busy_seconds_daily(source, T0, T0 + HOUR)
    assert daily.select("covered_seconds", "busy_seconds", "samples").rows() == [
        (1200.0, 480.0, 40)]


def test_upper_case_profiling_name_wins_over_the_old_namespace_one(tmp_path: Path):
    line = [x for x in exposition(OLD_NAMESPACE) if x[1].get("pod_name")]
    upper = [(PREFERRED, relabel(line, uuid=None, UUID=line[0][1]["uuid"])[0][1], 0.0)]
    series = over_time(line, 0, 30, value=0.9) + over_time(upper, 0, 30, value=0.5)
    (out, _), _ = read(tmp_path, series)
    assert out.select("busy_fraction", "samples").rows() == [(0.5, 2)]


def test_labels_lower_cased_by_the_store_as_in_issue_577(tmp_path: Path):
    # dcgm-exporter#577 shows series whose label names and values a store lower-cased
    # (gpu_i_id, gpu_i_profile, modelname, uuid="gpu-..."): the same devices as upstream's
    original = exposition(MIG_H100)
    lowered = [(m, {k.lower(): (v.lower() if k in ("UUID", "modelName") else v)
                    for k, v in labels.items()}, v) for m, labels, v in original]
    (want, _), _ = read(tmp_path, over_time(original, 0, 30), "a.om")
    (got, _), _ = read(tmp_path, over_time(lowered, 0, 30), "b.om")
    cols = ["gpu_uuid", "gpu_instance", "gpu_instance_profile", "node", "pod", "busy_fraction"]
    assert got.select(cols).rows() == want.select(cols).rows()
    assert got["gpu_uuid"].unique().to_list() == ["GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77"]
