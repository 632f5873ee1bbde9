"""Kueue's quota gauges scraped by a real Prometheus, ingested the normal way and modelled:
borrowed, lendable and used GPU-hours and the share of quota used in ``kueue_quota_hourly``
equal the scraped samples, each standing for the time until the next scrape (at most the scrape
interval).

The body is the v0.17.0 leader exposition (tests/fixtures/expositions/kueue-v0.17.0-leader.prom,
rendered from kubernetes-sigs/kueue pkg/metrics/metrics.go @ v0.17.0: nominal quota 16
nvidia.com/gpu, lending limit 8, borrowing limit 4) with the GPU usage moved over the harness's
seconds: 4 GPUs in use (12 unused, 8 of them lendable) until FLIP_S, then 18 (2 borrowed).
"""

from __future__ import annotations

import re
from datetime import timedelta
from itertools import pairwise
from statistics import median

import polars as pl
import pytest

from gpuledger.ingest.kubernetes import run as k8s_ingest
from models.kueue_quota import build_kueue_quota
from models.runner import connect
from tests.prometheus_real.scrape import EXPOSITIONS, kueue_controller

pytestmark = pytest.mark.prometheus

FLIP_S = 11.0
FIXTURE = (EXPOSITIONS / "kueue-v0.17.0-leader.prom").read_text(encoding="utf-8")
GPU_LINE = re.compile(r'^(kueue_cluster_queue_resource_(?:usage|reservation)\{[^}]*'
                      r'resource="nvidia\.com/gpu"[^}]*\}) \S+$', re.MULTILINE)


def render(seconds: float) -> str:
    gpus = 4 if seconds < FLIP_S else 18
    return GPU_LINE.sub(lambda m: f"{m.group(1)} {gpus}", FIXTURE)


def expected_from_samples(usage: pl.DataFrame, nominal: float, lending: float) -> dict:
    ts = sorted(usage["ts"].to_list())
    values = dict(zip(usage["ts"], usage["value"], strict=True))
    step = median(b - a for a, b in pairwise(ts))
    spans = [min(step, (ts[i + 1] - t) if i + 1 < len(ts) else step) / timedelta(seconds=1)
             for i, t in enumerate(ts)]
    used = [values[t] for t in ts]
    return {
        "usage": sum(u * s for u, s in zip(used, spans, strict=True)) / 3600,
        "nominal": nominal * sum(spans) / 3600,
        "borrowed": sum(max(u - nominal, 0) * s for u, s in zip(used, spans, strict=True)) / 3600,
        "lendable": sum(min(max(nominal - u, 0), lending) * s
                        for u, s in zip(used, spans, strict=True)) / 3600,
    }


def test_scraped_quota_gauges_give_the_borrowed_and_lendable_gpu_hours(prometheus_scrape,
                                                                       tmp_path):
    with prometheus_scrape([kueue_controller(render)], setups={"nohonor": False}) as h:
        h.wait_for_samples(14)
        start, end = h.freeze()
        src = h.source("nohonor")
        usage = src.raw_samples('kueue_cluster_queue_resource_usage{resource="nvidia.com/gpu"}',
                                start, end)
        assert set(usage["value"]) == {4.0, 18.0}  # both phases were scraped
        with connect(tmp_path / "ledger.duckdb") as con:
            k8s_ingest.ingest_kubernetes_window(con, src, start, end, cluster="lab")
            build_kueue_quota(con, start.date(), end.date())
            got = con.execute(
                "SELECT sum(usage_gpu_hours), sum(nominal_gpu_hours), sum(borrowed_gpu_hours), "
                "sum(lendable_gpu_hours), bool_and(known) FROM kueue_quota_hourly "
                "WHERE scope = 'queue' AND cluster_queue = 'cluster-queue' "
                "AND covered_seconds > 0").fetchone()
            limits = con.execute(
                "SELECT max(borrowing_limit_gpus), max(lending_limit_gpus) "
                "FROM kueue_quota_hourly WHERE cluster_queue = 'cluster-queue'").fetchone()
    want = expected_from_samples(usage, nominal=16.0, lending=8.0)
    assert got[4] is True
    assert got[0] == pytest.approx(want["usage"], rel=1e-9)
    assert got[1] == pytest.approx(want["nominal"], rel=1e-9)
    assert got[2] == pytest.approx(want["borrowed"], rel=1e-9)
    assert got[3] == pytest.approx(want["lendable"], rel=1e-9)
    assert want["borrowed"] > 0
    assert want["lendable"] > 0
    assert limits == (4.0, 8.0)
