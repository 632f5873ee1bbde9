"""MIG instances: devices of their parent GPU, per-instance rows, a parent figure never above 1.

Expositions from dcgm-exporter issues #512 (H100, 1g.10gb instances, current names), #272
(A100, 3g.40gb + 4g.40gb, --use-old-namespace) and #68 (A30, 2g.12gb); values set per test.
"""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.dcgm import FALLBACK, PREFERRED, gpu_busy_seconds_daily, gpu_utilization
from connectors.kubernetes.dcgm_metric_choice import MIG_UTIL_REASON
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.dcgm_fixtures import exposition, over_time, relabel
from tests.connectors.kubernetes.fakes import T0, om_file

HOUR = timedelta(hours=1)
DAY = date(2025, 1, 6)
H100 = "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77"
A100 = "GPU-ed1353d6-52ba-8793-7230-4d5d3eb68167"
A30 = "GPU-603a8873-0edd-c157-ce48-2078e8b1a935"


def source(tmp_path: Path, series) -> OpenMetricsFileSource:
    return OpenMetricsFileSource(om_file(tmp_path / "mig.om", series))


def by_instance(values: dict[str, float]):
    return lambda metric, labels, t: values[labels["GPU_I_ID"]]


@pytest.fixture
def h100(tmp_path: Path) -> OpenMetricsFileSource:
    lines = exposition("dcgm-exporter-issue-512-mig-h100.prom")
    return source(tmp_path, over_time(lines, 0, 3570,
                                      value=by_instance({"7": 0.6, "8": 0.0, "9": 0.3})))


def test_instances_are_rows_of_their_own_with_profile_and_holder(h100):
    out, warnings = gpu_utilization(h100, T0, T0 + HOUR)
    first = out.filter(pl.col("bucket_start") == T0)
    assert first.select("gpu_uuid", "gpu_instance", "gpu_instance_profile", "node", "pod",
                        "busy_fraction").rows() == [
        (H100, "7", "1g.10gb", "gsrh100-074",
         "text-embedding-predictor-00008-deployment-57946f6c67-vdtjl", 0.6),
        (H100, "8", "1g.10gb", "gsrh100-074", None, 0.0),
        (H100, "9", "1g.10gb", "gsrh100-074",
         "tts-predictor-00011-deployment-5554f75554-8j8pl", 0.3),
    ]
    assert warnings == []


def test_parent_busy_seconds_are_slice_weighted_not_summed(h100):
    daily, _ = gpu_busy_seconds_daily(h100, T0, T0 + HOUR)
    got = {r["gpu_instance"]: (r["device_kind"], r["mig_slices"], r["busy_seconds"],
                               r["covered_seconds"], r["gpu_instance_profile"])
           for r in daily.iter_rows(named=True)}
    assert got["7"] == ("mig_instance", 1, pytest.approx(0.6 * 3600), 3600.0, "1g.10gb")
    assert got["8"] == ("mig_instance", 1, 0.0, 3600.0, "1g.10gb")
    assert got["9"] == ("mig_instance", 1, pytest.approx(0.3 * 3600), 3600.0, "1g.10gb")
    # the parent: 3 of the H100's 7 slices configured, busy 0.6 + 0 + 0.3 slice-seconds
    assert got[None] == ("mig_parent", 7, pytest.approx(0.9 * 3600 / 7), 3600.0, None)
    assert sum(r["busy_seconds"] for r in daily.iter_rows(named=True)
               if r["device_kind"] == "mig_instance") == pytest.approx(0.9 * 3600)


def test_a_fully_busy_split_gpu_is_one_busy_gpu_not_two(tmp_path: Path):
    lines = exposition("dcgm-exporter-issue-272-use-old-namespace-mig.prom")
    daily, _ = gpu_busy_seconds_daily(source(tmp_path, over_time(lines, 0, 3570, value=1.0)),
                                      T0, T0 + HOUR)
    parent = daily.filter((pl.col("gpu_uuid") == A100) & (pl.col("device_kind") == "mig_parent"))
    # 3g.40gb + 4g.40gb = all 7 slices, both at 100 %: the GPU was busy 3600 s, not 7200
    assert parent.select("busy_seconds", "covered_seconds", "mig_slices").rows() == [
        (3600.0, 3600.0, 7)]
    fractions = daily.with_columns(f=pl.col("busy_seconds") / pl.col("covered_seconds"))
    assert fractions["f"].max() <= 1.0
    # the pod's whole GPU is a device of its own kind; no parent row is made for it
    whole = daily.filter(pl.col("gpu_uuid") == "GPU-931446e6-0413-2864-5b76-11227dcda4ae")
    assert whole["device_kind"].to_list() == ["gpu"]


def test_a30_has_four_slices(tmp_path: Path):
    lines = [x for x in exposition("dcgm-exporter-issue-68-mig-a30-no-pod-labels.prom")
             if x[0] == PREFERRED]
    daily, _ = gpu_busy_seconds_daily(source(tmp_path, over_time(lines, 0, 3570)), T0, T0 + HOUR)
    parent = daily.filter(pl.col("device_kind") == "mig_parent")
    assert parent.select("gpu_uuid", "mig_slices").rows() == [(A30, 4)]
    assert parent["busy_seconds"][0] == pytest.approx(0.381124 * 3600 * 2 / 4)
    assert daily.filter(pl.col("device_kind") == "mig_instance")["mig_slices"].to_list() == [2]


def test_gpu_util_of_mig_devices_is_rejected_not_read_as_idle(tmp_path: Path):
    # dcgm-exporter#216: GPU_UTIL reads 0 on MIG instances. Here the profiling field reports
    # only instance 7; GPU_UTIL (0) for all three instances and for the parent GPU.
    lines = exposition("dcgm-exporter-issue-512-mig-h100.prom")
    prof = [x for x in lines if x[1]["GPU_I_ID"] == "7"]
    util = [(FALLBACK, labels, 0.0) for _, labels, _ in lines]
    parent = relabel(util[:1], GPU_I_ID=None, GPU_I_PROFILE=None, container=None,
                     namespace=None, pod=None)
    series = (over_time(prof, 0, 570, value=0.8) + over_time(util, 0, 570)
              + over_time(parent, 0, 570))
    sink: list[pl.DataFrame] = []
    out, warnings = gpu_utilization(source(tmp_path, series), T0, T0 + HOUR, rejects=sink)
    assert out.select("gpu_instance", "metric").unique().rows() == [("7", PREFERRED)]
    assert out["busy_fraction"].unique().to_list() == [0.8]
    rejects = pl.concat(sink)
    assert rejects["reason"].unique().to_list() == [MIG_UTIL_REASON]
    # instances 8 and 9 and the parent, 20 scrapes each; instance 7's GPU_UTIL is superseded
    assert rejects.height == 3 * 20
    assert rejects["metric"].unique().to_list() == [FALLBACK]
    assert any("MIG devices" in w and "dcgm-exporter#216" in w for w in warnings)
