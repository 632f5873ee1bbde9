"""Nothing dropped silently on the DCGM side: unusable samples are rejects with their reason.

Bad values as upstream reports them: go-dcgm#75 (GPU_UTIL "4294967295 (max supported by UINT32)"
and "1k to 200k"), NaN / +Inf as Prometheus stores them; on dcgm-exporter#363's label set.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from connectors.kubernetes.dcgm import (
    FALLBACK,
    NO_UUID,
    NOT_FINITE,
    OUT_OF_RANGE,
    PREFERRED,
    gpu_busy_seconds_daily,
    gpu_utilization,
)
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.records import SAMPLE_REJECT_SCHEMA
from gpuledger.ingest.kubernetes.run import ingest_kubernetes_window
from models.runner import connect
from tests.connectors.kubernetes.dcgm_fixtures import exposition, over_time, relabel
from tests.connectors.kubernetes.fakes import T0, om_file

HOUR = timedelta(hours=1)
UTIL = [x for x in exposition("dcgm-exporter-issue-363-no-pod-labels.prom")
        if x[0] == FALLBACK]
BAD = {60: math.nan, 90: math.inf, 120: 4294967295.0, 150: 1200.0, 180: -1.0}


def bad_values(metric: str, labels: dict, t: float) -> float:
    return BAD.get(t, 40.0)


def series() -> list:
    prof = [(PREFERRED, labels, 0.0) for _, labels, _ in
            relabel(UTIL, UUID="GPU-7ad09335-aadb-19c3-e3a9", gpu="1", device="nvidia1")]
    no_uuid = relabel(UTIL, UUID=None, gpu="2", device="nvidia2")
    return (over_time(UTIL, 0, 570, value=bad_values)
            + over_time(prof, 0, 570,
                        value=lambda m, labels, t: {60: 1.5, 90: 1.0000001}.get(t, 0.5))
            + over_time(no_uuid, 0, 60))


def test_each_unusable_sample_is_a_reject_with_its_reason(tmp_path: Path):
    source = OpenMetricsFileSource(om_file(tmp_path / "bad.om", series()))
    sink: list[pl.DataFrame] = []
    out, _ = gpu_utilization(source, T0, T0 + HOUR, rejects=sink)
    rejects = pl.concat(sink)
    assert rejects.schema == pl.Schema(SAMPLE_REJECT_SCHEMA)
    counts = dict(rejects.group_by("reason").len().iter_rows())
    assert counts == {NOT_FINITE: 2, OUT_OF_RANGE[FALLBACK]: 3, OUT_OF_RANGE[PREFERRED]: 1,
                      NO_UUID: 3}
    assert set(rejects["component"]) == {"dcgm"}
    huge = rejects.filter(pl.col("value") == 4294967295.0).row(0, named=True)
    assert huge["reason"] == OUT_OF_RANGE[FALLBACK]
    assert huge["ts"] == T0 + timedelta(seconds=120)
    assert json.loads(huge["series"])["UUID"] == "GPU-7ad09335-aadb-19c3-e3a8"
    # the good samples are all there: 20 - 5 on GPU 0, 20 - 1 on GPU 1 (1.0000001 is clipped)
    samples = dict(out.group_by("gpu_uuid").agg(pl.col("samples").sum()).iter_rows())
    assert samples == {"GPU-7ad09335-aadb-19c3-e3a8": 15, "GPU-7ad09335-aadb-19c3-e3a9": 19}
    assert out["busy_fraction"].max() == 1.0


def test_rejects_are_those_of_the_window_not_of_the_whole_day_read(tmp_path: Path):
    source = OpenMetricsFileSource(om_file(tmp_path / "bad.om", series()))
    sink: list[pl.DataFrame] = []
    gpu_utilization(source, T0 + timedelta(seconds=100), T0 + HOUR, rejects=sink)
    assert sorted(pl.concat(sink)["ts"].to_list()) == [
        T0 + timedelta(seconds=s) for s in (120, 150, 180)]
    busy_sink: list[pl.DataFrame] = []
    gpu_busy_seconds_daily(source, T0, T0 + HOUR, rejects=busy_sink)
    assert pl.concat(busy_sink).height == 9


def test_the_ingest_counts_and_keeps_them(tmp_path: Path):
    source = OpenMetricsFileSource(om_file(tmp_path / "bad.om", series()))
    day = datetime(2025, 1, 6)
    with connect(tmp_path / "l.duckdb") as con:
        load = ingest_kubernetes_window(con, source, day, day + timedelta(days=1), cluster="c")
        stored = con.execute("SELECT reason, count(*) FROM k8s_rejects WHERE component = 'dcgm' "
                             "GROUP BY reason ORDER BY reason").fetchall()
    dcgm = {reason: n for component, reason, n in load.rejected if component == "dcgm"}
    assert dcgm == {NOT_FINITE: 2, OUT_OF_RANGE[FALLBACK]: 3, OUT_OF_RANGE[PREFERRED]: 1,
                    NO_UUID: 3}
    assert dict(stored) == dcgm
    assert f"rejected 3 dcgm samples: {OUT_OF_RANGE[FALLBACK]}" in load.summary()
