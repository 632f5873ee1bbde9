"""Queries against a real Prometheus (2.42 on Debian 12) backfilled from the small fixture.

What is pinned here (the connector relies on it):
* raw-sample instant queries ``metric[window]`` return exactly the samples written;
* range selectors in 2.x are closed on both ends: a sample exactly on a window edge is returned by
  both adjacent windows (3.x made them left-open) -- dedupe on (series, timestamp);
* a counter reset (Kueue restart) is visible in raw samples;
* prometheus-api-client's ``custom_query`` works against it;
* backfilled series carry no staleness markers (ended series linger for the 5 min lookback),
  empty label values are dropped, query_range is capped at 11,000 points per series.
"""

from __future__ import annotations

import gzip
import itertools
import subprocess
import time
from pathlib import Path

import pytest
import requests
from prometheus_api_client import PrometheusConnect

pytestmark = pytest.mark.prometheus

START, END = 1736150400, 1736164800  # 2025-01-06 08:00 .. 12:00 UTC (fixture window, half-open)
WHOLE = f"{END - START}s"  # [END - 4h, END] contains every sample (first 08:00:00, last 11:59:50)
START_SCRIPT = Path(__file__).resolve().parents[1] / "services" / "prometheus" / "start-prom.sh"
LLM_POD = "llm-pretrain-7f3a-worker-0-x7k2p"
K8S_GPU0 = "GPU-3f5c0a1e-7b2d-4c8e-9a61-0d2e4f6a8b01"


@pytest.fixture(scope="module")
def prom(real_prometheus, small_cluster_om):
    return real_prometheus(small_cluster_om)


def instant(url: str, query: str, at: float) -> list[dict]:
    r = requests.get(f"{url}/api/v1/query", params={"query": query, "time": at}, timeout=30)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "success", body
    return body["data"]["result"]


def key(metric: dict) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = dict(metric)
    name = labels.pop("__name__")
    return name, tuple(sorted(labels.items()))


def major_version(url: str) -> int:
    info = requests.get(f"{url}/api/v1/status/buildinfo", timeout=10).json()["data"]
    return int(info["version"].split(".")[0])


def test_ready_loopback_no_scrape_jobs(prom):
    r = requests.get(f"{prom.url}/-/ready", timeout=5)
    assert r.status_code == 200
    assert prom.url == f"http://127.0.0.1:{prom.port}"
    assert prom.is_running()
    flags = requests.get(f"{prom.url}/api/v1/status/flags", timeout=5).json()["data"]
    assert flags["web.listen-address"] == f"127.0.0.1:{prom.port}"
    assert flags["storage.tsdb.retention.time"] == "100y"
    assert flags["web.enable-lifecycle"] == "true"
    targets = requests.get(f"{prom.url}/api/v1/targets", timeout=5).json()["data"]
    assert targets["activeTargets"] == []  # nothing is scraped, nothing lands in the head


def test_start_script_is_idempotent(prom):
    t0 = time.monotonic()
    again = subprocess.run(
        ["bash", str(START_SCRIPT), str(prom.om_path), str(prom.data_dir), str(prom.port)],
        capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL, timeout=60,
    )
    assert time.monotonic() - t0 < 10
    assert again.stdout.strip() == prom.url
    assert "already running" in again.stderr
    assert int((prom.data_dir / "prometheus.pid").read_text()) == prom.pid
    assert prom.is_running()


def test_raw_samples_equal_what_was_written(prom, small_cluster):
    """`{__name__!=""}[4h]` at the window end returns every written sample, exactly."""
    result = instant(prom.url, f'{{__name__!=""}}[{WHOLE}]', END)
    got = {key(s["metric"]): [(float(t), float(v)) for t, v in s["values"]] for s in result}
    assert set(got) == set(small_cluster.series)
    for series_key, points in small_cluster.series.items():
        assert got[series_key] == points, series_key
    assert sum(len(p) for p in got.values()) == small_cluster.total_samples


def test_raw_sample_count_per_series_and_window(prom, small_cluster):
    """count_over_time / raw selectors over a sub-window give the counted number of samples.

    The window edges (09:00:15, 10:00:15) fall between dcgm scrapes, so the count does not depend
    on whether the range selector includes its left edge (2.x) or not (3.x).
    """
    lo, hi = START + 3615, START + 7215
    written = small_cluster.select("DCGM_FI_DEV_GPU_UTIL", Hostname="gpu-hpc-01")
    expected = {
        labels: sum(1 for ts, _ in points if lo <= ts <= hi) for labels, points in written.items()
    }
    expected = {labels: n for labels, n in expected.items() if n}
    result = instant(
        prom.url, 'count_over_time(DCGM_FI_DEV_GPU_UTIL{Hostname="gpu-hpc-01"}[3600s])', hi
    )
    got = {tuple(sorted(s["metric"].items())): int(s["value"][1]) for s in result}
    assert got == expected
    # job 48211 ends 09:15:00: its samples in the window are 09:00:30 .. 09:14:30
    (raw,) = instant(prom.url, 'DCGM_FI_DEV_GPU_UTIL{hpc_job="48211",gpu="0"}[3600s]', hi)
    assert len(raw["values"]) == 29
    assert (raw["values"][0][0], raw["values"][-1][0]) == (START + 3630, START + 4470)


def test_adjacent_windows_share_the_boundary_sample(prom, small_cluster):
    """Prometheus 2.x: `x[30m]` at t covers [t-30m, t] -- closed on BOTH ends.

    With windows [09:00, 09:30] and [09:30, 10:00] and a sample exactly at 09:30:00 (dcgm scrapes
    at :00/:30), that sample is returned by both queries: naive concatenation double-counts it.
    Prometheus 3.x changed range selectors to left-open (t-30m, t]; then the windows tile.
    A connector paging through history must dedupe on (series, timestamp) or use windows whose
    edges cannot coincide with samples.
    """
    sel = f'DCGM_FI_DEV_GPU_UTIL{{UUID="{K8S_GPU0}",pod="{LLM_POD}"}}'
    t0, t1, t2 = START + 3600, START + 5400, START + 7200  # 09:00, 09:30, 10:00
    (written,) = small_cluster.select("DCGM_FI_DEV_GPU_UTIL", UUID=K8S_GPU0, pod=LLM_POD).values()
    assert t1 in {ts for ts, _ in written}

    (first,) = instant(prom.url, f"{sel}[1800s]", t1)
    (second,) = instant(prom.url, f"{sel}[1800s]", t2)
    first_ts = [float(t) for t, _ in first["values"]]
    second_ts = [float(t) for t, _ in second["values"]]

    if major_version(prom.url) < 3:
        assert (first_ts[0], first_ts[-1]) == (t0, t1)
        assert (second_ts[0], second_ts[-1]) == (t1, t2)
        assert len(first_ts) == len(second_ts) == 61  # 30 min / 30 s + 1
        both = sorted(first_ts + second_ts)
        assert len(both) == sum(1 for ts, _ in written if t0 <= ts <= t2) + 1  # t1 twice
        assert len(set(both)) == sum(1 for ts, _ in written if t0 <= ts <= t2)
    else:  # pragma: no cover - documents the 3.x behaviour for the day CI upgrades
        assert (first_ts[0], second_ts[0]) == (t0 + 30, t1 + 30)
        assert len(first_ts) == len(second_ts) == 60


def test_counter_reset_visible_in_raw_samples(prom, small_cluster):
    """Kueue controller restart 10:00-10:02: kueue_admitted_workloads_total 42 -> (absent) -> 1."""
    sel = 'kueue_admitted_workloads_total{cluster_queue="cq-training"}'
    (series,) = instant(prom.url, f"{sel}[{WHOLE}]", END)
    points = [(float(t), float(v)) for t, v in series["values"]]
    (written,) = small_cluster.select("kueue_admitted_workloads_total",
                                      cluster_queue="cq-training").values()
    assert points == written

    drops = [(a, b) for a, b in itertools.pairwise(points) if b[1] < a[1]]
    assert len(drops) == 1
    (before, after) = drops[0]
    assert before == (START + 7200 - 10, 42.0)  # last scrape before the restart, 09:59:50
    assert after == (START + 9050, 1.0)  # first scrape after the next admission, 10:30:50
    # the series is simply absent while the new process had not incremented it yet
    assert after[0] - before[0] > 30 * 60

    naive = points[-1][1] - points[0][1]
    reset_aware = sum(b[1] - a[1] if b[1] >= a[1] else b[1] for a, b in itertools.pairwise(points))
    assert naive == -40  # 1 - 41: what a reset-unaware "last - first" would report
    assert reset_aware == 2  # llm-pretrain (08:05) and vit-finetune (10:30:30) admissions

    (resets,) = instant(prom.url, f"resets({sel}[{WHOLE}])", END)
    assert resets["value"][1] == "1"
    (inc,) = instant(prom.url, f"increase({sel}[{WHOLE}])", END)
    assert 2 <= float(inc["value"][1]) < 2.1  # reset-aware, slightly extrapolated to the window


def test_prometheus_api_client_custom_query(prom, small_cluster):
    written = small_cluster.select("DCGM_FI_DEV_GPU_UTIL")
    per_host: dict[str, int] = {}
    for labels, points in written.items():
        host = dict(labels)["Hostname"]
        per_host[host] = per_host.get(host, 0) + len(points)

    with PrometheusConnect(url=prom.url, disable_ssl=True, timeout=30) as pc:
        assert pc.check_prometheus_connection()
        result = pc.custom_query(
            f"sum by (Hostname) (count_over_time(DCGM_FI_DEV_GPU_UTIL[{WHOLE}]))",
            params={"time": END},
        )
        got = {r["metric"]["Hostname"]: int(r["value"][1]) for r in result}
        assert got == per_host == {"gpu-k8s-01": 960, "gpu-hpc-01": 920}

        raw = pc.custom_query(
            f'kube_pod_status_phase{{pod="{LLM_POD}",phase="Succeeded"}}[{WHOLE}]',
            params={"time": END},
        )
        (series,) = raw
        ones = [float(t) for t, v in series["values"] if v == "1"]
        assert (min(ones), max(ones)) == (START + 9010, START + 9580)  # 10:30:10 .. 10:39:40


def test_empty_label_values_are_dropped(prom):
    """KSM's `node=""` (pod not yet scheduled) arrives as a series *without* a node label."""
    result = instant(
        prom.url,
        f'kube_pod_container_resource_requests{{pod="{LLM_POD}",resource="nvidia_com_gpu"}}'
        f"[{WHOLE}]",
        END,
    )
    nodes = sorted((s["metric"].get("node", "<absent>"), len(s["values"])) for s in result)
    assert nodes == [("<absent>", 1), ("gpu-k8s-01", 309)]


def test_backfilled_series_have_no_staleness_markers(prom):
    """Ended series linger for the 5 min lookback in instant (and query_range) evaluation.

    GPU 0 of gpu-k8s-01: llm-pretrain's series ends 10:29:30, the idle series covers
    10:30:00..10:31:30, vit-finetune's series starts 10:32:00. A scraping Prometheus would write
    stale markers and show one series at 10:32:00; backfilled data shows all three. Accounting
    must therefore read raw samples, not instant/range evaluations of gauges.
    """
    sel = f'DCGM_FI_DEV_GPU_UTIL{{UUID="{K8S_GPU0}"}}'

    def pods_visible(at: int) -> list[str]:
        return sorted(s["metric"].get("pod", "<idle>") for s in instant(prom.url, sel, at))

    assert pods_visible(START + 9120) == [  # 10:32:00
        "<idle>", LLM_POD, "vit-finetune-2b9c-0-q4wzt",
    ]
    assert pods_visible(START + 9280) == ["<idle>", "vit-finetune-2b9c-0-q4wzt"]  # 10:34:40
    assert pods_visible(START + 9420) == ["vit-finetune-2b9c-0-q4wzt"]  # 10:37:00


def test_query_range_limit_of_11000_points(prom):
    def query_range(step: str) -> requests.Response:
        return requests.get(
            f"{prom.url}/api/v1/query_range",
            params={"query": "kube_node_status_capacity", "start": START, "end": END,
                    "step": step},
            timeout=30,
        )

    too_many = query_range("1s")  # 14,401 points per series
    assert too_many.status_code == 400
    assert "exceeded maximum resolution of 11,000 points" in too_many.json()["error"]
    ok = query_range("2s")  # 7,201 steps
    assert ok.status_code == 200
    # KSM is scraped at :10/:40, so the steps 08:00:00..08:00:08 have no sample yet: 5 fewer
    assert {len(s["values"]) for s in ok.json()["data"]["result"]} == {7201 - 5}


def test_plain_and_gzip_inputs_give_the_same_data(real_prometheus, small_cluster_om, prom,
                                                  tmp_path):
    plain = tmp_path / "small-cluster.om"
    with gzip.open(small_cluster_om, "rb") as src:
        plain.write_bytes(src.read())
    other = real_prometheus(plain, fresh=True)
    try:
        assert other.url != prom.url
        query = f'{{__name__!=""}}[{WHOLE}]'
        assert instant(other.url, query, END) == instant(prom.url, query, END)
    finally:
        other.stop()
    assert not other.is_running()
