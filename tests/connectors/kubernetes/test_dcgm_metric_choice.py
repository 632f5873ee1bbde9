"""GR_ENGINE_ACTIVE or GPU_UTIL, chosen per GPU and UTC day from the data.

A profiling field stuck at 0 while GPU_UTIL reads busy (dcgm-exporter#662: "consistently reports
0 for all GPUs even when GPUs are under heavy load (confirmed via DCGM_FI_DEV_GPU_UTIL reporting
~99-100%)"; NVIDIA/DCGM#303: GPU_UTIL = 100, GR_ENGINE_ACTIVE = 0) on the label shape of
dcgm-exporter#250's V100 exporter (those issues quote no exposition).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from connectors.kubernetes.dcgm import FALLBACK, PREFERRED, gpu_busy_seconds_daily, gpu_utilization
from connectors.kubernetes.dcgm_metric_choice import STUCK_MIN_BUSY, STUCK_REASON
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from tests.connectors.kubernetes.dcgm_fixtures import exposition, over_time
from tests.connectors.kubernetes.fakes import T0, om_file

V100 = exposition("dcgm-exporter-issue-250-v100-node.prom")
PROF = [(PREFERRED, labels, 0.0) for _, labels, _ in V100]
GPU = "GPU-a6158b59-2c1e-1e63-0068-9178c4298abd"
DAY_START = datetime(2025, 1, 6)  # T0 is 08:00 of that day
DAY_END = DAY_START + timedelta(days=1)


def source(tmp_path: Path, series) -> OpenMetricsFileSource:
    return OpenMetricsFileSource(om_file(tmp_path / "choice.om", series))


def util_at(busy_from: float, busy_to: float, level: float = 99.0):
    """GPU_UTIL ~99 % between the two times (seconds after T0), 0 elsewhere."""
    return lambda metric, labels, t: level if busy_from <= t < busy_to else 0.0


def test_stuck_profiling_field_gives_way_to_gpu_util_for_the_day(tmp_path: Path):
    series = over_time(PROF, 0, 3570) + over_time(V100, 0, 3570, value=util_at(0, 3600))
    sink: list[pl.DataFrame] = []
    out, warnings = gpu_utilization(source(tmp_path, series), T0, T0 + timedelta(hours=1),
                                    rejects=sink)
    assert out.select("metric", "busy_fraction").unique().rows() == [(FALLBACK, 0.99)]
    assert out["samples"].sum() == 120
    rejects = pl.concat(sink)
    assert rejects.select("reason", "metric").unique().rows() == [(STUCK_REASON, PREFERRED)]
    assert rejects.height == 120
    assert rejects["value"].unique().to_list() == [0.0]
    assert any(f"reads 0 on all 120 samples of GPU {GPU} on node 'r6i3n0' on 2025-01-06" in w
               and "dcgm-exporter#662" in w for w in warnings)


def test_a_profiling_field_that_moves_once_is_trusted(tmp_path: Path):
    series = (over_time(PROF, 0, 3570, value=lambda m, labels, t: 0.3 if t == 1800 else 0.0)
              + over_time(V100, 0, 3570, value=util_at(0, 3600)))
    sink: list[pl.DataFrame] = []
    out, warnings = gpu_utilization(source(tmp_path, series), T0, T0 + timedelta(hours=1),
                                    rejects=sink)
    assert out["metric"].unique().to_list() == [PREFERRED]
    assert sink == []
    assert not [w for w in warnings if "stuck" in w]


def test_an_idle_gpu_reads_idle_on_both_and_keeps_its_profiling_field(tmp_path: Path):
    series = over_time(PROF, 0, 3570) + over_time(V100, 0, 3570, value=0.0)
    out, warnings = gpu_utilization(source(tmp_path, series), T0, T0 + timedelta(hours=1))
    assert out.select("metric", "busy_fraction").unique().rows() == [(PREFERRED, 0.0)]
    assert warnings == []


@pytest.mark.parametrize(("busy_scrapes", "stuck"), [(STUCK_MIN_BUSY - 1, False),
                                                     (STUCK_MIN_BUSY, True)])
def test_too_few_busy_gpu_util_samples_are_no_evidence(tmp_path: Path, busy_scrapes, stuck):
    # a 10-minute day of data: 20 scrapes, GPU_UTIL 99 % on the first `busy_scrapes`
    series = (over_time(PROF, 0, 570)
              + over_time(V100, 0, 570, value=util_at(0, 30 * busy_scrapes)))
    out, _ = gpu_utilization(source(tmp_path, series), T0, T0 + timedelta(hours=1))
    assert set(out["metric"]) == ({FALLBACK} if stuck else {PREFERRED})


def test_the_day_is_the_unit_whatever_the_reads(tmp_path: Path):
    # GPU_UTIL is busy only from 14:00 to 16:00 (8 % of the day's scrapes); the profiling field
    # reads 0 all day. A read of the morning alone must make the same choice as the whole day.
    series = (over_time(PROF, -8 * 3600, 16 * 3600 - 30)
              + over_time(V100, -8 * 3600, 16 * 3600 - 30, value=util_at(6 * 3600, 8 * 3600)))
    src = source(tmp_path, series)
    whole, _ = gpu_utilization(src, DAY_START, DAY_END)
    pieces = [gpu_utilization(src, a, b)[0] for a, b in (
        (DAY_START, T0), (T0, T0 + timedelta(hours=4, minutes=7)),
        (T0 + timedelta(hours=4, minutes=7), DAY_END))]
    assert set(whole["metric"]) == {FALLBACK}
    assert pl.concat(pieces).sort("bucket_start").equals(whole.sort("bucket_start"))
    daily = [gpu_busy_seconds_daily(src, a, b)[0] for a, b in (
        (DAY_START, DAY_END), (T0, T0 + timedelta(hours=1)))]
    assert daily[0]["busy_seconds"].to_list() == [pytest.approx(0.99 * 7200)]
    assert daily[1]["busy_seconds"].to_list() == [0.0]  # the 08:00 hour: GPU_UTIL idle
    assert daily[0]["day"].to_list() == [date(2025, 1, 6)]


def test_mig_instances_keep_their_profiling_field_even_at_zero(tmp_path: Path):
    # GPU_UTIL is not measured under MIG: a MIG instance's zero profiling field is no sign of a
    # stuck profiler, and its GPU_UTIL (which reads 0 there anyway) never replaces it
    lines = exposition("dcgm-exporter-issue-512-mig-h100.prom")
    util = [(FALLBACK, labels, 0.0) for _, labels, _ in lines]
    series = over_time(lines, 0, 570, value=0.0) + over_time(util, 0, 570, value=99.0)
    out, warnings = gpu_utilization(source(tmp_path, series), T0, T0 + timedelta(hours=1))
    assert set(out["metric"]) == {PREFERRED}
    assert not [w for w in warnings if "stuck" in w]
